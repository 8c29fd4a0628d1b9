"""Saving and loading a whole pipeline's state: the envelope, the walk over stages, the checks.

A pipeline's state (what :meth:`DataFlow.state_dict` returns) is::

    {"format": "dataflow.state", "version": 1, "writer": "dataflow 0.2.0",
     "pipeline": "BatchData(MapData(DataFromList))",
     "root": node}

    node = {"stage": "BatchData", "live": True, "state": {...}, "upstreams": [node, ...]}

``state`` is the stage's own part (from its ``_get_state``); ``upstreams`` nests the states of
the flows it reads (``_state_upstreams``). ``live`` says whether the stage had an epoch in
progress, as seen by the stage *reading* it: the root's own iterator decides for the root, and
every stage decides for its upstreams (``_upstreams_live``), because only the reader knows
whether it will go on with its iterator over them or start a fresh one. A stage loaded with
``live=False`` starts a fresh epoch at its next ``__iter__``.

A user stage that defines ``state_dict``/``load_state_dict`` itself owns its subtree: what it
returns is stored as ``{"stage": name, "custom": ...}`` and handed back as is.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._state_fields import check_plain
from ._version import __version__
from .errors import StateError, StateUnsupportedError

if TYPE_CHECKING:
    from .base import DataFlow

__all__ = [
    "FORMAT",
    "VERSION",
    "SaveOptions",
    "load_pipeline",
    "load_subtree",
    "pipeline_shape",
    "save_options",
    "save_pipeline",
    "save_subtree",
]

FORMAT = "dataflow.state"
VERSION = 1

_HOOKS, _STATELESS, _CUSTOM, _UNSUPPORTED = "hooks", "stateless", "custom", "unsupported"


@dataclass(frozen=True)
class SaveOptions:
    """Options of one ``state_dict()`` call, readable by stages while they save."""

    allow_fast_forward: bool = False
    #: Whether the root's epoch counts as in progress; ``None``: ask the root. An adapter
    #: whose caller owns the epoch boundaries (torchdata's loader) says ``True``: continue
    #: the last iterator, even an exhausted one.
    root_live: bool | None = None


_DEFAULT_OPTIONS = SaveOptions()
_options: contextvars.ContextVar[SaveOptions] = contextvars.ContextVar("dataflow_save")


def save_options() -> SaveOptions:
    """The options of the ``state_dict()`` call in progress (defaults outside one)."""
    return _options.get(_DEFAULT_OPTIONS)


def _owner(cls: type, name: str) -> type | None:
    return next((c for c in cls.__mro__ if name in c.__dict__), None)


_MODES: dict[type, str] = {}


def _mode(cls: type) -> str:
    """How a class takes part: its own hooks, stateless, its own state_dict, or not at all.

    Hooks (or ``stateless = True``) count only if defined by the class that defines
    ``__iter__`` or a subclass of it: a user subclass that overrides ``__iter__`` of one of our
    stages must not silently reuse that stage's hooks."""
    mode = _MODES.get(cls)
    if mode is None:
        mode = _MODES[cls] = _find_mode(cls)
    return mode


def _find_mode(cls: type) -> str:
    from .base import DataFlow

    sd, lsd = _owner(cls, "state_dict"), _owner(cls, "load_state_dict")
    if (sd is not None and sd is not DataFlow) or (lsd is not None and lsd is not DataFlow):
        return _CUSTOM
    iter_owner = _owner(cls, "__iter__") or DataFlow
    hooks = _owner(cls, "_get_state")
    if hooks is not None and hooks is not DataFlow and issubclass(hooks, iter_owner):
        return _HOOKS
    flag = _owner(cls, "stateless")
    if flag is not None and flag.__dict__["stateless"] is True and issubclass(flag, iter_owner):
        return _STATELESS
    return _UNSUPPORTED


def _name(flow: object) -> str:
    return type(flow).__name__


def _kind(flow: object) -> str:
    """What a state must have been saved by: the class name, or a family name shared by
    stages with one state format (a map on threads, processes or Ray)."""
    return getattr(flow, "_state_kind", None) or type(flow).__name__


def _children(flow: DataFlow) -> list[DataFlow]:
    return [] if _mode(type(flow)) == _CUSTOM else list(flow._state_upstreams())


def pipeline_shape(flow: DataFlow) -> str:
    """``BatchData(MapData(DataFromList))``: the stage names as saved in a state."""
    kids = _children(flow)
    return _name(flow) + (f"({', '.join(pipeline_shape(k) for k in kids)})" if kids else "")


def _unsupported(flow: DataFlow, path: str) -> StateUnsupportedError:
    where = "" if path == _name(flow) else f" (in the pipeline at {path})"
    return StateUnsupportedError(
        f"{_name(flow)}{where} cannot save its position: it defines its own __iter__ but no state. If it "
        f"keeps nothing between datapoints (a per-datapoint transform of its upstream), declare "
        f"`stateless = True` in the class body; otherwise define state_dict() and "
        f"load_state_dict() on it (see the 'Checkpointing and sharding' docs page for the recipe)"
    )


