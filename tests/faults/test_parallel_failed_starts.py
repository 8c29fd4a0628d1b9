"""Failed starts (docs/failure_semantics.rst, "Failed start" and "Timeout"): a start that
exceeds ``timeout=``, a worker that cannot rebuild the map function or the flow, a datapoint
that cannot cross processes: each raises a clear error, and ``close()`` leaves no worker,
socket, fd or ``/dev/shm`` segment."""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest

import dataflow as D
from tests._leaks import assert_no_leaks, snapshot
from tests.faults import _faulty as f
from tests.parallel import _util as u

pytestmark = pytest.mark.timeout(120)


def _warm(method: str) -> None:
    """Start multiprocessing's own helpers (forkserver, resource tracker) before a snapshot:
    they live as long as the interpreter and are not ours to stop."""
    with D.MultiProcessRunnerZMQ(u.Range(2), num_proc=1, start_method=method) as warm:
        warm.reset_state()
        list(warm)


def _notes(err: BaseException) -> str:
    return " ".join(getattr(err, "__notes__", []))


# spawn and forkserver workers rebuild their arguments the same way (dataflow/parallel/
# _worker.py): each kind is tried under one of them
@pytest.mark.parametrize("kind, method", [("map", "spawn"), ("runner", "forkserver")])
def test_worker_that_cannot_rebuild_its_function_raises_that_error(kind: str, method: str) -> None:
    """Promise: a map function or flow that pickles but cannot be unpickled in a spawned
    worker raises the unpickling error itself (the user's exception type and message, naming
    the object on 3.11+), never "a worker died"; nothing is left."""
    _warm(method)
    before = snapshot()
    if kind == "map":
        df: D.DataFlow = D.MultiProcessMapDataZMQ(
            u.Range(10), 2, f.BreaksOnUnpickle(), strict=True, start_method=method
        )
        name = "BreaksOnUnpickle"
    else:
        df = D.MultiProcessRunnerZMQ(f.FlowBreaksOnUnpickle(), num_proc=2, start_method=method)
        name = "FlowBreaksOnUnpickle"
    with pytest.raises(RuntimeError, match=f"{name} cannot be rebuilt in a worker") as info:
        df.reset_state()
        list(df)
    if sys.version_info >= (3, 11):
        what = "map_func" if kind == "map" else "flow"
        assert f"rebuilding the {what} in worker" in _notes(info.value)
    df.close()
    assert_no_leaks(before)


def test_map_function_failing_to_rebuild_after_every_worker_is_ready_raises_that_error() -> None:
    """Promise: the rebuild error is raised even when it comes after every worker's READY
    (a slow unpickling), not a TypeError of the map's own bookkeeping."""
    _warm("spawn")
    before = snapshot()
    df = D.MultiProcessMapDataZMQ(
        u.Range(10), 2, f.SlowlyBreaksOnUnpickle(), strict=True, start_method="spawn"
    )
    with pytest.raises(RuntimeError, match="SlowlyBreaksOnUnpickle cannot be rebuilt in a worker"):
        df.reset_state()
        list(df)
    df.close()
    assert_no_leaks(before)


_SLOW_STARTS: dict[str, Callable[[str], D.DataFlow]] = {
    # under fork a map worker runs no user code before it is ready: spawn only
    "map": lambda m: D.MultiProcessMapDataZMQ(
        u.Range(10), 2, f.slow_to_rebuild(30), strict=True, start_method=m, timeout=1
    ),
    "runner": lambda m: D.MultiProcessRunnerZMQ(f.SlowToStart(30), num_proc=2, start_method=m, timeout=1),
}


@pytest.mark.parametrize("kind, method", [("map", "spawn"), ("runner", "spawn"), ("runner", "fork")])
def test_start_slower_than_timeout_raises_timeout_and_leaves_nothing(kind: str, method: str) -> None:
    """Promise: workers that produce nothing for ``timeout=`` seconds (here: a start that
    takes 30 s) raise TimeoutError within about that time; close() stops them, however far
    their start got, and leaves nothing."""
    _warm(method)
    before = snapshot()
    df = _SLOW_STARTS[kind](method)
    try:
        with pytest.raises(TimeoutError, match="timeout=1"):
            df.reset_state()
            list(df)
    finally:
        df.close()
    assert_no_leaks(before)


@pytest.mark.parametrize("method", ["fork"])
def test_failed_start_then_a_good_start_of_the_same_flow(method: str) -> None:
    """Promise: after a failed start (timeout), ``reset_state()`` starts afresh. (The restart
    is the consumer's: a spawned start that timed out is released in
    test_start_slower_than_timeout_raises_timeout_and_leaves_nothing.)"""
    _warm(method)
    before = snapshot()
    df = D.MultiProcessRunnerZMQ(f.SlowToStart(0.0), num_proc=2, start_method=method, timeout=1)
    df.ds.seconds = 30  # type: ignore[attr-defined]
    with pytest.raises(TimeoutError):
        df.reset_state()
        list(df)
    df.ds.seconds = 0  # type: ignore[attr-defined]
    df.options = type(df.options)(df.options.stage, method, None, 60.0)
    df.reset_state()
    assert len(list(df)) == 10
    df.close()
    assert_no_leaks(before)


def test_runner_datapoint_that_cannot_be_pickled_is_named() -> None:
    """Promise: a runner's datapoint that cannot be sent to the consumer raises a TypeError
    naming the pickling error (and so the offending type), not a worker crash; the
    datapoints before it are delivered first."""
    before = snapshot()
    df = D.MultiProcessRunnerZMQ(f.YieldsALock(), num_proc=1)
    df.reset_state()
    got = []
    with pytest.raises(TypeError, match="cannot be sent to the consumer process.*lock") as info:
        for dp in df:
            got.append(dp)
    assert got == [[0]]
    assert "died" not in str(info.value)
    df.close()
    assert_no_leaks(before)


def test_map_result_that_cannot_be_pickled_is_named() -> None:
    """Promise: a map result that cannot be sent back raises the pickling TypeError (naming
    the type) in the consumer, with the worker named on 3.11+; nothing is left."""
    before = snapshot()
    df = D.MultiProcessMapDataZMQ(u.Range(4), 2, f.lock_result, strict=True)
    df.reset_state()
    with pytest.raises(TypeError, match="lock") as info:
        list(df)
    if sys.version_info >= (3, 11):
        assert "worker" in _notes(info.value)
    df.close()
    assert_no_leaks(before)
