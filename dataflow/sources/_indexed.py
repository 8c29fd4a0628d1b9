"""The base of random-access sources: :class:`IndexedSource`.

A random-access source has ``n`` items read by index. Each epoch visits an order of indices
(in order, or a permutation drawn from ``self.rng`` at the epoch's start), restricted to one
shard when :class:`~dataflow.ShardData` sits right above it (see :mod:`._order`).

Checkpointing costs nothing per datapoint: the epoch is iterated through a ``list``/``range``
iterator whose position CPython can report, so the state is ``(epoch, position)`` plus the RNG
state at the epoch's start (to draw the same permutation again). Resuming at position 10
million sets that iterator's index: no datapoint is read again.

The order of an epoch of up to :data:`LIST_ORDER_MAX` indices is a ``list`` of them; a longer
one stays an int64 array (8 bytes an index instead of ~40 as Python ints) in memory that
processes forked later do not inherit (:mod:`._unforked`). A worker forked after the
epoch began (a process map starts its others after the first batch) would otherwise share
the order's pages with this process only, and own a private copy of each page this process
then writes or frees: the whole order, for the worker's life. Such a worker never reads this
process's order; an epoch is continued only by the process that began it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import chain
from typing import Any

import numpy as np

from .._errors import StateError
from .._fluent import T_co
from .._state_fields import exhausted, field, int_field, plain_rng_state, position
from ..base import DataFlow, RNGDataFlow
from ._order import Level, ShardSpec, epoch_order, level_parts, shard_length, spec_from_list
from ._unforked import unforked_copy

__all__ = ["LIST_ORDER_MAX", "IndexedSource", "Order", "cursor"]

#: the indices an epoch visits, in order: a ``range``, a ``list`` or an int64 array (see above)
Order = Sequence[int] | np.ndarray

#: an epoch's order of more indices than this is held as an array, not a list (see above)
LIST_ORDER_MAX = 1 << 15


class IndexedSource(RNGDataFlow[T_co]):
    """A source of ``_num_items()`` items read by index, optionally shuffled every epoch.

    Subclasses implement :meth:`_num_items` and :meth:`_getter` (or :meth:`_open` for a faster
    iterator) and set ``self._shuffle``. ``reset_state()`` is required when shuffling.
    """

    _shuffle: bool = False
    _shard: ShardSpec | None = None
    _epochs: int = 0  # epochs started, the interrupted one included
    _cursor: Iterator[int] | None = None
    _order_len: int = 0
    _chain: tuple[Level, ...] = ()
    _epoch_rng: Mapping[str, Any] | None = None  # the RNG's state when the epoch began
    _resume_position: int | None = None  # set by _set_state: the next epoch continues from here

    def _num_items(self) -> int:
        raise NotImplementedError

    def _getter(self) -> Callable[[int], Any]:
        """``index -> datapoint``."""
        raise NotImplementedError

    def _open(self, order: Order, start: int) -> tuple[Iterator[Any], Iterator[int], Iterator[Any]]:
        """``(datapoints, cursor, probe)`` for ``order`` from position ``start``: ``cursor`` is
        the ``list``/``range`` iterator over ``order`` the datapoints are drawn from, ``probe``
        a list iterator that is exhausted exactly when the datapoints are (see :func:`cursor`)."""
        cur, probe, indices = cursor(order, start)
        return map(self._getter(), indices), cur, probe

    def __len__(self) -> int:
        return shard_length(self._num_items(), self._shard)

    def _set_shard(self, spec: ShardSpec) -> bool:
        """Visit only shard ``spec`` from now on (called by :class:`~dataflow.ShardData`)."""
        if self._shard is not None and self._shard != spec:
            raise ValueError(
                f"{type(self).__name__} is already sharded as shard {self._shard.index} of "
                f"{self._shard.num_shards}; build one source per .shard() call"
            )
        self._shard = spec
        return True

    def _split_shard(self, spec: ShardSpec) -> DataFlow[Any] | None:
        """A copy of this source that visits only part ``spec`` of this shard's indices (the
        workers of a rank, see :class:`~dataflow.ShardData`): exact at any depth, for every
        ``equal``/``pad``. ``None`` when this source is not sharded. This source is unchanged."""
        if self._shard is None:
            return None
        part = copy.copy(self)
        part._shard = ShardSpec(spec.num_shards, spec.index, spec.equal, spec.pad, parent=self._shard)
        part._cursor, part._resume_position = None, None  # no epoch of this source's goes on in it
        part.__dict__.pop("_epoch_ref", None)
        return part

    def __iter__(self) -> Iterator[Any]:
        start, self._resume_position = self._resume_position, None
        rng = self.rng if self._shuffle else None  # raises before reset_state when shuffling
        if start is None:
            self._epochs += 1
            self._chain = ()
            start = 0
        self._epoch_rng = None if rng is None else rng.bit_generator.state  # resumed: just loaded
        total = self._num_items()
        perm = None if rng is None else rng.permutation(total)
        order = _held(epoch_order(total, perm, self._shard, self._chain))
        del perm  # a large order was copied where forked workers do not inherit it
        items, self._cursor, self._probe = self._open(order, min(start, len(order)))
        self._order_len = len(order)
        return items

    def _position(self) -> int:
        if self._cursor is None:
            return 0
        if exhausted(self._probe):
            return self._order_len
        return position(self._cursor, self._order_len)

    def _iter_live(self) -> bool:
        return self._cursor is not None and not exhausted(self._probe)

    def _get_state(self, live: bool) -> dict[str, Any]:
        state: dict[str, Any] = {
            "items": self._num_items(),
            "shuffle": bool(self._shuffle),
            "shard": None if self._shard is None else self._shard.as_list(),
            "epochs": self._epochs,
            "rng": self._save_rng() if self._shuffle else None,
        }
        if live:
            state["position"] = self._position()
            epoch_rng = self._epoch_rng
            state["epoch_rng"] = None if epoch_rng is None else plain_rng_state(epoch_rng)
            state["reshard"] = [[spec.as_list(), list(k)] for spec, k in self._chain]
        return state

    def _set_state(self, state: Mapping[str, Any], live: bool) -> None:
        stage = type(self).__name__
        items = int_field(stage, state, "items")
        if items != self._num_items():
            raise StateError(
                f"{stage}: the state was saved for {items} datapoints but this source has "
                f"{self._num_items()}; resume with the same data"
            )
        if bool(field(stage, state, "shuffle", bool)) != bool(self._shuffle):
            raise StateError(
                f"{stage}: the state was saved with shuffle={not self._shuffle}; this source has "
                f"shuffle={self._shuffle}"
            )
        chain = tuple(_level(stage, lv) for lv in field(stage, state, "reshard", list)) if live else ()
        saved_shard = field(stage, state, "shard", (list, str, type(None)))
        mine = None if self._shard is None else self._shard.as_list()
        if saved_shard != mine and saved_shard != "any":
            raise StateError(
                f"{stage}: the state was saved by shard {saved_shard} ([num_shards, index, equal, pad]) "
                f"but this pipeline is shard {mine}; each rank must load its own state, or convert "
                f"all ranks' states with dataflow.checkpoint.reshard(states, num_shards)"
            )
        self._epochs = int_field(stage, state, "epochs")
        if not live:
            if self._shuffle:
                self._load_rng(field(stage, state, "rng", dict))
            return
        self._chain = chain
        self._resume_position = int_field(stage, state, "position")
        if self._shuffle:  # draw the interrupted epoch's permutation again
            self._load_rng(field(stage, state, "epoch_rng", dict))


def cursor(order: Order, start: int) -> tuple[Iterator[Any], Iterator[Any], Iterator[int]]:
    """``(cursor, probe, indices)`` over ``order`` from ``start``: ``indices`` yields the
    indices; ``cursor`` is the ``list``/``range`` iterator whose position is the number
    yielded (:func:`~dataflow._state_fields.position`); ``probe`` an iterator exhausted
    exactly when ``indices`` is (:func:`~dataflow._state_fields.exhausted`). A list iterator
    shows when it is exhausted, so for a list all three are one iterator; a range iterator
    does not, so it gets an empty list iterator to chain behind it; an array is walked by a
    range iterator over its positions."""
    if isinstance(order, np.ndarray):
        positions, probe = cursor(range(len(order)), start)[:2]
        return positions, probe, map(order.item, chain(positions, probe))
    cur = iter(order)
    if start:
        cur.__setstate__(start)  # type: ignore[attr-defined]
    if not isinstance(order, range):
        return cur, cur, cur
    probe = iter([])
    return cur, probe, chain(cur, probe)


def _held(order: range | np.ndarray) -> Order:
    """``order`` as an epoch holds it (see the module docstring): a ``range`` as is, a short
    array as a ``list``, a long one copied into memory that forked processes do not inherit."""
    if isinstance(order, range):
        return order
    if len(order) <= LIST_ORDER_MAX:
        return order.tolist()  # type: ignore[no-any-return]
    return unforked_copy(order)


def _level(stage: str, level: Any) -> Level:
    try:
        saved, consumed = level
        spec = spec_from_list(saved)
        counts = tuple(int(k) for k in consumed)
        if len(counts) != len(level_parts(spec)):
            raise ValueError("one consumed count per part")
        return spec, counts
    except (TypeError, ValueError) as e:
        raise StateError(f"{stage}: the state's reshard record {level!r:.80} is corrupted") from e

