"""tensorpack's old names of the parallel flows, kept so old code runs: each is a subclass of
the new class that warns once (:class:`DeprecationWarning`) when first built, naming the new
class. Same arguments, same behaviour, same checkpoints as the class it points to."""

from __future__ import annotations

import functools
from typing import Any, TypeVar

from .._deprecation import warn_once
from ._map_and_batch import MultiProcessMapAndBatchDataZMQ
from ._runners import MultiProcessRunner, MultiProcessRunnerZMQ
from ._threads import MultiThreadRunner

__all__ = [
    "MultiProcessMapAndBatchData",
    "MultiProcessPrefetchData",
    "MultiThreadPrefetchData",
    "PrefetchData",
    "PrefetchDataZMQ",
]

_C = TypeVar("_C", bound=type)


def _deprecated_alias(cls: _C) -> _C:
    """Make ``cls`` (a subclass named after an old name) warn once at construction, pointing
    to its base class, and show the base class's signature."""
    new: Any = cls.__mro__[1]
    init = new.__init__

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        warn_once(
            f"alias.{cls.__name__}",
            f"{cls.__name__} is tensorpack's old name of {new.__name__}; use {new.__name__} (same arguments)",
        )
        init(self, *args, **kwargs)

    cls.__init__ = __init__  # type: ignore[misc]
    # its states load into the new class, and the new class's into it
    cls._state_kind = new._state_kind or new.__name__  # type: ignore[attr-defined]
    return cls


@_deprecated_alias
class PrefetchData(MultiProcessRunner):
    """Deprecated: tensorpack's old name of :class:`~dataflow.MultiProcessRunner`."""


@_deprecated_alias
class MultiProcessPrefetchData(MultiProcessRunner):
    """Deprecated: tensorpack's old name of :class:`~dataflow.MultiProcessRunner`."""


@_deprecated_alias
class PrefetchDataZMQ(MultiProcessRunnerZMQ):
    """Deprecated: tensorpack's old name of :class:`~dataflow.MultiProcessRunnerZMQ`."""


@_deprecated_alias
class MultiThreadPrefetchData(MultiThreadRunner):
    """Deprecated: tensorpack's old name of :class:`~dataflow.MultiThreadRunner`."""


@_deprecated_alias
class MultiProcessMapAndBatchData(MultiProcessMapAndBatchDataZMQ):
    """Deprecated: tensorpack's old name of :class:`~dataflow.MultiProcessMapAndBatchDataZMQ`."""
