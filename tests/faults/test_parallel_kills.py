"""Killed processes (docs/failure_semantics.rst, "Worker killed" and "Parent killed"):
a worker SIGKILLed mid-epoch raises WorkerDied naming its pid and the signal, and
``close()`` then leaves nothing; a parent SIGKILLed mid-epoch takes every worker with it."""

from __future__ import annotations

import os
import signal
import textwrap
import time
from collections.abc import Callable

import pytest

import dataflow as D
from dataflow import WorkerDied
from tests._leaks import assert_no_leaks, our_shm, pid_alive, snapshot, wait_until
from tests.parallel import _probes as p
from tests.parallel import _util as u

pytestmark = pytest.mark.timeout(120)

BIG = 10**6  # upstream length: an epoch that cannot end before the kill is noticed

FLOWS: dict[str, Callable[[], D.DataFlow]] = {
    "map-ordered": lambda: D.MultiProcessMapDataZMQ(u.Range(BIG), 2, u.double, strict=True, ordered=True),
    "map-unordered": lambda: D.MultiProcessMapDataZMQ(u.Range(BIG), 2, u.double, strict=True),
    "map-nonstrict": lambda: D.MultiProcessMapDataZMQ(u.Range(BIG), 2, u.double),
    "map-batch": lambda: D.MultiProcessMapAndBatchDataZMQ(u.Range(BIG), 2, u.to_pair, 4, strict=True),
    "runner": lambda: D.MultiProcessRunnerZMQ(u.Counting(), num_proc=2),
}


# the pool watches every worker alike: each flow loses one of its two, the first or the second
@pytest.mark.parametrize("kind, victim", [(kind, i % 2) for i, kind in enumerate(FLOWS)])
def test_worker_sigkilled_mid_epoch_raises_worker_died(kind: str, victim: int) -> None:
    """Promise: a worker killed (SIGKILL) while the consumer iterates is noticed within
    about a second and raised as WorkerDied with its pid and exit code (-9, named SIGKILL);
    close() then stops the other workers and leaves nothing; reset_state() starts afresh."""
    before = snapshot()
    df = FLOWS[kind]()
    df.reset_state()
    pid = df.worker_pids[victim]
    assert pid is not None
    it = iter(df)
    for _ in range(20):
        next(it)
    os.kill(pid, signal.SIGKILL)
    t0 = time.monotonic()
    with pytest.raises(WorkerDied) as info:
        for _ in it:
            pass
    assert time.monotonic() - t0 < 10
    err = info.value
    assert err.pid == pid and err.exitcode == -signal.SIGKILL
    assert str(pid) in str(err) and "SIGKILL" in str(err) and f"worker {victim}" in str(err)
    df.reset_state()  # a fresh start after a death
    it = iter(df)
    assert next(it) is not None
    del it
    df.close()
    assert_no_leaks(before)


_PARENT = """
import sys
import dataflow as D
from tests.parallel import _util as u

kind, method = sys.argv[1], sys.argv[2]
if kind == "map-batch":
    df = D.MultiProcessMapAndBatchDataZMQ(u.Range(10**6), 2, u.to_pair, 4, strict=True, start_method=method)
elif kind == "map-unordered-nonstrict":
    df = D.MultiProcessMapDataZMQ(u.Range(50), 2, u.double, start_method=method)
else:  # prefetch-over-map
    inner = D.MultiProcessMapDataZMQ(u.Range(50), 2, u.double, strict=True, start_method=method)
    df = D.ThreadPrefetchData(inner, 4)
df.reset_state()
inner = getattr(df, "ds", df) if kind == "prefetch-over-map" else df
print("PIDS", *inner.worker_pids, flush=True)
while True:
    for _ in df:
        pass
"""


# the start methods and the runner and map are in tests/parallel/test_signals.py
# (test_sigkill_of_parent_leaves_no_worker); here the flows it does not build
@pytest.mark.parametrize(
    "kind, method",
    [
        ("map-batch", "fork"),
        ("map-unordered-nonstrict", "fork"),
        ("prefetch-over-map", "fork"),
    ],
)
def test_parent_sigkilled_mid_epoch_takes_its_workers(kind: str, method: str) -> None:
    """Promise: when the consumer process is SIGKILLed mid-epoch (no cleanup code runs),
    every worker exits within a few seconds: no orphan keeps running, and no /dev/shm
    segment is left named."""
    code = f"import sys; sys.argv[1:] = [{kind!r}, {method!r}]\n" + textwrap.dedent(_PARENT)
    proc = p.start_script(code)
    try:
        pids = [int(x) for x in p.read_line_with(proc, "PIDS", timeout=60).split()[1:]]
        assert len(pids) == 2 and all(pid_alive(x) for x in pids)
        time.sleep(0.3)  # mid-epoch
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        gone = wait_until(lambda: not any(pid_alive(x) for x in pids), 10)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)
    assert gone, f"orphans still running: {[x for x in pids if pid_alive(x)]}"
    assert our_shm(proc.pid) == set()  # the rings' names went when the workers mapped them
