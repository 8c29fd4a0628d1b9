"""The base class of every parallel map (:class:`ParallelMapBase`), independent of threads,
processes or Ray: one class, whose subclasses provide only the transport.

The consumer (the thread iterating the map) reads the upstream itself and submits *tasks*
(a chunk of datapoints, tagged ``(epoch, seq)``) to workers, keeping at most
``buffer_size`` datapoints in flight; workers send back results tagged the same way.

- **strict** (one pass per ``__iter__``): every upstream datapoint of the pass is mapped
  exactly once, and the iteration ends when the pass is done. Whatever belongs to an
  abandoned earlier pass — results *and errors* — is recognised by its epoch tag and dropped.
- **non-strict** (tensorpack's default): the upstream is repeated forever in the background
  and each ``__iter__`` yields ``len(ds)`` results; results in flight carry over to the next
  epoch, nothing is lost or duplicated.
- **ordered**: results are yielded in submission order (a reorder buffer holds early ones).
- **item_rng**: ``map_func(dp, rng)`` gets a generator seeded from ``(seed, epoch, index)``
  (see :func:`dataflow._seeding.item_rng`), the same in any worker.
- **chunks**: with ``chunk="auto"`` the datapoints per task follow the map time the workers
  measure (:meth:`ParallelMapBase._observe`): one for a slow map, so no worker idles while
  another holds a long chunk; groups for a cheap one, whose cost is the consumer's per-task
  work (pickling, socket operations, reordering). Decisions are logged at debug level on
  ``dataflow.autotune``.
- **checkpoints**: the upstream's state plus the inputs not yet delivered, independent of
  the number of workers (see below).

**The task ledger.** Every task (its inputs, with the item index of the first one) is kept
from its submission until every output it produced has been yielded. When a task's outputs
are released to the consumer (in input order for ordered maps, as they come for unordered
ones), the ledger notes the cumulative number of *units* released (a unit is an output
datapoint; for a map-and-batch, a mapped datapoint before batching). At ``state_dict()``
time, the units not yet yielded tell which released tasks are not fully delivered and how
many outputs of the first of them were; tasks still in flight or waiting in the reorder
buffer are not delivered at all. Those tasks' inputs, in delivery order, are the state: a
resumed map submits them again first and skips what the first one had delivered (an
unordered map holds the results that come back before that task's, so the outputs skipped
are always its own). A failed task's error is raised when it comes; the stream of a
non-strict map then goes on past that task (an ordered one does not wait for it). So an
ordered map resumes identically at any worker count, on threads, processes or Ray
(``_state_kind = "ParallelMap"``), as long as ``map_func`` is deterministic or draws from
per-item RNGs. Cost: a dict entry and a deque entry per task, pruned as tasks are delivered.

Subclasses provide the transport: ``_start``, ``_submit``, ``_receive``, ``_stop`` (and may
change how a result becomes outputs: ``_outputs``, ``_unyielded_units``, ``_finish_pass``).
"""

from __future__ import annotations

import inspect
import logging
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from itertools import islice
from typing import Any

from .. import _seeding as seeding
from .._checks import check_callable, check_int, check_timeout
from .._errors import DataFlowNotReset, DataFlowReentrantError, StateError
from .._state_fields import decode_items, encode_items, field, int_field
from ..base import DataFlow, ProxyDataFlow, ReentrancyGuard
from ..ops._shard import shard_key
from . import _messages as msg

__all__ = ["TASK_SECONDS", "ParallelMapBase", "RngKey", "TaskId", "apply_map"]

TaskId = tuple[int, int]
RngKey = tuple[seeding.ItemSeed, int, int] | None  # (base, epoch, index of the chunk's first)
Task = tuple[list[Any], int]  # the inputs, the item index of the first one

logger = logging.getLogger("dataflow.autotune")

#: with ``chunk="auto"`` a task should keep a worker busy about this long: long enough that
#: the consumer's fixed cost per task (~30-60 us: pickling, two socket operations,
#: bookkeeping) is a few percent, short enough that the last task of a pass does not leave
#: the other workers idle for long
TASK_SECONDS = 0.002
#: weight of the newest measurement in the running per-datapoint estimate (at least: more
#: while it holds more datapoints than all those measured before it)
_ALPHA = 0.25


