"""All-or-nothing saves: an interrupted save leaves no file and no temporary file, and an
existing file it was replacing stays intact."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from dataflow import DataFromList, HDF5Serializer, LMDBSerializer, NumpySerializer, TFRecordSerializer

from ._util import FailingFlow, leftovers

SAVES = {
    "lmdb": lambda df, p, **kw: LMDBSerializer.save(df, p, write_frequency=7, **kw),
    "tfrecord": TFRecordSerializer.save,
    "npz": NumpySerializer.save,
    "hdf5": lambda df, p, **kw: HDF5Serializer.save(df, p, ["i", "a"], **kw),
}
LOADS = {
    "lmdb": lambda p: LMDBSerializer.load(p, shuffle=False),
    "tfrecord": TFRecordSerializer.load,
    "npz": lambda p: NumpySerializer.load(p, shuffle=False),
    "hdf5": lambda p: HDF5Serializer.load(p, ["i", "a"], shuffle=False),
}


class Boom(RuntimeError):
    pass


@pytest.mark.parametrize("fmt", sorted(SAVES))
@pytest.mark.parametrize("exc", [Boom("flow failed"), KeyboardInterrupt()], ids=["exception", "ctrl-c"])
def test_interrupted_save_leaves_nothing(fmt: str, exc: BaseException, tmp_path: Path) -> None:
    path = tmp_path / "out.data"
    with pytest.raises(type(exc)):
        SAVES[fmt](FailingFlow(fail_after=30, exc=exc), str(path))
    assert leftovers(tmp_path) == []  # no file at path, no temporary file


@pytest.mark.parametrize("fmt", sorted(SAVES))
def test_interrupted_overwrite_keeps_the_old_file(fmt: str, tmp_path: Path) -> None:
    path = str(tmp_path / "out.data")
    SAVES[fmt](FailingFlow(fail_after=-1, exc=Boom(), size=5), path)
    with pytest.raises(Boom):
        SAVES[fmt](FailingFlow(fail_after=30, exc=Boom()), path, overwrite=True)
    assert leftovers(tmp_path) == (["out.data", "out.data.index"] if fmt == "tfrecord" else ["out.data"])
    df: Any = LOADS[fmt](path)
    df.reset_state()
    assert [int(dp[0]) for dp in df] == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("fmt", sorted(SAVES))
def test_save_into_a_missing_directory_is_refused_up_front(fmt: str, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        SAVES[fmt](DataFromList([[1, 2]]), str(tmp_path / "missing" / "out"))


def test_saved_file_has_default_permissions(tmp_path: Path) -> None:
    import os

    path = tmp_path / "x.tfrecord"
    TFRecordSerializer.save(DataFromList([[1]]), str(path))
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask


@pytest.mark.parametrize("fmt", sorted(SAVES))
@pytest.mark.parametrize("durable", [False, True])
def test_durable_saves_flush_the_file_and_its_directory(
    fmt: str, durable: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``durable=True`` fsyncs every file it writes and the directory; the default writes
    through the page cache only (a killed process loses nothing; a power loss may)."""
    import os

    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    path = str(tmp_path / "out.data")
    SAVES[fmt](FailingFlow(fail_after=-1, exc=Boom(), size=5), path, durable=durable)
    if not durable:
        assert synced == []
    else:
        assert str(tmp_path) in synced  # the rename is durable too
        # each file is flushed under its temporary name ``.<name>.<12 hex>.tmp`` (HDF5: in a
        # private directory of that name), before the rename
        names = [os.path.relpath(p, tmp_path).split(os.sep)[0] for p in synced if p != str(tmp_path)]
        files = {re.sub(r"\.[0-9a-f]{12}\.tmp$", "", name) for name in names}
        assert files == ({".out.data", ".out.data.index"} if fmt == "tfrecord" else {".out.data"})
    df: Any = LOADS[fmt](path)
    df.reset_state()
    assert [int(dp[0]) for dp in df] == [0, 1, 2, 3, 4]
