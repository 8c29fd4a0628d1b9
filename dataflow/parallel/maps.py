"""Parallel maps in worker processes: :class:`MultiProcessMapDataZMQ` (alias
:data:`MultiProcessMapData`); the batching one, :class:`MultiProcessMapAndBatchDataZMQ`, is in
:mod:`dataflow.parallel.map_and_batch`.

The upstream is read **in the consumer process** (it is reset there, once); datapoints are
sent to ``num_proc`` workers that apply ``map_func`` and send results back. Each task goes
to the worker with the fewest tasks in flight, so a slow datapoint never stalls the others.
Epochs, ``strict``, ``ordered``, ``item_rng`` and checkpoints are as described in
:mod:`dataflow.parallel._map_base`. ``map_func`` runs in the workers: under
``spawn``/``forkserver`` it must be picklable (a module-level function), which is checked
with a clear error. Workers are seeded apart (see :func:`dataflow.seeding.enter_worker`), so
random augmentations drawing from a worker's RNG differ across workers.
"""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import zmq

from .. import _trace
from .._checks import check_int
from ..base import DataFlow
from ..errors import DataFlowNotReset, WorkerError
from . import _map_auto as here
from . import _messages as msg
from ._autotune import (
    AUTO_BUFFER_PER_WORKER,
    WORKER_BYTES,
    WorkerPlan,
    available_cores,
    memory_bound_workers,
)
from ._autoworkers import AutoBuffer, AutoWorkers
from ._interrupts import deferred_sigint
from ._map_base import ParallelMapBase, RngKey, TaskId
from ._map_worker import map_worker
from ._options import WorkerOptions
from ._pool import DEFAULT_SHM_BYTES, ProcessPool
from ._startup import StartupDispatch

__all__ = ["MultiProcessMapData", "MultiProcessMapDataZMQ"]


