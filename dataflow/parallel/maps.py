"""Parallel maps in worker processes: :class:`MultiProcessMapDataZMQ` (alias
:data:`MultiProcessMapData`) and :class:`MultiProcessMapAndBatchDataZMQ`.

The upstream is read **in the consumer process** (it is reset there, once); datapoints are
sent to ``num_proc`` workers that apply ``map_func`` and send results back. Each task goes
to the worker with the fewest tasks in flight, so a slow datapoint never stalls the others.
Epochs, ``strict`` and ``ordered`` are as described in :mod:`dataflow.parallel._map_base`.
``map_func`` runs in the workers: under ``spawn``/``forkserver`` it must be picklable (a
module-level function), which is checked with a clear error. Workers are seeded apart (see
:func:`dataflow.seeding.enter_worker`), so random augmentations differ across workers.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import zmq

from .. import seeding
from .._checks import check_int
from ..base import DataFlow
from ..errors import DataFlowNotReset, WorkerError
from ..ops._stack import collate
from . import _transport as tr
from ._map_base import ParallelMapBase, TaskId
from ._pool import ProcessPool, worker_socket
from ._process import bootstrap_worker, check_start_method, check_workers
from ._shm import RingWriter

__all__ = ["MultiProcessMapAndBatchDataZMQ", "MultiProcessMapData", "MultiProcessMapDataZMQ"]


def _map_worker(
    parent: tuple[int, bool],
    endpoint: str,
    ring_path: str | None,
    index: int,
    map_func: Callable[[Any], Any],
    seed: int | None,
    batch_size: int,
    stage: str,
) -> None:
    """Serve tasks forever: map each chunk, drop ``None`` results, batch full chunks when
    ``batch_size`` is set. Never raises: exceptions are sent back as ERROR results."""
    ring = RingWriter(ring_path, index) if ring_path else None  # first: it unlinks the file
    bootstrap_worker(parent)
    sock = worker_socket(endpoint, zmq.DEALER, hwm=0, identity=b"w%d" % index)
    seeding.enter_worker((index,), seed)
    tr.send(sock, tr.READY, os.getpid())
    where = f"map_func in worker {index} (pid {os.getpid()})"
    while True:
        _, (task_id, chunk) = tr.recv(sock)
        try:
            out = [r for r in map(map_func, chunk) if r is not None]
            if batch_size and len(out) == batch_size:
                tr.send(sock, tr.BATCH, (task_id, collate(stage, out)), ring=ring)
            else:
                tr.send(sock, tr.DATA, (task_id, out), ring=ring)
        except BaseException as e:
            tr.send(sock, tr.ERROR, (task_id, tr.error_payload(e, where)))


class MultiProcessMapDataZMQ(ParallelMapBase):
    """Apply ``map_func`` to every datapoint in ``num_proc`` worker processes.

    Args:
        ds: the upstream, read (and reset) in this process.
        num_proc: number of worker processes.
        map_func: ``dp -> dp``; a ``None`` result drops the datapoint.
        buffer_size: datapoints in flight (bounds memory and the reorder buffer).
        strict: one exact pass per ``__iter__`` (see the module docstring); default ``False``
            as in tensorpack: the upstream repeats and each epoch yields ``len(ds)`` results.
        ordered: yield results in input order (default ``False``: as they complete).
        start_method, seed, timeout, shm_bytes, copy: as for
            :class:`~dataflow.MultiProcessRunnerZMQ` (results of 16 KiB and more come back
            through shared memory).

    ``len`` is ``len(ds)`` (an upper bound in strict mode when ``map_func`` drops some).
    An exception in ``map_func`` is raised here as :class:`~dataflow.errors.WorkerError`
    (chained to the original, with the worker's traceback); a worker that dies raises
    :class:`~dataflow.errors.WorkerDied`. Not reentrant. Close it or use ``with``.
    """

    _batch_size = 0

    def __init__(
        self,
        ds: DataFlow,
        num_proc: int,
        map_func: Callable[[Any], Any],
        buffer_size: int = 200,
        strict: bool = False,
        *,
        ordered: bool = False,
        start_method: str | None = None,
        seed: int | None = None,
        timeout: float | None = None,
        shm_bytes: int | None = None,
        copy: bool = False,
        chunk: int = 1,
    ) -> None:
        super().__init__(ds, map_func, buffer_size, strict, ordered, timeout, chunk=chunk)
        stage = type(self).__name__
        self.num_proc = check_int(stage, "num_proc", num_proc)
        self.start_method = check_start_method(stage, start_method)
        self.seed = seeding.check_seed(stage, seed)
        self.shm_bytes = shm_bytes
        self.copy = bool(copy)
        self._pool: ProcessPool | None = None
        self._load: dict[bytes, int] = {}

    @property
    def worker_pids(self) -> list[int | None]:
        """The pids of the running workers (empty before ``reset_state``/after ``close``)."""
        return self._pool.pids if self._pool is not None else []

    def _start(self) -> None:
        stage = type(self).__name__
        self._pool = ProcessPool(
            stage,
            zmq.ROUTER,
            _map_worker,
            [
                (i, self.map_func, seeding.resolve_seed(self.seed), self._batch_size, stage)
                for i in range(self.num_proc)
            ],
            start_method=self.start_method,
            hwm=0,
            timeout=self.timeout,
            picklable={"map_func": self.map_func},
            shm_bytes=self.shm_bytes,
            copy=self.copy,
        )
        self._pool.sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
        self._load = {}
        while len(self._load) < self.num_proc:  # a ROUTER drops messages to unknown peers
            frames = self._pool.recv_frames()
            if self._pool.decode(frames[1:])[0] == tr.READY:
                self._load[frames[0]] = 0

    def _live_pool(self) -> ProcessPool:
        if self._pool is None:
            raise DataFlowNotReset(f"{type(self).__name__}: the workers are not running; call reset_state()")
        return self._pool

    def _submit(self, task_id: TaskId, chunk: list[Any]) -> None:
        pool = self._live_pool()
        ident = min(self._load, key=self._load.__getitem__)
        try:
            tr.send(pool.sock, tr.DATA, (task_id, chunk), prefix=(ident,))
        except zmq.ZMQError as e:  # EHOSTUNREACH: that worker is gone; name it once reapable
            deadline = time.monotonic() + 2.0
            while time.monotonic() < deadline:
                check_workers(type(self).__name__, pool.procs)
                time.sleep(0.02)
            raise WorkerError(f"{type(self).__name__}: cannot reach worker {ident.decode()}: {e}") from e
        self._load[ident] += 1

    def _receive(self) -> tuple[TaskId, bytes, Any]:
        pool = self._live_pool()
        frames = pool.recv_frames()
        self._load[frames[0]] -= 1
        kind, (task_id, payload) = pool.decode(frames[1:])
        return task_id, kind, payload

    def _worker_error(self, payload: dict[str, Any]) -> BaseException:
        return tr.worker_error(type(self).__name__, payload)

    def _stop(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None


#: tensorpack's name for :class:`MultiProcessMapDataZMQ`.
MultiProcessMapData = MultiProcessMapDataZMQ


class MultiProcessMapAndBatchDataZMQ(MultiProcessMapDataZMQ):
    """Map ``batch_size`` datapoints at a time in a worker and batch them there.

    Each task is a chunk of ``batch_size`` upstream datapoints; the worker maps them and,
    when none was dropped, batches them itself (as :class:`~dataflow.BatchData` would), so
    only one message per batch crosses processes. Chunks with dropped datapoints come back
    unbatched and are topped up from later ones here, so every batch has ``batch_size``
    datapoints. At the end of a strict pass the rest is produced if ``remainder`` else
    dropped. ``len`` is ``len(ds) // batch_size`` (``ceil`` with ``remainder``).
    ``buffer_size`` (default ``3 * batch_size``) counts datapoints in flight.
    """

    def __init__(
        self,
        ds: DataFlow,
        num_proc: int,
        map_func: Callable[[Any], Any],
        batch_size: int,
        buffer_size: int | None = None,
        strict: bool = False,
        remainder: bool = False,
        **kwargs: Any,
    ) -> None:
        bs = check_int(type(self).__name__, "batch_size", batch_size)
        buffer_size = 3 * bs if buffer_size is None else buffer_size
        super().__init__(ds, num_proc, map_func, buffer_size, strict, chunk=bs, **kwargs)
        self._batch_size = self.batch_size = bs
        self.remainder = bool(remainder)
        self._carry: list[Any] = []

    def __len__(self) -> int:
        size = len(self.ds)
        return -(-size // self.batch_size) if self.remainder else size // self.batch_size

    def _clear_epoch_state(self) -> None:
        super()._clear_epoch_state()
        self._carry = []

    def _outputs(self, kind: bytes, payload: Any) -> None:
        carry, bs = self._carry, self.batch_size
        if kind == tr.BATCH:
            if not carry:
                self._ready.append(payload)
                return
            payload = _unbatch(payload)  # datapoints carried from a chunk with drops go first
        carry.extend(payload)
        while len(carry) >= bs:
            self._ready.append(collate(type(self).__name__, carry[:bs]))
            del carry[:bs]

    def _finish_pass(self) -> None:
        if self._carry and self.remainder:
            self._ready.append(collate(type(self).__name__, self._carry))
        self._carry = []


def _unbatch(batch: Any) -> list[Any]:
    """The datapoints of a batch made by ``collate`` (rows of its components)."""
    if isinstance(batch, dict):
        n = len(next(iter(batch.values())))
        return [{k: v[i] for k, v in batch.items()} for i in range(n)]
    n = len(batch[0])
    return [[c[i] for c in batch] for i in range(n)]
