"""Argument checks shared by every stage: they raise with the stage name and the value."""

from __future__ import annotations

import numbers

__all__ = ["check_callable", "check_int", "check_timeout"]


def check_callable(stage: str, name: str, value: object, what: str = "callable") -> None:
    """A ``TypeError`` naming the stage, the argument and the value unless ``value`` is
    callable (``what``: how the message says what it must be, e.g. "a function returning a
    DataFlow")."""
    if not callable(value):
        raise TypeError(f"{stage}: {name} must be {what}, got {type(value).__name__} ({value!r:.80})")


def check_int(stage: str, name: str, value: object, minimum: int = 1, allow: tuple[int, ...] = ()) -> int:
    """``value`` as an ``int`` >= ``minimum`` (or one of ``allow``), else a ``ValueError``/``TypeError``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{stage}: {name} must be an int, got {type(value).__name__} ({value!r})")
    value = int(value)
    if value < minimum and value not in allow:
        extra = f" (or {', '.join(map(str, allow))})" if allow else ""
        raise ValueError(f"{stage}: {name} must be >= {minimum}{extra}, got {value}")
    return value


def check_timeout(stage: str, timeout: object) -> float | None:
    """``timeout`` as seconds (a positive number) or ``None``, else a ``ValueError``."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real) or not float(timeout) > 0:
        raise ValueError(f"{stage}: timeout must be a positive number of seconds or None, got {timeout!r}")
    return float(timeout)
