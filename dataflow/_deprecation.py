"""One :class:`DeprecationWarning` per deprecated spelling, not one per call."""

from __future__ import annotations

import threading
import warnings

__all__ = ["warn_once"]

_lock = threading.Lock()
_warned: set[str] = set()


def warn_once(key: str, message: str, stacklevel: int = 3) -> None:
    """Warn ``message`` as a :class:`DeprecationWarning` the first time ``key`` is seen in this
    process; later calls with the same ``key`` are free and silent. ``stacklevel`` counts from
    the caller of this function (3: the caller's caller, the user's line)."""
    with _lock:
        if key in _warned:
            return
        _warned.add(key)
    warnings.warn(message, DeprecationWarning, stacklevel=stacklevel)
