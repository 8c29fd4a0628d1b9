"""Epoch orders of random-access sources: which indices an epoch visits, for one shard.

An epoch visits a *base order* of the ``n`` items (``0..n-1``, or a permutation drawn for the
epoch). Sharding gives rank ``index`` of ``num_shards`` the strided slice ``base[index::num_shards]``
(so the first ``k`` datapoints of every rank are the first ``k * num_shards`` of the base order,
which is what makes changing the number of shards mid-epoch possible). With ``equal`` every rank
gets the same count: the tail that does not fill a row is dropped (``pad=False``) or the row is
completed with the first items again (``pad=True``).

A spec with a ``parent`` is a shard of a shard (the workers of a rank): the parent's positions
first, then this spec's slice of them, so the workers of one rank split exactly the rank's part.

A *reshard chain* records, for an epoch that was resharded while in progress, which positions
of the base order the earlier ranks had consumed: each level is ``(spec, consumed per part)``,
the parts being the ranks of ``spec`` or, for a spec with a parent (the workers of ranks),
every (rank, worker) pair, rank-major. The rest of the epoch is then the positions not
consumed, sharded by the current spec.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

__all__ = ["ShardSpec", "epoch_order", "level_parts", "shard_length", "spec_from_list"]

T = TypeVar("T")


@dataclass(frozen=True)
class ShardSpec:
    """Rank ``index`` of ``num_shards``; ``equal``: same count per rank (drop, or ``pad``).

    ``parent``: this is shard ``index`` of ``num_shards`` *of the parent's part* (worker
    ``index`` of a rank's ``num_shards`` workers), not of the whole."""

    num_shards: int
    index: int
    equal: bool = True
    pad: bool = False
    parent: ShardSpec | None = None

    def as_list(self) -> list[Any]:
        own: list[Any] = [self.num_shards, self.index, self.equal, self.pad]
        return own if self.parent is None else [*own, self.parent.as_list()]

    def own(self) -> ShardSpec:
        """This level alone (without the parent)."""
        return ShardSpec(self.num_shards, self.index, self.equal, self.pad)

    def split(self, items: Sequence[T]) -> list[T]:
        """This level's part of ``items`` (a parent's part, say): positions ``_slice(len(items))``."""
        return [items[int(k)] for k in _slice(len(items), self.own())]


def spec_from_list(value: Any) -> ShardSpec:
    """The spec :meth:`ShardSpec.as_list` wrote (``TypeError``/``ValueError`` if it is not one)."""
    n, i, equal, pad, *parent = value
    if len(parent) > 1 or not all(isinstance(v, bool) for v in (equal, pad)):
        raise ValueError(f"not a shard spec: {value!r}")
    spec = ShardSpec(int(n), int(i), equal, pad, spec_from_list(parent[0]) if parent else None)
    if not 0 <= spec.index < spec.num_shards:
        raise ValueError(f"not a shard spec: {value!r}")
    return spec


def shard_length(total: int, spec: ShardSpec | None) -> int:
    """How many of ``total`` items rank ``spec.index`` gets."""
    if spec is None:
        return total
    if spec.parent is not None:
        return shard_length(shard_length(total, spec.parent), spec.own())
    n, i = spec.num_shards, spec.index
    if spec.equal:
        return -(-total // n) if spec.pad else total // n
    return len(range(i, total, n))


def _slice(total: int, spec: ShardSpec) -> range | np.ndarray:
    """Positions ``0..total-1`` that rank ``spec.index`` visits, in order."""
    if spec.parent is not None:
        outer = np.asarray(_slice(total, spec.parent), dtype=np.int64)
        return outer[np.asarray(_slice(len(outer), spec.own()), dtype=np.int64)]
    n, i = spec.num_shards, spec.index
    if not spec.equal:
        return range(i, total, n)
    if not spec.pad:
        return range(i, total // n * n, n)
    rows = -(-total // n) * n
    if rows == total:
        return range(i, total, n)
    return np.arange(i, rows, n) % total


Level = tuple[ShardSpec, Sequence[int]]


def level_parts(spec: ShardSpec) -> list[ShardSpec]:
    """Every part of the level ``spec`` belongs to, in the order a reshard chain lists their
    consumed counts: ranks ``0..n-1``, or (rank, worker) pairs rank-major for a worker spec."""
    own = [ShardSpec(spec.num_shards, i, spec.equal, spec.pad) for i in range(spec.num_shards)]
    if spec.parent is None:
        return own
    ranks = level_parts(spec.parent)
    return [ShardSpec(w.num_shards, w.index, w.equal, w.pad, rank) for rank in ranks for w in own]


def remaining_positions(total: int, chain: Sequence[Level]) -> np.ndarray:
    """Positions of the base order not consumed by the parts of each level of ``chain``."""
    left = np.arange(total)
    for spec, consumed in chain:
        taken = np.zeros(len(left), dtype=bool)
        for part, k in zip(level_parts(spec), consumed):
            seen = np.asarray(_slice(len(left), part), dtype=np.int64)[:k]
            taken[seen] = True
        left = left[~taken]
    return left


def epoch_order(
    total: int,
    perm: np.ndarray | None,
    spec: ShardSpec | None,
    chain: Sequence[Level] = (),
) -> range | np.ndarray:
    """The indices one epoch visits, as a ``range`` (cheap, no allocation) or an int64 array."""
    if not chain:
        if spec is None:
            return range(total) if perm is None else perm
        positions = _slice(total, spec)
        if isinstance(positions, range):
            return positions if perm is None else perm[positions.start : positions.stop : positions.step]
        return positions if perm is None else perm[positions]
    left = remaining_positions(total, chain)
    if spec is not None:
        left = left[np.asarray(_slice(len(left), spec), dtype=np.int64)]
    return left if perm is None else perm[left]
