"""One local Ray for the Ray tests (started once, with 4 logical CPUs on any machine; the
multi-node test stops it and starts its own simulated cluster, and the next test gets a
local Ray again). Everything skips when Ray is not installed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

ray = pytest.importorskip("ray")

NUM_CPUS = 4  # logical: two actors of a map and two of a runner fit together


def start_local_ray() -> None:
    if not ray.is_initialized():
        ray.init(num_cpus=NUM_CPUS, include_dashboard=False, log_to_driver=False)


@pytest.fixture(scope="session")
def _ray_session() -> Iterator[None]:
    yield
    if ray.is_initialized():
        ray.shutdown()


@pytest.fixture(autouse=True)
def local_ray(_ray_session: None) -> Any:
    start_local_ray()
    return ray