def _save_node(flow: DataFlow, live: bool, path: str) -> dict[str, Any]:
    mode = _mode(type(flow))
    if mode == _CUSTOM:
        custom = flow.state_dict()
        check_plain(path, custom, "the state returned by its state_dict()")
        return {"stage": _name(flow), "custom": custom}
    if mode == _UNSUPPORTED:
        raise _unsupported(flow, path)
    loaded = flow.__dict__.get("_loaded_node") if mode == _HOOKS else None
    if loaded is not None:  # loaded and not iterated since: still at the loaded position
        own, live = dict(loaded[0]), loaded[1]
        return _node(flow, own, live, flow._upstreams_live(live), path)
    try:
        own = flow._get_state(live) if mode == _HOOKS else {}
        lives = flow._upstreams_live(live) if mode == _HOOKS else [live] * len(_children(flow))
        return _node(flow, own, live, lives, path)
    finally:
        if mode == _HOOKS:
            flow._state_saved()


def _node(flow: DataFlow, own: dict[str, Any], live: bool, lives: list[bool], path: str) -> dict[str, Any]:
    return {
        "stage": _name(flow),
        "kind": _kind(flow),
        "live": bool(live),
        "state": own,
        "upstreams": [
            _save_node(kid, bool(kid_live), f"{path} > {_name(kid)}")
            for kid, kid_live in zip(_children(flow), lives, strict=True)
        ],
    }


def save_pipeline(root: DataFlow, options: SaveOptions) -> dict[str, Any]:
    """The envelope for ``root.state_dict()``."""
    token = _options.set(options)
    try:
        live = root._iter_live() if options.root_live is None else options.root_live
        node = _save_node(root, bool(live), _name(root))
    finally:
        _options.reset(token)
    check_plain(_name(root), node)  # every stage's part: plain data only, whoever wrote it
    return {
        "format": FORMAT,
        "version": VERSION,
        "writer": f"dataflow {__version__}",
        "pipeline": pipeline_shape(root),
        "root": node,
    }


def _walk(
    flow: DataFlow, node: Any, path: str, saved_shape: str
) -> Iterator[tuple[DataFlow, dict[str, Any]]]:
    """Check that ``node`` fits ``flow`` (recursively) before anything is changed."""
    name = _name(flow)
    if not isinstance(node, Mapping) or not isinstance(node.get("stage"), str):
        raise StateError(f"{path}: the state is corrupted: expected a stage entry, got {node!r:.80}")
    if node.get("kind", node["stage"]) != _kind(flow):
        raise StateError(
            f"load_state_dict: the state was saved from the pipeline {saved_shape}, which differs "
            f"from this one at {path}: the state has {node['stage']} where this pipeline has {name}. "
            f"Build the same pipeline (same stages in the same order) to resume"
        )
    if _mode(type(flow)) == _CUSTOM:
        if "custom" not in node:
            raise StateError(f"{path}: the state is corrupted: no 'custom' state for {name}")
        yield flow, dict(node)
        return
    kids = _children(flow)
    ups = node.get("upstreams")
    if not isinstance(ups, list) or not isinstance(node.get("live"), bool) or not isinstance(
        node.get("state"), Mapping
    ):
        raise StateError(
            f"{path}: the state is corrupted: fields 'live', 'state', 'upstreams' missing or malformed"
        )
    if len(ups) != len(kids):
        raise StateError(
            f"load_state_dict: the state was saved from the pipeline {saved_shape}: at {path} it has "
            f"{len(ups)} upstream(s) where this pipeline has {len(kids)}"
        )
    yield flow, dict(node)
    for i, (kid, sub) in enumerate(zip(kids, ups)):
        label = _name(kid) if len(kids) == 1 else f"[{i}] {_name(kid)}"
        yield from _walk(kid, sub, f"{path} > {label}", saved_shape)


def save_subtree(flow: DataFlow, live: bool) -> dict[str, Any]:
    """The state node of ``flow`` and its upstreams, for a stage that keeps another flow's
    state inside its own (a cache's source, an interleave's sub-flows)."""
    return _save_node(flow, live, _name(flow))


def load_subtree(flow: DataFlow, node: Any, where: str) -> None:
    """Load a node made by :func:`save_subtree` into ``flow`` (``where`` names it in errors)."""
    _apply(list(_walk(flow, node, where, where)))


def _apply(plan: list[tuple[DataFlow, dict[str, Any]]]) -> None:
    for flow, node in plan:
        if "custom" in node:
            flow.load_state_dict(node["custom"])
        elif _mode(type(flow)) == _HOOKS:
            flow._set_state(node["state"], node["live"])
            # saved as is until this stage iterates again (DataFlow.__init_subclass__ wraps
            # __iter__ to forget it): a checkpoint right after resuming keeps the position
            flow.__dict__["_loaded_node"] = (dict(node["state"]), node["live"])


def load_pipeline(root: DataFlow, state: Any) -> None:
    """Load an envelope made by :func:`save_pipeline` into ``root``'s pipeline."""
    if not isinstance(state, Mapping) or state.get("format") != FORMAT:
        hint = ""
        if isinstance(state, Mapping) and "root" not in state:
            hint = " (did you pass the state of one stage, or a state_dict of something else?)"
        raise StateError(f"load_state_dict: this is not a dataflow state: no format {FORMAT!r}{hint}")
    version = state.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise StateError(f"load_state_dict: the state is corrupted: bad version {version!r}")
    if version > VERSION:
        raise StateError(
            f"load_state_dict: the state was written by {state.get('writer', 'a newer dataflow')} in "
            f"state format {version}; this dataflow reads up to format {VERSION}: upgrade dataflow"
        )
    shape = str(state.get("pipeline", "?"))
    _apply(list(_walk(root, state.get("root"), _name(root), shape)))  # all checks first
