"""Ctrl-C at bad moments (docs/failure_semantics.rst, "Ctrl-C"): every parallel flow, hit by
SIGINTs at random moments, raises ``KeyboardInterrupt`` where it was; iterated again, it
delivers an intact epoch or raises ``DataFlowNotReset`` telling to call ``reset_state()``,
after which its epochs are intact; never another error, never a hang; ``close()`` then leaves
nothing. A consumer a runner feeds exits promptly on SIGINT, also when both cores are busy.
Signals are sent in child processes (tests/faults/_storm.py), never to pytest.
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
from tests._leaks import assert_no_leaks, pid_alive, snapshot, wait_until
from tests.faults._storm import FLOWS
from tests.parallel import _probes as p
from tests.parallel import _util as u

pytestmark = pytest.mark.timeout(120)

# (min, max) seconds between two SIGINTs, drawn log-uniformly: storms of 1-30 ms gaps and
# single interrupts 20-200 ms apart that let epochs end, mixed in one child per flow for 4 s
# (the 2 s + 2 s of the two ranges that each had a child of their own, which only started
# and closed every flow twice)
GAPS = (0.001, 0.2)


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
    _, _, complete, interrupted, _resets = lines["KIND"].split()
    return int(complete), int(interrupted)


@pytest.mark.parametrize("kind", list(FLOWS))
def test_sigint_at_random_moments_then_intact_epochs(kind: str) -> None:
    """Promise: after each caught KeyboardInterrupt the next epoch of the same flow is intact
    (values, order where promised, arrays matching their values) or raises DataFlowNotReset,
    and then, after reset_state(), is intact; no other error is ever raised, nothing hangs,
    and close() leaves no process, thread, fd or /dev/shm segment."""
    complete, interrupted = _run_storm(kind, seed=len(kind), seconds=4.0, gaps=GAPS)
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


_RUNNER_AFTER_INTERRUPT = """
import os, signal, tempfile, threading, time
import dataflow as D
from dataflow import DataFlowNotReset
from tests._leaks import leaks, pid_alive, snapshot, wait_until
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


before = snapshot()
src = StallsAfterFirst(D.DataFromList([[i] for i in range(10**6)], shuffle=False))
df = D.MultiProcessRunnerZMQ(src, num_proc=2, shm_bytes=0)
df.reset_state()
pids = df.worker_pids
it = iter(df)
next(it)
# The workers stall, so the consumer is inside a receive when Ctrl-C comes (with flowing
# data it could land between two datapoints, where nothing is lost and nothing stops).
threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
try:
    for _ in it:
        pass
except KeyboardInterrupt:
    pass
print("STOPPED", wait_until(lambda: not any(pid_alive(x) for x in pids), 5), flush=True)
for call in (lambda: iter(df), df.state_dict):
    try:
        call()
        print("REFUSED no", flush=True)
    except DataFlowNotReset as e:
        print("REFUSED", "Ctrl-C" in str(e) and "reset_state()" in str(e), flush=True)
os.remove(STALL)
df.reset_state()
it = iter(df)
print("AFTER", [next(it)[0] >= 0 for _ in range(50)].count(True), flush=True)
df.state_dict()  # between datapoints of a restarted runner: exact again
del it
df.close()
print("LEAKS", leaks(before), flush=True)
"""


def test_runner_interrupted_inside_a_receive_stops_its_workers_until_reset_state() -> None:
    """Promise: a Ctrl-C inside a process runner's receive stops its workers at once; until
    ``reset_state()``, ``iter()`` and ``state_dict()`` raise DataFlowNotReset saying why and
    what to do (what was in flight is lost: no exact checkpoint exists); after it, data and
    checkpoints flow again, and close() leaves nothing."""
    proc = p.start_script(_RUNNER_AFTER_INTERRUPT)
    try:
        stopped = p.read_line_with(proc, "STOPPED", timeout=30)
        refused = [p.read_line_with(proc, "REFUSED", timeout=30) for _ in range(2)]
        after = p.read_line_with(proc, "AFTER", timeout=30)
        leaks = p.read_line_with(proc, "LEAKS", timeout=30)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
        _, err = proc.communicate(timeout=10)
    assert stopped == "STOPPED True", err[-2000:]
    assert refused == ["REFUSED True", "REFUSED True"], err[-2000:]
    assert after == "AFTER 50"
    assert leaks == "LEAKS []"
    assert proc.returncode == 0, err[-2000:]


_FED_CONSUMER = """
import dataflow as D
from tests.parallel import _util as u

df = D.MultiProcessRunnerZMQ(u.Counting(), num_proc=2)
df.reset_state()
it = iter(df)
next(it)
print("PIDS", *df.worker_pids, flush=True)
for _ in it:
    pass
"""

_BUSY_LOOP = "import time\nend = time.monotonic() + 60\nwhile time.monotonic() < end: pass"


@pytest.mark.parametrize("busy", [0, 2], ids=["idle", "both-cores-busy"])
def test_consumer_a_runner_feeds_exits_within_2s_of_sigint(busy: int) -> None:
    """Promise: SIGINT to a consumer that a runner is feeding, uncaught, ends the program
    within 2 s, its workers with it, also while two other processes keep both cores busy
    (the workers are stopped in the interrupt's path, not left to compete with the exit)."""
    loads = [subprocess.Popen([sys.executable, "-c", _BUSY_LOOP]) for _ in range(busy)]
    try:
        proc = p.start_script(_FED_CONSUMER)
        try:
            pids = [int(x) for x in p.read_line_with(proc, "PIDS").split()[1:]]
            time.sleep(0.5)  # fed for a while
            os.kill(proc.pid, signal.SIGINT)
            t0 = time.monotonic()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                pytest.fail("the consumer did not exit within 10 s of SIGINT")
            took = time.monotonic() - t0
            gone = wait_until(lambda: not any(pid_alive(x) for x in pids), 5)
        finally:
            if proc.poll() is None:
                proc.kill()
            _, err = proc.communicate(timeout=10)
    finally:
        for load in loads:
            load.kill()
            load.wait(10)
    assert "KeyboardInterrupt" in err, err[-2000:]
    assert took < 2.0, f"the consumer took {took:.2f} s to exit after SIGINT"
    assert gone, "a worker outlived its consumer"


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
