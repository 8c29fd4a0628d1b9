"""Module-level map functions and flows for the Ray tests (Ray workers import them by name)."""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np


class MapFailed(ValueError):
    """The user's own exception type, to check it crosses Ray intact."""


def double(dp: list[Any]) -> list[Any]:
    return [dp[0] * 2]


def double_keep_rest(dp: list[Any]) -> list[Any]:
    return [dp[0] * 2, *dp[1:]]


def drop_odd(dp: list[Any]) -> list[Any] | None:
    return None if dp[0] % 2 else [dp[0]]


def fail_on_7(dp: list[Any]) -> list[Any]:
    if dp[0] == 7:
        raise MapFailed(f"bad item {dp[0]}")
    return dp


def slow_double(dp: list[Any]) -> list[Any]:
    time.sleep(0.01)
    return [dp[0] * 2]


def with_pid(dp: list[Any]) -> list[Any]:
    return [dp[0], os.getpid()]


def big_array(dp: list[Any]) -> list[Any]:
    return [dp[0], np.full((256, 1024), dp[0], dtype=np.float32)]  # 1 MiB: through the object store


def noisy(dp: list[Any], rng: np.random.Generator) -> list[Any]:
    return [dp[0], float(rng.random())]


def build_counter_flow() -> Any:
    """A builder run on the worker: 20 numbers, then a per-worker random value."""
    from dataflow import DataFromList

    return DataFromList([[i] for i in range(20)], shuffle=False)


def build_random_flow() -> Any:
    from dataflow import DataFromList

    return DataFromList([[i] for i in range(12)], shuffle=True)


def with_node(dp: list[Any]) -> list[Any]:
    """The datapoint doubled, and the Ray node that mapped it."""
    import ray

    return [dp[0] * 2, ray.get_runtime_context().get_node_id()]


def build_growing_flow(counter_path: str) -> Any:
    """A builder whose flow is not deterministic: build *k* (counted in a file) gives
    ``5 * k`` numbers per pass."""
    from dataflow import DataFromList

    try:
        with open(counter_path) as f:
            builds = int(f.read()) + 1
    except FileNotFoundError:
        builds = 1
    with open(counter_path, "w") as f:
        f.write(str(builds))
    return DataFromList([[i] for i in range(5 * builds)], shuffle=False)


def same_pipeline(backend: str) -> Any:
    """One pipeline for every backend: a seeded shuffle read by the consumer, then a map
    with per-datapoint randomness in 2 workers (processes or Ray actors)."""
    from dataflow import DataFromList

    src = DataFromList([[i] for i in range(40)], shuffle=True, seed=5)
    return src.parallel_map(noisy, num_proc=2, backend=backend, item_rng=True, seed=9, chunk=3, timeout=120)


def two_epochs(df: Any) -> list[list[Any]]:
    df.reset_state()
    try:
        return [list(df) for _ in range(2)]
    finally:
        df.close()
