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

Loading checks the whole state first, then gives each stage its part to keep; a stage is
handed its part (``_set_state(state, live)``) when its next epoch starts, so loading works the
same before and after ``reset_state()``, and a checkpoint taken before that epoch starts saves
the loaded part unchanged (a job preempted again right after resuming resumes the same).

A user stage that defines ``state_dict``/``load_state_dict`` itself owns its subtree: what it
returns is stored as ``{"stage": name, "custom": ...}`` and handed back as is.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ._errors import StateError, StateUnsupportedError
from ._state_fields import check_plain
from ._version import __version__


class Stage(Protocol):
    """What the walk uses of a flow: every :class:`~dataflow.base.DataFlow` is one (this module
    does not import the base class, which imports it)."""

    def _get_state(self, live: bool) -> dict[str, Any]: ...
    def _set_state(self, state: Mapping[str, Any], live: bool) -> None: ...
    def _state_upstreams(self) -> Sequence[Stage]: ...
    def _upstreams_live(self, live: bool) -> list[bool]: ...
    def _state_saved(self) -> None: ...
    def _iter_live(self) -> bool: ...
    def state_dict(self) -> Any: ...
    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...


__all__ = [
    "FORMAT",
    "PENDING",
    "UNSUPPORTED",
    "VERSION",
    "SaveOptions",
    "load_pipeline",
    "load_subtree",
    "save_options",
    "save_pipeline",
    "save_subtree",
    "checking_only",
    "state_mode",
]

FORMAT = "dataflow.state"
#: where a loaded stage keeps its state until its next epoch starts (``flow.__dict__[PENDING]``)
PENDING = "_pending_state"
VERSION = 1

HOOKS, STATELESS, CUSTOM, UNSUPPORTED = "hooks", "stateless", "custom", "unsupported"


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


def state_mode(cls: type, parent_mode: str) -> str:
    """How a class takes part, decided once when the class is created, from its own body:
    its own ``state_dict``/``load_state_dict`` (custom), its own hooks, ``stateless = True``,
    or nothing. A class that defines ``__iter__`` without saying how it resumes does not
    inherit its parent's hooks (a user subclass overriding the ``__iter__`` of one of our
    stages must not silently reuse that stage's state); one that defines neither inherits."""
    body = cls.__dict__
    if "state_dict" in body or "load_state_dict" in body:
        return CUSTOM
    if "_get_state" in body:
        return HOOKS
    if body.get("stateless") is True:
        return STATELESS
    if "__iter__" in body or body.get("stateless") is False:
        return UNSUPPORTED
    return parent_mode


def _mode(cls: type) -> str:
    return cls._state_mode  # type: ignore[attr-defined, no-any-return]


def _name(flow: object) -> str:
    return type(flow).__name__


def _kind(flow: object) -> str:
    """What a state must have been saved by: the class name, or a family name shared by
    stages with one state format (a map on threads, processes or Ray)."""
    return getattr(flow, "_state_kind", None) or type(flow).__name__


def _children(flow: Stage) -> list[Stage]:
    return [] if _mode(type(flow)) == CUSTOM else list(flow._state_upstreams())


def pipeline_shape(flow: Stage) -> str:
    """``BatchData(MapData(DataFromList))``: the stage names as saved in a state."""
    kids = _children(flow)
    return _name(flow) + (f"({', '.join(pipeline_shape(k) for k in kids)})" if kids else "")


def _unsupported(flow: Stage, path: str) -> StateUnsupportedError:
    where = "" if path == _name(flow) else f" (in the pipeline at {path})"
    if flow._state_upstreams():
        how = (
            "If it keeps nothing between datapoints (a per-datapoint transform of its upstream), "
            "declare `stateless = True` in the class body"
        )
    else:
        how = (
            "If it is a source whose epoch is a function of its attributes and self.rng only, "
            "declare `resumes_by_replay = True` in the class body (resuming runs the epoch again "
            "and skips what was consumed)"
        )
    return StateUnsupportedError(
        f"{_name(flow)}{where} cannot save its position: it defines its own __iter__ but no state. "
        f"{how}; otherwise define state_dict() and load_state_dict() on it (see the "
        f"'Checkpointing and sharding' docs page for the recipe)"
    )


