"""Per-datapoint transforms: :class:`MapData`, :class:`MapDataComponent`, :class:`FilterData`,
:class:`SelectComponent`.

All four keep the upstream order, are reentrant when the upstream is, and run ``func`` in the
iterating thread. Their ``len`` is the upstream's, except when a function may drop datapoints
(then it is an upper bound, as documented on each class).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..base import DataFlow, ProxyDataFlow
from ._components import component_error, get_component, replace_component

__all__ = ["FilterData", "MapData", "MapDataComponent", "SelectComponent"]


def _check_callable(stage: str, name: str, func: object) -> None:
    if not callable(func):
        raise TypeError(f"{stage}: {name} must be callable, got {type(func).__name__} ({func!r})")


class MapData(ProxyDataFlow):
    """Apply ``func`` to every datapoint; a ``None`` result drops that datapoint.

    ``len`` is the upstream's: exact when ``func`` never returns ``None``, otherwise an upper
    bound. ``func`` must not modify its input in place if the upstream reuses datapoints
    (e.g. :class:`~dataflow.CacheData`, ``FakeData(random=False)``): return a new one.
    """

    def __init__(self, ds: DataFlow, func: Callable[[Any], Any]) -> None:
        super().__init__(ds)
        _check_callable(type(self).__name__, "func", func)
        self.func = func

    def __iter__(self) -> Iterator[Any]:
        func = self.func
        for dp in self.ds:
            out = func(dp)
            if out is not None:
                yield out


class MapDataComponent(ProxyDataFlow):
    """Replace component ``index`` (an int, or a key for dict datapoints) with ``func(dp[index])``.

    The datapoint is copied (list, tuple or dict, as it came), never modified in place. A
    ``None`` result drops the datapoint, so ``len`` is an upper bound then. A datapoint without
    that component raises :class:`~dataflow.errors.ComponentError`.
    """

    def __init__(self, ds: DataFlow, func: Callable[[Any], Any], index: int | str = 0) -> None:
        super().__init__(ds)
        _check_callable(type(self).__name__, "func", func)
        self.func = func
        self.index = index

    def __iter__(self) -> Iterator[Any]:
        func, index, stage = self.func, self.index, type(self).__name__
        for dp in self.ds:
            out = func(get_component(stage, dp, index))
            if out is not None:
                yield replace_component(stage, dp, index, out)


class FilterData(ProxyDataFlow):
    """Keep the datapoints for which ``predicate(dp)`` is true, in order.

    ``len`` is the upstream's, documented as an upper bound.
    """

    def __init__(self, ds: DataFlow, predicate: Callable[[Any], bool]) -> None:
        super().__init__(ds)
        _check_callable(type(self).__name__, "predicate", predicate)
        self.predicate = predicate

    def __iter__(self) -> Iterator[Any]:
        return filter(self.predicate, self.ds)


class SelectComponent(ProxyDataFlow):
    """Keep the components ``idxs``, in that order (repeats allowed).

    A list/tuple datapoint gives a list ``[dp[i] for i in idxs]``; a dict datapoint gives a
    dict of the selected keys. ``len`` is the upstream's (exact).
    """

    def __init__(self, ds: DataFlow, idxs: Sequence[int | str]) -> None:
        super().__init__(ds)
        if isinstance(idxs, (int, str)) or not isinstance(idxs, Sequence) or len(idxs) == 0:
            raise ValueError(
                f"SelectComponent: idxs must be a non-empty list of component indices or keys, got {idxs!r}"
            )
        self.idxs = list(idxs)

    def __iter__(self) -> Iterator[Any]:
        idxs = self.idxs
        for dp in self.ds:
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
