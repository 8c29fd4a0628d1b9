"""What :meth:`DataFlow.__init_subclass__ <dataflow.base.DataFlow>` does to every class
that derives from it: alias tensorpack's ``get_data``/``size``, and wrap ``__iter__`` so that
starting an epoch hands the stage the state it was loaded with and remembers the epoch."""

from __future__ import annotations

import functools
import inspect
import weakref
from types import GeneratorType
from typing import Any

from ._deprecation import warn_once
from ._state import PENDING

__all__ = ["EpochRef", "adopt_legacy_protocol", "start_epochs_through_base"]


class EpochRef:
    """A weak reference to a flow's current epoch generator that pickles as a dead one, so
    a flow that was iterated can still be sent to workers (a generator never travels)."""

    __slots__ = ("_ref",)

    def __init__(self, gen: GeneratorType[Any] | None) -> None:
        self._ref = None if gen is None else weakref.ref(gen)

    def __call__(self) -> GeneratorType[Any] | None:
        return None if self._ref is None else self._ref()

    def __reduce__(self) -> tuple[Any, ...]:
        return EpochRef, (None,)


def start_epochs_through_base(cls: type) -> None:
    """Wrap ``cls.__iter__`` (if the class body defines it) so that each epoch starts the same
    way for every stage: a state loaded since the last epoch is handed to ``_set_state``
    (once, right before the stage's own ``__iter__`` runs), and the epoch's generator is
    remembered weakly, which is how ``state_dict()`` tells an epoch in progress from a
    finished one."""
    it = cls.__dict__.get("__iter__")
    if it is None or getattr(it, "_starts_epochs", False):
        return

    @functools.wraps(it)
    def __iter__(self: Any) -> Any:
        pending = self.__dict__.pop(PENDING, None)
        if pending is not None:
            self._set_state(*pending)
        epoch = it(self)
        if isinstance(epoch, GeneratorType):
            self.__dict__["_epoch_ref"] = EpochRef(epoch)
        return epoch

    __iter__._starts_epochs = True  # type: ignore[attr-defined]
    cls.__iter__ = __iter__  # type: ignore[attr-defined]


def adopt_legacy_protocol(cls: type) -> None:
    """tensorpack's old protocol: a class that defines ``get_data()``/``size()`` but not
    ``__iter__``/``__len__`` gets them as aliases (like tensorpack's metaclass did), with one
    :class:`DeprecationWarning` per class, at its definition."""
    ns = cls.__dict__
    for new, old in (("__iter__", "get_data"), ("__len__", "size")):
        if new not in ns and inspect.isfunction(ns.get(old)):
            setattr(cls, new, ns[old])
            warn_once(
                f"{cls.__module__}.{cls.__qualname__}.{old}",
                f"{cls.__name__} defines {old}(), tensorpack's old name of {new}(); it is used "
                f"as {new} for now, but rename it to {new}",
                stacklevel=4,
            )
