"""``repr(flow)``: the pipeline as a tree of stages with their key parameters.

Example (``print(DataFromList(rows).map(parse).batch(64))``)::

    BatchData(batch_size=64)
    └─ MapData(func=parse)
       └─ DataFromList(lst=<list of 1000>)

A stage shows the arguments of its ``__init__`` that it keeps as an attribute of the same
name (or with a leading underscore) and that differ from their default, plus the required
ones and its degree of parallelism (``num_proc``/``num_thread``); its upstreams
(:meth:`~dataflow.DataFlow._state_upstreams`, or ``ds`` for runners that run their flow in
workers) hang below it. A class changes what it shows by overriding
``_repr_args()``. Building a repr never raises and never touches the data.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sized
from typing import Any

import numpy as np

__all__ = ["default_repr_args", "render"]

_MAX_CHARS = 40


def _is_flow(value: object) -> bool:
    """Whether ``value`` is a DataFlow (told by its protocol: this module does not import
    the base class, whose ``__repr__`` calls it)."""
    return hasattr(type(value), "_state_upstreams") and hasattr(type(value), "reset_state")

#: Shown even at their default: how parallel a stage is.
_ALWAYS = frozenset({"num_proc", "num_thread"})


def default_repr_args(flow: Any) -> dict[str, Any]:
    """The ``__init__`` arguments ``flow`` keeps (as ``name`` or ``_name``), required ones and
    those that differ from their default; upstream flows are left out (they are children)."""
    try:
        params = inspect.signature(type(flow).__init__).parameters
    except (TypeError, ValueError):
        return {}
    attrs = vars(flow)
    out: dict[str, Any] = {}
    for name, p in list(params.items())[1:]:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        tail = name.rsplit("_", 1)[-1]  # lmdb_path kept as _path
        key = next((k for k in (name, f"_{name}", tail, f"_{tail}") if k in attrs), None)
        if key is None:
            continue
        value = attrs[key]
        if _is_flow(value) or (
            isinstance(value, (list, tuple)) and value and all(_is_flow(v) for v in value)
        ):
            continue
        if p.default is not p.empty and _same(value, p.default) and name not in _ALWAYS:
            continue
        out[name] = value
    return out


def _same(value: Any, default: Any) -> bool:
    try:
        return type(value) is type(default) and bool(value == default)
    except Exception:  # arrays and other objects without a plain ==
        return False


def short(value: Any) -> str:
    """A one-line description of a parameter value, at most about 40 characters."""
    if isinstance(value, np.ndarray):
        return f"<ndarray {value.dtype} {tuple(value.shape)}>"
    if value is None or isinstance(value, (bool, int, float, np.generic)):
        return repr(value)
    if isinstance(value, (str, bytes)):
        text = repr(value)
        return text if len(text) <= _MAX_CHARS else text[: _MAX_CHARS - 4] + "...'"
    if callable(value) and not isinstance(value, type):
        func = getattr(value, "func", value)  # functools.partial
        name = getattr(func, "__qualname__", None) or type(func).__name__
        return f"partial({name})" if func is not value else name
    if isinstance(value, type):
        return value.__name__
    if isinstance(value, (list, tuple, dict, set, frozenset, range)) or (
        isinstance(value, Sized) and not isinstance(value, Mapping) and hasattr(value, "__getitem__")
    ):
        try:
            n = len(value)
        except Exception:
            n = -1
        if 0 <= n <= 8 and isinstance(value, (list, tuple, dict, set, frozenset, range)):
            text = repr(value)  # small: cheap to build, and more telling than a count
            if len(text) <= _MAX_CHARS and " object at 0x" not in text:
                return text
        if n >= 0:
            return f"<{type(value).__name__} of {n}>"
    text = repr(value)
    if len(text) <= _MAX_CHARS and "\n" not in text and " object at 0x" not in text:
        return text
    return f"<{type(value).__name__}>"


def _children(flow: Any) -> list[Any]:
    try:
        ups = list(flow._state_upstreams())
    except Exception:
        ups = []
    if not ups:  # a runner: its flow runs in the workers
        ds = vars(flow).get("ds")
        if _is_flow(ds):
            ups = [ds]
    return ups


def _line(flow: Any) -> str:
    try:
        args = flow._repr_args()
        text = ", ".join(f"{k}={short(v)}" for k, v in args.items())
    except Exception:
        text = "..."
    return f"{type(flow).__name__}({text})"


def render(flow: Any) -> str:
    """The tree of ``flow`` and its upstreams, one stage a line (a shared stage once)."""
    lines: list[str] = []
    seen: set[int] = set()

    def walk(node: Any, lead: str, branch: str) -> None:
        line = _line(node)
        if id(node) in seen:
            lines.append(f"{lead}{branch}{line} (shown above)")
            return
        seen.add(id(node))
        lines.append(f"{lead}{branch}{line}")
        kids = _children(node)
        lead = lead + ("" if not branch else ("   " if branch == "└─ " else "│  "))
        for i, kid in enumerate(kids):
            walk(kid, lead, "└─ " if i == len(kids) - 1 else "├─ ")

    walk(flow, "", "")
    return "\n".join(lines)
