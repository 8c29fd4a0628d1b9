"""Resume by replay: the documented opt-in for sources written by users (tensorpack-style
random sources among them) whose epoch cannot seek but can be run again.

A class opts in with ``resumes_by_replay = True`` in its body. Its epoch must be a function
of its attributes and of ``self.rng`` (for an :class:`~dataflow.RNGDataFlow`) only: the state
is then the epoch count, the RNG state at the epoch's start and the number of datapoints
yielded, and resuming rewinds the RNG, runs ``__iter__`` again and skips (generates without
delivering) the datapoints already consumed. It costs one generator step per datapoint.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from itertools import islice
from typing import Any

from ._state_fields import field, from_plain, int_field, plain_rng_state

__all__ = ["adopt_replay"]


def adopt_replay(cls: type) -> None:
    """Give ``cls`` the replay state hooks described in the module if its body opts in."""
    if cls.__dict__.get("resumes_by_replay") is not True or "__iter__" not in cls.__dict__:
        return
    original: Callable[[Any], Any] = cls.__dict__["__iter__"]

    def __iter__(self: Any) -> Iterator[Any]:
        skip = self.__dict__.pop("_replay_skip", None)
        rng = getattr(self, "_rng", None)
        if skip is None:
            self._replay_epochs = self.__dict__.get("_replay_epochs", 0) + 1
            self._replay_epoch_rng = None if rng is None else rng.bit_generator.state
            skip = 0
        self._replay_yielded = skip
        return _counted(self, iter(original(self)), skip)

    __iter__.__doc__ = original.__doc__
    __iter__.__wrapped__ = original  # type: ignore[attr-defined]
    cls.__iter__ = __iter__  # type: ignore[attr-defined]
    cls._get_state = _get_state  # type: ignore[attr-defined]
    cls._set_state = _set_state  # type: ignore[attr-defined]


def _counted(flow: Any, gen: Iterator[Any], skip: int) -> Iterator[Any]:
    for _ in islice(gen, skip):
        pass
    for dp in gen:
        flow._replay_yielded += 1
        yield dp


def _get_state(self: Any, live: bool) -> dict[str, Any]:
    save_rng = getattr(self, "_save_rng", None)
    state: dict[str, Any] = {
        "epochs": self.__dict__.get("_replay_epochs", 0),
        "rng": None if save_rng is None else save_rng(),
    }
    if live:
        epoch_rng = self.__dict__.get("_replay_epoch_rng")
        state["epoch_rng"] = None if epoch_rng is None else plain_rng_state(epoch_rng)
        state["position"] = self.__dict__.get("_replay_yielded", 0)
    return state


def _set_state(self: Any, state: Mapping[str, Any], live: bool) -> None:
    stage = type(self).__name__
    self._replay_epochs = int_field(stage, state, "epochs")
    rng_state = field(stage, state, "epoch_rng" if live else "rng", (dict, type(None)))
    if rng_state is not None:
        self._load_rng(rng_state)
    if live:
        self._replay_epoch_rng = None if rng_state is None else from_plain(rng_state)
        self._replay_skip = int_field(stage, state, "position")
