"""Helpers for the tests of ``dataflow.parallel``: grouping results by worker; scripts run in
a fresh interpreter. Leak checks live in :mod:`tests._leaks`."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections import defaultdict
from typing import Any

__all__ = ["per_worker", "read_line_with", "start_script"]

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# --- per-worker grouping -------------------------------------------------------------------


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
