"""Ctrl-C at bad moments (docs/failure_semantics.rst, "Ctrl-C"): every parallel flow, hit by
SIGINTs at random moments, raises ``KeyboardInterrupt`` where it was and, iterated again,
delivers intact epochs; never an internal error, never a hang; ``close()`` then leaves
nothing. Signals are sent in a child process (tests/faults/_storm.py), never to pytest.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import dataflow as D
from dataflow.parallel._interrupts import deferred_sigint
from tests.faults._leaks import assert_no_leaks, snapshot
from tests.faults._storm import FLOWS
from tests.parallel import _probes as p
from tests.parallel import _util as u

pytestmark = pytest.mark.timeout(120)

# (min, max) seconds between two SIGINTs: a storm, and single interrupts that let epochs end
GAPS = {"storm": (0.001, 0.03), "sparse": (0.02, 0.2)}


def _run_storm(kind: str, seed: int, seconds: float, gaps: tuple[float, float]) -> tuple[int, int]:
    args = [sys.executable, "-m", "tests.faults._storm", kind, str(seed), str(seconds), *map(str, gaps)]
    env = dict(os.environ, PYTHONPATH=p.REPO_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    try:
        out = subprocess.run(args, capture_output=True, text=True, env=env, cwd=p.REPO_ROOT, timeout=90)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{kind}: the storm child hung past 90 s\n{e.stderr!r}")
    lines = {line.split(" ", 1)[0]: line for line in out.stdout.splitlines() if line}
    tail = out.stderr[-3000:]
    assert "BAD" not in lines, f"{kind}: a corrupt epoch after an interrupt: {lines['BAD']}"
    why = "4: an error other than KeyboardInterrupt, 1: a hang"
    assert out.returncode == 0, f"{kind}: exit {out.returncode} ({why})\n{tail}"
    assert lines.get("LEAKS") == "LEAKS []", f"{kind}: close() left {lines.get('LEAKS')}\n{tail}"
    _, _, complete, interrupted = lines["KIND"].split()
    return int(complete), int(interrupted)


@pytest.mark.parametrize("gaps", list(GAPS))
@pytest.mark.parametrize("kind", list(FLOWS))
def test_sigint_at_random_moments_then_intact_epochs(kind: str, gaps: str) -> None:
    """Promise: after each caught KeyboardInterrupt the next epoch of the same flow is intact
    (values, order where promised, arrays matching their values), no internal error is ever
    raised, nothing hangs, and close() leaves no process, thread, fd or /dev/shm segment."""
    complete, interrupted = _run_storm(kind, seed=len(kind), seconds=2.0, gaps=GAPS[gaps])
    assert interrupted >= 1, "no SIGINT landed: the scenario tested nothing"
    assert complete >= 1


def test_prefetch_iterator_never_started_leaves_no_thread() -> None:
    """Promise: an iterator dropped before its first ``next`` (as a Ctrl-C right after
    ``iter()`` does) leaves no thread: the next ``iter()`` or ``close()`` stops it."""
    before = snapshot()
    df = D.ThreadPrefetchData(u.Range(10), 2)
    df.reset_state()
    for _ in range(5):
        iter(df)  # started a reading thread each time, never iterated
    assert list(df) == [[i] for i in range(10)]
    iter(df)
    df.close()
    assert_no_leaks(before)


def test_signals_during_close_leak_no_fd() -> None:
    """Promise: close() releases every fd even when signals keep arriving during it (pyzmq
    drops a context whose termination a signal interrupts; the pool blocks signals there)."""
    previous = signal.signal(signal.SIGUSR1, lambda *_: None)
    stop = threading.Event()

    def pester() -> None:
        while not stop.is_set():
            os.kill(os.getpid(), signal.SIGUSR1)
            time.sleep(0.0002)

    try:
        with D.MultiProcessRunnerZMQ(u.Range(5), num_proc=1, shm_bytes=0) as warm:
            warm.reset_state()
            list(warm)
        before = snapshot()
        t = threading.Thread(target=pester, daemon=True)
        t.start()
        for _ in range(30):
            with D.MultiProcessRunnerZMQ(u.Range(5), num_proc=1, shm_bytes=0) as df:
                df.reset_state()
                list(df)
        stop.set()
        t.join()
    finally:
        stop.set()
        signal.signal(signal.SIGUSR1, previous)
    assert_no_leaks(before, fd_slack=0)


_RUNNER_STATE_AFTER_INTERRUPT = """
import os, signal, tempfile, threading, time
import dataflow as D
from dataflow.errors import StateError
from tests.parallel import _util as u

