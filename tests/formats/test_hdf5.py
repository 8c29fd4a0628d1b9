"""HDF5: columns of arrays, numbers, str and bytes; checks on shapes and types; foreign
files; versions; the optional import."""

from __future__ import annotations

import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from dataflow import DataFromGenerator, DataFromList, FormatError, HDF5Data, HDF5Serializer

from ._util import FailingFlow

PATHS = ["label", "group/image", "score", "name", "blob"]


def _data(n: int = 2500) -> list[list]:
    rng = np.random.default_rng(3)
    return [
        [i, rng.integers(0, 255, (4, 5), dtype=np.uint8), float(i) / 7, f"name-{i}-é", bytes([i % 256, 0, 7])]
        for i in range(n)
    ]


def test_round_trip_across_write_chunks(tmp_path: Path) -> None:
    data = _data(2048)  # exactly two 1024-row write chunks
    path = str(tmp_path / "d.h5")
    HDF5Serializer.save(DataFromList(data, shuffle=False), path, PATHS)
    df = HDF5Serializer.load(path, PATHS, shuffle=False)
    assert len(df) == len(data)
    df.reset_state()
    for _ in range(2):  # two epochs
        out = list(df)
        assert len(out) == len(data)
        for e, a in zip(data, out):
            assert a[0] == e[0] and isinstance(a[0], np.integer)
            assert a[1].dtype == np.uint8 and np.array_equal(a[1], e[1])
            assert a[2] == e[2] and a[3] == e[3] and a[4] == e[4]
            assert type(a[3]) is str and type(a[4]) is bytes


def test_shuffle_and_owned_rows(tmp_path: Path) -> None:
    path = str(tmp_path / "d.h5")
    HDF5Serializer.save(DataFromList(_data(50), shuffle=False), path, PATHS)
    df = HDF5Data(path, PATHS, shuffle=True, seed=3)
    df.reset_state()
    a, b = [int(dp[0]) for dp in df], [int(dp[0]) for dp in df]
    assert sorted(a) == sorted(b) == list(range(50)) and a != b
    for dp in df:
        dp[1][:] = 0  # modifying a row must not change the next epoch
    assert all(dp[1].any() for dp in df if int(dp[0]) in (3, 4))


def test_foreign_file_and_length_mismatch(tmp_path: Path) -> None:
    path = str(tmp_path / "foreign.h5")
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(6).reshape(3, 2)
        f["y"] = np.array([1.0, 2.0, 3.0])
        f["z"] = np.arange(4)
    df = HDF5Data(path, ["x", "y"], shuffle=False)
    df.reset_state()
    assert [(dp[0].tolist(), float(dp[1])) for dp in df] == [([0, 1], 1.0), ([2, 3], 2.0), ([4, 5], 3.0)]
    with pytest.raises(FormatError, match="same length"):
        HDF5Data(path, ["x", "z"]).reset_state()
    with pytest.raises(KeyError, match="no dataset 'w'"):
        HDF5Data(path, ["x", "w"]).reset_state()


def test_datapoints_that_do_not_fit_columns(tmp_path: Path) -> None:
    path = str(tmp_path / "bad.h5")
    with pytest.raises(ValueError, match="datapoint 1 must be a list/tuple of 2 components"):
        HDF5Serializer.save(DataFromList([[1, 2], [1]], shuffle=False), path, ["a", "b"])
    with pytest.raises(ValueError, match=r"datapoint 1 component 'a': got shape \(3,\)"):
        HDF5Serializer.save(DataFromList([[np.zeros(2)], [np.zeros(3)]], shuffle=False), path, ["a"])
    with pytest.raises(ValueError, match="no lossy casts"):
        HDF5Serializer.save(DataFromList([[np.int8(1)], [2.5]], shuffle=False), path, ["a"])
    with pytest.raises(TypeError, match="expected str"):
        HDF5Serializer.save(DataFromList([["x"], [b"y"]], shuffle=False), path, ["a"])
    with pytest.raises(TypeError, match="NUL"):
        HDF5Serializer.save(DataFromList([["x"], ["a\x00b"]], shuffle=False), path, ["a"])
    with pytest.raises(TypeError, match="cannot hold"):
        HDF5Serializer.save(DataFromList([[{"nested": 1}]], shuffle=False), path, ["a"])
    assert list(tmp_path.iterdir()) == []


