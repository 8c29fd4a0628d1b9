"""In-memory caching of a complete pass: :class:`CacheData`."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from .._errors import StateError
from .._state import load_subtree, save_subtree
from .._state_fields import exhausted, field, plain_rng_state, position
from ..base import DataFlow, ProxyDataFlow, ReentrancyGuard, RNGDataFlow
from ._repeat import nothing

__all__ = ["CacheData"]


class CacheData(ProxyDataFlow, RNGDataFlow[Any]):
    """Produce the upstream's first complete pass, then replay it from memory.

    Only a *complete* pass is cached: if the first epoch is abandoned midway, what was seen
    is discarded and the next epoch reads the upstream again (tensorpack cached the partial
    pass and silently lost the rest). With ``shuffle=True`` each replayed epoch is a new
    permutation from ``self.rng`` (the first pass keeps upstream order). The same datapoint
    objects are produced every epoch: downstream stages must not modify them in place.

    ``len`` is the upstream's until cached, then the cache's. Not reentrant while the first
    pass runs. ``reset_state()`` drops the cache.

    Checkpoints do not hold the cached datapoints (they may be the whole dataset): the state
    keeps the upstream's state from the start of the cached pass, and a resumed pipeline
    rebuilds the cache by reading that pass again, once, before it goes on (the rebuilt cache
    is identical when the upstream's state describes its data exactly, as for every
    random-access source).
    """

    def __init__(self, ds: DataFlow[Any], shuffle: bool = False, seed: int | None = None) -> None:
        ProxyDataFlow.__init__(self, ds)
        RNGDataFlow.__init__(self, seed)
        self._shuffle = bool(shuffle)
        self._cache: list[Any] | None = None
        self._guard = ReentrancyGuard(type(self).__name__)
        self._source: Any = None  # the upstream's state node at the start of the cached pass
        self._replay: Iterator[Any] | None = None  # the iterator of the current replayed epoch

    def reset_state(self) -> None:
        ProxyDataFlow.reset_state(self)
        RNGDataFlow.reset_state(self)
        self._cache = None

    def __len__(self) -> int:
        if self._cache is not None:
            return len(self._cache)
        return len(self.ds)

    def __iter__(self) -> Iterator[Any]:
        resume = self.__dict__.pop("_resume", None)
        rebuild = self.__dict__.pop("_rebuild", None)
        if rebuild is not None:
            self._cache = self._read_pass(rebuild)
        self._at_first_end = self.__dict__.pop("_resume_ended", False)
        if self._at_first_end:  # resumed after the first pass's end: nothing left of this
            self._replay = None  # epoch, which saves again as such (and draws no permutation:
            return nothing()  # that pass drew none; a generator: live until pulled)
        cache = self._cache
        if cache is None:
            self._epoch_rng = None
            if not self.__dict__.get("_partial"):  # a resumed first pass keeps its source state
                try:
                    self._source = save_subtree(self.ds, False)
                except Exception as e:  # not checkpointable: say so only if a state is asked for
                    self._source = e
            return self._first_pass(iter(self.ds))
        order: Any = cache
        if self._shuffle:
            self._epoch_rng = self.rng.bit_generator.state
            order = self.rng.permutation(len(cache)).tolist()
        self._replay = cur = iter(order)
        if resume:
            cur.__setstate__(resume)
        return map(cache.__getitem__, cur) if self._shuffle else cur

    def _first_pass(self, itr: Iterator[Any]) -> Iterator[Any]:
        with self._guard:
            seen: list[Any] = []
            append = seen.append
            for dp in itr:
                append(dp)
                yield dp
            if self.__dict__.pop("_partial", False):  # resumed midway: read it whole again
                self._rebuild = self._source
            else:
                self._cache = seen

    def _read_pass(self, node: Any) -> list[Any]:
        load_subtree(self.ds, node, f"{type(self).__name__}'s upstream")
        return list(self.ds)

    def _iter_live(self) -> bool:
        if self._cache is None or self.__dict__.get("_at_first_end"):
            return DataFlow._iter_live(self)
        cur = self._replay
        return cur is not None and not exhausted(cur)

    def _upstreams_live(self, live: bool) -> list[bool]:
        return [live and self._cache is None and "_rebuild" not in self.__dict__]

    def _get_state(self, live: bool) -> dict[str, Any]:
        if isinstance(self._source, Exception):
            raise self._source
        cached = self._cache is not None or "_rebuild" in self.__dict__
        state: dict[str, Any] = {"cached": cached, "source": self._source, "rng": self._save_rng()}
        if live and cached and self._replay is None:
            state["first_pass_ended"] = True  # a downstream epoch goes on after it: resume at its end
        if live and cached and self._replay is not None:
            state["position"] = position(self._replay, len(self._cache or ()))
            epoch_rng = self.__dict__.get("_epoch_rng")
            state["epoch_rng"] = None if epoch_rng is None else plain_rng_state(epoch_rng)
        return state

    def _set_state(self, state: Mapping[str, Any], live: bool) -> None:
        stage = type(self).__name__
        cached = field(stage, state, "cached", bool)
        source = field(stage, state, "source", (dict, type(None)))
        for key in ("_resume", "_rebuild", "_partial", "_resume_ended"):
            self.__dict__.pop(key, None)
        self._cache, self._source, self._replay = None, source, None
        if cached:
            if source is None:
                raise StateError(f"{stage}: the state says the cache was full but holds no source state")
            self._rebuild = source
            if live and state.get("first_pass_ended") is True:
                self._resume_ended = True
            elif live and "position" in state:
                self._resume = int(field(stage, state, "position", int))
                self._load_rng(field(stage, state, "epoch_rng", (dict, type(None))) or state["rng"])
                return
        elif live:
            self._partial = True
        self._load_rng(field(stage, state, "rng", (dict, type(None))))
