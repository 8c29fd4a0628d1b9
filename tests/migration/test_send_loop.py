"""``send_dataflow_zmq(loop=True)``: tensorpack's sender that sends epoch after epoch forever."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import zmq

from dataflow import DataFromList, RemoteDataZMQ, send_dataflow_zmq
from tests.parallel.test_remote import tcp_addr


class _Stop(Exception):
    pass


class _Counted(DataFromList):
    """Stops the sender (by raising) once ``epochs`` epochs were started."""

    def __init__(self, n: int, epochs: int) -> None:
        super().__init__([[i] for i in range(n)], shuffle=False)
        self.started, self.max_epochs = 0, epochs
        self.received = threading.Event()  # set by the test: everything sent has arrived

    def __iter__(self) -> Any:
        self.started += 1
        if self.started > self.max_epochs:
            # stop only once the receiver has everything: a sender that raises drops what
            # ZMQ still queues, and under load that could be the last epoch's datapoints
            self.received.wait(30)
            raise _Stop
        return super().__iter__()


def test_loop_sends_epoch_after_epoch_without_end_marker() -> None:
    addr = tcp_addr()
    flow = _Counted(5, epochs=3)
    errors: list[BaseException] = []

    def send() -> None:
        try:
            send_dataflow_zmq(flow, addr, progress=False, loop=True)
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            errors.append(e)

    with RemoteDataZMQ(addr, timeout=30) as df:
        df.reset_state()
        t = threading.Thread(target=send, daemon=True)
        t.start()
        it = iter(df)
        got = [next(it)[0] for _ in range(15)]  # three epochs in one receiver epoch: no end marker
        flow.received.set()
        t.join(30)
    assert got == list(range(5)) * 3
    assert flow.started == 4 and len(errors) == 1 and isinstance(errors[0], _Stop)


def test_loop_refuses_to_spin_on_an_empty_epoch() -> None:
    class Empty(DataFromList):
        def __iter__(self) -> Any:
            return iter(())

    ctx_addr = tcp_addr()
    with pytest.raises(ValueError, match="loop=True but an epoch of Empty was empty"):
        send_dataflow_zmq(Empty([[1]]), ctx_addr, progress=False, loop=True, bind=True)
    # the sender closed its socket: binding the same port again works
    with zmq.Context() as ctx, ctx.socket(zmq.PULL) as s:
        s.bind(ctx_addr)
