"""Importing Ray and connecting to it: the one place that does either.

``ray.init()`` belongs to the user (a real cluster: ``ray.init(address="auto")``). When a Ray
flow starts and Ray is not initialised, a local Ray is started with ``ray.init()`` and one
log line says so. Ray is imported here on first use, never when ``dataflow`` is imported.
"""

from __future__ import annotations

import logging
from types import ModuleType
from typing import Any

from ..adapters._require import require

__all__ = ["actor_options", "connected_ray", "ray_module"]

logger = logging.getLogger("dataflow")

#: what every actor of ours reserves unless ``ray_remote_args`` says otherwise: one CPU, so
#: Ray spreads actors over the nodes that have CPUs free (and never oversubscribes one)
DEFAULT_ACTOR_OPTIONS: dict[str, Any] = {"num_cpus": 1}


def ray_module(what: str) -> ModuleType:
    """``import ray``, or an ``ImportError`` naming the extra: ``pip install "dataflow-ml[ray]"``."""
    return require("ray", "ray", what)


def connected_ray(what: str) -> ModuleType:
    """Ray, initialised: the user's ``ray.init()``, else a local Ray started now."""
    ray = ray_module(what)
    if not ray.is_initialized():
        logger.warning(
            "%s: Ray is not initialised; starting a local Ray on this machine (call ray.init() "
            "yourself first to configure it or to join a cluster: ray.init(address='auto'))",
            what,
        )
        ray.init()
    return ray


def actor_options(stage: str, ray_remote_args: dict[str, Any] | None, **ours: Any) -> dict[str, Any]:
    """The ``.options(...)`` of our actors: the defaults, then ``ray_remote_args``, then the
    options the stage manages itself (which the user may not override)."""
    if ray_remote_args is None:
        ray_remote_args = {}
    if not isinstance(ray_remote_args, dict):
        raise TypeError(
            f"{stage}: ray_remote_args must be a dict of Ray actor options (num_cpus=, resources=, "
            f"scheduling_strategy=, ...), got {type(ray_remote_args).__name__} ({ray_remote_args!r})"
        )
    clash = sorted(set(ray_remote_args) & set(ours))
    if clash:
        raise ValueError(
            f"{stage}: ray_remote_args may not set {clash}: {stage} sets them itself "
            f"(use its own arguments instead, e.g. max_restarts=)"
        )
    return {**DEFAULT_ACTOR_OPTIONS, **ray_remote_args, **ours}
