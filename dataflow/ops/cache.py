"""In-memory caching of a complete pass: :class:`CacheData`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..base import DataFlow, ProxyDataFlow, ReentrancyGuard, RNGDataFlow

__all__ = ["CacheData"]


class CacheData(ProxyDataFlow, RNGDataFlow):
    """Produce the upstream's first complete pass, then replay it from memory.

    Only a *complete* pass is cached: if the first epoch is abandoned midway, what was seen
    is discarded and the next epoch reads the upstream again (tensorpack cached the partial
    pass and silently lost the rest). With ``shuffle=True`` each replayed epoch is a new
    permutation from ``self.rng`` (the first pass keeps upstream order). The same datapoint
    objects are produced every epoch: downstream stages must not modify them in place.

    ``len`` is the upstream's until cached, then the cache's. Not reentrant while the first
    pass runs. ``reset_state()`` drops the cache.
    """

    def __init__(self, ds: DataFlow, shuffle: bool = False, seed: int | None = None) -> None:
        ProxyDataFlow.__init__(self, ds)
        RNGDataFlow.__init__(self, seed)
        self._shuffle = bool(shuffle)
        self._cache: list[Any] | None = None
        self._guard = ReentrancyGuard(type(self).__name__)

    def reset_state(self) -> None:
        ProxyDataFlow.reset_state(self)
        RNGDataFlow.reset_state(self)
        self._cache = None

    def __len__(self) -> int:
        if self._cache is not None:
            return len(self._cache)
        return len(self.ds)

    def __iter__(self) -> Iterator[Any]:
        cache = self._cache
        if cache is not None:
            if self._shuffle:
                order = self.rng.permutation(len(cache)).tolist()
                yield from (cache[i] for i in order)
            else:
                yield from cache
            return
        with self._guard:
            seen: list[Any] = []
            append = seen.append
            for dp in self.ds:
                append(dp)
                yield dp
            self._cache = seen
