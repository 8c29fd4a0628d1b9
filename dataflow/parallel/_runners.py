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
- Start: ``reset_state()`` forks worker 0 only; the others are forked once the first
  datapoint has reached the consumer, or after 0.1 s without one (at once when
  ``worker_pids`` or ``state_dict()`` needs them). Forking a large process takes tens of
  milliseconds, so the first batch does not wait for every fork.
- Workers send small datapoints in groups: a message leaves when 256 are pending or 1 ms
  after the previous one, which cuts the per-datapoint messaging cost several times. Large
  datapoints (64 KiB and more) always go alone.
- Checkpoints: ``state_dict()`` asks every worker for its flow's state at its next message
  boundary (answered in-band, after the datapoints it sent before), and keeps the datapoints
  received but not yet yielded; resuming starts each worker from its state and yields those
  first. Each worker stream resumes exactly; a resumed runner needs the same ``num_proc``
  (and ``shard``).

With ``shard=True`` the workers split the flow instead of repeating it: worker ``i`` runs
``ds.shard(num_proc, i, equal=False)``, built in the worker, and one ``__iter__`` yields each
datapoint of an epoch of ``ds`` once (``len(ds)`` of them, in any interleaving): it ends when
every worker's part of the epoch has arrived, and what a faster worker sent of its next part
waits for the next ``__iter__``. An epoch left early is continued by the next ``__iter__``.
Sharding reads only each worker's part where :class:`~dataflow.ShardData` can (``ds`` a
random-access source, a file reader, or a ``.shard()`` of them: each worker reads only its
indices/files of the rank's part), else each worker runs ``ds`` whole and keeps every
``num_proc``-th datapoint. All workers share one seed in this mode (the runner's ``seed=``,
else :func:`~dataflow.set_seed`'s, else one drawn once), so a shuffled source draws the
same order in every worker and the parts partition it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping
from time import perf_counter
from typing import Any

import numpy as np

from .. import _trace
from .._checks import check_int
from .._errors import DataFlowNotReset, StateError
from .._state import checking_only
from .._state_fields import decode_items, encode_items, field, int_field
from ..base import DataFlow, ProxyDataFlow, ReentrancyGuard
from . import _messages as msg
from ._interrupts import deferred_sigint
from ._pool import ProcessPool, WorkerOptions
from ._runner_part import PartEnd, RunnerPart
from ._worker import runner_worker

__all__ = ["MultiProcessRunner", "MultiProcessRunnerZMQ"]

class MultiProcessRunnerZMQ(ProxyDataFlow):
    """Run ``num_proc`` copies of ``ds`` in worker processes (see :mod:`dataflow.parallel._runners`).

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
        shard: split ``ds`` among the workers, each datapoint once per epoch (see
            :mod:`dataflow.parallel._runners`); ``False``: every worker runs all of ``ds``.

    An exception in a worker is raised here as the same exception type, with the worker's
    traceback as its cause; a worker that dies raises :class:`~dataflow._errors.WorkerDied`.
    Not reentrant. Close it (or use ``with``) to stop the workers; they also die with this
    process.
    """

    def __init__(
        self,
        ds: DataFlow[Any],
        num_proc: int = 1,
        hwm: int = 50,
        *,
        start_method: str | None = None,
        seed: int | None = None,
        timeout: float | None = None,
        shm_bytes: int | None = None,
        copy: bool = False,
        shard: bool = False,
    ) -> None:
        super().__init__(ds)
        stage = type(self).__name__
        self.num_proc = check_int(stage, "num_proc", num_proc)
        self._shard = bool(shard)  # not self.shard: that is the fluent .shard() (repr reads _shard)
        # shard mode: one seed for all workers, drawn at the first start when none is given
        self._part_seed: int | None = None
        self._ended: set[int] = set()  # shard mode: workers whose part of this epoch has arrived
        self._held: list[list[Any]] = [[] for _ in range(self.num_proc)]  # their next parts
        hwm = check_int(stage, "hwm", hwm)
        self.options = WorkerOptions(stage, start_method, seed, timeout, shm_bytes, copy, hwm)
        self.hwm, self.start_method, self.seed = self.options.hwm, start_method, self.options.seed
        self.timeout, self.shm_bytes, self.copy = self.options.timeout, shm_bytes, self.options.copy
        self._pool: ProcessPool | None = None
        self._buffer: deque[Any] = deque()
        self._guard = ReentrancyGuard(stage)
        self._received = 0  # datapoints received since reset (what was yielded: minus the buffer)
        self._epoch_start = 0  # datapoints yielded before the current epoch
        self._ready: set[int] = set()
        self._token = 0
        self._worker_states: list[Any] | None = None  # where each worker starts (a loaded state)
        self._stopped_by: str | None = None  # what stopped the workers of a started runner
        # during a snapshot: the messages of workers that already answered, kept out of it
        self._late: dict[int, list[tuple[bytes, Any]]] | None = None

    def _state_upstreams(self) -> tuple[DataFlow[Any], ...]:
        return ()  # the flow runs in the workers; their states are this stage's own

    def reset_state(self) -> None:
        """Start the workers (each resets its own copy of ``ds``), first stopping whatever an
        earlier start, epoch or interrupt left."""
        self.close_workers()  # after load_state_dict(), the loaded buffer stays
        states = self._worker_states or [None] * self.num_proc
        if self._worker_states is None:
            self._ended, self._held = set(), [[] for _ in range(self.num_proc)]
        seed = self.options.worker_seed()
        flows: list[DataFlow[Any]] = [self.ds] * self.num_proc
        if self._shard:
            part_seed = seed
            if part_seed is None:
                if self._part_seed is None:
                    self._part_seed = int(np.random.SeedSequence().generate_state(1)[0])
                part_seed = self._part_seed
            flows = [RunnerPart(self.ds, self.num_proc, i, part_seed) for i in range(self.num_proc)]
        args = [(flows[i], i, self.options, seed, states[i]) for i in range(self.num_proc)]
        self._received, self._ready = len(self._buffer), set()
        self._pool = ProcessPool(self.options, runner_worker, args, {"flow": flows[0]}, lazy=True)
        self._worker_states = None
        self._stopped_by = None

    @property
    def worker_pids(self) -> list[int | None]:
        """The pids of the running workers (empty before ``reset_state``/after ``close``)."""
        return self._pool.pids if self._pool is not None else []

    def __len__(self) -> int:
        return len(self.ds)

    def _receive(self, pool: ProcessPool) -> Any:
        """Receive one message; returns a STATE payload, else ``None`` (data is buffered)."""
        worker, kind, obj = pool.recv()
        late = self._late
        if late is not None and worker in late and kind in (msg.GROUP, msg.DATA):
            late[worker].append((kind, obj))  # sent after its state: not part of the snapshot
        elif self._shard and kind in (msg.GROUP, msg.DATA):
            self._take_part(worker, obj if kind == msg.GROUP else [obj])
        elif kind == msg.GROUP:
            self._buffer.extend(obj)
            self._received += len(obj)
        elif kind == msg.DATA:
            self._buffer.append(obj)
            self._received += 1
        elif kind == msg.READY:
            self._ready.add(worker)
        elif kind == msg.STATE:
            return worker, obj
        else:
            raise msg.error_for(type(self).__name__, obj)
        return None

    def _take_part(self, worker: int, items: list[Any]) -> None:
        """Shard mode: ``worker``'s datapoints of this epoch go to the buffer, up to its
        :class:`PartEnd`; what follows is its next part, held until the next epoch."""
        held = self._held[worker]
        for dp in items:
            if worker in self._ended:
                held.append(dp)
            elif isinstance(dp, PartEnd):
                self._ended.add(worker)
            else:
                self._buffer.append(dp)
                self._received += 1

    def _next_epoch(self) -> None:
        """Shard mode, every part of the last epoch yielded: the held parts come next."""
        held, self._held = self._held, [[] for _ in range(self.num_proc)]
        self._ended = set()
        for worker, items in enumerate(held):
            self._take_part(worker, items)

    def _not_running(self, restarted: bool = False) -> DataFlowNotReset:
        if restarted:
            return DataFlowNotReset(
                f"{type(self).__name__}: reset_state() restarted the workers during this epoch; "
                f"start a new one"
            )
        why = self._stopped_by or "reset_state() was not called or did not complete, or close() was"
        return DataFlowNotReset(
            f"{type(self).__name__} has no workers running: {why}. Call reset_state() in the "
            f"process that iterates: it starts them afresh"
        )

    def __iter__(self) -> Iterator[Any]:
        pool = self._pool
        if pool is None:
            raise self._not_running()
        delivered = self.__dict__.pop("_resume", None)
        if self._shard and delivered is None and len(self._ended) == self.num_proc and not self._buffer:
            self._next_epoch()
        yielded = self._received - len(self._buffer)
        self._epoch_start = yielded - (delivered or 0)
        return self._track(self._epoch(pool, delivered or 0))

    def _epoch(self, pool: ProcessPool, n: int) -> Iterator[Any]:
        with self._guard:
            try:
                size: int | None = None if self._shard else len(self.ds)
            except (TypeError, NotImplementedError):
                size = None
            buffer = self._buffer
            try:
                while size is None or n < size:
                    while not buffer:
                        if self._shard and len(self._ended) == self.num_proc:
                            return  # every worker's part of the epoch is yielded
                        if self._pool is not pool:  # stopped meanwhile (close(), reset_state(),
                            raise self._not_running(restarted=self._pool is not None)  # state_dict())
                        tr = _trace.current
                        if tr is None:
                            self._receive(pool)
                        else:
                            t0 = perf_counter()
                            self._receive(pool)
                            tr.span(tr.stage_track(self), "waiting for workers", t0, perf_counter(), "wait")
                    yield buffer.popleft()
                    n += 1
            except KeyboardInterrupt:
                self._stop_after_interrupt(pool, "an epoch")
                raise

    def _stop_after_interrupt(self, pool: ProcessPool, where: str) -> None:
        """A Ctrl-C inside this flow's own code may have cut a message in half: stop the
        workers at once (releasing everything); ``reset_state()`` starts them afresh."""
        if self._pool is pool:
            self._stopped_by = f"a Ctrl-C inside {where} stopped them"
            self.close_workers()

    def close_workers(self) -> None:
        """Stop the workers and drop the datapoints received from them (they may view their
        shared memory), unless a loaded state will restart from them."""
        with deferred_sigint():  # bounded (stop_workers joins ~1 s): the pool is never dropped half closed
            pool, self._pool = self._pool, None
            if self._worker_states is None:
                self._buffer.clear()
            if pool is not None:
                pool.close()

    def close(self) -> None:
        """Stop the workers and release sockets. Idempotent; ``reset_state`` restarts."""
        try:
            self.close_workers()
        finally:
            self._stopped_by = None
            self.ds.close()

    # -- checkpoints ----------------------------------------------------------------------
    def _snapshot(self, pool: ProcessPool) -> list[Any]:
        """Every worker's flow state at its next message boundary; the datapoints they sent
        before it are received into the buffer meanwhile."""
        pool.start_pending()
        while len(self._ready) < self.num_proc:  # control goes only to connected workers
            self._receive(pool)
        self._token += 1
        for worker in range(self.num_proc):
            pool.send(worker, msg.CONTROL, ("snapshot", self._token))
        states: list[Any] = [None] * self.num_proc
        missing = self.num_proc
        self._late = {}
        try:
            while missing:
                answer = self._receive(pool)
                if answer is None:
                    continue
                worker, (token, state) = answer
                if token != self._token:
                    continue
                if isinstance(state, msg.ErrorRecord):
                    raise msg.error_for(type(self).__name__, state)
                states[worker] = state
                self._late[worker] = []
                missing -= 1
        except BaseException:
            self._release_late()
            raise
        return states

    def _release_late(self) -> None:
        """Take in what workers sent after answering a snapshot (once the state is built)."""
        late, self._late = self._late, None
        for worker, messages in (late or {}).items():
            for kind, obj in messages:
                if self._shard:
                    self._take_part(worker, obj if kind == msg.GROUP else [obj])
                elif kind == msg.GROUP:
                    self._buffer.extend(obj)
                    self._received += len(obj)
                else:
                    self._buffer.append(obj)
                    self._received += 1

    def _get_state(self, live: bool) -> dict[str, Any]:
        stage = type(self).__name__
        pool = self._pool
        if pool is None:
            if self._stopped_by is not None:  # what was in flight is lost: no exact state exists
                raise self._not_running()
            states = self._worker_states or [None] * self.num_proc
        else:
            try:
                states = self._snapshot(pool)
            except KeyboardInterrupt:
                self._stop_after_interrupt(pool, "state_dict()")
                raise
        try:
            yielded = self._received - len(self._buffer)
            buffered = list(self._buffer)
            what = "datapoints received, not yielded"
            state = {
                "num_proc": self.num_proc,
                "workers": states,
                "buffer": encode_items(stage, buffered, what) if buffered else None,
                "delivered": yielded - self._epoch_start if live else 0,
            }
            if self._shard:
                held = [_segments(stage, h) for h in self._held]
                state.update(shard=True, ended=sorted(self._ended), held=held)
        finally:
            self._release_late()
        return state

    def _set_state(self, state: Mapping[str, Any], live: bool) -> None:
        stage = type(self).__name__
        num = int_field(stage, state, "num_proc", 1)
        sharded = bool(state.get("shard", False))
        if sharded != self._shard:
            raise StateError(
                f"{stage}: the state was saved by a runner with shard={sharded}, this runner has "
                f"shard={self._shard}; resume with the same shard= and num_proc"
            )
        if num != self.num_proc:
            raise StateError(
                f"{stage}: the state was saved by {num} worker processes, this runner has "
                f"num_proc={self.num_proc}: each worker runs its own copy of the flow, so resume "
                f"with the same num_proc (a strict ordered parallel map resumes at any worker count)"
            )
        workers = field(stage, state, "workers", list)
        if len(workers) != num or not all(w is None or isinstance(w, dict) for w in workers):
            raise StateError(f"{stage}: the saved worker states are corrupted")
        buffered = decode_items(stage, state, "buffer") if state.get("buffer") is not None else []
        ended: set[int] = set()
        held: list[list[Any]] = [[] for _ in range(num)]
        if sharded:
            ended_field = field(stage, state, "ended", list)
            held_field = field(stage, state, "held", list)
            if not all(isinstance(w, int) and 0 <= w < num for w in ended_field) or len(held_field) != num:
                raise StateError(f"{stage}: the saved shard-mode fields are corrupted")
            ended = set(ended_field)
            held = [_joined(stage, segs) for segs in held_field]
        self._ended, self._held = ended, held
        self._buffer = deque(buffered)
        self._worker_states = workers
        self._stopped_by = None  # a position again: the loaded one
        self.__dict__.pop("_resume", None)
        if live:
            self._resume = int_field(stage, state, "delivered")
        if self._pool is not None and not checking_only():  # started: start again from it
            self.reset_state()


def _segments(stage: str, items: list[Any]) -> list[bytes | None]:
    """A worker's held datapoints as encoded runs between its :class:`PartEnd` markers."""
    runs: list[list[Any]] = [[]]
    for dp in items:
        if isinstance(dp, PartEnd):
            runs.append([])
        else:
            runs[-1].append(dp)
    return [encode_items(stage, run, "datapoints of a worker's next part") if run else None for run in runs]


def _joined(stage: str, segments: Any) -> list[Any]:
    """The held datapoints :func:`_segments` encoded, markers between the runs again."""
    if not isinstance(segments, list) or not segments:
        raise StateError(f"{stage}: the saved held datapoints are corrupted")
    items: list[Any] = []
    for k, run in enumerate(segments):
        if k:
            items.append(PartEnd())
        if run is not None:
            items.extend(decode_items(stage, {"run": run}, "run"))
    return items


class MultiProcessRunner(MultiProcessRunnerZMQ):
    """tensorpack's ``MultiProcessRunner(ds, num_prefetch, num_proc)``: the same runner, with
    ``num_prefetch`` as the transport's buffer (high-water mark)."""

    _state_kind = "MultiProcessRunnerZMQ"

    def __init__(self, ds: DataFlow[Any], num_prefetch: int, num_proc: int, **kwargs: Any) -> None:
        super().__init__(ds, num_proc=num_proc, hwm=num_prefetch, **kwargs)