def test_bad_data_paths() -> None:
    with pytest.raises(TypeError, match="data_paths"):
        HDF5Data("x.h5", "label")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="distinct"):
        HDF5Data("x.h5", ["a", "a"])


def test_newer_format_version_is_refused(tmp_path: Path) -> None:
    path = str(tmp_path / "d.h5")
    HDF5Serializer.save(FailingFlow(-1, RuntimeError(), size=3), path, ["i", "a"])
    with h5py.File(path, "a") as f:
        f.attrs["dataflow_format_version"] = 2
        f.attrs["dataflow_writer"] = "dataflow-ml 9.9"
    with pytest.raises(FormatError, match=r"hdf5 format version 2 \(by dataflow-ml 9.9\)"):
        HDF5Serializer.load(path, ["i", "a"]).reset_state()


def test_empty_flow(tmp_path: Path) -> None:
    path = str(tmp_path / "e.h5")
    HDF5Serializer.save(DataFromGenerator(lambda: iter(())), path, ["a", "b"])
    df = HDF5Serializer.load(path, ["a", "b"])
    df.reset_state()
    assert len(df) == 0 and list(df) == []


def test_missing_h5py_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "h5py", None)
    with pytest.raises(ImportError, match=r'pip install "dataflow-ml\[hdf5\]"'):
        HDF5Data("x.h5", ["a"])
    with pytest.raises(ImportError, match=r'pip install "dataflow-ml\[hdf5\]"'):
        HDF5Serializer.save(DataFromList([[1]]), str(tmp_path / "x.h5"), ["a"])


def test_flow_that_reuses_its_buffers(tmp_path: Path) -> None:
    def gen():  # one array and one bytearray, overwritten for every datapoint
        buf, raw = np.zeros(3, np.int32), bytearray(2)
        for i in range(5):
            buf[:] = i
            raw[0] = i
            yield [buf, raw, [b"", b"x", b"\x00\x01"][i % 3], ["", "é", "ab"][i % 3]]

    path = str(tmp_path / "r.h5")
    HDF5Serializer.save(DataFromGenerator(gen), path, ["a", "b", "c", "d"])
    df = HDF5Serializer.load(path, ["a", "b", "c", "d"], shuffle=False)
    df.reset_state()
    out = list(df)
    assert [dp[0].tolist() for dp in out] == [[i] * 3 for i in range(5)]
    assert [dp[1] for dp in out] == [bytes([i, 0]) for i in range(5)]
    assert [dp[2] for dp in out] == [b"", b"x", b"\x00\x01", b"", b"x"]
    assert [dp[3] for dp in out] == ["", "é", "ab", "", "é"]


def test_save_creates_its_file_without_truncating(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # h5py's "w" opens with O_TRUNC, and on ext4 a truncated file is flushed to the disk when
    # it is closed (~0.5 s per GB): the save creates a fresh temporary file exclusively ("x"),
    # in a private directory beside the target, then renames it over the target.
    import os

    opened: list[tuple[str, str, bool]] = []
    real = h5py.File

    def spy(name: str, mode: str = "r", *args: object, **kwargs: object) -> h5py.File:
        if mode != "r":
            opened.append((str(name), mode, os.path.lexists(name)))
        return real(name, mode, *args, **kwargs)

    monkeypatch.setattr(h5py, "File", spy)
    path = tmp_path / "d.h5"
    path.write_bytes(b"the previous file")
    data = _data(10)
    HDF5Serializer.save(DataFromList(data, shuffle=False), str(path), PATHS, overwrite=True)
    assert len(opened) == 1
    tmp, mode, existed = opened[0]
    assert (mode, existed) == ("x", False)
    private = os.path.dirname(tmp)
    assert os.path.dirname(private) == str(tmp_path)
    assert not os.path.exists(private)  # the file was renamed over d.h5, its directory removed
    assert sorted(os.listdir(tmp_path)) == ["d.h5"]
    monkeypatch.undo()
    df = HDF5Serializer.load(str(path), PATHS, shuffle=False)
    df.reset_state()
    assert [int(dp[0]) for dp in df] == [dp[0] for dp in data]
