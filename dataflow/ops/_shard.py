"""Splitting a flow across data-parallel ranks: :class:`ShardData` (the ``.shard()`` counterpart)."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

from .. import _seeding as seeding
from .._checks import check_int
from .._errors import StateError
from .._state_fields import decode_items, encode_items, field, int_field
from .._warn import warn
from ..base import DataFlow, ProxyDataFlow
from ..sources._indexed import IndexedSource
from ..sources._order import ShardSpec, shard_length

__all__ = ["ShardData", "shard_key"]


class ShardData(ProxyDataFlow):
    """Rank ``index`` of ``num_shards``: a disjoint part of every epoch of ``ds``.

    Every rank builds the same pipeline and calls ``.shard(num_shards, rank)``; together the
    ranks see each datapoint of an epoch once (with ``equal=True``: except the few dropped).

    - **By index** when ``ds`` is a random-access source (:class:`~dataflow.DataFromList`,
      :class:`~dataflow.DataFromArrays`, LMDB/HDF5/NumPy readers): the source visits only
      indices ``order[index::num_shards]`` of each epoch's order, reading nothing else. With
      ``shuffle=True`` every rank draws the *same* permutation (a global shuffle), so the
      source needs ``seed=`` (or :func:`dataflow.set_seed`), the same on every rank: without
      one, ``reset_state()`` raises rather than let shards overlap.
    - **By file** when ``ds`` is a multi-file reader (:class:`~dataflow.TFRecordData` in file
      order or over remote files, :class:`~dataflow.TextLineData` with ``equal=False``) with
      at least ``num_shards`` files: each rank reads (and fetches) only its own files;
      ``equal=True`` assigns them by record count and stops every rank at the smallest
      rank's count (see :doc:`/object_stores`).
    - **Within a rank** when ``ds`` is a ``.shard()`` of the two kinds above (directly, or
      through plain :meth:`~dataflow.DataFlow.map` stages): ``rank.shard(num_workers, w)``
      splits *that rank's* part among its workers and each reads only its own part of it —
      by index at any depth and for every ``equal``/``pad`` (worker ``w`` gets positions
      ``w::num_workers`` of the rank's epoch order, or equal counts as below); by file/piece
      with ``equal=False`` at the worker level (worker ``w`` reads pieces ``w, w + num_workers,
      ...`` of the rank's files, or of the rank's record runs with an ``equal=True`` rank, cut
      to exactly the rank's count), when the rank has at least ``num_workers`` pieces. The
      rank's flow is not changed: this stage holds a copy of it, so any number of workers'
      shards can be built from one rank's flow. This is what the workers of
      ``to_torch(shard=True)`` and ``MultiProcessRunnerZMQ(shard=True)`` do.
    - **By position** otherwise (a flow that reorders, batches or buffers; a map with
      ``item_rng``; too few files; ``equal=True`` below a file-sharded rank): every rank (or
      worker) reads the whole upstream and keeps datapoints ``index, index + num_shards,
      ...``. Correct, but each one does all the upstream's work: put ``.shard()`` right after
      the source when you can.

    ``equal=True`` (the default, for training): every rank gets the same number of
    datapoints per epoch — ``len(ds) // num_shards`` — so ranks run the same number of steps
    and a collective op never waits for a rank that ran out; the last incomplete row of
    ``num_shards`` datapoints is dropped, or, with ``pad=True``, completed with the epoch's
    first datapoints again (every rank gets ``ceil(len(ds) / num_shards)``; a few datapoints
    are seen twice). A filter *after* the shard can still make counts differ. ``equal=False``
    gives rank ``index`` exactly the datapoints at positions ``index::num_shards``.

    Ordering: the upstream's, restricted to this rank. Checkpoints: a state resumes the same
    rank; to resume with another number of ranks, see :func:`dataflow.checkpoint.reshard`
    (one ``.shard()`` by index or file; the state of a worker of a rank, a ``.shard()`` of a
    ``.shard()``, resumes with the same ranks and workers only).
    """

    def __init__(
        self, ds: DataFlow[Any], num_shards: int, index: int, equal: bool = True, pad: bool = False
    ) -> None:
        super().__init__(ds)
        stage = type(self).__name__
        n = check_int(stage, "num_shards", num_shards)
        i = check_int(stage, "index", index, minimum=0)
        if i >= n:
            raise ValueError(f"{stage}: index must be in [0, num_shards), got index={i} with num_shards={n}")
        if pad and not equal:
            raise ValueError(
                f"{stage}: pad=True completes the last row so counts are equal; it needs equal=True"
            )
        self.num_shards, self.index = n, i
        self.spec = ShardSpec(n, i, bool(equal), bool(pad))
        # a shard of a shard read by index/file: a copy of it that reads only this part
        split = getattr(ds, "_split_shard", None)
        part = split(self.spec) if isinstance(ds, ProxyDataFlow) and callable(split) else None
        if part is not None:
            self.ds, self.by_index = part, True
            return
        # a random-access source visits this rank's indices, a file reader reads its files
        take_shard = getattr(ds, "_set_shard", None)
        self.by_index = callable(take_shard) and bool(take_shard(self.spec))
        if not self.by_index:
            _hint_index_sharding(ds)

    def _split_shard(self, spec: ShardSpec) -> ShardData | None:
        """A copy of this shard whose source reads only part ``spec`` of this shard's
        indices/files/pieces (asked by a :class:`ShardData` right above: the workers of this
        rank), or ``None`` where that is not exact (then that one shards by position). This
        shard and its source are unchanged, so any number of such parts can be built."""
        split = getattr(self.ds, "_split_shard", None)
        if not self.by_index or not callable(split):
            return None
        source = split(spec)
        if source is None:
            return None
        part = copy.copy(self)
        part.ds = source
        for epoch_attr in ("_resume", "_epoch_ref"):  # no epoch of this shard's goes on in it
            part.__dict__.pop(epoch_attr, None)
        return part

    def reset_state(self) -> None:
        super().reset_state()
        ds = self.ds
        unseeded = isinstance(ds, IndexedSource) and ds._shuffle and not seeding.is_seeded(ds._seed)
        if self.by_index and unseeded:
            raise ValueError(
                f"ShardData: the source {type(ds).__name__} shuffles without a seed, so each rank "
                f"would draw its own permutation and shards would overlap; give the source "
                f"seed=... (the same on every rank) or call dataflow.set_seed(...) first"
            )

    def __len__(self) -> int:
        return len(self.ds) if self.by_index else shard_length(len(self.ds), self.spec)

    def __iter__(self) -> Iterator[Any]:
        if self.by_index:
            return iter(self.ds)  # the source visits this shard only
        resume = self.__dict__.pop("_resume", None)
        self._pos, self._first, self._padded = (0, [], False) if resume is None else resume
        return self._by_position(iter(self.ds))

    def _by_position(self, itr: Iterator[Any]) -> Iterator[Any]:
        """Yields only at the end of a row (``equal``) or at this rank's column, so that at
        every yield ``self._pos`` upstream datapoints are consumed and nothing is held."""
        n, i, equal, pad = self.num_shards, self.index, self.spec.equal, self.spec.pad
        first, held, seen = self._first, None, self._pos
        for p, dp in enumerate(itr, seen):
            seen = p + 1
            if pad and p < n:
                first.append(dp)
            col = p % n
            if not equal:
                if col == i:
                    self._pos = seen
                    yield dp
            elif col == i and i == n - 1:
                self._pos = seen
                yield dp
            elif col == i:
                held = dp
            elif col == n - 1:  # a row is complete: every rank gets its datapoint of it
                self._pos = seen
                out, held = held, None
                yield out
        self._pos = seen
        if pad and seen % n and not self._padded:  # complete the last row
            self._padded = True
            yield held if held is not None else first[(seen - seen % n + i) % seen]

    def _get_state(self, live: bool) -> dict[str, Any]:
        state: dict[str, Any] = {
            "num_shards": self.num_shards, "index": self.index,
            "equal": self.spec.equal, "pad": self.spec.pad,
        }  # fmt: skip
        if live and not self.by_index:
            first = None
            if self.spec.pad:
                first = encode_items(type(self).__name__, self._first, "first datapoints (for padding)")
            state.update(position=self._pos, first=first, padded=self._padded)
        return state

    def _set_state(self, state: Mapping[str, Any], live: bool) -> None:
        stage = type(self).__name__
        saved = state.get("num_shards"), state.get("index")
        if saved != (self.num_shards, self.index) and saved != (None, None):
            raise StateError(
                f"{stage}: the state was saved by shard {saved[1]} of {saved[0]} but this pipeline is "
                f"shard {self.index} of {self.num_shards}; each rank loads its own state, or convert "
                f"all ranks' states with dataflow.checkpoint.reshard(states, num_shards)"
            )
        mode = state.get("equal", self.spec.equal), state.get("pad", self.spec.pad)
        if mode != (self.spec.equal, self.spec.pad):  # another split: the position means other datapoints
            raise StateError(
                f"{stage}: the state was saved by a shard with equal={mode[0]}, pad={mode[1]} but "
                f"this one has equal={self.spec.equal}, pad={self.spec.pad}; resume with the same "
                f".shard() arguments"
            )
        if not live or self.by_index:
            return
        if saved == (None, None):  # merged by reshard: the upstream resumes at the rest, counted from 0
            self._resume: tuple[int, list[Any], bool] = (0, [], False)
            return
        first = decode_items(stage, state, "first") if self.spec.pad else []
        padded = bool(field(stage, state, "padded", bool))
        self._resume = (int_field(stage, state, "position"), first, padded)


def shard_key(ds: DataFlow[Any]) -> tuple[int, ...]:
    """``(num_shards, index)`` of a :class:`ShardData` below ``ds`` (through single-upstream
    stages), or ``()``: what per-item RNGs add to their seed so that ranks draw independently."""
    flow: Any = ds
    while isinstance(flow, ProxyDataFlow):
        if isinstance(flow, ShardData):
            return (flow.num_shards, flow.index)
        flow = flow.ds
    return ()


def _hint_index_sharding(ds: DataFlow[Any]) -> None:
    """Warn when a random-access source sits below ``ds`` through single-upstream stages: a
    shard placed right after it would read only this rank's part."""
    chain, flow = [type(ds).__name__], ds
    while isinstance(flow, ProxyDataFlow) and not isinstance(flow, IndexedSource):
        flow = flow.ds
        chain.append(type(flow).__name__)
    if isinstance(flow, IndexedSource) and len(chain) > 1:
        warn(
            f"ShardData: sharding by position after {' <- '.join(chain[:-1])}: every rank reads and "
            f"processes all of {chain[-1]} and keeps its part. Put .shard() right after "
            f"{chain[-1]} to read only this rank's part",
            UserWarning,
        )
