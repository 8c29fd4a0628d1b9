"""Checkpoints for random sources written for tensorpack: an :class:`~dataflow.RNGDataFlow`
subclass with its own ``__iter__`` (or ``get_data``), no upstream and no state of its own.

Such a source's epoch is a function of ``self.rng`` (and of its attributes), so its state is
the epoch count, the RNG state at the epoch's start and the number of datapoints yielded. On
resume the RNG is rewound to the epoch's start, ``__iter__`` runs again and the datapoints
already consumed are skipped (re-generated, not delivered): exact when ``__iter__`` draws its
randomness from ``self.rng`` only. Counting costs no Python call per datapoint: the epoch is
``zip``-ped with a ``range`` iterator whose position CPython reports.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable, Iterator, Mapping
from itertools import islice
from operator import itemgetter
from typing import Any

from ._state_fields import field, int_field, plain_rng_state

__all__ = ["adopt_legacy_rng_source"]

_first = itemgetter(0)


def _wants_adoption(cls: type) -> bool:
    if cls.__module__.split(".")[0] == "dataflow":  # our own classes have their own hooks
        return False
    from .base import DataFlow, ProxyDataFlow, RNGDataFlow

    if not issubclass(cls, RNGDataFlow) or issubclass(cls, ProxyDataFlow) or "__iter__" not in cls.__dict__:
        return False
    owned = ("_get_state", "state_dict", "load_state_dict", "_state_upstreams", "stateless")
    return all(next(c for c in cls.__mro__ if n in c.__dict__) in (DataFlow, RNGDataFlow) for n in owned)


def adopt_legacy_rng_source(cls: type) -> None:
    """Give ``cls`` the counted-replay state hooks described in the module, if it qualifies."""
    if not _wants_adoption(cls):
        return
    original: Callable[[Any], Any] = cls.__dict__["__iter__"]

    def __iter__(self: Any) -> Iterator[Any]:
        resume = self.__dict__.pop("_legacy_resume", None)
        rng = self._rng
        if resume is None:
            self._legacy_epochs = self.__dict__.get("_legacy_epochs", 0) + 1
            self._legacy_epoch_rng = None if rng is None else rng.bit_generator.state
            resume = 0
        gen = iter(original(self))
        if resume:
            for _ in islice(gen, resume):
                pass
        counter = iter(range(resume, sys.maxsize))
        self._legacy_counter = counter
        self._legacy_gen = weakref.ref(gen) if hasattr(gen, "gi_frame") else None
        return map(_first, zip(gen, counter))

    __iter__.__doc__ = original.__doc__
    __iter__.__wrapped__ = original  # type: ignore[attr-defined]
    cls.__iter__ = __iter__  # type: ignore[attr-defined]
    cls._get_state = _get_state  # type: ignore[attr-defined]
    cls._set_state = _set_state  # type: ignore[attr-defined]
    cls._iter_live = _iter_live  # type: ignore[attr-defined]


def _yielded(self: Any) -> int:
    counter = self.__dict__.get("_legacy_counter")
    if counter is None:
        return 0
    reduced = counter.__reduce__()
    return int(reduced[1][0].start) + (int(reduced[2]) if len(reduced) > 2 else 0)


def _iter_live(self: Any) -> bool:
    ref = self.__dict__.get("_legacy_gen")
    if ref is None:
        return self.__dict__.get("_legacy_counter") is not None
    gen = ref()
    return gen is not None and gen.gi_frame is not None


def _get_state(self: Any, live: bool) -> dict[str, Any]:
    state: dict[str, Any] = {
        "epochs": self.__dict__.get("_legacy_epochs", 0),
        "rng": self._save_rng(),
    }
    if live:
        epoch_rng = self.__dict__.get("_legacy_epoch_rng")
        state["epoch_rng"] = None if epoch_rng is None else plain_rng_state(epoch_rng)
        state["position"] = _yielded(self)
    return state


def _set_state(self: Any, state: Mapping[str, Any], live: bool) -> None:
    stage = type(self).__name__
    self._legacy_epochs = int_field(stage, state, "epochs")
    if not live:
        self.__dict__.pop("_legacy_resume", None)
        self._load_rng(field(stage, state, "rng", (dict, type(None))))
        return
    epoch_rng = field(stage, state, "epoch_rng", (dict, type(None)))
    self._load_rng(epoch_rng)
    self._legacy_epoch_rng = None
    if epoch_rng is not None:
        from ._state_fields import _from_plain  # the raw bit-generator dict, for the next save

        self._legacy_epoch_rng = _from_plain(epoch_rng)
    self._legacy_resume = int_field(stage, state, "position")
