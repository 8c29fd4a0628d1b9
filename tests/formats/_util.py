"""Data, flows and comparisons shared by the tests of ``dataflow.formats``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from dataflow.base import DataFlow

DTYPES = ("uint8", "int16", "int32", "int64", "float16", "float32", "float64", "bool", "complex64")


def rich_datapoints(n: int = 40) -> list[Any]:
    """Datapoints with arrays of several dtypes and shapes, scalars, str, bytes and nested
    lists/tuples/dicts (one in five is a dict datapoint, one in seven a tuple)."""
    rng = np.random.default_rng(1234)
    out: list[Any] = []
    for i in range(n):
        dtype = np.dtype(DTYPES[i % len(DTYPES)])
        arr = (rng.random((i % 4 + 1, 3)) * 100).astype(dtype)
        comps = [
            i,
            arr,
            np.zeros((0, 2), np.float32),
            float(i) / 3,
            f"text {i} ✓",
            bytes([i % 256, 0, 255]),
            None,
            (i, "tuple", (1.5, [2, {"k": b"v"}])),
            {"nested": [1, 2, (3, 4)], 7: np.arange(i % 3, dtype=np.int8), "flag": i % 2 == 0},
        ]
        if i % 5 == 0:
            out.append({f"c{j}": c for j, c in enumerate(comps)})
        elif i % 7 == 0:
            out.append(tuple(comps))
        else:
            out.append(comps)
    return out


def assert_same(expected: Any, actual: Any, where: str = "dp") -> None:
    """Deep equality that also checks container types (tuples stay tuples) and dtypes."""
    assert type(actual) is type(expected), f"{where}: {type(actual)} != {type(expected)}"
    if isinstance(expected, np.ndarray):
        assert actual.dtype == expected.dtype and actual.shape == expected.shape, where
        np.testing.assert_array_equal(actual, expected, err_msg=where)
    elif isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), where
        for j, (e, a) in enumerate(zip(expected, actual)):
            assert_same(e, a, f"{where}[{j}]")
    elif isinstance(expected, dict):
        assert list(actual) == list(expected), where
        for k in expected:
            assert_same(expected[k], actual[k], f"{where}[{k!r}]")
    else:
        assert actual == expected, f"{where}: {actual!r} != {expected!r}"


def first_int(dp: Any) -> int:
    return int(dp["c0"] if isinstance(dp, dict) else dp[0])


class FailingFlow(DataFlow):
    """Yields ``[i, array]`` and raises ``exc`` after ``fail_after`` datapoints; ``len`` is
    ``size``."""

    def __init__(self, fail_after: int, exc: BaseException, size: int = 100) -> None:
        self.fail_after, self.exc, self.size = fail_after, exc, size

    def __len__(self) -> int:
        return self.size

    def __iter__(self) -> Iterator[Any]:
        for i in range(self.size):
            if i == self.fail_after:
                raise self.exc
            yield [i, np.full((8, 8), i, np.int32)]


def leftovers(directory: os.PathLike | str) -> list[str]:
    """Files in ``directory`` (temporary files of a save start with a dot)."""
    return sorted(os.listdir(directory))
