"""Probes for the tests of ``dataflow.parallel``: processes, threads, fds, sockets and
shared memory this process holds; polling; helper scripts run in a fresh interpreter."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psutil

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# --- probes --------------------------------------------------------------------------------


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
    """True while ``pid`` runs and is not a zombie (an orphaned zombie may wait for a reaper
    that never comes in a container; it runs no code)."""
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
    out = set()
    for c in psutil.Process().children(recursive=True):
        if pid_alive(c.pid) and not _is_mp_helper(c):
            out.add(c.pid)
    return out


def our_abstract_sockets() -> list[str]:
    """Abstract-namespace unix sockets named like this process's dataflow endpoints."""
    tag = f"-{os.getpid()}-"
    with open("/proc/net/unix") as f:
        return [line.split()[-1] for line in f if "@dataflow-" in line and tag in line]


def open_fds() -> dict[int, str]:
    """This process's open descriptors and what each is (``pipe:[...]``, a path, ...)."""
    out = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            out[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:  # closed meanwhile (the listing's own descriptor among them)
            pass
    return out


def ring_mappings() -> list[str]:
    """This process's memory mappings of dataflow shared-memory rings (in /dev/shm)."""
    with open("/proc/self/maps") as f:
        return [line.split(None, 5)[-1].strip() for line in f if "/dev/shm/dataflow-" in line]


@dataclass
class Snapshot:
    children: set[int]
    threads: int
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
        threads=threading.active_count(),
        os_threads=me.num_threads(),
        fds=open_fds(),
        shm={n for n in os.listdir("/dev/shm") if n.startswith(f"dataflow-{os.getpid()}-")},
        tmp_sockets={p for p in glob.glob("/tmp/dataflow-*") if f"-{os.getpid()}-" in p},
        rss=me.memory_info().rss,
        rings=len(ring_mappings()),
    )


def leaks(before: Snapshot, fd_slack: int = 2, timeout: float = 5.0) -> list[str]:
    """What is still there that was not in ``before`` (waits up to ``timeout`` to settle)."""
    problems: list[str] = []

    def check() -> bool:
        now = snapshot()
        problems.clear()
        if now.children - before.children:
            problems.append(f"child processes left: {sorted(now.children - before.children)}")
        if now.threads > before.threads:
            problems.append(f"threads: {before.threads} -> {now.threads} ({threading.enumerate()})")
        if now.os_threads > before.os_threads:
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
        if our_abstract_sockets():
            problems.append(f"abstract sockets still bound: {our_abstract_sockets()}")
        return not problems

    wait_until(check, timeout, interval=0.1)
    return problems


def per_worker(rows: list[list[Any]], pid_index: int, value_index: int, k: int) -> frozenset[tuple]:
    """Group ``rows`` by the pid in ``pid_index``: the set of each worker's first ``k``
    values (in arrival order), without the pids (they differ between runs)."""
    groups: dict[int, list[Any]] = defaultdict(list)
    for row in rows:
        groups[row[pid_index]].append(row[value_index])
    assert all(len(v) >= k for v in groups.values()), {p: len(v) for p, v in groups.items()}
    return frozenset(tuple(v[:k]) for v in groups.values())


# --- subprocess scripts --------------------------------------------------------------------


def start_script(code: str, new_session: bool = False) -> subprocess.Popen[str]:
    """Run ``code`` in a fresh interpreter that can import ``dataflow`` and ``tests``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    return subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO_ROOT,
        start_new_session=new_session,
    )


def read_line_with(proc: subprocess.Popen[str], prefix: str, timeout: float = 30.0) -> str:
    """The first stdout line of ``proc`` starting with ``prefix`` (fails on EOF/timeout)."""
    assert proc.stdout is not None
    result: list[str] = []

    def reader() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith(prefix):
                result.append(line.strip())
                return

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    t.join(timeout)
    if not result:
        proc.kill()
        _, err = proc.communicate(timeout=10)
        raise AssertionError(f"no line starting with {prefix!r} from the script; stderr:\n{err}")
    return result[0]
