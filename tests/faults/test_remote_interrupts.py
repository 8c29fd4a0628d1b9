"""The remote receiver interrupted (docs/failure_semantics.rst, "Remote"): a Ctrl-C that cut a
message in two does not make the next epoch see a malformed message, and ``close()``
releases every socket and fd even when signals arrive during it or a step fails."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest
import zmq

from dataflow import codec
from dataflow.parallel._remote import RemoteDataZMQ
from tests._leaks import assert_no_leaks, snapshot
from tests.parallel.test_remote import raw_push, tcp_addr

pytestmark = pytest.mark.timeout(60)


def test_message_cut_by_an_interrupt_is_dropped_not_malformed() -> None:
    """Promise: after an epoch ended by a Ctrl-C between two parts of a message, the next
    epoch starts at the next whole message: no malformed count, no warning, no error."""
    addr = tcp_addr()
    with RemoteDataZMQ(addr, timeout=10, on_malformed="raise") as df:
        df.reset_state()
        first = codec.dumps_frames([np.arange(30000, dtype=np.int64), 1])
        second = codec.dumps_frames([np.arange(5, dtype=np.int64), 2])
        assert len(first) > 1
        raw_push(addr, [[bytes(f) for f in first], [bytes(f) for f in second], [b"DF-END"]])
        sock = df._socks[0]
        assert sock.poll(10_000)
        sock.recv()  # the first part only: where a Ctrl-C inside a receive leaves the socket
        assert sock.getsockopt(zmq.RCVMORE)
        got = list(df)
    assert len(got) == 1 and got[0][1] == 2
    assert df.malformed == 0


def test_signals_during_close_leak_no_fd() -> None:
    """Promise: reset_state()/close() cycles of a receiver leak no fd while signals keep
    arriving (a signal interrupting the context's termination used to leak its fds)."""
    previous = signal.signal(signal.SIGUSR1, lambda *_: None)
    stop = threading.Event()

    def pester() -> None:
        while not stop.is_set():
            os.kill(os.getpid(), signal.SIGUSR1)
            time.sleep(0.0002)

    df = RemoteDataZMQ(tcp_addr(), timeout=1)
    df.reset_state()
    df.close()
    before = snapshot()
    t = threading.Thread(target=pester, daemon=True)
    try:
        t.start()
        for _ in range(40):
            df.reset_state()
            df.close()
    finally:
        stop.set()
        t.join()
        signal.signal(signal.SIGUSR1, previous)
    assert_no_leaks(before, fd_slack=0)


@pytest.mark.parametrize("fault", [RuntimeError, KeyboardInterrupt])
def test_close_with_a_failing_socket_close_still_releases_everything(
    fault: type[BaseException], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Promise: a socket close that fails inside close() is raised, and the context still
    closes that socket and terminates (no fd left, the port is free again)."""
    addr = tcp_addr()
    df = RemoteDataZMQ(addr, timeout=1)
    df.reset_state()
    df.close()
    before = snapshot()
    df.reset_state()
    real = zmq.Socket.close

    def close(self: zmq.Socket, linger: int | None = None) -> None:
        monkeypatch.setattr(zmq.Socket, "close", real)
        raise fault("injected")

    monkeypatch.setattr(zmq.Socket, "close", close)
    with pytest.raises(fault):
        df.close()
    monkeypatch.undo()
    assert_no_leaks(before)
    df.reset_state()  # the port is free: bind works again
    df.close()
