"""The memory and CPU of a pipeline's worker processes, measured with psutil: what the
profiler and the speed test report (:func:`worker_usage`), and the pipeline's peak memory
while it runs (:class:`MemorySampler`, used by :func:`~dataflow.tools.tune`).

A worker's *RSS* counts every page it has resident, the pages it still shares with the
consumer (a forked worker shares its parent's) included; its *USS* counts only its private
pages, what would be freed if it exited. The pipeline's memory is the consumer's RSS plus
every worker's USS (as for ``ram_budget=``, see :mod:`dataflow.parallel._budget`).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

import psutil

from ._chain import chain_of

__all__ = ["MemorySampler", "WorkerUsage", "worker_usage"]


@dataclass(frozen=True)
class WorkerUsage:
    """One worker process, measured once.

    Attributes:
        stage: the class name of the stage that runs it.
        index: the worker's index in that stage.
        pid: its process id.
        rss: resident bytes (shared pages included).
        uss: private bytes (its own pages only).
        cpu_seconds: user plus system CPU time since it started.
        cpu_percent: ``cpu_seconds`` over its lifetime, in percent of one core.
    """

    stage: str
    index: int
    pid: int
    rss: int
    uss: int
    cpu_seconds: float
    cpu_percent: float

    def __str__(self) -> str:
        return (
            f"worker {self.index} of {self.stage} (pid {self.pid}): RSS {self.rss / 2**20:.1f} MiB, "
            f"USS {self.uss / 2**20:.1f} MiB, CPU {self.cpu_seconds:.2f} s "
            f"({self.cpu_percent:.0f}% of a core)"
        )


def _measure(stage: str, index: int, pid: int) -> WorkerUsage | None:
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            mem = proc.memory_full_info()
            cpu = proc.cpu_times()
            alive = max(1e-9, time.time() - proc.create_time())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None
    busy = float(cpu.user + cpu.system)
    return WorkerUsage(stage, index, pid, int(mem.rss), int(mem.uss), busy, 100.0 * busy / alive)


def worker_usage(df: Any) -> tuple[WorkerUsage, ...]:
    """Measure now the workers of every stage of ``df``'s chain that has ``worker_pids``
    (process maps and runners; those not started yet are started by asking for their
    pids). Stages without workers, and workers that are gone, give nothing."""
    found: list[WorkerUsage] = []
    for stage in chain_of(df):
        try:
            pids = stage.worker_pids if hasattr(type(stage), "worker_pids") else []
        except Exception:  # noqa: BLE001 - a stage not running (closed, not reset): no workers
            pids = []
        for index, pid in enumerate(pids):
            usage = _measure(type(stage).__name__, index, pid) if pid else None
            if usage is not None:
                found.append(usage)
    return tuple(found)


class MemorySampler:
    """A thread that measures this process's RSS plus the USS of all its descendant
    processes every ``interval`` seconds, keeping the peak (bytes), from ``start()`` (or
    ``with``) to ``stop()``. A sample reads each process's page-table summary
    (``/proc/<pid>/smaps_rollup``): a few milliseconds of CPU for processes holding hundreds
    of MB, taken from the pipeline, so short intervals slow what they measure."""

    def __init__(self, interval: float = 0.05) -> None:
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @staticmethod
    def now() -> int:
        """This process's RSS plus its descendants' USS, measured now."""
        me = psutil.Process()
        total = int(me.memory_info().rss)
        for child in me.children(recursive=True):
            try:
                total += int(child.memory_full_info().uss)
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                pass
        return total

    def _run(self) -> None:
        while True:
            self.peak = max(self.peak, self.now())
            if self._stop.wait(self.interval):
                return

    def start(self) -> MemorySampler:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="dataflow-memory-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> int:
        """Stop sampling (after one last sample); the peak."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.peak = max(self.peak, self.now())
        return self.peak

    def __enter__(self) -> MemorySampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
