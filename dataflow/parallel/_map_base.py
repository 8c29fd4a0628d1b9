"""The base class of the parallel maps (:class:`ParallelMapBase`), independent of threads,
processes or Ray.

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
map in the consumer itself (``_in_consumer``, ``_stream_here``, ``_map_here``,
``_serial_rest``: ``num_proc="auto"`` while workers do not pay).

This module holds the class: its settings, hooks and lifecycle. Its passes (the generators
``__iter__`` returns) are in :mod:`._map_passes`, the tasks they submit and the results they
take in :mod:`._map_tasks`, its checkpoint in :mod:`._map_state`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Mapping
from operator import length_hint
from typing import Any

from .. import seeding
from .._checks import check_callable, check_int, check_timeout
from ..base import DataFlow, ProxyDataFlow, ReentrancyGuard
from ..errors import DataFlowNotReset, DataFlowReentrantError
from ..ops.shard import shard_key
from ._autotune import ChunkTuner
from ._map_passes import begin_pass, endless_epoch, endless_run, forever, strict_pass
from ._map_state import TaskLedger, get_state, set_state, upstreams_live

__all__ = ["ParallelMapBase"]

TaskId = tuple[int, int]
RngKey = tuple[seeding.ItemSeed, int, int] | None  # (base, epoch, index of the chunk's first)
_NOTHING: Iterator[Any] = iter(())


class ParallelMapBase(ProxyDataFlow):
    """Common logic of the parallel maps; see the module docstring for the semantics."""

    _state_kind = "ParallelMap"  # threads, processes, Ray: one state, resumable on another
    _resume: tuple[Any, ...]  # set only by a live load (_map_state.py); the next __iter__ takes it

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
        self._stretch_count = 0  # measured stretches so far (which of their calls are timed)
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
        """How many datapoints to map right here, in the consumer, without tasks (a pass,
        or a non-strict epoch, with nothing in flight asks before each group or measured
        stretch); 0: none, use the workers.
        See :meth:`_map_here`."""
        return 0

    def _stream_here(self, size: int) -> int:
        """Where :meth:`_in_consumer` asked for ``size`` datapoints: how many to map in a
        measured stretch instead (each result yielded as it is made, some calls of
        ``map_func`` timed; see :mod:`._map_passes`); 0: a group, :meth:`_map_here`."""
        return 0

    def _stretch_sample(self) -> bool:
        """Whether the next measured stretch keeps its first result for
        :meth:`_stretch_measured`."""
        return False

    def _stretch_measured(self, items: int, busy: float, now: float, sample: list[Any] | None) -> None:
        """A measured stretch read ``items`` datapoints and spent ``busy`` s in ``map_func``;
        it ended at ``now``; ``sample``: its first result, where asked for."""

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

    def _finish_pass(self) -> None:
        """Called when a strict pass has received every result (batching flushes here)."""

    # -- lifecycle ------------------------------------------------------------------------
    def reset_state(self) -> None:
        """Reset the upstream (it is read in this process) and start the workers."""
        self._started = False
        self._stop()  # even if not started: a start that a Ctrl-C cut may have begun
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
        if self._guard.busy():  # before any bookkeeping of a second iterator
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

    # -- passes: the generators are in _map_passes.py -------------------------------------
    def _begin_pass(self, resume: Any) -> tuple[int, Iterator[Any], int]:
        """Start a strict pass (eagerly, in ``__iter__``): ``(epoch, source, resubmitted)``."""
        return begin_pass(self, resume)

    def _strict_pass(self, begun: tuple[int, Iterator[Any], int]) -> Iterator[Any]:
        return strict_pass(self, begun)

    def _forever(self, resumed: bool) -> Iterator[Any]:
        return forever(self, resumed)

    def _endless_epoch(self, resume: Any) -> Iterator[Any]:
        return endless_epoch(self, resume)

    def _endless_run(self) -> Iterator[Any]:
        return endless_run(self)

    # -- checkpoints: the state is made and read back in _map_state.py ---------------------
    def _upstreams_live(self, live: bool) -> list[bool]:
        return upstreams_live(self, live)

    def _get_state(self, live: bool) -> dict[str, Any]:
        return get_state(self, live)

    def _set_state(self, state: Mapping[str, Any], live: bool) -> None:
        set_state(self, state, live)
