"""Every serializer gives back exactly what it saved: values, dtypes, container types."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dataflow import (
    DataFromGenerator,
    DataFromList,
    LengthUnknownError,
    LMDBSerializer,
    NumpySerializer,
    TFRecordSerializer,
)

from ._util import assert_same, first_int, rich_datapoints

FORMATS = ("lmdb", "tfrecord", "npz")


def save(fmt: str, df: Any, path: Path, **kwargs: Any) -> None:
    {"lmdb": LMDBSerializer, "tfrecord": TFRecordSerializer, "npz": NumpySerializer}[fmt].save(
        df, str(path), **kwargs
    )


def load(fmt: str, path: Path, shuffle: bool, seed: int | None = None) -> Any:
    if fmt == "lmdb":
        return LMDBSerializer.load(path, shuffle=shuffle, seed=seed)
    if fmt == "npz":
        return NumpySerializer.load(path, shuffle=shuffle, seed=seed)
    return TFRecordSerializer.load(path)  # TFRecord has no random access: file order


@pytest.mark.parametrize("fmt", FORMATS)
def test_round_trip_in_order(fmt: str, tmp_path: Path) -> None:
    data = rich_datapoints()
    path = tmp_path / f"data.{fmt}"
    save(fmt, DataFromList(data, shuffle=False), path)
    df = load(fmt, path, shuffle=False)
    assert len(df) == len(data)  # known before reset_state, from the file's metadata
    df.reset_state()
    assert len(df) == len(data)
    for epoch in range(2):
        out = list(df)
        assert len(out) == len(data), f"epoch {epoch}"
        for i, (e, a) in enumerate(zip(data, out)):
            assert_same(e, a, f"epoch {epoch} dp {i}")
    df.close()


@pytest.mark.parametrize("fmt", ["lmdb", "npz"])
def test_shuffle_gives_a_new_permutation_each_epoch(fmt: str, tmp_path: Path) -> None:
    data = rich_datapoints(60)
    path = tmp_path / f"data.{fmt}"
    save(fmt, DataFromList(data, shuffle=False), path)
    df = load(fmt, path, shuffle=True, seed=7)
    df.reset_state()
    epochs = [list(df) for _ in range(2)]
    orders = [[first_int(dp) for dp in ep] for ep in epochs]
    for order in orders:
        assert sorted(order) == list(range(len(data)))
    assert orders[0] != orders[1] and orders[0] != list(range(len(data)))
    for ep in epochs:
        for dp in ep:
            assert_same(data[first_int(dp)], dp)
    again = load(fmt, path, shuffle=True, seed=7)  # seed= makes the order reproducible
    again.reset_state()
    assert [first_int(dp) for dp in again] == orders[0]


@pytest.mark.parametrize("fmt", FORMATS)
def test_decoded_arrays_are_owned_and_writable(fmt: str, tmp_path: Path) -> None:
    path = tmp_path / f"data.{fmt}"
    save(fmt, DataFromList([[np.arange(6, dtype=np.int64)]] * 3, shuffle=False), path)
    df = load(fmt, path, shuffle=False)
    df.reset_state()
    first = list(df)
    for (arr,) in first:
        assert arr.flags.writeable
        arr[:] = -1  # must not change what the next epoch reads
    for (arr,) in df:
        np.testing.assert_array_equal(arr, np.arange(6))


@pytest.mark.parametrize("fmt", FORMATS)
def test_flow_without_len_and_empty_flow(fmt: str, tmp_path: Path) -> None:
    gen = DataFromGenerator(lambda: ([i, str(i)] for i in range(25)))
    with pytest.raises(LengthUnknownError):
        len(gen)
    save(fmt, gen, tmp_path / "a")
    df = load(fmt, tmp_path / "a", shuffle=False)
    df.reset_state()
    assert len(df) == 25 and [dp[1] for dp in df] == [str(i) for i in range(25)]
    save(fmt, DataFromGenerator(lambda: iter(())), tmp_path / "empty")
    df = load(fmt, tmp_path / "empty", shuffle=False)
    df.reset_state()
    assert len(df) == 0 and list(df) == []


@pytest.mark.parametrize("fmt", FORMATS)
def test_save_refuses_to_overwrite_unless_asked(fmt: str, tmp_path: Path) -> None:
    path = tmp_path / "data"
    save(fmt, DataFromList([[1]], shuffle=False), path)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        save(fmt, DataFromList([[2]], shuffle=False), path)
    save(fmt, DataFromList([[3], [4]], shuffle=False), path, overwrite=True)
    df = load(fmt, path, shuffle=False)
    df.reset_state()
    assert [dp[0] for dp in df] == [3, 4]


@pytest.mark.parametrize("fmt", FORMATS)
def test_save_rejects_what_is_not_a_flow(fmt: str, tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="DataFromList"):
        save(fmt, [[1], [2]], tmp_path / "x")
    with pytest.raises(TypeError, match="DataFlow instance"):
        save(fmt, DataFromList, tmp_path / "x")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("fmt", FORMATS)
def test_unencodable_datapoint_names_the_type_and_leaves_no_file(fmt: str, tmp_path: Path) -> None:
    from dataflow.codec import CodecError

    with pytest.raises(CodecError, match="object"):
        save(fmt, DataFromList([[1], [np.array([object()])]], shuffle=False), tmp_path / "x")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("fmt", FORMATS)
def test_missing_file_is_reported_at_reset_state(fmt: str, tmp_path: Path) -> None:
    df = load(fmt, tmp_path / "nope", shuffle=False)
    with pytest.raises(FileNotFoundError, match="nope"):
        df.reset_state()