def _save_node(flow: Stage, live: bool, path: str) -> dict[str, Any]:
    mode = _mode(type(flow))
    if mode == CUSTOM:
        custom = flow.state_dict()
        check_plain(path, custom, "the state returned by its state_dict()")
        return {"stage": _name(flow), "custom": custom}
    if mode == UNSUPPORTED:
        raise _unsupported(flow, path)
    pending = flow.__dict__.get(PENDING) if mode == HOOKS else None
    if pending is not None:  # loaded and not iterated since: still at the loaded position
        own, live = dict(pending[0]), pending[1]
        return _node(flow, own, live, flow._upstreams_live(live), path)
    try:
        own = flow._get_state(live) if mode == HOOKS else {}
        lives = flow._upstreams_live(live) if mode == HOOKS else [live] * len(_children(flow))
        return _node(flow, own, live, lives, path)
    finally:
        if mode == HOOKS:
            flow._state_saved()


def _node(flow: Stage, own: dict[str, Any], live: bool, lives: list[bool], path: str) -> dict[str, Any]:
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


def save_pipeline(root: Stage, options: SaveOptions) -> dict[str, Any]:
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


def _walk(flow: Stage, node: Any, path: str, saved_shape: str) -> Iterator[tuple[Stage, dict[str, Any]]]:
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
    if _mode(type(flow)) == CUSTOM:
        if "custom" not in node:
            raise StateError(f"{path}: the state is corrupted: no 'custom' state for {name}")
        yield flow, dict(node)
        return
    kids = _children(flow)
    ups = node.get("upstreams")
    if (
        not isinstance(ups, list)
        or not isinstance(node.get("live"), bool)
        or not isinstance(node.get("state"), Mapping)
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


def save_subtree(flow: Stage, live: bool) -> dict[str, Any]:
    """The state node of ``flow`` and its upstreams, for a stage that keeps another flow's
    state inside its own (a cache's source, an interleave's sub-flows)."""
    return _save_node(flow, live, _name(flow))


def load_subtree(flow: Stage, node: Any, where: str) -> None:
    """Load a node made by :func:`save_subtree` into ``flow`` (``where`` names it in errors)."""
    _apply(list(_walk(flow, node, where, where)))


_checking: contextvars.ContextVar[bool] = contextvars.ContextVar("dataflow_state_check", default=False)


def checking_only() -> bool:
    """Whether the ``_set_state`` running now only checks a state (on a stand-in of the
    stage, at load time): it must then change nothing shared with the stage, such as its RNG."""
    return _checking.get()


def _apply(plan: list[tuple[Stage, dict[str, Any]]]) -> None:
    # each stage's own checks of its part run now, so that a state that does not fit fails at
    # load_state_dict and not at the next epoch: _set_state runs on a stand-in that shares
    # the stage's attributes, and what it assigns is dropped
    token = _checking.set(True)
    try:
        for flow, node in plan:
            if _mode(type(flow)) == HOOKS:
                stand_in = object.__new__(type(flow))
                stand_in.__dict__.update(flow.__dict__)
                stand_in._set_state(node["state"], node["live"])
    finally:
        _checking.reset(token)
    for flow, node in plan:
        if "custom" in node:
            flow.load_state_dict(node["custom"])
        elif _mode(type(flow)) == HOOKS:
            # handed to the stage's _set_state when its next epoch starts (the __iter__
            # wrapper of DataFlow.__init_subclass__); until then a checkpoint saves it as is
            flow.__dict__[PENDING] = (dict(node["state"]), node["live"])


def load_pipeline(root: Stage, state: Any) -> None:
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
