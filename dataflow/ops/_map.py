"""Per-datapoint transforms: :class:`MapData`, :class:`MapDataComponent`, :class:`FilterData`,
:class:`SelectComponent`.

All four keep the upstream order, are reentrant when the upstream is, and run ``func`` in the
iterating thread. Their ``len`` is the upstream's, except when a function may drop datapoints
(then it is an upper bound, as documented on each class). They keep nothing between
datapoints, so their checkpoint state is their upstream's (plus, for ``MapData(item_rng=True)``,
the epoch and item counters that seed each datapoint's RNG).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from .. import _seeding as seeding
from .._checks import check_callable
from .._errors import StateError
from .._state_fields import field, int_field
from ..base import DataFlow, ProxyDataFlow
from ..sources._order import ShardSpec
from ._components import component_error, get_component, replace_component
from ._shard import shard_key

__all__ = ["FilterData", "MapData", "MapDataComponent", "SelectComponent"]


class MapData(ProxyDataFlow):
    """Apply ``func`` to every datapoint; a ``None`` result drops that datapoint.

    ``len`` is the upstream's: exact when ``func`` never returns ``None``, otherwise an upper
    bound. ``func`` must not modify its input in place if the upstream reuses datapoints
    (e.g. :class:`~dataflow.CacheData`, ``FakeData(random=False)``): return a new one.

    With ``item_rng=True``, ``func(dp, rng)`` also gets a :class:`numpy.random.Generator`
    seeded from ``(seed, epoch, index)`` alone (see :func:`dataflow._seeding.item_rng`): the
    same datapoint gets the same randomness after a resume and in any parallel map at any
    worker count. ``seed=``: as for every flow (else :func:`dataflow.set_seed`, else fresh
    entropy, which the checkpoint keeps). It costs ~9 us per datapoint.
    """

    def __init__(
        self, ds: DataFlow[Any], func: Callable[..., Any], *, item_rng: bool = False, seed: int | None = None
    ) -> None:
        super().__init__(ds)
        check_callable(type(self).__name__, "func", func)
        self.func = func
        self.item_rng = bool(item_rng)
        self._seed = seeding.check_seed(type(self).__name__, seed)
        self._base: seeding.ItemSeed | None = None
        self._epochs = 0
        self._index = 0

    def reset_state(self) -> None:
        super().reset_state()
        if self.item_rng:
            self._key = shard_key(self.ds)
            if self._base is None:
                self._base = seeding.item_seed(self._seed)

    def _split_shard(self, spec: ShardSpec) -> DataFlow[Any] | None:
        """A copy of this map over part ``spec`` of its upstream, when the upstream is a
        ``.shard()`` that can split its own part by index/file (see
        :class:`~dataflow.ShardData`): each upstream datapoint then goes to one part and is
        mapped there. ``None`` with ``item_rng`` (a datapoint's RNG depends on its position
        here) or when ``spec`` asks for equal counts (``func`` may drop datapoints)."""
        split = getattr(self.ds, "_split_shard", None)
        if type(self) is not MapData or self.item_rng or spec.equal or spec.pad or not callable(split):
            return None
        upstream = split(spec)
        if upstream is None:
            return None
        part = copy.copy(self)
        part.ds = upstream
        part.__dict__.pop("_epoch_ref", None)
        return part

    def __iter__(self) -> Iterator[Any]:
        if not self.item_rng:
            return self._mapped(iter(self.ds))
        if self._base is None:
            self._base = seeding.item_seed(self._seed)
        start = self.__dict__.pop("_resume", None)
        if start is None:
            self._epochs += 1
        self._index = start or 0
        entropy, key = self._base
        base = (entropy, (*key, *self.__dict__.get("_key", ())))
        return self._mapped_rng(iter(self.ds), base, self._epochs, self._index)

    def _mapped(self, itr: Iterator[Any]) -> Iterator[Any]:
        func = self.func
        for dp in itr:
            out = func(dp)
            if out is not None:
                yield out

    def _mapped_rng(
        self, itr: Iterator[Any], base: seeding.ItemSeed, epoch: int, index: int
    ) -> Iterator[Any]:
        func, rng_for = self.func, seeding.item_rng
        for dp in itr:
            rng = rng_for(base, epoch, index)
            index += 1
            self._index = index
            out = func(dp, rng)
            if out is not None:
                yield out

    def _get_state(self, live: bool) -> dict[str, Any]:
        if not self.item_rng:
            return {}
        base = self._base if self._base is not None else seeding.item_seed(self._seed)
        self._base = base
        index = self._index if live else 0
        return {"base": [str(base[0]), list(base[1])], "epochs": self._epochs, "index": index}

    def _set_state(self, state: Mapping[str, Any], live: bool) -> None:
        if not self.item_rng:
            return
        stage = type(self).__name__
        base = field(stage, state, "base", list)
        if len(base) != 2 or not str(base[0]).isdigit() or not isinstance(base[1], list):
            raise StateError(f"{stage}: state field 'base' is corrupted: {base!r:.80}")
        # the shard's part of the key is added where the flow runs (see shard_key)
        self._base = (int(base[0]), tuple(int(k) for k in base[1]))
        self._epochs = int_field(stage, state, "epochs")
        if live:
            self._resume = int_field(stage, state, "index")


class MapDataComponent(ProxyDataFlow):
    """Replace component ``index`` (an int, or a key for dict datapoints) with ``func(dp[index])``.

    The datapoint is copied (list, tuple or dict, as it came), never modified in place. A
    ``None`` result drops the datapoint, so ``len`` is an upper bound then. A datapoint without
    that component raises :class:`~dataflow._errors.ComponentError`.
    """

    def __init__(self, ds: DataFlow[Any], func: Callable[[Any], Any], index: int | str = 0) -> None:
        super().__init__(ds)
        check_callable(type(self).__name__, "func", func)
        self.func = func
        self.index = index

    stateless = True

    def __iter__(self) -> Iterator[Any]:
        return self._mapped(iter(self.ds))

    def _mapped(self, itr: Iterator[Any]) -> Iterator[Any]:
        func, index, stage = self.func, self.index, type(self).__name__
        for dp in itr:
            out = func(get_component(stage, dp, index))
            if out is not None:
                yield replace_component(stage, dp, index, out)


class FilterData(ProxyDataFlow):
    """Keep the datapoints for which ``predicate(dp)`` is true, in order.

    ``len`` is the upstream's, documented as an upper bound.
    """

    def __init__(self, ds: DataFlow[Any], predicate: Callable[[Any], bool]) -> None:
        super().__init__(ds)
        check_callable(type(self).__name__, "predicate", predicate)
        self.predicate = predicate

    stateless = True

    def __iter__(self) -> Iterator[Any]:
        return filter(self.predicate, self.ds)


class SelectComponent(ProxyDataFlow):
    """Keep the components ``idxs``, in that order (repeats allowed).

    A list/tuple datapoint gives a list ``[dp[i] for i in idxs]``; a dict datapoint gives a
    dict of the selected keys. ``len`` is the upstream's (exact).
    """

    def __init__(self, ds: DataFlow[Any], idxs: Sequence[int | str]) -> None:
        super().__init__(ds)
        if isinstance(idxs, (int, str)) or not isinstance(idxs, Sequence) or len(idxs) == 0:
            raise ValueError(
                f"SelectComponent: idxs must be a non-empty list of component indices or keys, got {idxs!r}"
            )
        self.idxs = list(idxs)

    stateless = True

    def __iter__(self) -> Iterator[Any]:
        return self._selected(iter(self.ds))

    def _selected(self, itr: Iterator[Any]) -> Iterator[Any]:
        idxs = self.idxs
        for dp in itr:
            try:
                if isinstance(dp, dict):
                    yield {k: dp[k] for k in idxs}
                else:
                    yield [dp[i] for i in idxs]
            except (IndexError, KeyError, TypeError):
                bad = next((i for i in idxs if not _has(dp, i)), idxs[0])
                raise component_error("SelectComponent", dp, bad) from None


def _has(dp: Any, index: Any) -> bool:
    try:
        dp[index]
    except (IndexError, KeyError, TypeError):
        return False
    return isinstance(dp, (list, tuple, dict))
