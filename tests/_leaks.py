"""The one leak check of the test suite: what a scenario left behind in this process.

``before = snapshot()`` … scenario … ``assert_no_leaks(before)`` fails naming everything of
ours that was not there before and is still there after a deadline (polled, so a worker that
is still exiting is waited for, not raced):

- child processes (multiprocessing's forkserver and resource tracker excepted; zombies do
  not count: an orphaned zombie in a container may wait for a reaper that never comes);
- Python threads started since (by identity, so a thread that ended and a new one that
  started do not cancel out) and OS threads (by count: native pools such as ZeroMQ's);
- file descriptors (by count, ``fd_slack`` allowed for descriptors the interpreter or a
  library opens once and keeps);
- ``/dev/shm`` segments and ``/tmp`` socket files named after this process, mapped
  shared-memory rings, and bound abstract unix sockets of ours.

``leaks(before)`` returns the same findings as a list (empty when clean) for scripts run in a
child process, which print it. Every suite uses this module; the probes it is built from
(:func:`our_shm`, :func:`ring_mappings`, :func:`live_children`, ...) serve tests that check
one resource on its own.
"""

from __future__ import annotations

import glob
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import psutil

__all__ = [
    "Snapshot",
    "assert_no_leaks",
    "leaks",
    "live_children",
    "open_fds",
    "our_shm",
    "pid_alive",
    "ring_mappings",
    "snapshot",
    "wait_until",
]


def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    """Poll ``predicate`` until it is true (True) or ``timeout`` seconds pass (False)."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)


def pid_alive(pid: int) -> bool:
    """True while ``pid`` runs and is not a zombie."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _is_mp_helper(proc: psutil.Process) -> bool:
    """multiprocessing's own long-lived helpers (forkserver, resource tracker)."""
    try:
        cmd = " ".join(proc.cmdline())
    except psutil.Error:
        return False
    return "forkserver" in cmd or "resource_tracker" in cmd


def live_children() -> set[int]:
    """Pids of this process's live descendants, multiprocessing's helpers excluded."""
    kids = psutil.Process().children(recursive=True)
    return {c.pid for c in kids if pid_alive(c.pid) and not _is_mp_helper(c)}


def open_fds() -> dict[int, str]:
    """This process's open descriptors and what each is (``pipe:[...]``, a path, ...)."""
    out = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            out[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:  # closed meanwhile (the listing's own descriptor among them)
            pass
    return out


def our_shm(pid: int | None = None) -> set[str]:
    """``/dev/shm`` entries named after the process ``pid`` (default: this one); dataflow
    names its shared memory after the consumer, so concurrent test runs do not interfere."""
    tag = f"dataflow-{os.getpid() if pid is None else pid}-"
    return {n for n in os.listdir("/dev/shm") if n.startswith(tag)}


def ring_mappings() -> list[str]:
    """This process's memory mappings of dataflow shared-memory rings (in /dev/shm)."""
    with open("/proc/self/maps") as f:
        return [line.split(None, 5)[-1].strip() for line in f if "/dev/shm/dataflow-" in line]


def _abstract_sockets() -> list[str]:
    """Bound abstract-namespace unix sockets named like this process's dataflow endpoints."""
    tag = f"-{os.getpid()}-"
    with open("/proc/net/unix") as f:
        return [line.split()[-1] for line in f if "@dataflow-" in line and tag in line]


def _tmp_sockets() -> set[str]:
    return {p for p in glob.glob("/tmp/dataflow-*") if f"-{os.getpid()}-" in p}


@dataclass
class Snapshot:
    """What this process held at one moment (``rss`` for tests that bound memory growth)."""

    children: set[int]
    threads: dict[int | None, str]
    os_threads: int
    fds: dict[int, str]
    shm: set[str]
    tmp_sockets: set[str]
    rss: int
    rings: int


def snapshot() -> Snapshot:
    me = psutil.Process()
    return Snapshot(
        children=live_children(),
        threads={t.ident: t.name for t in threading.enumerate()},
        os_threads=me.num_threads(),
        fds=open_fds(),
        shm=our_shm(),
        tmp_sockets=_tmp_sockets(),
        rss=me.memory_info().rss,
        rings=len(ring_mappings()),
    )


def _describe(pid: int) -> str:
    try:
        proc = psutil.Process(pid)
        return f"{pid} ({proc.status()}: {' '.join(proc.cmdline())[:80]})"
    except psutil.Error:
        return str(pid)


def _findings(before: Snapshot, now: Snapshot, fd_slack: int, os_threads: bool) -> list[str]:
    problems = []
    if now.children - before.children:
        kids = [_describe(pid) for pid in sorted(now.children - before.children)]
        problems.append(f"child processes left: {kids}")
    new_threads = {i: n for i, n in now.threads.items() if i not in before.threads}
    if new_threads:
        problems.append(f"threads started and still running: {sorted(new_threads.values())}")
    if os_threads and now.os_threads > before.os_threads:
        problems.append(f"OS threads: {before.os_threads} -> {now.os_threads}")
    if len(now.fds) > len(before.fds) + fd_slack:
        new = {fd: what for fd, what in now.fds.items() if before.fds.get(fd) != what}
        problems.append(f"fds: {len(before.fds)} -> {len(now.fds)} (new: {new})")
    if now.shm - before.shm:
        problems.append(f"/dev/shm entries: {sorted(now.shm - before.shm)}")
    if now.tmp_sockets - before.tmp_sockets:
        problems.append(f"/tmp socket files: {sorted(now.tmp_sockets - before.tmp_sockets)}")
    if now.rings > before.rings:
        problems.append(f"shared-memory rings still mapped: {ring_mappings()}")
    if _abstract_sockets():
        problems.append(f"abstract sockets still bound: {_abstract_sockets()}")
    return problems


def leaks(before: Snapshot, fd_slack: int = 2, timeout: float = 10.0, os_threads: bool = True) -> list[str]:
    """What is still there that was not in ``before``, once it settled or ``timeout`` s passed
    (an empty list when nothing leaked). ``os_threads=False`` skips the OS-thread count, for
    code that starts a native pool once per process on first use (OpenCV's, BLAS's)."""
    problems: list[str] = []

    def clean() -> bool:
        problems[:] = _findings(before, snapshot(), fd_slack, os_threads)
        return not problems

    wait_until(clean, timeout, interval=0.1)
    return problems


def assert_no_leaks(
    before: Snapshot, timeout: float = 10.0, fd_slack: int = 2, what: str = "", os_threads: bool = True
) -> None:
    """Fail if, ``timeout`` s from now at the latest, anything of ours is left that was not in
    ``before`` (see :func:`leaks` for the arguments); the message names it, prefixed by
    ``what`` (the scenario)."""
    problems = leaks(before, fd_slack=fd_slack, timeout=timeout, os_threads=os_threads)
    if problems:
        prefix = f"{what}: " if what else ""
        raise AssertionError(f"{prefix}left behind: {problems}")
