"""Shared pytest fixtures and hooks for the whole suite.

- Every test starts and ends with fresh-entropy seeding: ``dataflow._seeding.set_seed(None)``
  is called after each test, so a test that calls ``set_seed`` cannot leak into the next.
- Tests marked ``gpu`` are skipped when the machine has no GPU (CI has none).
- The framework adapter tests (tests/adapters, and tests marked ``framework``) run last:
  importing JAX or TensorFlow starts
  their thread pools, and every test that forks worker processes after that would fork a
  multithreaded process (JAX then warns on each fork, and such forks can deadlock).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from functools import lru_cache

import pytest

from dataflow import _seeding as seeding


@pytest.fixture(autouse=True)
def reset_global_seed() -> Iterator[None]:
    """Undo any :func:`dataflow.set_seed` a test made."""
    yield
    seeding.set_seed(None)


@lru_cache(maxsize=1)
def _gpu_available() -> bool:
    nvidia_smi = shutil.which("nvidia-smi")
    if nvidia_smi is None:
        return False
    try:
        out = subprocess.run([nvidia_smi, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0 and "GPU" in out.stdout


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    framework_tests = [item for item in items if item.get_closest_marker("framework") is not None
                       or "tests/adapters/" in item.nodeid.replace("\\", "/")
                       or "tests/ray/" in item.nodeid.replace("\\", "/")]  # Ray starts threads too
    if framework_tests:
        others = [item for item in items if item not in framework_tests]
        items[:] = others + framework_tests
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if gpu_items and not _gpu_available():
        skip = pytest.mark.skip(reason="needs a GPU (marked 'gpu'); none found by nvidia-smi")
        for item in gpu_items:
            item.add_marker(skip)
