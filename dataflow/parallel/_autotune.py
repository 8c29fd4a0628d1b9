"""Decisions the parallel maps take by themselves while they run, from what they measure.

The maps feed these objects measurements (the time a worker spent mapping a task, how many
datapoints the task held, how long the consumer waited for results) and read back decisions
(how many datapoints travel per task, how many workers to use, whether to map in-process).
The objects hold **no clock and start nothing**: they are pure functions of the
measurements, so the decision logic is tested with made-up numbers, not with timings.
Every decision that changes something is logged at debug level on ``dataflow.autotune``.

- :class:`ChunkTuner`: datapoints per task. A cheap map (microseconds per datapoint) is
  dominated by the per-message cost in the consumer (pickling a task, two socket
  operations, reordering), so its datapoints travel in groups; a slow map (milliseconds)
  sends them one by one, so no worker idles while another holds a long chunk.
- :class:`WorkerPlan`: how many workers to use, or none (map in-process), from the
  per-datapoint map time and the consumer's own per-datapoint cost measured in a short
  in-process probe, then adjusted by how long the consumer waits for results.
- :class:`~._autoworkers.AutoWorkers` (its own module): the running side, which also
  **checks every move against the measured throughput** and undoes one that lost.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection
from dataclasses import dataclass

__all__ = [
    "AUTO_BUFFER_PER_WORKER",
    "COPY_BYTES_PER_S",
    "WORKER_BYTES",
    "ChunkTuner",
    "WorkerPlan",
    "available_cores",
    "logger",
    "memory_bound_workers",
]

logger = logging.getLogger("dataflow.autotune")

#: a task should keep a worker busy about this long: long enough that the consumer's fixed
#: cost per task (~30-60 us: pickling, two socket operations, bookkeeping) is a few percent,
#: short enough that the last task of a pass does not leave the other workers idle for long.
TASK_SECONDS = 0.002
#: weight of the newest measurement in the running per-datapoint estimate (at least: more
#: while it holds more datapoints than all those measured before it)
_ALPHA = 0.25


class ChunkTuner:
    """How many datapoints a map sends per task: ``fixed`` when given, else chosen from the
    measured map time per datapoint so that a task takes about :data:`TASK_SECONDS`, within
    ``[1, cap]``. Starts at 1 (nothing is known yet; the first results also come sooner)."""

    __slots__ = ("_seen", "cap", "chunk", "fixed", "per_item", "stage")

    def __init__(self, stage: str, fixed: int | None, cap: int) -> None:
        self.stage = stage
        self.fixed = fixed
        self.cap = max(1, cap)
        self.chunk = fixed if fixed is not None else 1
        self.per_item: float | None = None  # seconds of map time per datapoint (running estimate)
        self._seen = 0  # datapoints measured so far

    def observe(self, items: int, busy: float) -> None:
        """A task of ``items`` datapoints kept a worker busy for ``busy`` seconds."""
        if items <= 0 or busy < 0:
            return
        sample = busy / items
        est, seen = self.per_item, self._seen
        # Weighted by datapoints while few are measured: the first task's one datapoint (often
        # slow: caches cold) must not outweigh the hundreds of the task it sized.
        weight = max(_ALPHA, items / (seen + items))
        self.per_item = est = sample if est is None else est + weight * (sample - est)
        self._seen = seen + items
        if self.fixed is not None:
            return  # measured all the same: the workers' start-up dispatch uses the estimate
        want = self.cap if est <= TASK_SECONDS / self.cap else max(1, min(self.cap, int(TASK_SECONDS / est)))
        old = self.chunk
        if want != old and (want >= 2 * old or 2 * want <= old or want in (1, self.cap)):
            self.chunk = want  # hysteresis: small wobbles of the estimate change nothing
            logger.debug(
                "%s: %d datapoint(s) per task (map takes %.1f us per datapoint; was %d)",
                self.stage, want, est * 1e6, old,
            )


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def memory_bound_workers(per_worker_bytes: int, available: int | None = None) -> int:
    """How many workers fit in half of the memory available now (``/proc/meminfo``'s
    MemAvailable unless ``available`` is given), each assumed to need ``per_worker_bytes``;
    at least 1. Without ``/proc/meminfo`` the bound is not applied (a large number)."""
    if available is None:
        available = _mem_available()
        if available is None:
            return 1 << 16
    return max(1, (available // 2) // max(1, per_worker_bytes))


def _mem_available() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


@dataclass
class WorkerPlan:
    """How many workers a ``num_proc="auto"`` map uses; 0 means: map in the consumer.

    The model: in-process, a datapoint costs the consumer ``own + work`` (``own``: reading
    the upstream and whatever the code iterating the map does per datapoint; ``work``: the
    map). With ``n`` workers the consumer pays ``own + transport`` per datapoint and the
    workers deliver ``n / work`` datapoints per second, but they share ``cores`` with the
    consumer, which keeps ``busy = (own + transport) * rate`` of a core. :meth:`decide`
    takes the ``n`` with the best predicted rate, and goes parallel only when that beats the
    in-process rate by ``margin`` (parallelism that would not pay stays off: no processes).
    :meth:`adjust` then grows the count when the consumer waits for results most of the
    time and cores are left, and shrinks it when the consumer never waits (it is the
    bottleneck, and a worker fewer leaves it a core)."""

    stage: str
    max_workers: int
    cores: int
    transport: float = 4e-6  #: consumer seconds per datapoint for grouped tasks (measured: 2-5 us)
    margin: float = 1.25
    workers: int = 0

    def predicted_rate(self, n: int, work: float, own: float, ship: float = 0.0) -> float:
        """Datapoints per second with ``n`` workers (0: in-process) under the model above;
        ``ship``: a worker's extra seconds per datapoint to send its result (copying large
        arrays into shared memory), on top of ``work``."""
        if n == 0:
            return 1.0 / max(own + work, 1e-9)
        consumer = own + self.transport
        work = work + ship
        rate = min(1.0 / max(consumer, 1e-9), n / max(work, 1e-9))
        free = self.cores - consumer * rate  # cores left to the workers at that rate
        if n > free:  # workers and consumer share the cores: scale the workers' part down
            rate = min(rate, max(free, 0.1) / max(work, 1e-9))
        return rate

    def decide(
        self, work: float, own: float, quiet: bool = False, avoid: Collection[int] = (), ship: float = 0.0
    ) -> int:
        """The worker count for a map costing ``work`` s per datapoint when the consumer's own
        part costs ``own`` s per datapoint (both measured in-process) and a worker needs
        ``ship`` s more per datapoint to send its result; sets :attr:`workers`.
        ``quiet``: log only if the decision differs from the current one. Counts in
        ``avoid`` (they were measured slower than the alternative lately) are not chosen."""
        serial = self.predicted_rate(0, work, own)
        best, best_rate = 0, serial
        for n in range(1, self.max_workers + 1):
            rate = self.predicted_rate(n, work, own, ship)
            if rate > best_rate * 1.02 and n not in avoid:  # a worker more must be worth it
                best, best_rate = n, rate
        if best and best_rate < serial * self.margin:
            best = 0
        changed, self.workers = best != self.workers, best
        if quiet and not changed:
            return best
        logger.debug(
            "%s: %s (map %.1f us/datapoint, consumer %.1f us/datapoint, sending a result %.1f us; "
            "predicted %.0f/s vs %.0f/s in-process; up to %d workers on %d cores%s)",
            self.stage, f"{best} worker(s)" if best else "maps in-process", work * 1e6, own * 1e6,
            ship * 1e6,
            best_rate, serial, self.max_workers, self.cores,
            f"; not {sorted(avoid)}: measured slower lately" if avoid else "",
        )
        return best

    def adjust(self, wait_fraction: float, avoid: Collection[int] = ()) -> int:
        """After a measuring window in which the consumer spent ``wait_fraction`` of its time
        waiting for results: one worker more (waiting > 30%, room left), one fewer (waiting
        < 2% with more workers than leave the consumer a core), or unchanged; never to a
        count in ``avoid``."""
        n = self.workers
        if n == 0:
            return 0
        new = n
        if wait_fraction > 0.3 and n < self.max_workers:
            new = n + 1
        elif wait_fraction < 0.02 and n > 1 and n >= self.cores:
            new = n - 1
        if new != n and new not in avoid:
            logger.debug(
                "%s: %d -> %d worker(s) (the consumer waited %.0f%% of the time for results)",
                self.stage, n, new, 100 * wait_fraction,
            )
            self.workers = new
        return self.workers


#: bytes per second a worker copies a result's large arrays into shared memory (a modest
#: machine's memcpy; used to price sending large results, which workers do and ``.map`` does not)
COPY_BYTES_PER_S = 4e9
#: datapoints in flight per worker when ``buffer_size="auto"``: room for two full tasks of
#: the largest automatic chunk (64) per worker, so no worker waits for its next task
AUTO_BUFFER_PER_WORKER = 128
#: memory assumed per worker process when bounding ``num_proc="auto"`` (a forked worker
#: shares its parent's pages; this is its own heap, buffers and the map's working set)
WORKER_BYTES = 256 * 2**20