def apply_map(map_func: Callable[..., Any], chunk: list[Any], rng_key: RngKey) -> list[Any]:
    """What every worker (process, thread or Ray actor) does with a task: ``map_func`` over
    a chunk, ``None`` results dropped; with an item RNG key, each datapoint also gets its
    generator."""
    if rng_key is None:
        return [r for r in map(map_func, chunk) if r is not None]
    base, epoch, first = rng_key
    out = (map_func(dp, seeding.item_rng(base, epoch, first + j)) for j, dp in enumerate(chunk))
    return [r for r in out if r is not None]


class ParallelMapBase(ProxyDataFlow):
    """Common logic of the parallel maps; see the module docstring for the semantics."""

    _state_kind = "ParallelMap"  # threads, processes, Ray: one state, resumable on another
    #: ``chunk="auto"``: the work a task should hold (a transport whose tasks cost more sets more)
    _task_seconds = TASK_SECONDS

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
        # Datapoints per task: fixed, or (None) tuned by _observe within [1, _chunk_cap].
        self.chunk: int | str = chunk  # as given (repr); _chunk is the size in use
        self._chunk_fixed = None if chunk == "auto" else check_int(stage, "chunk", chunk)
        self._chunk = self._chunk_fixed or 1  # 1 until a result has measured the map
        self._chunk_cap = max(1, self.buffer_size)  # set again by _start
        self._per_item: float | None = None  # seconds of map time per datapoint (running estimate)
        self._per_item_seen = 0  # datapoints measured so far
        self._busy: float | None = None  # set by _receive: the map's seconds on the task received
        # Tasks in flight allowed before the first result (0: no limit; _start sets it). Until
        # a result has measured the map, tasks carry one datapoint each; filling the whole
        # buffer with them (200 messages) delayed a cheap map's first batch by tens of ms.
        self._probe = 0
        # Tasks in flight allowed once the map is measured (0: only buffer_size bounds them);
        # a transport that gives tasks to workers ahead of time sets it (see _fill).
        self._task_cap = 0
        self._flight: dict[TaskId, int] = {}  # tasks sent, not received: their sizes
        self._flight_items = 0
        self._inflight = 0
        self._guard = ReentrancyGuard(stage)
        self._started = False
        self._interrupted = False
        self._epoch = 0
        self._index = 0  # inputs taken this pass (strict) or since reset (non-strict)
        self._produced = 0  # results yielded in this non-strict epoch
        self._ledger: dict[int, Task] = {}  # the ledger: tasks not yet fully delivered ...
        self._marks: deque[tuple[int, int, int]] = deque()  # ... released: seq, first unit, end unit
        self._released = 0  # ... units released so far
        self._loaded: tuple[Any, ...] | None = None  # a loaded state, for the next __iter__
        self._base: seeding.ItemSeed | None = None
        self._shard_key: tuple[int, ...] = ()
        self._endless: Iterator[Any] | None = None
        self._clear_epoch_state()

    # -- transport: the subclass's ---------------------------------------------------------
    def _start(self) -> None:
        raise NotImplementedError

    def _submit(self, task_id: TaskId, chunk: list[Any], rng_key: RngKey) -> None:
        raise NotImplementedError

    def _receive(self) -> tuple[TaskId | None, bytes, Any]:
        """The next ``(task_id, kind, payload)``; raises on timeout or dead workers. An ERROR
        payload is an :class:`~._messages.ErrorRecord` (``task_id`` ``None``: not a task's).
        A transport whose workers time the map sets ``self._busy`` to the seconds it took."""
        raise NotImplementedError

    def _stop(self) -> None:
        raise NotImplementedError

    def _outputs(self, kind: bytes, payload: Any, skip: int) -> int:
        """Put one task's result on ``self._ready``, dropping its first ``skip`` units;
        returns the units it added (default: a list of results, a unit per result)."""
        out = payload[skip:] if skip else payload
        self._ready.extend(out)
        return len(out)

    def _unyielded_units(self) -> int:
        """Units released to the consumer but not yielded yet."""
        return len(self._ready)

    def _finish_pass(self) -> None:
        """Called when a strict pass has received every result (batching flushes here)."""

    # -- lifecycle ------------------------------------------------------------------------
    def reset_state(self) -> None:
        """Reset the upstream (it is read in this process) and start the workers."""
        self._started = False
        self._stop()  # even if not started: a start that a Ctrl-C cut may have begun
        self.ds.reset_state()
        self._forget_flight()
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

    def _forget_flight(self) -> None:
        self._inflight = 0
        self._flight.clear()
        self._flight_items = 0
        self._endless = None

    def _clear_epoch_state(self) -> None:
        self._seq = 0
        self._want = 0
        self._pending: dict[int, tuple[bytes, Any, int]] = {}
        self._pending_items = 0
        self._ready: deque[Any] = deque()
        self._ledger.clear()
        self._marks.clear()
        self._released = 0
        self._skip = 0  # units of the first released task to drop (a resumed partial task) ...
        self._skip_seq = -1  # ... this task (an unordered map holds other results until it is released)

    def __iter__(self) -> Iterator[Any]:
        if not self._started:
            raise DataFlowNotReset(
                f"{type(self).__name__} was iterated before reset_state() (or after close()); "
                f"call reset_state() once in the process that iterates"
            )
        if self._guard.busy():  # before any bookkeeping of a second iterator
            raise DataFlowReentrantError(
                f"{type(self).__name__} is not reentrant: it is already being iterated"
            )
        if self._interrupted:  # a message may have been cut in half: restart the workers
            self._clear_epoch_state()  # first: results held here may view the old workers' memory
            self._stop()
            self._forget_flight()
            self._start()
            self._interrupted = False
        loaded, self._loaded = self._loaded, None
        if self.strict:
            gen = self._strict_pass(*self._begin_pass(loaded))
        else:
            gen = self._endless_run(loaded)
        return self._track(gen)

    # -- passes: the generators __iter__ returns ------------------------------------------
    def _begin_pass(self, loaded: tuple[Any, ...] | None) -> tuple[int, Iterator[Any]]:
        """Start a strict pass (eagerly, in ``__iter__``): ``(epoch, source)``; a resumed pass
        first submits the tasks its checkpoint owed."""
        self._clear_epoch_state()
        if loaded is None:
            self._epoch += 1
            self._index = 0
            return self._epoch, iter(self.ds)
        tasks, self._skip = loaded[:2]
        source = iter(self.ds)
        self._skip_seq = self._seq
        for chunk, first in tasks:
            self._submit_task(chunk, self._epoch, first)
        return self._epoch, source

    def _strict_pass(self, epoch: int, source: Iterator[Any]) -> Iterator[Any]:
        # The guard and the interrupt flag live here, not in a wrapping generator: one
        # generator level less per datapoint (a cheap map's whole cost is such overheads).
        more, received = True, 0
        ready = self._ready
        with self._guard:
            try:
                while True:
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
        """The upstream repeated forever (non-strict maps)."""
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

    def _endless_run(self, loaded: tuple[Any, ...] | None) -> Iterator[Any]:
        """A non-strict epoch: ``len(ds)`` results of the upstream repeated forever. Begun
        eagerly (in ``__iter__``): a resumed epoch first submits the tasks its checkpoint owed."""
        if loaded is not None:
            tasks, self._skip, produced, up_live = loaded
            self._endless = self._forever(up_live) if up_live else None
            self._skip_seq = self._seq
            for chunk, first in tasks:
                self._submit_task(chunk, 0, first)
        else:
            produced = 0
        self._produced = produced  # the epoch begins now, not when first pulled
        if self._endless is None:
            self._endless = self._forever(False)
        return self._endless_epoch(self._endless)

    def _endless_epoch(self, endless: Iterator[Any]) -> Iterator[Any]:
        try:
            size: int | None = len(self)
        except (TypeError, NotImplementedError):
            size = None
        ready = self._ready
        with self._guard:
            try:
                while size is None or self._produced < size:
                    if ready:
                        self._produced += 1
                        yield ready.popleft()
                        continue
                    self._fill(endless, 0)
                    self._take_result(0)
            except KeyboardInterrupt:
                self._interrupted = True
                raise

    # -- tasks: submitted, then their results taken ----------------------------------------
    def _rng_key(self, epoch: int, first_index: int) -> RngKey:
        if not self.item_rng or self._base is None:
            return None
        entropy, base_key = self._base
        return ((entropy, (*base_key, *self._shard_key)), epoch if self.strict else 0, first_index)

    def _submit_task(self, chunk: list[Any], epoch: int, first_index: int) -> None:
        seq = self._seq
        self._submit((epoch, seq), chunk, self._rng_key(epoch, first_index))
        self._flight[(epoch, seq)] = n = len(chunk)
        self._flight_items += n
        self._ledger[seq] = (chunk, first_index)
        self._seq = seq + 1
        self._inflight += 1

    def _fill(self, source: Iterator[Any], epoch: int) -> bool:
        """Submit tasks while there is room; False once ``source`` is exhausted. Results held in
        the reorder buffer count against the room, so ``buffer_size`` bounds memory (in
        datapoints; a task is sent only if it fits whole, or when nothing is in flight)."""
        limit = self.buffer_size
        while True:
            size = self._chunk
            held = self._flight_items + self._pending_items
            if held and held + size > limit:
                return True
            cap = self._probe or self._task_cap
            if cap and self._inflight >= cap:
                return True  # the first result sizes the rest; then the transport's cap
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
        busy, self._busy = self._busy, None
        if busy is not None:
            self._observe(size, busy)
        if task_id is not None and task_id[0] != epoch:
            return False  # an abandoned pass's result or error: dropped
        seq = task_id[1] if task_id is not None else -1
        if kind == msg.ERROR:
            self._ledger.pop(seq, None)  # delivered as its error: a checkpoint must not run it again
            self._pass_over(seq)
            raise msg.error_for(type(self).__name__, payload)
        pending = self._pending
        if not self.ordered:
            if not self._skip:
                self._release(seq, kind, payload)
            elif seq == self._skip_seq:  # a resumed partial task: released before any other
                self._release(seq, kind, payload)
                self._release_held()
            else:
                pending[seq] = (kind, payload, size)
                self._pending_items += size
            return True
        pending[seq] = (kind, payload, size)
        self._pending_items += size
        self._release_in_order()
        return True

    def _release_in_order(self) -> None:
        """An ordered map: release the tasks the reorder buffer holds from ``self._want`` on."""
        pending = self._pending
        while self._want in pending:
            kind, payload, size = pending.pop(self._want)
            self._pending_items -= size
            if kind != msg.ERROR:  # a failed task's error was raised when it came
                self._release(self._want, kind, payload)
            self._want += 1

    def _pass_over(self, seq: int) -> None:
        """Task ``seq`` failed (its error is raised next). A non-strict stream goes on past it:
        an ordered map's reorder buffer must not wait for its results, and the units that a
        resumed partial task owed were the failed task's, not the next one's."""
        if seq >= 0 and seq == self._skip_seq and self._skip:
            self._skip = 0
            if not self.ordered:
                self._release_held()
        if self.ordered and seq >= 0:
            self._pending[seq] = (msg.ERROR, None, 0)
            self._release_in_order()

    def _release_held(self) -> None:
        """An unordered map: release the results held while a resumed partial task was in flight."""
        held = list(self._pending.items())
        self._pending.clear()
        self._pending_items = 0
        for seq, (kind, payload, _) in held:
            self._release(seq, kind, payload)

    def _release(self, seq: int, kind: bytes, payload: Any) -> None:
        """A task's outputs go to the consumer: noted in the ledger, which forgets the tasks
        whose every output was yielded."""
        skip, self._skip = self._skip, 0
        start = self._released
        self._released = start + self._outputs(kind, payload, skip)
        # a resumed partial task counts its units yielded before the checkpoint too, so
        # that a checkpoint taken while it is still released skips them again
        self._marks.append((seq, start - skip, self._released))
        self._prune(self._unyielded_units())

    def _prune(self, unyielded: int) -> None:
        """Forget tasks whose every unit was yielded (``unyielded`` units are still waiting)."""
        yielded, marks, tasks = self._released - unyielded, self._marks, self._ledger
        while marks and marks[0][2] <= yielded:
            tasks.pop(marks.popleft()[0], None)

    def _observe(self, items: int, busy: float) -> None:
        """A task of ``items`` datapoints kept a worker busy for ``busy`` seconds: update the
        map's time per datapoint and, with ``chunk="auto"``, the datapoints per task, so that
        a task takes about ``_task_seconds`` (:data:`TASK_SECONDS` unless the transport
        sets another), within ``[1, _chunk_cap]``."""
        if items <= 0 or busy < 0:
            return
        sample = busy / items
        est, seen = self._per_item, self._per_item_seen
        # Weighted by datapoints while few are measured: the first task's one datapoint (often
        # slow: caches cold) must not outweigh the hundreds of the task it sized.
        weight = max(_ALPHA, items / (seen + items))
        self._per_item = est = sample if est is None else est + weight * (sample - est)
        self._per_item_seen = seen + items
        if self._chunk_fixed is not None:
            return  # measured all the same: the process map's start-up placement uses it
        cap = self._chunk_cap
        task = self._task_seconds
        want = cap if est <= task / cap else max(1, min(cap, int(task / est)))
        old = self._chunk
        if want != old and (want >= 2 * old or 2 * want <= old or want in (1, cap)):
            self._chunk = want  # hysteresis: small wobbles of the estimate change nothing
            logger.debug(
                "%s: %d datapoint(s) per task (map takes %.1f us per datapoint; was %d)",
                type(self).__name__, want, est * 1e6, old,
            )

    # -- checkpoints ----------------------------------------------------------------------
    def _undelivered(self) -> tuple[list[Task], int]:
        """The tasks to submit again, in delivery order, and how many units of the first of
        them were already yielded."""
        unyielded = self._unyielded_units()
        self._prune(unyielded)
        yielded = self._released - unyielded
        released = [seq for seq, _, _ in self._marks if seq in self._ledger]
        # nothing released yet since a resume: its first task still owes the skip it was loaded with
        skip = yielded - self._marks[0][1] if self._marks else self._skip
        rest = sorted(seq for seq in self._ledger if seq not in set(released))
        order = sorted(released + rest) if self.ordered else released + rest
        return [self._ledger[seq] for seq in order], max(0, skip)

    def _upstreams_live(self, live: bool) -> list[bool]:
        if self.strict:
            return [live]
        gen = self._endless  # _forever yields only from inside an upstream epoch
        return [gen is not None and inspect.getgeneratorstate(gen) == inspect.GEN_SUSPENDED]  # type: ignore[arg-type]

    def _get_state(self, live: bool) -> dict[str, Any]:
        stage = type(self).__name__
        carry = live or not self.strict  # a non-strict map's results in flight belong to its next epoch
        tasks, skip = self._undelivered() if carry else ([], 0)
        flat = [dp for inputs, _ in tasks for dp in inputs]
        state: dict[str, Any] = {"epoch": self._epoch, "index": self._index}
        state["produced"] = self._produced if live else 0
        state["tasks"] = {
            "inputs": encode_items(stage, flat, "inputs in flight") if flat else None,
            "sizes": [len(inputs) for inputs, _ in tasks],
            "first_indices": [first for _, first in tasks],
            "skip": skip,
        }
        if self.item_rng and self._base is not None:
            state["base"] = [str(self._base[0]), list(self._base[1])]
        return state

    def _set_state(self, state: Mapping[str, Any], live: bool) -> None:
        """Keep what the next ``__iter__`` starts from (it submits the saved tasks first);
        nothing is started or stopped here."""
        stage = type(self).__name__
        saved = field(stage, state, "tasks", dict)
        sizes = field(stage, saved, "sizes", list)
        firsts = field(stage, saved, "first_indices", list)
        skip = int_field(stage, saved, "skip")
        flat = decode_items(stage, saved, "inputs") if sizes and sum(sizes) else []
        sizes_ok = all(isinstance(n, int) and n > 0 for n in sizes)
        if len(sizes) != len(firsts) or not sizes_ok or sum(sizes) != len(flat):
            raise StateError(f"{stage}: the saved inputs in flight are corrupted")
        tasks: list[Task] = []
        pos = 0
        for n, first in zip(sizes, firsts):
            tasks.append((flat[pos : pos + n], int(first)))
            pos += n
        self._epoch = int_field(stage, state, "epoch")
        self._index = int_field(stage, state, "index")
        if self.item_rng and "base" in state:
            entropy, key = field(stage, state, "base", list)
            self._base = (int(entropy), tuple(int(k) for k in key))
        if self.strict:
            self._loaded = (tasks, skip) if live else None
        else:
            self._loaded = (tasks, skip, int_field(stage, state, "produced") if live else 0, True)
