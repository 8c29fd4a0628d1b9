"""tensorpack 0.11's own serializer test (``dataflow/serialize_test.py``), written against
this package: same flow, same calls, same checks; nothing is skipped here."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dataflow import HDF5Serializer, LMDBSerializer, NumpySerializer, TFRecordSerializer
from dataflow.base import DataFlow


class SeededFakeDataFlow(DataFlow):
    """tensorpack's test flow: 32 datapoints ``[label, float64 image 28x28x3]`` made from a
    seed in ``reset_state``."""

    def __init__(self, seed: int = 42, size: int = 32) -> None:
        self.seed = seed
        self._size = size
        self.cache: list[list[Any]] = []

    def reset_state(self) -> None:
        rng = np.random.RandomState(self.seed)
        self.cache = []
        for _ in range(self._size):
            label = rng.randint(low=0, high=10)
            img = rng.randn(28, 28, 3)
            self.cache.append([label, img])

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[list[Any]]:
        yield from self.cache


def run_write_read_test(
    file: Path, serializer: Any, w_args: list, w_kwargs: dict, r_args: list, r_kwargs: dict
) -> None:
    ds_expected = SeededFakeDataFlow()
    serializer.save(ds_expected, str(file), *w_args, **w_kwargs)
    ds_actual = serializer.load(str(file), *r_args, **r_kwargs)

    ds_actual.reset_state()
    ds_expected.reset_state()

    n = 0
    for dp_expected, dp_actual in zip(ds_expected, ds_actual):
        assert dp_expected[0] == dp_actual[0]
        assert np.allclose(dp_expected[1], dp_actual[1])
        n += 1
    assert n == 32 == len(ds_actual)  # tensorpack's zip() would have passed on an empty load


def test_lmdb(tmp_path: Path) -> None:
    run_write_read_test(tmp_path / "test.lmdb", LMDBSerializer, [], {}, [], {"shuffle": False})


def test_lmdb_into_directory(tmp_path: Path) -> None:
    (tmp_path / "db").mkdir()  # tensorpack: a directory path means <dir>/data.mdb
    run_write_read_test(tmp_path / "db", LMDBSerializer, [], {}, [], {"shuffle": False})
    assert (tmp_path / "db" / "data.mdb").is_file()


def test_tfrecord(tmp_path: Path) -> None:
    run_write_read_test(tmp_path / "test.tfrecord", TFRecordSerializer, [], {}, [], {"size": 32})


def test_numpy(tmp_path: Path) -> None:
    run_write_read_test(tmp_path / "test.npz", NumpySerializer, [], {}, [], {"shuffle": False})


def test_hdf5(tmp_path: Path) -> None:
    args = [["label", "image"]]
    run_write_read_test(tmp_path / "test.h5", HDF5Serializer, args, {}, args, {"shuffle": False})


def test_tfrecord_size_must_match_the_index(tmp_path: Path) -> None:
    TFRecordSerializer.save(SeededFakeDataFlow(), str(tmp_path / "t.tfrecord"))
    df = TFRecordSerializer.load(str(tmp_path / "t.tfrecord"), size=31)
    with pytest.raises(ValueError, match="size=31 but the files' indexes say 32"):
        df.reset_state()
