"""The tf.data adapters undo ``from_generator``'s frozen malloc thresholds
(dataflow/adapters/_malloc.py): a flow run by tf.data that allocates a large array per
datapoint reuses heap memory instead of faulting in fresh pages every time."""

from __future__ import annotations

import os
import resource
import statistics
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
tf = pytest.importorskip("tensorflow")

from dataflow.adapters import _malloc  # noqa: E402
from dataflow.adapters.tf import dataflow_to_dataset  # noqa: E402
from dataflow.base import DataFlow  # noqa: E402

needs_glibc = pytest.mark.skipif(
    _malloc._mallopt is None or not hasattr(resource, "RUSAGE_THREAD"),
    reason="glibc's mallopt and per-thread fault counts are Linux/glibc features",
)
MIB = 2**20


class FreshArrays(DataFlow):
    """Yields ``n`` freshly allocated and written 1 MiB arrays, counting the page faults
    each allocation took in the thread that iterates (tf.data's)."""

    def __init__(self, n: int, nested: bool = False) -> None:
        self.n = n
        self.nested = nested
        self.faults: list[int] = []

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[Any]:
        for i in range(self.n):
            before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
            a = np.empty(MIB // 4, np.float32)
            a.fill(i)  # touches every page
            self.faults.append(resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before)
            yield [a, ({"i": np.int64(i)},)] if self.nested else [a, np.int64(i)]


def _signature(nested: bool) -> Any:
    array = tf.TensorSpec((MIB // 4,), tf.float32)
    index = tf.TensorSpec((), tf.int64)
    return (array, ({"i": index},)) if nested else (array, index)


@needs_glibc
@pytest.mark.timeout(120)
@pytest.mark.parametrize("nested", [False, True], ids=["grouped", "one-by-one"])
def test_a_flow_under_tf_data_reuses_heap_memory_for_large_arrays(nested: bool) -> None:
    """256 pages per 1 MiB array: with TensorFlow's 128 KiB threshold each allocation faults
    all of them in anew (measured: 256 per array, every one); with the thresholds lifted,
    the heap's pages are reused (measured: none after the first 3-4 groups)."""
    flow = FreshArrays(160, nested)
    ds = dataflow_to_dataset(flow, output_signature=_signature(nested))
    got = [int(e[1][0]["i"] if nested else e[1]) for e in ds]
    assert got == list(range(flow.n))
    steady = flow.faults[flow.n // 2 :]  # the heap grows first: up to 3 groups of 16 alive at once
    assert statistics.median(steady) < 32, f"page faults per 1 MiB allocation: {flow.faults}"


def test_the_thresholds_set_are_glibcs_adaptive_ceiling(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[int, int]] = []
    monkeypatch.setattr(_malloc, "_mallopt", lambda param, value: calls.append((param, value)) or 1)
    monkeypatch.delenv("DATAFLOW_MALLOPT", raising=False)
    assert _malloc.lift_mmap_threshold() is True
    assert calls == [(-3, 32 * MIB), (-1, 64 * MIB)]  # M_MMAP_THRESHOLD, M_TRIM_THRESHOLD


def test_dataflow_mallopt_0_leaves_malloc_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[int, int]] = []
    monkeypatch.setattr(_malloc, "_mallopt", lambda param, value: calls.append((param, value)) or 1)
    monkeypatch.setenv("DATAFLOW_MALLOPT", "0")
    assert _malloc.lift_mmap_threshold() is False
    assert list(dataflow_to_dataset(FreshArrays(3), output_signature=_signature(False)).as_numpy_iterator())
    assert calls == []


def test_without_glibc_nothing_is_called(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_malloc, "_mallopt", None)
    monkeypatch.delenv("DATAFLOW_MALLOPT", raising=False)
    assert _malloc.lift_mmap_threshold() is False
