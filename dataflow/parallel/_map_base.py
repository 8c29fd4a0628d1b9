"""Bookkeeping shared by the parallel maps, independent of threads, processes or Ray.

The consumer (the thread iterating the map) reads the upstream itself and submits *tasks*
(a chunk of datapoints, tagged ``(epoch, seq)``) to workers, keeping at most
``buffer_size`` datapoints in flight; workers send back results tagged the same way. With
``chunk="auto"`` the datapoints per task follow the measured map time
(:class:`~._autotune.ChunkTuner`): one for a slow map, groups for a cheap one.

- **strict** (one pass per ``__iter__``): every upstream datapoint of the pass is mapped
  exactly once, and the iteration ends when the pass is done. Whatever belongs to an
  abandoned earlier pass — results *and errors* — is recognised by its epoch tag and dropped.
- **non-strict** (tensorpack's default): the upstream is repeated forever in the background
  and each ``__iter__`` yields ``len(ds)`` results; results in flight carry over to the next
  epoch, nothing is lost or duplicated.
- **ordered**: results are yielded in submission order (a reorder buffer holds early ones).
- **item_rng**: ``map_func(dp, rng)`` gets a generator seeded from ``(seed, epoch, index)``
  (see :func:`dataflow.seeding.item_rng`), the same in any worker.
- **checkpoints**: the upstream's state plus the inputs not yet delivered (see
  :mod:`._map_state`); independent of the number of workers.

Subclasses provide the transport: ``_start``, ``_submit``, ``_receive``, ``_stop``; and may
map in the consumer itself (``_in_consumer``, ``_map_here``: ``num_proc="auto"`` while
workers do not pay), where a strict pass then maps groups and yields their outputs straight,
with no task, queue or reorder step per datapoint (a checkpoint still owes the rest of the
group being yielded).
"""

from __future__ import annotations

import inspect
import sys
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from itertools import islice
from operator import length_hint
from typing import Any

from .. import seeding
from .._checks import check_callable, check_int, check_timeout
from .._state_fields import field, int_field
from ..base import DataFlow, ProxyDataFlow, ReentrancyGuard
from ..errors import DataFlowNotReset, DataFlowReentrantError
from ..ops.shard import shard_key
from . import _messages as msg
from ._autotune import ChunkTuner
from ._map_state import TaskLedger, decode_tasks, encode_tasks

__all__ = ["ParallelMapBase"]

TaskId = tuple[int, int]
RngKey = tuple[seeding.ItemSeed, int, int] | None  # (base, epoch, index of the chunk's first)
_NOTHING: Iterator[Any] = iter(())
IN_CONSUMER = "map_func (in-process: num_proc='auto' found it faster than workers)"


