"""Signals: workers die with their parent (SIGKILL of the parent, any start method), and a
Ctrl-C (SIGINT) in the consumer reaches it as KeyboardInterrupt and shuts everything down.
Each scenario runs in a fresh interpreter (tests/parallel/_probes.start_script)."""

from __future__ import annotations

import glob
import os
import signal
import textwrap
import time

import pytest

from tests._leaks import pid_alive, wait_until
from tests.parallel import _probes as p

pytestmark = pytest.mark.timeout(60)

_WORKLOAD = """
import threading, time
from dataflow.parallel._maps import MultiProcessMapDataZMQ
from dataflow.parallel._runners import MultiProcessRunnerZMQ
from tests.parallel import _util as u

def make():
    if {kind!r} == "runner":
        return MultiProcessRunnerZMQ(u.Counting(), num_proc=2, start_method={method!r})
    return MultiProcessMapDataZMQ(u.Range(10), 2, u.double, start_method={method!r})

holder = {{}}
def start():
    df = make()
    df.reset_state()
    it = iter(df)
    next(it)
    holder["df"], holder["it"] = df, it

if {in_thread!r}:
    t = threading.Thread(target=start)
    t.start()
    t.join()
else:
    start()
print("PIDS", *holder["df"].worker_pids, flush=True)

def forever():
    yield from holder["it"]
    while True:
        yield from holder["df"]
"""


def _pids(line: str) -> list[int]:
    pids = [int(x) for x in line.split()[1:]]
    assert len(pids) == 2
    return pids


# the pool's bootstrap_worker makes every worker die with its parent, whatever the flow: each
# start method once (pool started from the main thread, and from another thread, where the
# kernel's death signal does not apply), each flow kind under fork; tests/faults/test_parallel_kills.py
# takes the map-and-batch, the prefetch over a map
@pytest.mark.parametrize(
    "kind, method, in_thread",
    [
        ("runner", "fork", False),
        ("runner", "fork", True),
        ("runner", "forkserver", False),
        ("map", "fork", False),
        ("map", "spawn", False),
    ],
)
def test_sigkill_of_parent_leaves_no_worker(kind: str, method: str, in_thread: bool) -> None:
    code = _WORKLOAD.format(kind=kind, method=method, in_thread=in_thread) + textwrap.dedent(
        """
        for _ in forever():
            pass
        """
    )
    proc = p.start_script(code)
    try:
        pids = _pids(p.read_line_with(proc, "PIDS"))
        assert all(pid_alive(x) for x in pids)
        time.sleep(0.3)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        t0 = time.monotonic()
        gone = wait_until(lambda: not any(pid_alive(x) for x in pids), 5)
        elapsed = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)
    assert gone, f"workers still alive 5 s after the parent was killed: {[x for x in pids if pid_alive(x)]}"
    assert elapsed < 3
    assert glob.glob(f"/dev/shm/dataflow-{proc.pid}-*") == []  # no shared memory left named


@pytest.mark.parametrize("kind", ["runner", "map"])
@pytest.mark.parametrize("group", [False, True], ids=["process", "process_group"])
def test_ctrl_c_in_consumer_exits_and_stops_workers(kind: str, group: bool) -> None:
    """SIGINT while the consumer iterates, uncaught: the program ends, workers with it."""
    code = _WORKLOAD.format(kind=kind, method="fork", in_thread=False) + textwrap.dedent(
        """
        print("ITERATING", flush=True)
        for _ in forever():
            pass
        """
    )
    proc = p.start_script(code, new_session=group)
    try:
        pids = _pids(p.read_line_with(proc, "PIDS"))
        p.read_line_with(proc, "ITERATING")
        time.sleep(0.3)
        if group:
            os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
        else:
            os.kill(proc.pid, signal.SIGINT)
        t0 = time.monotonic()
        try:
            proc.wait(10)
        except Exception:
            pytest.fail("the program did not exit within 10 s of SIGINT")
        exited_after = time.monotonic() - t0
        gone = wait_until(lambda: not any(pid_alive(x) for x in pids), 5)
    finally:
        if proc.poll() is None:
            proc.kill()
        _, err = proc.communicate(timeout=10)
    assert exited_after < 5
    assert gone
    assert "KeyboardInterrupt" in err


@pytest.mark.parametrize("kind", ["runner", "map", "thread_map"])
def test_ctrl_c_caught_then_with_block_closes(kind: str) -> None:
    """SIGINT caught inside the ``with``: leaving the block stops every worker, and the
    program goes on normally."""
    code = textwrap.dedent(
        f"""
        import threading
        from dataflow.parallel._maps import MultiProcessMapDataZMQ
        from dataflow.parallel._runners import MultiProcessRunnerZMQ
        from dataflow.parallel._threads import MultiThreadMapData
        from tests._leaks import live_children, wait_until
        from tests.parallel import _util as u

        kind = {kind!r}
        if kind == "runner":
            df = MultiProcessRunnerZMQ(u.Counting(), num_proc=2)
        elif kind == "map":
            df = MultiProcessMapDataZMQ(u.Range(10), 2, u.double)
        else:
            df = MultiThreadMapData(u.Range(10), 2, u.double)
        threads = threading.active_count()
        with df:
            df.reset_state()
            print("PIDS", *getattr(df, "worker_pids", []), flush=True)
            try:
                while True:
                    for dp in df:
                        pass
            except KeyboardInterrupt:
                print("CAUGHT", flush=True)
        wait_until(lambda: threading.active_count() <= threads, 3)
        print("AFTER", len(live_children()), threading.active_count() - threads, flush=True)
        """
    )
    proc = p.start_script(code)
    try:
        p.read_line_with(proc, "PIDS")
        time.sleep(0.5)
        os.kill(proc.pid, signal.SIGINT)
        p.read_line_with(proc, "CAUGHT", timeout=5)
        after = p.read_line_with(proc, "AFTER", timeout=10)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
        _, err = proc.communicate(timeout=10)
    assert after == "AFTER 0 0", err
    assert proc.returncode == 0, err


@pytest.mark.parametrize("kind", ["runner", "map"])
def test_every_ctrl_c_reaches_the_consumer(kind: str) -> None:
    """25 SIGINTs while iterating: each must surface as KeyboardInterrupt in the consumer
    (a lost one means a Ctrl-C that does nothing: the program keeps running)."""
    code = textwrap.dedent(
        f"""
        import os, signal, threading, time
        from dataflow.parallel._maps import MultiProcessMapDataZMQ
        from dataflow.parallel._runners import MultiProcessRunnerZMQ
        from tests.parallel import _util as u

        def make():
            if {kind!r} == "runner":
                return MultiProcessRunnerZMQ(u.Range(10), num_proc=2)
            return MultiProcessMapDataZMQ(u.Range(10), 2, u.double)

        lost = 0
        for trial in range(25):
            with make() as df:  # a fresh flow each time: only delivery of the signal is tested
                df.reset_state()
                threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGINT)).start()
                deadline = time.monotonic() + 1.0
                try:
                    while time.monotonic() < deadline:
                        for _ in df:
                            pass
                    lost += 1
                except KeyboardInterrupt:
                    pass
        print("LOST", lost, flush=True)
        """
    )
    proc = p.start_script(code)
    try:
        line = p.read_line_with(proc, "LOST", timeout=45)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
        _, err = proc.communicate(timeout=10)
    assert line == "LOST 0", f"{line} of 25 SIGINTs never raised KeyboardInterrupt\n{err[-2000:]}"
