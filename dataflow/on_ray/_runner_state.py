"""The checkpoint of a :class:`~dataflow.on_ray.RayRunner`: the state its hooks save (every
worker's flow state, taken right after the pulls already sent, the chunks received but not
yielded, the round-robin position) and load back, checked against the runner's
``num_workers`` and ``shard``. :mod:`.runner` calls these; this module imports it only for
type checking."""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._state_fields import decode_items, encode_items, field, int_field
from ..errors import StateError
from ..parallel import _messages as msg

if TYPE_CHECKING:
    from .runner import RayRunner

__all__ = ["get_state", "set_state", "snapshot"]


def snapshot(runner: RayRunner) -> list[Any]:
    """Every worker's flow state right after the pulls already sent (whose chunks are
    received into the queues meanwhile)."""
    workers = runner._workers
    asked = [(actor, actor.state.remote()) for actor in workers.actors]
    drain = functools.partial(_drain, runner)
    for w in range(runner.num_workers):
        drain(w)
    states = [workers.state(w, actor, ref, drain) for w, (actor, ref) in enumerate(asked)]
    for state in states:
        if isinstance(state, msg.ErrorRecord):
            raise msg.error_for(type(runner).__name__, state)
    for w in range(runner.num_workers):
        runner._top_up(w)
    return states


def _drain(runner: RayRunner, w: int) -> None:
    """Receive worker ``w``'s pulls in flight into its queue."""
    while runner._workers.inflight[w]:
        runner._receive(w)


def get_state(runner: RayRunner, live: bool) -> dict[str, Any]:
    stage = type(runner).__name__
    saved = runner._loaded or ([None] * runner.num_workers, [])
    states = snapshot(runner) if runner._workers.actors else saved[0]
    queues = [
        [
            {"items": encode_items(stage, items, "datapoints received") if items else None, "ended": e}
            for items, e in queue
        ]
        for queue in runner._queues
    ]
    current = list(runner._current)
    return {
        "num_workers": runner.num_workers,
        "shard": runner.sharded,
        "workers": states,
        "queues": queues,
        "current": encode_items(stage, current, "datapoints received") if current else None,
        "turn": runner._turn,
        "pass": runner._pass,
        "ended": list(runner._ended),
        "yielded": runner._yielded if live else 0,
    }


def set_state(runner: RayRunner, state: Mapping[str, Any], live: bool) -> None:
    stage = type(runner).__name__
    num = int_field(stage, state, "num_workers", 1)
    if num != runner.num_workers or bool(state.get("shard")) != runner.sharded:
        raise StateError(
            f"{stage}: the state was saved with num_workers={num}, shard={bool(state.get('shard'))}; "
            f"this runner has num_workers={runner.num_workers}, shard={runner.sharded}: each worker "
            f"resumes its own copy, so resume with the same ones"
        )
    workers = field(stage, state, "workers", list)
    queues, ended = field(stage, state, "queues", list), field(stage, state, "ended", list)
    if len(workers) != num or len(queues) != num or len(ended) != num:
        raise StateError(f"{stage}: the saved worker states are corrupted")
    runner._queues = [deque((_items(stage, c, "items"), bool(c["ended"])) for c in q) for q in queues]
    runner._current = deque(_items(stage, state, "current"))
    runner._turn, runner._pass = int_field(stage, state, "turn", 0), int_field(stage, state, "pass", 0)
    runner._ended = [bool(e) for e in ended]
    runner.__dict__.pop("_resume", None)
    if live:  # else the next __iter__ begins an epoch (a new pass, in shard mode)
        runner._resume = int_field(stage, state, "yielded", 0)
    was_running = bool(runner._workers.actors)
    runner._loaded = (workers, runner._ended)
    if was_running:  # loaded after reset_state: start the workers again from it
        runner.reset_state()


def _items(stage: str, state: Mapping[str, Any], key: str) -> list[Any]:
    return decode_items(stage, state, key) if state.get(key) is not None else []
