"""Process runners: run copies of a flow in worker processes and merge what they produce.

:class:`MultiProcessRunnerZMQ` (and its tensorpack-compatible spelling
:class:`MultiProcessRunner`) start ``num_proc`` processes; each resets **its own copy** of
the flow and iterates it forever, epoch after epoch, sending datapoints to the consumer over
ZMQ. Consequences users must know:

- With ``num_proc > 1`` each worker produces the whole flow: datapoints are duplicated
  across workers unless the flow itself shards or randomises (seed workers apart with
  ``seed=``/:func:`~dataflow.set_seed`; each worker gets a distinct stream).
- Order: each worker's datapoints arrive in its order; workers interleave arbitrarily.
- Epochs: one ``__iter__`` yields ``len(ds)`` datapoints (from any workers) when the flow
  has a length, else it never ends. Nothing is lost between epochs: what was received but
  not yet yielded comes first in the next one.
- Workers send small datapoints in groups: a message leaves when 256 are pending or 1 ms
  after the previous one, which cuts the per-datapoint messaging cost several times. A
  source slower than one datapoint per millisecond still sends each at once; the price is
  that a datapoint made less than 1 ms after a message waits for the next datapoint (or the
  end of the epoch). Large datapoints (64 KiB and more) always go alone.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Iterator
from time import perf_counter
from typing import Any

import zmq

from .. import seeding
from .._checks import check_int, check_timeout
from ..base import DataFlow, ProxyDataFlow, ReentrancyGuard
from ..errors import DataFlowNotReset
from . import _transport as tr
from ._pool import ProcessPool, worker_socket
from ._process import bootstrap_worker, check_start_method
from ._shm import RingWriter

__all__ = ["MultiProcessRunner", "MultiProcessRunnerZMQ"]

_GROUP_MAX = 256
_GROUP_UNTIL_BYTES = 64 * 1024  # per datapoint
_GROUP_WINDOW_S = 0.001  # a datapoint waits at most this long for others to share its message


def _runner_worker(
    parent: tuple[int, bool],
    endpoint: str,
    ring_path: str | None,
    ds: DataFlow,
    key: tuple[int, ...],
    seed: int | None,
    hwm: int,
) -> None:
    """A worker's whole life: reset its copy of ``ds`` and send it forever. Never raises:
    an exception is sent to the consumer, then the worker idles until it is stopped."""
    ring = RingWriter(ring_path, key[-1]) if ring_path else None  # first: it unlinks the file
    bootstrap_worker(parent)
    sock = worker_socket(endpoint, zmq.PUSH, hwm)
    pending: list[Any] = []
    group_max = _GROUP_MAX
    last_flush = 0.0
    try:
        seeding.enter_worker(key, seed)
        ds.reset_state()
        while True:
            produced = False
            for dp in ds:
                produced = True
                pending.append(dp)
                now = perf_counter()
                if len(pending) >= group_max or now - last_flush >= _GROUP_WINDOW_S:
                    # grouping only pays while messages are small (their fixed cost dominates)
                    big = _flush(sock, pending, ring) >= _GROUP_UNTIL_BYTES * len(pending)
                    group_max = 1 if big else _GROUP_MAX
                    pending = []
                    last_flush = now
            if not produced:
                raise ValueError(f"the flow {type(ds).__name__} produced an empty epoch")
            if pending:  # the end of an epoch may be followed by a slow start of the next
                _flush(sock, pending, ring)
                pending = []
                last_flush = perf_counter()
    except BaseException as e:
        if pending:
            _flush(sock, pending, ring)
        where = f"the flow {type(ds).__name__} in worker {key[-1]} (pid {os.getpid()})"
        tr.send(sock, tr.ERROR, tr.error_payload(e, where))
        threading.Event().wait()  # exiting could drop the message; the consumer stops us


def _flush(sock: zmq.Socket, pending: list[Any], ring: RingWriter | None) -> int:
    """Send the pending datapoints as one message; returns its size in bytes."""
    if len(pending) == 1:
        return tr.send(sock, tr.DATA, pending[0], ring=ring)
    return tr.send(sock, tr.GROUP, pending, ring=ring)


class MultiProcessRunnerZMQ(ProxyDataFlow):
    """Run ``num_proc`` copies of ``ds`` in worker processes (see the module docstring).

    Args:
        ds: the flow to run; it is reset in each worker, never in this process.
        num_proc: number of worker processes.
        hwm: ZMQ high-water mark: messages buffered per direction before workers block.
        start_method: ``"fork"`` (default on Linux), ``"forkserver"`` or ``"spawn"``; under
            the last two, ``ds`` must be picklable (checked, with a clear error).
        seed: base seed for the workers' RNGs (worker *i* gets child *i*); default:
            :func:`~dataflow.set_seed`'s, else fresh entropy.
        timeout: seconds without any datapoint before ``TimeoutError`` (``None``: no limit).
        shm_bytes: shared memory for arrays of 16 KiB and more, one ring per worker
            (``None``: 256 MiB, capped to half of the free ``/dev/shm``; ``0``: off). See
            ``docs/zero_copy.rst`` for the lifetime contract.
        copy: ``True`` gives owned arrays instead of views of shared memory.

    Errors in a worker are raised here as :class:`~dataflow.errors.WorkerError` with the
    worker's traceback; a worker that dies raises :class:`~dataflow.errors.WorkerDied`.
    Not reentrant. Close it (or use ``with``) to stop the workers; they also die with this
    process.
    """

    def __init__(
        self,
        ds: DataFlow,
        num_proc: int = 1,
        hwm: int = 50,
        *,
        start_method: str | None = None,
        seed: int | None = None,
        timeout: float | None = None,
        shm_bytes: int | None = None,
        copy: bool = False,
    ) -> None:
        super().__init__(ds)
        stage = type(self).__name__
        self.num_proc = check_int(stage, "num_proc", num_proc)
        self.hwm = check_int(stage, "hwm", hwm)
        self.start_method = check_start_method(stage, start_method)
        self.seed = seeding.check_seed(stage, seed)
        self.timeout = check_timeout(stage, timeout)
        self.shm_bytes = shm_bytes
        self.copy = bool(copy)
        self._pool: ProcessPool | None = None
        self._buffer: deque[Any] = deque()
        self._guard = ReentrancyGuard(stage)

    def reset_state(self) -> None:
        """Start the workers (each resets its own copy of ``ds``)."""
        self.close_workers()
        self._buffer.clear()
        self._pool = ProcessPool(
            type(self).__name__,
            zmq.PULL,
            _runner_worker,
            [(self.ds, (i,), seeding.resolve_seed(self.seed), self.hwm) for i in range(self.num_proc)],
            start_method=self.start_method,
            hwm=self.hwm,
            timeout=self.timeout,
            picklable={"flow": self.ds},
            shm_bytes=self.shm_bytes,
            copy=self.copy,
        )

    @property
    def worker_pids(self) -> list[int | None]:
        """The pids of the running workers (empty before ``reset_state``/after ``close``)."""
        return self._pool.pids if self._pool is not None else []

    def __len__(self) -> int:
        return len(self.ds)

    def _receive(self, pool: ProcessPool) -> None:
        kind, obj = pool.decode(pool.recv_frames())
        if kind == tr.DATA:
            self._buffer.append(obj)
        elif kind == tr.GROUP:
            self._buffer.extend(obj)
        else:
            raise tr.worker_error(type(self).__name__, obj)

    def __iter__(self) -> Iterator[Any]:
        pool = self._pool
        if pool is None:
            raise DataFlowNotReset(
                f"{type(self).__name__} was iterated before reset_state() (or after close()); "
                f"call reset_state() once in the process that iterates"
            )
        with self._guard:
            try:
                size: int | None = len(self.ds)
            except (TypeError, NotImplementedError):
                size = None
            buffer = self._buffer
            n = 0
            while size is None or n < size:
                if not buffer:
                    self._receive(pool)
                yield buffer.popleft()
                n += 1

    def close_workers(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def close(self) -> None:
        """Stop the workers and release sockets. Idempotent; ``reset_state`` restarts."""
        self.close_workers()
        self.ds.close()


class MultiProcessRunner(MultiProcessRunnerZMQ):
    """tensorpack's ``MultiProcessRunner(ds, num_prefetch, num_proc)``: the same runner, with
    ``num_prefetch`` as the transport's buffer (high-water mark)."""

    def __init__(self, ds: DataFlow, num_prefetch: int, num_proc: int, **kwargs: Any) -> None:
        super().__init__(ds, num_proc=num_proc, hwm=num_prefetch, **kwargs)
