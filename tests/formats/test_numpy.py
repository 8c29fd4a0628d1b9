"""NumpySerializer: versions, damaged files, compression, foreign .npz files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dataflow import DataFromList, FormatError, NumpySerializer, codec


def _save(tmp_path: Path, n: int = 10, **kwargs) -> Path:
    path = tmp_path / "d.npz"
    NumpySerializer.save(
        DataFromList([[i, np.arange(i)] for i in range(n)], shuffle=False), str(path), **kwargs
    )
    return path


def _rewrite(path: Path, **changes: np.ndarray) -> None:
    with np.load(path) as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays.update(changes)
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def test_compressed_round_trip_and_exact_path(tmp_path: Path) -> None:
    path = tmp_path / "no-suffix"
    NumpySerializer.save(DataFromList([[np.zeros(10_000)]]), str(path), compressed=True)
    assert path.is_file() and path.stat().st_size < 10_000  # no ".npz" appended; compressed
    df = NumpySerializer.load(str(path), shuffle=False)
    df.reset_state()
    (dp,) = list(df)
    assert dp[0].shape == (10_000,) and not dp[0].any()


def test_newer_format_version_is_refused(tmp_path: Path) -> None:
    path = _save(tmp_path)
    meta = {"format": "npz", "version": 3, "count": 10, "writer": "dataflow-ml 9.9"}
    _rewrite(path, meta=np.frombuffer(codec.dumps(meta), np.uint8))
    with pytest.raises(FormatError, match=r"npz format version 3 \(by dataflow-ml 9.9\).*upgrade"):
        NumpySerializer.load(str(path)).reset_state()


def test_inconsistent_offsets_are_refused(tmp_path: Path) -> None:
    path = _save(tmp_path)
    with np.load(path) as npz:
        offsets = npz["offsets"].copy()
    offsets[-1] += 1
    _rewrite(path, offsets=offsets)
    with pytest.raises(FormatError, match="offsets array is inconsistent"):
        NumpySerializer.load(str(path)).reset_state()


def test_corrupt_datapoint_names_its_index(tmp_path: Path) -> None:
    path = _save(tmp_path)
    with np.load(path) as npz:
        data, offsets = npz["data"].copy(), npz["offsets"]
    data[offsets[4] : offsets[4] + 3] = 0  # wipe the DFC magic of datapoint 4
    _rewrite(path, data=data)
    df = NumpySerializer.load(str(path), shuffle=False)
    df.reset_state()
    with pytest.raises(codec.CodecError, match="d.npz: datapoint 4 cannot be decoded"):
        list(df)


def test_truncated_and_non_npz_files(tmp_path: Path) -> None:
    path = _save(tmp_path)
    path.write_bytes(path.read_bytes()[:-50])
    with pytest.raises(FormatError, match="d.npz"):
        NumpySerializer.load(str(path)).reset_state()
    other = tmp_path / "text.npz"
    other.write_text("not a zip")
    with pytest.raises(FormatError, match="not a readable .npz"):
        len(NumpySerializer.load(str(other)))


def test_len_before_reset_state(tmp_path: Path) -> None:
    assert len(NumpySerializer.load(str(_save(tmp_path, 7)))) == 7
