"""Loading a file never runs code from it: no pickle, even when another library (tensorpack,
through ``msgpack_numpy.patch()``) has monkey-patched the ``msgpack`` module."""

from __future__ import annotations

import os
import pickle
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import msgpack
import numpy as np
import pytest

from dataflow import DataFromList, FormatError, NumpySerializer, TFRecordSerializer
from dataflow.formats._tfrecord import frame

ROOT = Path(__file__).resolve().parents[2]


class _Touch:
    """Unpickling this creates a file: the proof that code ran."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (open, (self.path, "w"))


def _hostile_record(marker: Path) -> bytes:
    """A codec header around a msgpack-numpy "object array" whose data is a pickle."""
    body = msgpack.packb(
        {
            b"nd": True,
            b"kind": b"O",
            b"type": b"|O",
            b"shape": [1],
            b"data": pickle.dumps(_Touch(str(marker))),
        },
        use_bin_type=True,
    )
    return b"DFC\x01" + struct.pack("<QI", len(body), 0) + body


def _write_hostile_tfrecord(path: Path, marker: Path) -> None:
    path.write_bytes(frame(_hostile_record(marker)))


def test_hostile_record_is_not_unpickled(tmp_path: Path) -> None:
    marker = tmp_path / "code-ran"
    _write_hostile_tfrecord(tmp_path / "evil.tfrecord", marker)
    df = TFRecordSerializer.load(str(tmp_path / "evil.tfrecord"))
    df.reset_state()
    (dp,) = list(df)
    assert isinstance(dp, dict) and not marker.exists()


@pytest.mark.timeout(120)
def test_hostile_record_is_not_unpickled_after_msgpack_numpy_patch(tmp_path: Path) -> None:
    marker = tmp_path / "code-ran"
    path = tmp_path / "evil.tfrecord"
    _write_hostile_tfrecord(path, marker)
    script = (
        "import sys, msgpack_numpy\n"
        "msgpack_numpy.patch()  # what `import tensorpack` does\n"
        "from dataflow import TFRecordSerializer\n"
        "df = TFRecordSerializer.load(sys.argv[1])\n"
        "df.reset_state()\n"
        "print(type(list(df)[0]).__name__)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=110, env=env
    )
    assert not marker.exists(), "loading the file ran code from it (pickle) once msgpack was patched"
    assert proc.returncode == 0 and proc.stdout.strip() == "dict", proc.stderr


def test_npz_with_pickled_objects_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tensorpack-style.npz"
    np.savez(path, buffer=np.asarray([[1, "x"], [2, "y"]], dtype=object))  # tensorpack's layout
    with pytest.raises(FormatError, match="written by tensorpack.*allow_pickle=True"):
        NumpySerializer.load(str(path)).reset_state()


def test_npz_files_need_no_pickle(tmp_path: Path) -> None:
    path = tmp_path / "d.npz"
    NumpySerializer.save(DataFromList([[1, "a", {"k": (1, 2)}]]), str(path))
    with np.load(path, allow_pickle=False) as npz:
        assert sorted(npz.files) == ["data", "meta", "offsets"]
        assert all(npz[k].dtype != object for k in npz.files)
    with zipfile.ZipFile(path) as zf:
        assert sorted(zf.namelist()) == ["data.npy", "meta.npy", "offsets.npy"]


@pytest.mark.timeout(120)
def test_file_saved_after_msgpack_numpy_patch_keeps_our_format(tmp_path: Path) -> None:
    """Converting tensorpack data means tensorpack is imported while saving: the file must
    still hold codec arrays (not msgpack-numpy dicts, nor pickles) readable without it."""
    path = tmp_path / "saved.tfrecord"
    script = (
        "import sys, numpy as np, msgpack_numpy\n"
        "msgpack_numpy.patch()  # what `import tensorpack` does\n"
        "from dataflow import TFRecordSerializer\n"
        "from dataflow import DataFromList\n"
        "TFRecordSerializer.save(DataFromList([[np.arange(3.0), (1, 2)]]), sys.argv[1])\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TQDM_DISABLE": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=110, env=env
    )
    assert proc.returncode == 0, proc.stderr
    df = TFRecordSerializer.load(str(path))
    df.reset_state()
    ((arr, tup),) = list(df)
    assert isinstance(arr, np.ndarray) and arr.tolist() == [0.0, 1.0, 2.0] and tup == (1, 2)
