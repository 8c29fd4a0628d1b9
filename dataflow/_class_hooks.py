"""What :meth:`DataFlow.__init_subclass__ <dataflow.base.DataFlow>` does to every class
that derives from it: alias tensorpack's ``get_data``/``size``, and make starting an epoch
drop the state the stage was loaded with."""

from __future__ import annotations

import functools
import inspect
from typing import Any

from ._deprecation import warn_once

__all__ = ["adopt_legacy_protocol", "forget_loaded_state", "forget_loaded_state_on_iter"]


def forget_loaded_state(flow: Any) -> None:
    """What starting an epoch does first: drop the state ``flow`` was loaded with."""
    d = getattr(flow, "__dict__", None)
    if d is not None:
        d.pop("_loaded_node", None)


def forget_loaded_state_on_iter(cls: type) -> None:
    """Wrap ``cls.__iter__`` so that starting an epoch drops the state this stage was loaded
    with (kept by :func:`dataflow._state._apply` so that ``state_dict()`` before iterating
    returns the loaded position, not whatever a freshly reset stage would report)."""
    it = cls.__dict__.get("__iter__")
    if it is None or getattr(it, "_forgets_loaded_state", False):
        return

    @functools.wraps(it)
    def __iter__(self: Any) -> Any:
        forget_loaded_state(self)
        return it(self)

    __iter__._forgets_loaded_state = True  # type: ignore[attr-defined]
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
