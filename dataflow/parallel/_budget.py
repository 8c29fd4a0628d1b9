"""A process map's memory budget (``ram_budget=``): :class:`RamBudget` parses it, measures the
pipeline's processes, and splits the budget into workers, shared memory and buffers.

**What is counted.** The pipeline's resident memory is this process's RSS plus each
worker's USS (its private pages: pages a forked worker still shares with this process, and
the shared-memory pages this process has read, are counted once, in this process's RSS).
:meth:`RamBudget.usage` measures exactly that, with psutil.

**The model** (an estimate)::

    this process's RSS  +  num_proc x (worker USS + one task's results)  +  results in flight
        <=  ram_budget

- this process's RSS is measured when the map is built and again at every ``reset_state()``;
- ``num_proc="auto"`` takes at most half of what is left beside this process's RSS for
  workers, the other half being for results;
- a worker's USS is assumed :data:`WORKER_GUESS_BYTES` until a worker of this map has been
  measured (worker 0, right after it started); a worker also holds the results of the task
  it maps (at the measured bytes per datapoint) until they are sent;
- the results in flight (``buffer_size`` times the measured bytes per datapoint) take what
  is left, and at most half the shared memory, whose other half is room for the results this
  process still holds and for gaps;
- the shared memory (``shm_bytes``, when not given) is what is left, at least
  :data:`MIN_RING_BYTES` and at most half of what ``/dev/shm`` has free (more than the
  automatic size without a budget: a budget with room for a deep buffer gets one). A ring's
  pages are reserved as they are written and then stay resident until the map stops, and
  each worker's ring reaches the most *that worker* ever had in flight: with an ordered map
  a worker runs ahead while another is slow, so the rings together take more than the
  buffer ever holds at once. The ring's whole size is therefore counted, not the buffer's;
- the map measures the total (:meth:`usage`) every :data:`CHECK_S` seconds and halves its
  buffer when it is over the budget and higher than when it last did (pages once touched
  stay resident, so a total that stopped growing is not cut again).

Like Grain's ``ram_budget``, the split follows the measured size of the datapoints; unlike
it, the workers' and this process's memory are measured too, and so is the total while the
map runs.

**Guaranteed**: the results in flight are at most what the budget leaves and at most half
the shared memory, at the measured bytes per datapoint, except for the floor of two tasks
per worker (a map always has work to hand out); the shared memory is at most ``shm_bytes``
as chosen; a budget too small for this process, one worker at :data:`WORKER_GUESS_BYTES`
and :data:`MIN_RING_BYTES` is refused with a ``ValueError``. **Not guaranteed** (estimated,
then checked by measurement): the map's own allocations inside a worker, datapoints larger
than those measured so far, and what the user (or a later stage) keeps referenced.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable

import psutil

__all__ = ["CHECK_S", "MIN_RING_BYTES", "WORKER_GUESS_BYTES", "RamBudget", "parse_bytes"]

#: a worker's private memory (USS) assumed before one has been measured: a forked worker of a
#: process with numpy and pyzmq imported measures 5-10 MiB after its first tasks, and more
#: (the pages of its shared-memory ring it wrote and this process has not read yet) as it maps
WORKER_GUESS_BYTES = 32 * 2**20
#: the least shared memory a budget leaves for results (below it, large results travel over
#: ZMQ, through this process's heap, which the budget cannot bound better)
MIN_RING_BYTES = 8 * 2**20
#: seconds between two measurements of the pipeline's memory while the map runs
CHECK_S = 0.25

_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*$")


def parse_bytes(stage: str, name: str, value: object) -> int:
    """``value`` in bytes: an int >= 1, or a string such as ``"4GiB"``, ``"512MB"``,
    ``"1.5 GiB"`` or ``"1000000"`` (units B, kB/MB/GB/TB in powers of 1000, KiB/MiB/GiB/TiB in
    powers of 1024, case-insensitive); else a ``ValueError`` (``TypeError`` for other types)
    naming ``stage``, ``name`` and the value."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(
            f'{stage}: {name} must be a number of bytes (int) or a string such as "4GiB", '
            f"got {type(value).__name__} ({value!r})"
        )
    if isinstance(value, int):
        nbytes = value
    else:
        match = _SIZE.match(value)
        unit = _UNITS.get(match.group(2).lower()) if match else None
        if match is None or unit is None:
            raise ValueError(
                f'{stage}: {name} must be bytes (int) or a size such as "4GiB" or "512MB" '
                f"(units B, kB, MB, GB, TB, KiB, MiB, GiB, TiB), got {value!r}"
            )
        nbytes = int(float(match.group(1)) * unit)
    if nbytes < 1:
        raise ValueError(f"{stage}: {name} must be at least 1 byte, got {value!r}")
    return nbytes