class MultiProcessMapDataZMQ(ParallelMapBase):
    """Apply ``map_func`` to every datapoint in ``num_proc`` worker processes.

    Args:
        ds: the upstream, read (and reset) in this process.
        num_proc: number of worker processes, or ``"auto"``: the map starts in-process,
            measures its map time and its consumer's own time per datapoint, and starts
            workers (up to the cores this process may use, bounded by the memory available)
            only when they pay; it then uses one worker more or fewer as the consumer's
            waiting shows. Every move is checked against the throughput measured before it
            and undone if it lost, and workers slower than the measured in-process rate
            (a loaded machine) give way to it. A cheap map stays in-process: no process is
            started. Decisions are logged at debug level on ``dataflow.autotune``.
        map_func: ``dp -> dp``; a ``None`` result drops the datapoint.
        buffer_size: datapoints in flight (bounds memory and the reorder buffer);
            ``"auto"``: 128 per worker that may run, but no more than 16 tasks per worker (a
            slow map sends one datapoint per task: more would only queue behind a worker the
            OS pauses), and fewer for large results (as many as half the shared memory
            holds, at the measured bytes per datapoint); at least 2 tasks per worker.
        strict: one exact pass per ``__iter__`` (see the module docstring); default ``False``
            as in tensorpack: the upstream repeats and each epoch yields ``len(ds)`` results.
        ordered: yield results in input order (default ``False``: as they complete).
        item_rng: call ``map_func(dp, rng)`` with a generator seeded from ``(seed, epoch,
            index)``: the same randomness for a datapoint in any worker and after a resume.
        chunk: datapoints per task sent to a worker; ``"auto"`` (default) sends one at a time
            while the map is slow and groups (up to ``buffer_size / (2 * num_proc)``) when
            it is cheap, from the map time the workers measure (see ``dataflow.autotune``
            in the logging docs). Results come back grouped the same way.
        start_method, seed, timeout, shm_bytes, copy: as for
            :class:`~dataflow.MultiProcessRunnerZMQ` (results of 16 KiB and more come back
            through shared memory).

    ``len`` is ``len(ds)`` (an upper bound in strict mode when ``map_func`` drops some).
    An exception in ``map_func`` is raised here as the same exception type, with the
    worker's traceback as its cause; a worker that dies raises
    :class:`~dataflow.errors.WorkerDied`. Not reentrant. Close it or use ``with``.
    Checkpoints hold the upstream's state and the inputs not yet delivered, so a strict
    ordered map resumes identically at any ``num_proc``.
    """

    _batch_size = 0

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
    ) -> None:
        stage = type(self).__name__
        options = WorkerOptions(stage, start_method, seed, timeout, shm_bytes, copy, hwm=0)
        self._auto: AutoWorkers | None = None
        if num_proc == "auto":
            cores = available_cores()
            most = max(1, min(cores, memory_bound_workers(WORKER_BYTES)))
            self._auto = AutoWorkers(WorkerPlan(stage, most, cores))
        else:
            most = check_int(stage, "num_proc", _not_str(stage, "num_proc", num_proc))
        self._inline: deque[tuple[TaskId, list[Any], RngKey]] = deque()  # tasks to map here
        self._abuf: AutoBuffer | None = None
        if buffer_size == "auto":
            unit = chunk if isinstance(chunk, int) else 1
            self._abuf = AutoBuffer(stage, AUTO_BUFFER_PER_WORKER * most, DEFAULT_SHM_BYTES // 2, unit)
            buffer_size = self._abuf.most
        size = _not_str(stage, "buffer_size", buffer_size)
        super().__init__(ds, map_func, size, strict, ordered, options.timeout, chunk, item_rng, seed)
        self.num_proc: int | str = num_proc if self._auto is not None else most
        self._most = most  # workers started (all of them used, unless num_proc="auto")
        self._active = most
        self.options = options
        self.start_method, self.seed = start_method, options.seed
        self.shm_bytes, self.copy = shm_bytes, options.copy
        self._pool: ProcessPool | None = None
        self._load: list[int] = []
        self._startup = StartupDispatch(0)  # task placement while workers start (see _startup)
        self._small_results = False  # num_proc="auto" saw no large buffer: workers get no rings
        self._measured_at = 0.0  # num_proc="auto": when a group mapped in-process was last timed
        self._measures = 0  # ... and how many were
        self._sized_at = -1e9  # ... and when a result's bytes were last measured
        self._results_small: bool | None = None  # ... and whether it held no large buffer

    @property
    def worker_pids(self) -> list[int | None]:
        """The pids of the workers (empty before ``reset_state``/after ``close``); starts
        those not started yet (see ``_startup``: worker 0 starts first)."""
        return self._pool.pids if self._pool is not None else []

    def _start(self) -> None:
        auto = self._auto
        if auto is not None:
            self._inline.clear()
            auto.restart(time.perf_counter())
            if not auto.parallel:
                return  # maps in-process until the measurements say workers pay
            self._active = auto.plan.workers
        self._start_pool()

    def _start_pool(self, small: bool | None = None) -> None:
        """Start the workers. ``small``: a result mapped in-process (``num_proc="auto"``) held
        no large buffer; where ``shm_bytes`` was left automatic, the workers then get no shared
        memory (reserving it costs more than a short job's whole run)."""
        n = self._most
        options = self.options
        if small is not None and options.shm_bytes is None:
            self._small_results = small
        if self._small_results:
            options = dataclasses.replace(options, shm_bytes=0)
        seed = options.worker_seed()
        args = [(i, self.map_func, options, seed, self._batch_size) for i in range(n)]
        # Worker 0 now, the others when _startup says tasks wait for them (or LAZY_START_S):
        # a fork blocks the consumer, so forking every worker first delays the first batch.
        self._pool = pool = ProcessPool(
            options, map_worker, args, {"map_func": self.map_func}, lazy=True, start_on_data=False
        )
        self._load = [0] * n
        self._startup = StartupDispatch(n)
        self._tuner.cap = max(1, self.buffer_size // (2 * n))  # >= 2 tasks per worker
        self._probe = 2 * self._active if self._tuner.per_item is None else 0  # see ParallelMapBase
        if self._abuf is not None and pool.ring_bytes:
            self._abuf.budget = pool.ring_bytes // 2  # results in flight stay in shared memory
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

    def _now_ready(self, worker: int) -> None:
        """``worker`` said READY: send it the tasks held for it, in order."""
        for task in self._startup.now_ready(worker):
            self._send(worker, task)

    def _live_pool(self) -> ProcessPool:
        if self._pool is None:
            raise DataFlowNotReset(f"{type(self).__name__}: the workers are not running; call reset_state()")
        return self._pool

    def _submit(self, task_id: TaskId, chunk: list[Any], rng_key: RngKey) -> None:
        if self._auto is not None and not self._auto.parallel:
            self._inline.append((task_id, chunk, rng_key))  # mapped when its result is wanted
            return
        self._live_pool()
        load, startup = self._load, self._startup
        if startup.starting:  # some worker is not READY yet: see _startup
            worker = startup.choose(load, self._active, len(chunk), self._tuner.per_item)
            startup.sent(worker, len(chunk))
            if not startup.hold(worker, (task_id, chunk, rng_key)):
                self._send(worker, (task_id, chunk, rng_key))
        else:
            active = load if self._active == len(load) else load[: self._active]
            worker = active.index(min(active))
            self._send(worker, (task_id, chunk, rng_key))
        load[worker] += 1

    def _send(self, worker: int, task: tuple[TaskId, list[Any], RngKey]) -> None:
        pool = self._live_pool()
        try:
            pool.send(worker, msg.DATA, task)
        except zmq.ZMQError as e:  # EHOSTUNREACH: that worker is gone; name it once reapable
            deadline = time.monotonic() + 2.0
            while time.monotonic() < deadline:
                pool.check()
                time.sleep(0.02)
            raise WorkerError(f"{type(self).__name__}: cannot reach worker {worker}: {e}") from e

    # -- num_proc="auto" in-process, and measured receives: in _map_auto.py -------------
    _in_consumer = here.in_consumer
    _stream_here = here.stream_here
    _stretch_sample = here.stretch_sample
    _stretch_measured = here.stretch_measured
    _map_here = here.map_here
    _serial_rest = here.serial_rest
    _serial_done = here.serial_done

    def _receive(self) -> tuple[TaskId | None, bytes, Any]:
        auto, abuf, tr = self._auto, self._abuf, _trace.current
        if auto is None and abuf is None and tr is None:
            worker, kind, (task_id, payload, *busy) = self._task_message()
            self._load[worker] -= 1
            if busy:
                self._tuner.observe(self._flight.get(task_id, 0), busy[0])
            return task_id, kind, payload
        return here.receive_measured(self, auto, abuf, tr)

    def _task_message(self, sizes: list[int] | None = None) -> tuple[int, bytes, Any]:
        """The next message about a task. An error that is no task's (a worker that could
        not rebuild ``map_func``, which may come after every worker said READY) is raised."""
        pool, startup = self._live_pool(), self._startup
        while True:
            if startup.starting:
                for w, task in startup.rebalance(self._load, self._active, self._tuner.per_item):
                    self._send(w, task)
                if startup.wants_start(self._tuner.per_item):
                    pool.start_pending()
            worker, kind, body = pool.recv(sizes=sizes)
            if kind != msg.READY:
                break
            self._now_ready(worker)  # a worker started lazily (see _start_pool)
            if sizes:
                sizes.clear()
        if startup.starting and kind != msg.ERROR:
            startup.done(worker, self._flight.get(body[0], 0))
        if kind == msg.ERROR and isinstance(body, msg.ErrorRecord):
            raise msg.error_for(type(self).__name__, body)
        return worker, kind, body

    def _stop(self) -> None:
        with deferred_sigint():  # bounded (stop_workers joins ~1 s): the pool is never dropped half closed
            pool, self._pool = self._pool, None
            self._startup = StartupDispatch(0)
            if pool is not None:
                pool.close()


def _not_str(stage: str, name: str, value: Any) -> Any:
    if isinstance(value, str):
        raise ValueError(f'{stage}: {name} must be an int >= 1 or "auto", got {value!r}')
    return value


#: tensorpack's name for :class:`MultiProcessMapDataZMQ`.
MultiProcessMapData = MultiProcessMapDataZMQ


def __getattr__(name: str) -> Any:
    """``MultiProcessMapAndBatchDataZMQ`` moved to :mod:`dataflow.parallel.map_and_batch`;
    importing it from here still works (it is also ``dataflow.MultiProcessMapAndBatchDataZMQ``)."""
    if name == "MultiProcessMapAndBatchDataZMQ":
        from .map_and_batch import MultiProcessMapAndBatchDataZMQ

        return MultiProcessMapAndBatchDataZMQ
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
