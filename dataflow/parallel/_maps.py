"""Parallel maps in worker processes: :class:`MultiProcessMapDataZMQ` (alias
:data:`MultiProcessMapData`); the batching one, :class:`MultiProcessMapAndBatchDataZMQ`, is in
:mod:`dataflow.parallel._map_and_batch`.

The upstream is read **in the consumer process** (it is reset there, once); datapoints are
sent to ``num_proc`` workers that apply ``map_func`` and send results back. Each task goes
to the worker with the fewest tasks in flight, so a slow datapoint never stalls the others.
Epochs, ``strict``, ``ordered``, ``item_rng``, chunks and checkpoints are those of every
parallel map (:mod:`dataflow.parallel._map_base`). ``map_func`` runs in the workers: under
``spawn``/``forkserver`` it must be picklable (a module-level function), which is checked
with a clear error. Workers are seeded apart (see :func:`dataflow._seeding.enter_worker`), so
random augmentations drawing from a worker's RNG differ across workers.

**Starting workers.** ``reset_state()`` forks worker 0 and the others later (``ProcessPool``
with ``lazy=True``): a fork blocks the consumer for as long as it takes (tens of
milliseconds in a process that imported a framework), so forking every worker up front
delays the first batch by that much per worker. Until every worker has said READY, the map
places tasks itself (:meth:`MultiProcessMapDataZMQ._choose`):

- a worker not READY yet never gets a message (a ROUTER drops messages to an unknown peer);
  the tasks given to it are held and sent when it says READY, in order;
- before any result has measured the map, tasks are placed as if every worker were there
  (the first tasks carry one datapoint each), but a worker's held tasks do not start it:
  only the pool's :data:`~._pool.LAZY_START_S` bound does;
- once a result has measured the map, the tasks held for workers not READY move to READY
  workers as long as the work queued on each stays within :data:`LAZY_BUDGET_S` at the
  measured time per datapoint, and new tasks are placed the same way; a task beyond that
  goes to the least loaded worker not READY, which the map then starts.

So a cheap map's first batches come from worker 0 while the others start, and a slow map
starts every worker at once. Once every worker is READY each task goes to the worker with
the fewest tasks in flight.

**"auto"**: see the class's arguments; a map too cheap for processes is warned once, with the
measured numbers (:meth:`MultiProcessMapDataZMQ._judge_transport`), not switched to another mode.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import time
from collections.abc import Callable
from typing import Any

import zmq

from .. import _trace
from .._checks import check_int
from .._errors import DataFlowNotReset, WorkerError
from .._warn import warn
from ..base import DataFlow
from . import _messages as msg
from ._budget import RamBudget
from ._interrupts import deferred_sigint
from ._map_base import ParallelMapBase, RngKey, TaskId
from ._pool import DEFAULT_SHM_BYTES, ProcessPool, WorkerOptions, resolve_shm_bytes
from ._worker import map_worker

__all__ = [
    "AUTO_BUFFER_PER_WORKER",
    "LAZY_BUDGET_S",
    "PROCESS_TASK_SECONDS",
    "QUEUE_SECONDS",
    "WORKER_BYTES",
    "WORTH_SPEEDUP",
    "MultiProcessMapData",
    "MultiProcessMapDataZMQ",
    "available_cores",
    "memory_bound_workers",
]

logger = logging.getLogger("dataflow.autotune")

Task = tuple[TaskId, list[Any], RngKey]

#: the map time a READY worker may have queued before tasks go to a worker still starting
LAZY_BUDGET_S = 0.02
#: datapoints in flight per worker when ``buffer_size="auto"``: room for two full tasks of
#: the largest automatic chunk (64) per worker, so no worker waits for its next task
AUTO_BUFFER_PER_WORKER = 128
#: ``buffer_size="auto"``: at most this many tasks in flight per worker (more only queue
#: behind a worker that the OS pauses, and an ordered map waits for it) ...
TASKS_PER_WORKER = 16
#: ... and never fewer than this many (of ``chunk`` datapoints: a batch of a map-and-batch)
FLOOR_TASKS_PER_WORKER = 2
#: a slow map keeps at most this much measured work queued per worker (and at least
#: FLOOR_TASKS_PER_WORKER tasks): a task goes to a worker when it is sent, so a worker that
#: the OS slows down would otherwise still hold a long queue at the end of a pass while the
#: others have nothing left to do
QUEUE_SECONDS = 0.03
#: ``chunk="auto"``: the work a task of a process map should hold. A task costs this process
#: ~100-200 us of CPU (pickling, two socket operations and their I/O thread's wake-ups,
#: bookkeeping), taken from the workers when they use every core; 10 ms keeps that to 1-2%,
#: and the last task of a pass leaves the other workers idle for at most that long
PROCESS_TASK_SECONDS = 0.01
#: memory assumed per worker process when bounding ``num_proc="auto"`` (a forked worker
#: shares its parent's pages; this is its own heap, buffers and the map's working set)
WORKER_BYTES = 256 * 2**20
#: ``num_proc="auto"`` warns about a map that processes make less than this many times faster
#: than in-process, counting the map and moving its data (the costs not measured, context
#: switches and this process's bookkeeping, take the rest)
WORTH_SPEEDUP = 4 / 3
#: ``num_proc="auto"`` judges its transport on the tasks received, once every worker has
#: started, after this many (the first may still be one-datapoint tasks) ...
_WARMUP_TASKS = 8
#: ... over this many tasks
_JUDGED_TASKS = 32


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
        try:
            with open("/proc/meminfo", encoding="ascii") as f:
                lines = [line for line in f if line.startswith("MemAvailable:")]
            available = int(lines[0].split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            return 1 << 16
    return max(1, (available // 2) // max(1, per_worker_bytes))


class MultiProcessMapDataZMQ(ParallelMapBase):
    """Apply ``map_func`` to every datapoint in ``num_proc`` worker processes.

    Args:
        ds: the upstream, read (and reset) in this process.
        num_proc: number of worker processes, or ``"auto"``: as many as this process may use
            cores, no more than fit in half the memory available (:data:`WORKER_BYTES` each).
            A map too cheap to gain from processes (moving a datapoint to a worker and its
            result back, counted on both ends, leaves the workers at most
            :data:`WORTH_SPEEDUP` times as fast as in-process) warns once, with the measured
            costs: map it in-process (``.map``) or batch first.
        map_func: ``dp -> dp``; a ``None`` result drops the datapoint.
        buffer_size: datapoints in flight (bounds memory and the reorder buffer; a slow
            map, once measured, keeps fewer: at most :data:`QUEUE_SECONDS` of its work per
            worker, and at least 2 tasks);
            ``"auto"``: 128 per worker, but no more than 16 tasks per worker (a slow map
            sends one datapoint per task: more would only queue behind a worker the OS
            pauses), and fewer for large results (as many as half the shared memory holds,
            at the measured bytes per datapoint); at least 2 tasks per worker.
        strict: one exact pass per ``__iter__`` (see :mod:`dataflow.parallel._map_base`); default ``False``
            as in tensorpack: the upstream repeats and each epoch yields ``len(ds)`` results.
        ordered: yield results in input order (default ``False``: as they complete).
        item_rng: call ``map_func(dp, rng)`` with a generator seeded from ``(seed, epoch,
            index)``: the same randomness for a datapoint in any worker and after a resume.
        chunk: datapoints per task sent to a worker; ``"auto"`` (default) sends one at a time
            while the map is slow and groups (about :data:`PROCESS_TASK_SECONDS` of work, up
            to ``buffer_size / (2 * num_proc)``) when it is cheaper, from the map time the
            workers measure (see ``dataflow.autotune``
            in the logging docs). Results come back grouped the same way.
        start_method, seed, timeout, shm_bytes, copy: as for
            :class:`~dataflow.MultiProcessRunnerZMQ` (results of 16 KiB and more come back
            through shared memory).
        ram_budget: the memory this process and the workers together may hold, as bytes or
            a string such as ``"4GiB"`` or ``"512MB"`` (``None``: no budget). It bounds
            ``num_proc="auto"`` (a worker is assumed to need 32 MiB of its own until one is
            measured), sizes the shared memory when ``shm_bytes`` is not given, and keeps
            the results in flight (``buffer_size``, then a maximum) to what is left, at the
            measured bytes per datapoint; while the map runs it measures the total (this
            process's RSS plus the workers' USS, with psutil) four times a second and halves
            the buffer when the total is over the budget and still growing. A budget that
            cannot hold this process, one worker and 8 MiB of shared memory is a
            ``ValueError``. The model, what it guarantees and what it only estimates:
            :mod:`dataflow.parallel._budget`.

    ``len`` is ``len(ds)`` (an upper bound in strict mode when ``map_func`` drops some).
    An exception in ``map_func`` is raised here as the same exception type, with the
    worker's traceback as its cause; a worker that dies raises
    :class:`~dataflow._errors.WorkerDied`. Not reentrant. Close it or use ``with``.
    Checkpoints hold the upstream's state and the inputs not yet delivered, so a strict
    ordered map resumes identically at any ``num_proc``.
    """

    _batch_size = 0
    _task_seconds = PROCESS_TASK_SECONDS

    def __init__(
        self,
        ds: DataFlow[Any],
        num_proc: int | str,
        map_func: Callable[..., Any],
        buffer_size: int | str = 200,
        strict: bool = False,
        *,
        ordered: bool = False,
        item_rng: bool = False,
        start_method: str | None = None,
        seed: int | None = None,
        timeout: float | None = None,
        shm_bytes: int | None = None,
        copy: bool = False,
        chunk: int | str = "auto",
        ram_budget: int | str | None = None,
    ) -> None:
        stage = type(self).__name__
        options = WorkerOptions(stage, start_method, seed, timeout, shm_bytes, copy, hwm=0)
        self.ram_budget = ram_budget
        self._ram = None if ram_budget is None else RamBudget(stage, ram_budget)
        consumer = self._ram.consumer_bytes() if self._ram is not None else 0
        if num_proc == "auto":
            workers = max(1, min(available_cores(), memory_bound_workers(WORKER_BYTES)))
            if self._ram is not None:
                workers = self._ram.workers(workers, consumer)
            logger.debug("%s: num_proc='auto' uses %d worker(s)", stage, workers)
        else:
            workers = check_int(stage, "num_proc", _not_str(stage, "num_proc", num_proc))
            if self._ram is not None:
                self._ram.check_workers(workers, consumer)
        self._auto_buffer = buffer_size == "auto"
        if self._auto_buffer:
            unit = chunk if isinstance(chunk, int) else 1  # a batch of a map-and-batch
            buffer_size = max(AUTO_BUFFER_PER_WORKER * workers, FLOOR_TASKS_PER_WORKER * unit)
        size = _not_str(stage, "buffer_size", buffer_size)
        super().__init__(ds, map_func, size, strict, ordered, options.timeout, chunk, item_rng, seed)
        self.num_proc: int | str = num_proc if num_proc == "auto" else workers
        self._workers = workers
        self.options = options
        self.start_method, self.seed = start_method, options.seed
        self.shm_bytes, self.copy = shm_bytes, options.copy
        self._pool: ProcessPool | None = None
        self._load: list[int] = []  # tasks in flight per worker
        self._buffer_most = self.buffer_size  # buffer_size="auto": its bounds and estimate
        self._buffer_budget = DEFAULT_SHM_BYTES // 2
        self._bytes_per_item: float | None = None
        self._ram_consumer = consumer  # ram_budget: this process's RSS at the last start
        self._ring_bytes = 0
        # num_proc="auto" judges once whether processes pay, from seconds per datapoint (one
        # sample per task) of the map and of moving the data on both ends (CPU: waiting, or
        # being preempted, costs nothing); None once judged
        self._transport: _Costs | None = None
        if num_proc == "auto":
            self._transport = _Costs()
        self._transport_seen = 0  # tasks received since every worker started
        self._startup_reset(0)

    @property
    def worker_pids(self) -> list[int | None]:
        """The pids of the workers (empty before ``reset_state``/after ``close``); starts
        those not started yet (worker 0 starts first: see the module docstring)."""
        return self._pool.pids if self._pool is not None else []

    # -- start and stop -------------------------------------------------------------------
    def _start(self) -> None:
        n, options = self._workers, self._budgeted_options()
        args = [(i, self.map_func, options, options.worker_seed(), self._batch_size) for i in range(n)]
        # Worker 0 now, the others when tasks wait for them (or LAZY_START_S): see the module
        # docstring. A fork blocks the consumer, so forking every worker first delays the first batch.
        self._pool = pool = ProcessPool(
            options, map_worker, args, {"map_func": self.map_func}, lazy=True, start_on_data=False
        )
        self._load = [0] * n
        self._startup_reset(n)
        self._chunk_cap = max(1, self.buffer_size // (2 * n))  # >= 2 tasks per worker
        self._probe = 2 * n if self._per_item is None else 0  # see ParallelMapBase.__init__
        self._ring_bytes = pool.ring_bytes
        if self._auto_buffer and pool.ring_bytes:
            self._buffer_budget = pool.ring_bytes // 2  # results in flight stay in shared memory
        try:
            while True:  # a ROUTER drops messages to unknown peers: wait for worker 0 to say READY
                worker, kind, payload = pool.recv()
                if kind == msg.READY:
                    self._now_ready(worker)
                    if worker == 0:
                        break
                elif kind == msg.ERROR:  # e.g. a worker could not rebuild map_func
                    raise msg.error_for(type(self).__name__, payload)
        except BaseException:
            self._stop()  # a failed start leaves no worker and no shared memory behind
            raise
        if self._ram is not None:  # worker 0 has just started: its USS is every worker's estimate
            self._ram.measure_worker(pool.procs[0].pid)
            self._buffer_budget = int(self._ram.results(n, self._ram_consumer, self._ring_bytes, 0))

    def _budgeted_options(self) -> WorkerOptions:
        """The workers' options; with a ``ram_budget`` and no ``shm_bytes``, the shared memory
        is what the budget leaves (measured now: the upstream was just reset)."""
        ram = self._ram
        if ram is None:
            return self.options
        self._ram_consumer = consumer = ram.consumer_bytes()
        automatic = resolve_shm_bytes(type(self).__name__, self.shm_bytes)
        if self.shm_bytes is not None or not automatic:
            return self.options
        ring = ram.ring(self._workers, consumer, max(automatic, ram.shm_room()))
        logger.debug(
            "%s: ram_budget %d MiB: this process %d MiB, %d worker(s) at %d MiB, %d MiB of shared memory",
            type(self).__name__, ram.total >> 20, consumer >> 20, self._workers,
            ram.worker_bytes >> 20, ring >> 20,
        )
        return dataclasses.replace(self.options, shm_bytes=ring)

    def _stop(self) -> None:
        with deferred_sigint():  # bounded (stop_workers joins ~1 s): the pool is never dropped half closed
            pool, self._pool = self._pool, None
            self._startup_reset(0)
            if pool is not None:
                pool.close()

    def _live_pool(self) -> ProcessPool:
        if self._pool is None:
            raise DataFlowNotReset(f"{type(self).__name__}: the workers are not running; call reset_state()")
        return self._pool

    # -- tasks out ------------------------------------------------------------------------
    def _submit(self, task_id: TaskId, chunk: list[Any], rng_key: RngKey) -> None:
        self._live_pool()
        load, task = self._load, (task_id, chunk, rng_key)
        if self._starting:  # some worker is not READY yet: see the module docstring
            worker = self._choose(len(chunk))
            self._queued[worker] += len(chunk)
            if self._is_ready[worker]:
                self._send(worker, task)
            else:
                self._held.setdefault(worker, []).append(task)
        else:
            worker = load.index(min(load))
            self._send(worker, task)
        load[worker] += 1

    def _send(self, worker: int, task: Task) -> None:
        pool = self._live_pool()
        cost = self._transport
        t0 = time.thread_time() if cost is not None else 0.0
        try:
            pool.send(worker, msg.DATA, task)
        except zmq.ZMQError as e:  # EHOSTUNREACH: that worker is gone; name it once reapable
            deadline = time.monotonic() + 2.0
            while time.monotonic() < deadline:
                pool.check()
                time.sleep(0.02)
            raise WorkerError(f"{type(self).__name__}: cannot reach worker {worker}: {e}") from e
        if cost is not None and self._per_item is not None and not self._starting:
            # measured once the first tasks (one datapoint each) and the workers' starts are over
            cost.sends.append((time.thread_time() - t0) / len(task[1]))

    def _observe(self, items: int, busy: float) -> None:
        """As the base class's, then bound the tasks in flight to :data:`QUEUE_SECONDS` of
        measured work per worker (a cheap map's tasks are bounded by ``buffer_size`` first)."""
        super()._observe(items, busy)
        per_task = (self._per_item or 0.0) * self._chunk
        if per_task > 0:
            ahead = max(FLOOR_TASKS_PER_WORKER, math.ceil(QUEUE_SECONDS / per_task))
            self._task_cap = self._workers * ahead

    # -- start-up placement (while some worker is not READY) -------------------------------
    def _startup_reset(self, n: int) -> None:
        self._is_ready = [False] * n
        self._held: dict[int, list[Task]] = {}  # worker -> tasks waiting for its READY
        self._queued = [0] * n  # datapoints in flight per worker, while starting
        self._starting = n > 0  # some worker has not said READY yet

    def _choose(self, size: int) -> int:
        """The worker for a task of ``size`` datapoints while some are starting."""
        room = self._room(size)
        if room is not None:
            return room
        # Ties: unmeasured, a READY worker (the first result comes sooner); over the budget,
        # a starting one.
        load, ready, over = self._load, self._is_ready, self._per_item is not None
        return min(range(len(load)), key=lambda w: (load[w], ready[w] == over))

    def _room(self, size: int) -> int | None:
        """The least loaded READY worker if ``size`` more datapoints keep its queued work
        within :data:`LAZY_BUDGET_S` (``None``: no such worker, or nothing measured)."""
        per_item = self._per_item
        up = [w for w, ready in enumerate(self._is_ready) if ready]
        if per_item is None or not up:
            return None
        best = min(up, key=self._load.__getitem__)
        return best if (self._queued[best] + size) * per_item <= LAZY_BUDGET_S else None

    def _rebalance(self) -> None:
        """Send held tasks (oldest first) to READY workers that have room within the budget."""
        load, queued = self._load, self._queued
        for worker in sorted(self._held):
            tasks = self._held[worker]
            while tasks:
                size = len(tasks[0][1])
                best = self._room(size)
                if best is None:
                    break
                task = tasks.pop(0)
                load[worker] -= 1
                load[best] += 1
                queued[worker] = max(0, queued[worker] - size)
                queued[best] += size
                self._send(best, task)
            if not tasks:
                del self._held[worker]

    def _now_ready(self, worker: int) -> None:
        """``worker`` said READY: send it the tasks held for it, in order."""
        self._is_ready[worker] = True
        self._starting = not all(self._is_ready)
        for task in self._held.pop(worker, []):
            self._send(worker, task)

    def _task_done(self, worker: int, items: int) -> None:
        """A task of ``items`` datapoints came back from ``worker``."""
        self._load[worker] -= 1
        if self._starting:
            self._queued[worker] = max(0, self._queued[worker] - items)

    # -- results in -----------------------------------------------------------------------
    def _receive(self) -> tuple[TaskId | None, bytes, Any]:
        tr, cost = _trace.current, self._transport
        sizes: list[int] | None = [] if self._auto_buffer or self._ram is not None else None
        t0 = time.perf_counter() if tr is not None else 0.0
        c0 = time.thread_time() if cost is not None else 0.0  # waiting costs no CPU
        worker, kind, (task_id, payload, *measured) = self._task_message(sizes)
        items = self._flight.get(task_id, 0)
        self._task_done(worker, items)
        if measured:
            self._busy = measured[0]
        if tr is not None:
            self._trace_receive(tr, worker, t0, items, measured)
        if sizes:
            self._size_buffer(items, sizes[0])
        if self._ram is not None and self._ram.due():
            self._check_budget()
        if cost is not None and measured and items and not self._starting:
            # not while workers start: a fork would be timed with the receive
            self._transport_seen = seen = self._transport_seen + 1
            if seen > _WARMUP_TASKS:
                cost.add(items, measured[0], measured[2], time.thread_time() - c0)
            if seen >= _WARMUP_TASKS + _JUDGED_TASKS:
                self._judge_transport(cost)
        return task_id, kind, payload

    def _task_message(self, sizes: list[int] | None = None) -> tuple[int, bytes, Any]:
        """The next message about a task. An error that is no task's (a worker that could
        not rebuild ``map_func``, which may come after every worker said READY) is raised."""
        pool = self._live_pool()
        while True:
            if self._starting and self._held and self._per_item is not None:
                self._rebalance()
                if self._held:  # measured tasks wait for a worker not started: start it
                    pool.start_pending()
            worker, kind, body = pool.recv(sizes=sizes)
            if kind != msg.READY:
                break
            self._now_ready(worker)  # a worker started lazily (see _start)
            if sizes:
                sizes.clear()
        if kind == msg.ERROR and isinstance(body, msg.ErrorRecord):
            raise msg.error_for(type(self).__name__, body)
        return worker, kind, body

    def _size_buffer(self, items: int, nbytes: int) -> None:
        """``buffer_size="auto"``: a result of ``items`` datapoints took ``nbytes``; resize
        (changes under 25% are ignored: the estimate wobbles)."""
        if items <= 0 or nbytes < 0:
            return
        sample = nbytes / items
        est = self._bytes_per_item
        self._bytes_per_item = est = sample if est is None else est + 0.25 * (sample - est)
        n, chunk, unit = self._workers, self._chunk, self._chunk_fixed or 1
        want = self._buffer_most
        if self._auto_buffer:
            want = min(want, TASKS_PER_WORKER * chunk * n)
        budget: float = self._buffer_budget
        if self._ram is not None:
            budget = self._ram.results(n, self._ram_consumer, self._ring_bytes, est * chunk)
            budget = min(budget, self._buffer_budget) if self._auto_buffer else budget
        if est > 0:
            want = min(want, int(budget / est))
        want, cur = max(FLOOR_TASKS_PER_WORKER * n * unit, want), self.buffer_size
        if want == cur or abs(want - cur) < 0.25 * cur:
            return
        logger.debug(
            "%s: buffer_size %d -> %d datapoints (%.0f bytes per datapoint, %d MiB for results "
            "in flight)", type(self).__name__, cur, want, est, int(budget) >> 20,
        )
        self.buffer_size = want
        self._chunk_cap = max(1, want // (2 * n))

    def _check_budget(self) -> None:
        """``ram_budget``: measure this process and the workers; over the budget (and above
        the last cut: see :meth:`RamBudget.over`), halve the buffer (down to two tasks per
        worker) and keep it at most that from now on."""
        ram, pool = self._ram, self._pool
        if ram is None or pool is None:
            return
        used = ram.usage(p.pid for p in pool.procs)
        floor = FLOOR_TASKS_PER_WORKER * self._workers * (self._chunk_fixed or 1)
        if self.buffer_size <= floor or not ram.over(used):
            return
        want = max(floor, self.buffer_size // 2)
        logger.debug(
            "%s: %d MiB in use, over ram_budget %d MiB: buffer_size %d -> %d datapoints",
            type(self).__name__, used >> 20, ram.total >> 20, self.buffer_size, want,
        )
        self.buffer_size = self._buffer_most = want
        self._chunk_cap = max(1, want // (2 * self._workers))

    def _judge_transport(self, cost: _Costs) -> None:
        """``num_proc="auto"``, once: warn if the map does not pay for moving its data. Moving
        a datapoint is counted on both ends, in CPU time: a worker receiving it and sending
        the result (``there``), this process sending it and receiving the result (``here``).
        A map of ``work`` seconds per datapoint on ``n`` workers is then at most
        ``min(n * work / (work + there + here), work / here)`` times faster than in-process
        (the cores do the map and both ends of the transport; this process receives every
        result alone); under :data:`WORTH_SPEEDUP` it is warned. Medians of the tasks' costs:
        on a loaded machine a task that the OS paused looks many times slower, which a mean
        would take for the map's cost."""
        self._transport = None
        work, there = _median(cost.maps), _median(cost.worker_moves)
        here = _median(cost.sends) + _median(cost.receives)
        n = self._workers
        best = min(n * work / max(1e-9, work + there + here), work / max(1e-9, here))
        logger.debug(
            "%s: map %.1f us per datapoint in the workers; moving it %.1f us in the workers, "
            "%.1f us here; at most %.2fx in-process",
            type(self).__name__, work * 1e6, there * 1e6, here * 1e6, best,
        )
        if best < WORTH_SPEEDUP:
            warn(
                f"{type(self).__name__}: map_func takes {work * 1e6:.1f} us per datapoint in a "
                f"worker, and moving the datapoint costs {there * 1e6:.1f} us in the workers "
                f"(receiving it, sending the result) and {here * 1e6:.1f} us in this process "
                f"(sending it, receiving the result), measured in CPU time: {n} worker "
                f"processes make this map at most {best:.2f}x as fast as in-process, before "
                f"the costs not measured. Map it in-process (.map(f)), or batch first and map "
                f"whole batches in the workers (.batch(n).parallel_map(f_on_batches, ...))",
                RuntimeWarning,
            )

    def _trace_receive(
        self, tr: _trace.Tracer, worker: int, t0: float, items: int, busy: list[float]
    ) -> None:
        """Trace spans: the consumer waiting for a result, the worker mapping its task."""
        tr.span(tr.stage_track(self), "waiting for workers", t0, time.perf_counter(), "wait")
        if len(busy) >= 2:
            pids = self._pool.pids if self._pool is not None else []
            track = tr.worker_track(self, worker, pids[worker] if worker < len(pids) else None)
            start = busy[1]
            tr.worker_span(track, f"map {items} datapoint(s)", start, start + busy[0], {"datapoints": items})


class _Costs:
    """Seconds per datapoint, one sample per task, that ``num_proc="auto"`` judges by."""

    def __init__(self) -> None:
        self.maps: list[float] = []  # the map, in a worker
        self.worker_moves: list[float] = []  # a worker receiving a task and sending its result
        self.sends: list[float] = []  # this process sending a task
        self.receives: list[float] = []  # this process receiving a result

    def add(self, items: int, busy: float, moved: float, received: float) -> None:
        """One task of ``items`` datapoints: its map time, the CPU its worker spent moving its
        previous task (per datapoint; negative: none yet), and the CPU receiving it here."""
        self.maps.append(busy / items)
        if moved >= 0:
            self.worker_moves.append(moved)
        self.receives.append(received / items)


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2] if values else 0.0


def _not_str(stage: str, name: str, value: Any) -> Any:
    if isinstance(value, str):
        raise ValueError(f'{stage}: {name} must be an int >= 1 or "auto", got {value!r}')
    return value


#: tensorpack's name for :class:`MultiProcessMapDataZMQ`.
MultiProcessMapData = MultiProcessMapDataZMQ
