"""Reading and replacing one component of a datapoint, with errors that name the stage."""

from __future__ import annotations

from typing import Any

from .._errors import ComponentError

__all__ = ["describe_kind", "get_component", "replace_component"]


def describe_kind(dp: object) -> str:
    """A short description of a datapoint's type for error messages."""
    if isinstance(dp, dict):
        return f"dict with keys {sorted(map(str, dp))}"
    if isinstance(dp, (list, tuple)):
        return f"{type(dp).__name__} of {len(dp)} components"
    return f"{type(dp).__name__} ({_short_repr(dp)})"


def _short_repr(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def component_error(stage: str, dp: object, index: Any) -> ComponentError:
    """The error for ``dp[index]`` failing inside ``stage``, saying why."""
    if isinstance(dp, dict):
        why = f"key {index!r} is not in the datapoint (keys: {sorted(map(str, dp))})"
    elif isinstance(dp, (list, tuple)):
        if isinstance(index, int):
            why = f"component index {index} is out of range for a datapoint of {len(dp)} components"
        else:
            why = f"component {index!r} cannot index a {type(dp).__name__}; use an int"
    else:
        why = (
            f"the datapoint must be a list/tuple or dict of components to take component "
            f"{index!r}, got {describe_kind(dp)}; wrap single values as [value]"
        )
    return ComponentError(f"{stage}: {why}")


def get_component(stage: str, dp: Any, index: Any) -> Any:
    """``dp[index]`` for a list/tuple/dict datapoint, else a :class:`ComponentError`."""
    if isinstance(dp, (list, tuple, dict)):
        try:
            return dp[index]
        except (IndexError, KeyError, TypeError):
            pass
    raise component_error(stage, dp, index)


def replace_component(stage: str, dp: Any, index: Any, value: Any) -> Any:
    """A copy of ``dp`` with ``dp[index]`` replaced by ``value`` (same container type)."""
    if isinstance(dp, dict):
        if index not in dp:
            raise component_error(stage, dp, index)
        new = dict(dp)
        new[index] = value
        return new
    elif isinstance(dp, (list, tuple)):
        out = list(dp)
    else:
        raise component_error(stage, dp, index)
    try:
        out[index] = value
    except (IndexError, TypeError):
        raise component_error(stage, dp, index) from None
    return tuple(out) if isinstance(dp, tuple) else out
