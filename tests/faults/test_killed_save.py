"""A save killed with SIGKILL at a random moment (fault-injection suite).

Promise (every ``*Serializer.save``): the file appears complete or not at all. A save killed
mid-way leaves the path it was writing absent, or, when it was replacing a file
(``overwrite=True``), that old file intact and readable.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from dataflow import DataFromList, HDF5Serializer, LMDBSerializer, NumpySerializer, TFRecordSerializer

ROOT = Path(__file__).resolve().parents[2]

_CHILD = """
import sys, time, numpy as np
from dataflow import HDF5Serializer, LMDBSerializer, NumpySerializer, TFRecordSerializer
from dataflow import DataFromList
kind, path, flag = sys.argv[1:4]
def slow(dp):
    if dp[1] == 5:
        open(flag, "w").close()  # the save is under way: the parent may kill now
    time.sleep(0.01)
    return dp
df = DataFromList([[np.zeros(100, np.float32), i] for i in range(100000)], shuffle=False).map(slow)
save = {"lmdb": LMDBSerializer.save, "npz": NumpySerializer.save, "tfrecord": TFRecordSerializer.save,
        "hdf5": lambda d, p, **k: HDF5Serializer.save(d, p, ["a", "b"], **k)}[kind]
save(df, path, overwrite=True)
"""

SAVERS = {
    "lmdb": (LMDBSerializer.save, lambda p: LMDBSerializer.load(p, shuffle=False)),
    "npz": (NumpySerializer.save, lambda p: NumpySerializer.load(p, shuffle=False)),
    "tfrecord": (TFRecordSerializer.save, lambda p: TFRecordSerializer.load(p)),
    "hdf5": (
        lambda d, p: HDF5Serializer.save(d, p, ["a", "b"]),
        lambda p: HDF5Serializer.load(p, ["a", "b"], shuffle=False),
    ),
}


def _kill_during_save(kind: str, path: Path, tmp: Path, delay: float) -> None:
    flag = tmp / f"started-{kind}-{delay}"
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, kind, str(path), str(flag)], env=env,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not flag.exists():
            assert proc.poll() is None, f"the saving child ended early (exit {proc.returncode})"
            assert time.monotonic() < deadline, "the save never started"
            time.sleep(0.01)
        time.sleep(delay)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)


# a kill right as the save starts writing, and one well into it: every format goes through
# the same atomic write (dataflow/formats/_atomic.py), so each format gets one of the two
@pytest.mark.parametrize("kind, delay", [("lmdb", 0.0), ("npz", 0.15), ("tfrecord", 0.0), ("hdf5", 0.15)])
def test_killed_save_leaves_nothing_or_the_old_file(kind: str, delay: float, tmp_path: Path) -> None:
    save, load = SAVERS[kind]
    fresh = tmp_path / f"fresh.{kind}"
    _kill_during_save(kind, fresh, tmp_path, delay)
    assert not fresh.exists(), "a killed save left a partial file at its target path"

    old = tmp_path / f"old.{kind}"
    save(DataFromList([[np.ones(100, np.float32), i] for i in range(7)], shuffle=False), str(old))
    _kill_during_save(kind, old, tmp_path, delay)
    with load(str(old)) as df:  # closed: an open LMDB file would stay in every later fd count
        df.reset_state()
        assert [int(dp[1]) for dp in df] == list(range(7)), "the replaced file did not survive intact"