STALL = os.path.join(tempfile.mkdtemp(), "stall")  # while it exists, workers stall after [0]
open(STALL, "w").close()


class StallsAfterFirst(D.ProxyDataFlow):
    stateless = True  # its upstream's position is its own

    def __iter__(self):
        for dp in self.ds:
            while dp[0] and os.path.exists(STALL):
                time.sleep(0.01)
            yield dp


src = StallsAfterFirst(D.DataFromList([[i] for i in range(10**6)], shuffle=False))
df = D.MultiProcessRunnerZMQ(src, num_proc=2, shm_bytes=0)
df.reset_state()
it = iter(df)
next(it)
# The workers stall, so the consumer is inside a receive when Ctrl-C comes (with flowing
# data it could land between two datapoints, where the checkpoint is exact and given).
threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
try:
    for _ in it:
        pass
except KeyboardInterrupt:
    pass
try:
    df.state_dict()
    print("STATE given", flush=True)
except StateError as e:
    print("STATE refused", "Ctrl-C" in str(e), flush=True)
os.remove(STALL)
it = iter(df)
print("AFTER", [next(it)[0] >= 0 for _ in range(50)].count(True), flush=True)
df.state_dict()  # between datapoints of a restarted runner: exact again
df.close()
print("DONE", flush=True)
"""


def test_runner_state_dict_after_an_interrupted_receive_is_refused() -> None:
    """Promise: a runner interrupted inside a receive refuses ``state_dict()`` with a
    StateError saying why (what was in flight is lost: no exact checkpoint exists), and the
    next ``iter()`` restarts the workers and delivers data (and checkpoints) again."""
    proc = p.start_script(_RUNNER_STATE_AFTER_INTERRUPT)
    try:
        state = p.read_line_with(proc, "STATE", timeout=30)
        after = p.read_line_with(proc, "AFTER", timeout=30)
        p.read_line_with(proc, "DONE", timeout=30)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
        _, err = proc.communicate(timeout=10)
    assert state == "STATE refused True", err[-2000:]
    assert after == "AFTER 50"
    assert proc.returncode == 0, err[-2000:]


def test_deferred_sigint_holds_a_sigint_until_the_block_ends() -> None:
    """Promise of the mechanism: a SIGINT inside the block does not cut it; it is raised as
    KeyboardInterrupt right after it, once (and a nested block defers to the outer one)."""
    steps = []
    with pytest.raises(KeyboardInterrupt):
        with deferred_sigint():
            with deferred_sigint():
                signal.raise_signal(signal.SIGINT)
                time.sleep(0.01)
                steps.append("inner done")
            steps.append("outer done")
    assert steps == ["inner done", "outer done"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with deferred_sigint():  # nothing held: nothing raised
        steps.append("quiet")


def test_deferred_sigint_is_a_no_op_in_other_threads() -> None:
    result = []

    def body() -> None:
        with deferred_sigint():
            result.append(signal.getsignal(signal.SIGINT))

    t = threading.Thread(target=body)
    t.start()
    t.join()
    assert result == [signal.default_int_handler]


@pytest.mark.parametrize("kind", ["runner", "map"])
def test_state_dict_right_after_a_caught_interrupt_outside_a_receive_works(kind: str) -> None:
    """Promise: a Ctrl-C that lands in the consumer's own code (not inside the flow) costs
    nothing: the flow goes on with the same workers and checkpoints as usual."""
    before = snapshot()
    src = D.DataFromList([[i] for i in range(40)], shuffle=False)
    if kind == "runner":
        df: D.DataFlow = D.MultiProcessRunnerZMQ(src, num_proc=2)
    else:
        df = D.MultiProcessMapDataZMQ(src, 2, u.double, strict=True)
    df.reset_state()
    it = iter(df)
    next(it)
    pids = df.worker_pids
    try:
        raise KeyboardInterrupt  # as if in the loop body
    except KeyboardInterrupt:
        pass
    state = df.state_dict()
    assert isinstance(state, dict)
    assert next(it) is not None
    assert df.worker_pids == pids
    del it
    df.close()
    assert_no_leaks(before)