class ParallelMapBase(ProxyDataFlow):
    """Common logic of the parallel maps; see the module docstring for the semantics."""

    _state_kind = "ParallelMap"  # threads, processes, Ray: one state, resumable on another

    def __init__(
        self,
        ds: DataFlow[Any],
        map_func: Callable[..., Any],
        buffer_size: int,
        strict: bool,
        ordered: bool,
        timeout: float | None,
        chunk: int | str = 1,
        item_rng: bool = False,
        seed: int | None = None,
    ) -> None:
        super().__init__(ds)
        stage = type(self).__name__
        check_callable(stage, "map_func", map_func)
        self.map_func = map_func
        self.buffer_size = check_int(stage, "buffer_size", buffer_size)
        self.strict = bool(strict)
        self.ordered = bool(ordered)
        self.timeout = check_timeout(stage, timeout)
        self.item_rng = bool(item_rng)
        self._item_seed = seeding.check_seed(stage, seed)
        if isinstance(chunk, str) and chunk != "auto":
            raise ValueError(f'{stage}: chunk must be an int >= 1 or "auto", got {chunk!r}')
        fixed = None if chunk == "auto" else check_int(stage, "chunk", chunk)
        self._tuner = ChunkTuner(stage, fixed, self.buffer_size)  # cap set again by _start
        # Tasks in flight allowed before the first result (0: no limit). Until a result has
        # measured the map, tasks carry one datapoint each; filling the whole buffer with
        # them (200 messages) delayed a cheap map's first batch by tens of milliseconds.
        self._probe = 0
        self._flight: dict[TaskId, int] = {}  # tasks sent, not received: their sizes
        self._flight_items = 0
        self._guard = ReentrancyGuard(stage)
        self._started = False
        self._interrupted = False
        self._epoch = 0
        self._index = 0  # inputs taken this pass (strict) or since reset (non-strict)
        self._produced = 0  # results yielded in this non-strict epoch
        self._ledger = TaskLedger()
        self._base: seeding.ItemSeed | None = None
        self._clear_epoch_state()
        self._endless: Iterator[Any] | None = None

    # -- transport hooks ------------------------------------------------------------------
    def _start(self) -> None:
        raise NotImplementedError

    def _submit(self, task_id: TaskId, chunk: list[Any], rng_key: RngKey) -> None:
        raise NotImplementedError

    def _receive(self) -> tuple[TaskId | None, bytes, Any]:
        """The next ``(task_id, kind, payload)``; raises on timeout or dead workers. An ERROR
        payload is an :class:`~._messages.ErrorRecord` (``task_id`` ``None``: not a task's)."""
        raise NotImplementedError

    def _stop(self) -> None:
        raise NotImplementedError

    # -- results --------------------------------------------------------------------------
    def _outputs(self, kind: bytes, payload: Any, skip: int) -> int:
        """Put one task's result on ``self._ready``, dropping its first ``skip`` units;
        returns the units it added (default: a list of results, a unit per result)."""
        out = payload[skip:] if skip else payload
        self._ready.extend(out)
        return len(out)

    def _unyielded_units(self) -> int:
        """Units released to the consumer but not yielded yet."""
        return len(self._ready) + length_hint(self._here)

    def _in_consumer(self) -> int:
        """How many datapoints to map right here, in the consumer, without tasks (a strict
        pass with nothing in flight asks before each group); 0: none, use the workers.
        See :meth:`_map_here`."""
        return 0

    def _map_here(self, chunk: list[Any], rng_key: RngKey) -> list[Any]:
        """Map ``chunk`` in the consumer (when :meth:`_in_consumer` asked for it)."""
        raise NotImplementedError

    def _serial_rest(self) -> bool:
        """Whether a strict pass maps the rest of its upstream (a non-strict map: of its
        epoch) in its own loop, exactly as ``.map`` does: no groups, no clock, nothing held (a
        checkpoint is the upstream's position). A strict pass asks where :meth:`_in_consumer`
        would map a group here, a non-strict one before each result it waits for."""
        return False

    def _serial_done(self) -> None:
        """The loop of :meth:`_serial_rest` reached the end of the upstream."""

    def _map_error(self, exc: Exception, call_line: int) -> BaseException | None:
        """What to raise for ``exc``, which left the :meth:`_serial_rest` loop: if it came
        through the line calling ``map_func`` (``call_line``), the map's error as a mapped
        group reports it (the user's exception, noted as raised in-process); ``None`` for an
        error of the upstream (or one thrown in at a ``yield``): it goes on untouched."""
        tb = exc.__traceback__
        if tb is None or tb.tb_lineno != call_line:
            return None
        return msg.error_for(type(self).__name__, msg.capture_error(exc, IN_CONSUMER, same_process=True))

    def _finish_pass(self) -> None:
        """Called when a strict pass has received every result (batching flushes here)."""

    # -- lifecycle ------------------------------------------------------------------------
    def reset_state(self) -> None:
        """Reset the upstream (it is read in this process) and start the workers."""
        if self._started:
            self._stop()
        self.ds.reset_state()
        self._inflight = 0
        self._flight.clear()
        self._flight_items = 0
        self._endless = None
        self._clear_epoch_state()
        if self.item_rng:
            if self._base is None:
                self._base = seeding.item_seed(self._item_seed)
            self._shard_key = shard_key(self.ds)
        self._start()
        self._started = True

    def close(self) -> None:
        """Stop the workers, drop the results buffered for a pass left halfway (they may view
        shared memory) and close the upstream. Idempotent; take checkpoints before it."""
        try:
            self._started = False
            self._stop()  # even if not started: a start that a Ctrl-C cut may have begun
        finally:
            try:
                self._clear_epoch_state()  # results of a pass left halfway may view shared memory
            finally:
                self.ds.close()

    def __len__(self) -> int:
        return len(self.ds)

    def _clear_epoch_state(self) -> None:
        self._seq = 0
        self._want = 0
        self._pending: dict[int, tuple[bytes, Any, int]] = {}
        self._pending_items = 0
        self._ready: deque[Any] = deque()
        self._here: Iterator[Any] = _NOTHING  # outputs of a group mapped here, being yielded
        self._ledger.clear()
        self._skip = 0  # units of the first released task to drop (a resumed partial task)

    def __iter__(self) -> Iterator[Any]:
        if not self._started:
            raise DataFlowNotReset(
                f"{type(self).__name__} was iterated before reset_state() (or after close()); "
                f"call reset_state() once in the process that iterates"
            )
        if self._guard._lock.locked():  # before any bookkeeping of a second iterator
            raise DataFlowReentrantError(
                f"{type(self).__name__} is not reentrant: it is already being iterated"
            )
        if self._interrupted:  # a message may have been cut in half: start clean
            self.reset_workers()
        resume = self.__dict__.pop("_resume", None)
        if self.strict:
            gen = self._strict_pass(self._begin_pass(resume))
        else:
            gen = self._endless_epoch(resume)
        return self._track(gen)

    def reset_workers(self) -> None:
        """Restart the workers without resetting the upstream (after an interrupt)."""
        self._clear_epoch_state()  # first: results held here may view the old workers' memory
        self._stop()
        self._inflight = 0
        self._flight.clear()
        self._flight_items = 0
        self._endless = None
        self._start()
        self._interrupted = False

    # -- submitting -----------------------------------------------------------------------
    def _rng_key(self, epoch: int, first_index: int) -> RngKey:
        if not self.item_rng or self._base is None:
            return None
        entropy, base_key = self._base
        base = (entropy, (*base_key, *self.__dict__.get("_shard_key", ())))
        return (base, epoch if self.strict else 0, first_index)

    def _submit_task(self, chunk: list[Any], epoch: int, first_index: int) -> None:
        seq = self._seq
        self._submit((epoch, seq), chunk, self._rng_key(epoch, first_index))
        self._flight[(epoch, seq)] = n = len(chunk)
        self._flight_items += n
        self._ledger.submitted(seq, chunk, first_index)
        self._seq = seq + 1
        self._inflight += 1

    def _fill(self, source: Iterator[Any], epoch: int) -> bool:
        """Submit tasks while there is room; False once ``source`` is exhausted. Results held in
        the reorder buffer count against the room, so ``buffer_size`` bounds memory (in
        datapoints; a task is sent only if it fits whole, or when nothing is in flight)."""
        tuner, limit = self._tuner, self.buffer_size
        while True:
            size = tuner.chunk
            held = self._flight_items + self._pending_items
            if held and held + size > limit:
                return True
            if self._probe and self._inflight >= self._probe:
                return True  # the first result sizes the rest (see __init__)
            chunk = list(islice(source, size))
            if not chunk:
                return False
            first = self._index
            self._index = first + len(chunk)
            self._submit_task(chunk, epoch, first)

    def _take_result(self, epoch: int) -> bool:
        """Receive one result into ``self._ready``; False if it was stale (older epoch)."""
        task_id, kind, payload = self._receive()
        self._inflight -= 1
        self._probe = 0
        size = self._flight.pop(task_id, 0) if task_id is not None else 0
        self._flight_items -= size
        if task_id is not None and task_id[0] != epoch:
            return False  # an abandoned pass's result or error: dropped
        if kind == msg.ERROR:
            raise msg.error_for(type(self).__name__, payload)
        seq = task_id[1] if task_id is not None else -1
        if not self.ordered:
            self._release(seq, kind, payload)
            return True
        pending = self._pending
        pending[seq] = (kind, payload, size)
        self._pending_items += size
        while self._want in pending:
            kind, payload, size = pending.pop(self._want)
            self._pending_items -= size
            self._release(self._want, kind, payload)
            self._want += 1
        return True

    def _release(self, seq: int, kind: bytes, payload: Any) -> None:
        skip, self._skip = self._skip, 0
        self._ledger.released(seq, self._outputs(kind, payload, skip))
        self._ledger.prune(self._unyielded_units())

    # -- passes ---------------------------------------------------------------------------
    def _begin_pass(self, resume: Any) -> tuple[int, Iterator[Any], int]:
        """Start a strict pass (eagerly, in ``__iter__``): ``(epoch, source, resubmitted)``."""
        self._clear_epoch_state()
        if resume is None:
            self._epoch += 1
            self._index = 0
            return self._epoch, iter(self.ds), 0
        tasks, self._skip = resume
        source = iter(self.ds)
        for chunk, first in tasks:
            self._submit_task(chunk, self._epoch, first)
        return self._epoch, source, len(tasks)

    def _strict_pass(self, begun: tuple[int, Iterator[Any], int]) -> Iterator[Any]:
        # The guard and the interrupt flag live here, not in a wrapping generator: one
        # generator level less per datapoint (a cheap map's whole cost is such overheads).
        epoch, source, _ = begun
        more, received = True, 0
        ready, ledger = self._ready, self._ledger
        with self._guard:
            try:
                while True:
                    size = self._in_consumer() if more and not self._inflight else 0
                    if size and self._serial_rest():  # the rest of the pass as .map maps it
                        func, call_line = self.map_func, sys._getframe().f_lineno + 3
                        try:  # around the loop: a try inside it costs a cheap map ~8%
                            for dp in source:
                                mapped = func(dp)
                                if mapped is not None:
                                    yield mapped
                        except Exception as e:
                            err = self._map_error(e, call_line)
                            if err is None:
                                raise
                            raise err  # noqa: B904 - the user's own exception (with a note)
                        more = False
                        self._serial_done()
                        continue
                    if size:  # map a group here and yield it straight (no task, no queue)
                        chunk = list(islice(source, size))
                        if not chunk:
                            more = False
                            continue
                        first, seq = self._index, self._seq
                        self._index = first + len(chunk)
                        out = self._map_here(chunk, self._rng_key(epoch, first))
                        self._seq = self._want = seq + 1
                        received += 1
                        ledger.submitted(seq, chunk, first)
                        ledger.released(seq, len(out))
                        self._here = here = iter(out)  # length_hint: what a checkpoint still owes
                        yield from here
                        ledger.prune(len(ready))
                        continue
                    if more:
                        more = self._fill(source, epoch)
                    if not more and received == self._seq:
                        break
                    if self._take_result(epoch):
                        received += 1
                    while ready:
                        yield ready.popleft()
                self._finish_pass()
                while ready:
                    yield ready.popleft()
            except KeyboardInterrupt:
                self._interrupted = True
                raise

    def _forever(self, resumed: bool) -> Iterator[Any]:
        produced = resumed  # a resumed upstream epoch had produced before the checkpoint
        itr = iter(self.ds)
        while True:
            for dp in itr:
                produced = True
                yield dp
            if not produced:
                raise ValueError(
                    f"{type(self).__name__}: the upstream {type(self.ds).__name__} produced an empty "
                    f"epoch; with strict=False it is repeated forever, which would hang"
                )
            produced = False
            itr = iter(self.ds)

    def _endless_epoch(self, resume: Any) -> Iterator[Any]:
        if resume is not None:
            tasks, self._skip, produced, up_live = resume
            self._endless = self._forever(up_live) if up_live else None
            for chunk, first in tasks:
                self._submit_task(chunk, 0, first)
        else:
            produced = 0
        self._produced = produced  # the epoch begins now, not when first pulled
        if self._endless is None:
            self._endless = self._forever(False)
        return self._endless_run()

    def _endless_run(self) -> Iterator[Any]:
        try:
            size: int | None = len(self)
        except (TypeError, NotImplementedError):
            size = None
        ready = self._ready
        endless = self._endless
        if endless is None:
            raise RuntimeError(f"{type(self).__name__}: the endless upstream was not started")
        with self._guard:
            try:
                while size is None or self._produced < size:
                    if ready:
                        self._produced += 1
                        yield ready.popleft()
                        continue
                    serial = self._serial_rest()  # then the tasks held are finished first
                    if serial and not self._inflight:  # the rest of the epoch as .map maps it
                        func, call_line = self.map_func, sys._getframe().f_lineno + 3
                        try:
                            for dp in endless:
                                mapped = func(dp)
                                if mapped is not None:
                                    self._produced += 1
                                    yield mapped
                                    if size is not None and self._produced >= size:
                                        break
                        except Exception as e:
                            err = self._map_error(e, call_line)
                            if err is None:
                                raise
                            raise err  # noqa: B904 - the user's own exception (with a note)
                        self._serial_done()
                        continue
                    if not serial:
                        self._fill(endless, 0)
                    self._take_result(0)
            except KeyboardInterrupt:
                self._interrupted = True
                raise

    # -- checkpoints ----------------------------------------------------------------------
    def _upstreams_live(self, live: bool) -> list[bool]:
        if self.strict:
            return [live]
        gen = self._endless  # _forever yields only from inside an upstream epoch
        return [gen is not None and inspect.getgeneratorstate(gen) == inspect.GEN_SUSPENDED]  # type: ignore[arg-type]

    def _get_state(self, live: bool) -> dict[str, Any]:
        stage = type(self).__name__
        carry = live or not self.strict  # a non-strict map's results in flight belong to its next epoch
        tasks, skip = self._ledger.undelivered(self._unyielded_units(), self.ordered) if carry else ([], 0)
        state: dict[str, Any] = {"epoch": self._epoch, "index": self._index}
        state["produced"] = self._produced if live else 0
        state["tasks"] = encode_tasks(stage, tasks, skip)
        if self.item_rng and self._base is not None:
            state["base"] = [str(self._base[0]), list(self._base[1])]
        return state

    def _set_state(self, state: Mapping[str, Any], live: bool) -> None:
        stage = type(self).__name__
        tasks, skip = decode_tasks(stage, field(stage, state, "tasks", dict))
        self._epoch = int_field(stage, state, "epoch")
        self._index = int_field(stage, state, "index")
        if self.item_rng and "base" in state:
            entropy, key = field(stage, state, "base", list)
            self._base = (int(entropy), tuple(int(k) for k in key))
        self.__dict__.pop("_resume", None)
        resume: tuple[Any, ...] | None = None
        if self.strict:
            resume = (tasks, skip) if live else None
        else:
            resume = (tasks, skip, int_field(stage, state, "produced") if live else 0, True)
        if resume is not None:
            self._resume = resume
