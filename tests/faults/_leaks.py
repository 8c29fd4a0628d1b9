"""One leak check for the fault suite: what a scenario left behind, polled until a deadline.

``before = snapshot()`` … scenario … ``assert_no_leaks(before)``: fails naming every child
process, thread, fd, ``/dev/shm`` segment, mapped ring and bound socket of ours that was not
there before (see :func:`tests.parallel._probes.leaks`, which does the polling). Safe to call
in a child process too (scripts print ``leaks(before)``).
"""

from __future__ import annotations

import os
import threading

import psutil

from tests.parallel._probes import Snapshot, leaks, snapshot

__all__ = ["Snapshot", "assert_no_leaks", "our_shm", "snapshot"]


def our_shm(pid: int | None = None) -> list[str]:
    """``/dev/shm`` entries named by the process ``pid`` (default: this one)."""
    tag = f"dataflow-{os.getpid() if pid is None else pid}-"
    return sorted(n for n in os.listdir("/dev/shm") if n.startswith(tag))


def assert_no_leaks(before: Snapshot, timeout: float = 10.0, fd_slack: int = 2) -> None:
    """Fail if, ``timeout`` s from now at the latest, anything of ours is left that was not in
    ``before``: child processes, Python and OS threads, fds, ``/dev/shm`` segments, ring
    mappings, abstract sockets. Polls, so a worker still exiting is waited for, not raced."""
    problems = leaks(before, fd_slack=fd_slack, timeout=timeout)
    if problems:
        names = [t.name for t in threading.enumerate()]
        kids = [(c.pid, c.status()) for c in psutil.Process().children(recursive=True) if c.is_running()]
        raise AssertionError(f"left behind: {problems}; threads {names}; children {kids}")
