"""Parallel flows interrupted at bad moments (fault-injection suite).

Each test states the documented promise it checks (docs/failure_semantics.rst):

- ``close()`` interrupted midway (an exception or Ctrl-C inside it) still releases every
  worker, socket and shared-memory segment;
- a failed start (a start timeout, a map function a spawned worker cannot rebuild) raises a
  clear error and leaves nothing behind.

The Ctrl-C storms are in test_parallel_interrupts.py, the 200-epoch soak in test_soak.py.
"""

from __future__ import annotations

import multiprocessing.process
from typing import Any

import pytest
import zmq

import dataflow as D
from tests.parallel import _probes as p
from tests.parallel import _util as u

pytestmark = pytest.mark.timeout(120)

def _flows() -> dict[str, Any]:
    return {
        "runner": lambda: D.MultiProcessRunnerZMQ(u.Range(20), num_proc=2),
        "map": lambda: D.MultiProcessMapDataZMQ(u.Range(20), 2, u.double, strict=True),
    }


@pytest.mark.parametrize("name", ["runner", "map"])
@pytest.mark.parametrize("fault", [KeyboardInterrupt, RuntimeError])
def test_close_interrupted_midway_releases_everything(
    name: str, fault: type[BaseException], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exception or Ctrl-C while close() joins the workers still stops every worker and
    releases the socket and shared memory; the fault reaches the caller."""
    before = p.snapshot()
    df = _flows()[name]()
    df.reset_state()
    next(iter(df))
    real_join = multiprocessing.process.BaseProcess.join
    calls = {"n": 0}

    def join(self: Any, timeout: float | None = None) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise fault("interrupted inside close()")
        real_join(self, timeout)

    monkeypatch.setattr(multiprocessing.process.BaseProcess, "join", join)
    with pytest.raises(fault):
        df.close()
    monkeypatch.undo()
    df.close()  # idempotent after a failed close
    assert p.leaks(before) == []


@pytest.mark.parametrize("name", ["runner", "map"])
def test_close_with_socket_failure_still_releases_shared_memory(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failing socket close inside close() still stops the workers and unlinks the ring."""
    before = p.snapshot()
    df = _flows()[name]()
    df.reset_state()
    next(iter(df))
    real_close = zmq.Socket.close
    failed = {"n": 0}

    def close(self: Any, linger: int | None = None) -> None:
        real_close(self, linger=linger)
        if not failed["n"]:
            failed["n"] += 1
            raise zmq.ZMQError(zmq.EINVAL, "injected")

    monkeypatch.setattr(zmq.Socket, "close", close)
    with pytest.raises(zmq.ZMQError):
        df.close()
    monkeypatch.undo()
    assert p.leaks(before) == []


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_unbuildable_map_function_fails_clearly_and_leaves_nothing(method: str) -> None:
    """A map function a spawned worker cannot rebuild (it raises when unpickled) stops the
    start with an error naming it; no worker and no shared memory is left."""
    before = p.snapshot()
    df = D.MultiProcessMapDataZMQ(u.Range(10), 2, u.BreaksOnUnpickle(), start_method=method, strict=True)
    with pytest.raises(Exception, match="(?i)worker|unpickl|rebuild|start"):
        df.reset_state()
        list(df)
    df.close()
    assert p.leaks(before) == []


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_start_timeout_fails_clearly_and_leaves_nothing(method: str) -> None:
    """Workers that do not come up within ``timeout=`` raise TimeoutError; nothing is left."""
    before = p.snapshot()
    df = D.MultiProcessRunnerZMQ(u.SlowToStart(5.0), num_proc=2, start_method=method, timeout=0.5)
    with pytest.raises(TimeoutError):
        df.reset_state()
        next(iter(df))
    df.close()
    assert p.leaks(before) == []