def _mib(nbytes: float) -> str:
    return f"{nbytes / 2**20:.0f} MiB"


class RamBudget:
    """A map's ``ram_budget``: the bytes allowed, the measurements, and the split (see the
    module docstring). ``stage`` names the map in errors and logs."""

    def __init__(self, stage: str, value: int | str) -> None:
        self.stage = stage
        self.value = value
        self.total = parse_bytes(stage, "ram_budget", value)
        self.worker_bytes = WORKER_GUESS_BYTES  # a worker's USS: guessed until measured
        self._next_check = 0.0
        self._cut_at = 0  # the total measured when the buffer was last cut

    def __repr__(self) -> str:
        return f"RamBudget({self.value!r})"

    # -- measurements ---------------------------------------------------------------------
    @staticmethod
    def shm_room() -> int:
        """Half of what ``/dev/shm`` has free (0 if unknown): the most shared memory a budget
        gives a map."""
        try:
            st = os.statvfs("/dev/shm")
        except OSError:
            return 0
        return int(st.f_bavail * st.f_frsize // 2)

    @staticmethod
    def consumer_bytes() -> int:
        """This process's resident memory (RSS)."""
        return int(psutil.Process().memory_info().rss)

    @staticmethod
    def private_bytes(pid: int) -> int:
        """The private memory (USS) of process ``pid``; 0 if it is gone."""
        try:
            return int(psutil.Process(pid).memory_full_info().uss)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            return 0

    @classmethod
    def usage(cls, worker_pids: Iterable[int | None]) -> int:
        """The pipeline's resident memory: this process's RSS plus the workers' USS."""
        return cls.consumer_bytes() + sum(cls.private_bytes(p) for p in worker_pids if p)

    def measure_worker(self, pid: int | None) -> None:
        """Take worker ``pid``'s USS (just started) as every worker's from now on."""
        if pid:
            self.worker_bytes = self.private_bytes(pid) or self.worker_bytes

    def over(self, used: int) -> bool:
        """True if the measured total ``used`` is over the budget and higher than at the last
        cut (which it then becomes): time to cut the buffer."""
        if used <= max(self.total, self._cut_at):
            return False
        self._cut_at = used
        return True

    def due(self) -> bool:
        """True every :data:`CHECK_S` seconds: time to measure :meth:`usage` again."""
        now = time.monotonic()
        if now < self._next_check:
            return False
        self._next_check = now + CHECK_S
        return True

    # -- the split ------------------------------------------------------------------------
    def workers(self, most: int, consumer: int) -> int:
        """How many workers (at most ``most``) fit in half of what the budget leaves beside
        ``consumer`` bytes and the least shared memory (the other half is for results), at
        least one; a ``ValueError`` if not even one fits."""
        room = self.total - consumer - MIN_RING_BYTES
        if room < self.worker_bytes:
            raise ValueError(
                f"{self.stage}: ram_budget={self.value!r} ({_mib(self.total)}) is too small: this "
                f"process already holds {_mib(consumer)}, a worker needs about "
                f"{_mib(self.worker_bytes)} and the shared memory at least {_mib(MIN_RING_BYTES)}; "
                f"give at least {_mib(consumer + self.worker_bytes + MIN_RING_BYTES)}"
            )
        return int(max(1, min(most, room // 2 // self.worker_bytes)))

    def check_workers(self, workers: int, consumer: int) -> None:
        """A ``ValueError`` unless ``workers`` fit beside ``consumer`` bytes (a fixed ``num_proc``)."""
        need = consumer + workers * self.worker_bytes + MIN_RING_BYTES
        if need > self.total:
            raise ValueError(
                f"{self.stage}: ram_budget={self.value!r} ({_mib(self.total)}) is too small for "
                f"num_proc={workers}: this process already holds {_mib(consumer)}, each worker "
                f"needs about {_mib(self.worker_bytes)} and the shared memory at least "
                f"{_mib(MIN_RING_BYTES)}; give at least {_mib(need)} or fewer workers"
            )

    def ring(self, workers: int, consumer: int, most: int) -> int:
        """The shared memory for ``workers`` beside ``consumer`` bytes: what is left (its
        pages stay resident once written, so all of it counts; the results in flight take at
        most half), within ``[MIN_RING_BYTES, most]``."""
        left = self.total - consumer - workers * self.worker_bytes
        return int(max(MIN_RING_BYTES, min(most, left)))

    def results(self, workers: int, consumer: int, ring: int, task_bytes: float) -> float:
        """Bytes the results in flight may take: what the budget leaves once this process and
        the workers (each with one task's results, ``task_bytes``) are counted, and at most
        half the shared memory (``ring``; 0: none, results travel over ZMQ)."""
        left = max(0.0, self.total - consumer - workers * (self.worker_bytes + task_bytes))
        return min(ring / 2, left) if ring else left
