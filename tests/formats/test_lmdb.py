"""LMDB: map growth without record loss, raw reading, metadata, corrupt values, versions,
tensorpack's files, the optional import, sharing and fork safety."""

from __future__ import annotations

import sys
from pathlib import Path

import lmdb
import numpy as np
import pytest

from dataflow import (
    DataFlowNotReset,
    DataFromList,
    FormatError,
    LMDBData,
    LMDBDataDecoder,
    LMDBSerializer,
    codec,
)
from dataflow.formats._lmdb_layout import META_KEY

from ._util import FailingFlow


def _save(tmp_path: Path, n: int = 20, **kwargs) -> str:
    path = str(tmp_path / "db.lmdb")
    LMDBSerializer.save(DataFromList([[i, f"v{i}"] for i in range(n)], shuffle=False), path, **kwargs)
    return path


def _put(path: str, key: bytes, value: bytes) -> None:
    env = lmdb.open(path, subdir=False, lock=False)
    with env.begin(write=True) as txn:
        txn.put(key, value)
    env.close()


def test_tiny_map_size_grows_and_keeps_every_record(tmp_path: Path) -> None:
    data = [[i, np.full(1000, i % 251, np.uint8)] for i in range(600)]  # ~600 KB in a 16 KB map
    path = str(tmp_path / "grow.lmdb")
    LMDBSerializer.save(DataFromList(data, shuffle=False), path, write_frequency=64, map_size=16384)
    df = LMDBSerializer.load(path, shuffle=False)
    df.reset_state()
    out = list(df)
    assert len(out) == len(df) == 600
    for i, (k, arr) in enumerate(out):
        assert k == i and arr.shape == (1000,) and (arr == i % 251).all()


def test_one_transaction_bigger_than_the_map(tmp_path: Path) -> None:
    data = [[np.full(50_000, i, np.int32)] for i in range(40)]  # 8 MB in one commit, map 64 KB
    path = str(tmp_path / "big.lmdb")
    LMDBSerializer.save(DataFromList(data, shuffle=False), path, write_frequency=1000, map_size=65536)
    df = LMDBSerializer.load(path, shuffle=False)
    df.reset_state()
    assert [int(dp[0][0]) for dp in df] == list(range(40))


def test_raw_reader_yields_keys_and_encoded_values(tmp_path: Path) -> None:
    path = _save(tmp_path, 5)
    df = LMDBData(path, shuffle=False)
    assert len(df) == 5
    df.reset_state()
    out = list(df)
    assert [k for k, _ in out] == [b"%010d" % i for i in range(5)]  # the metadata key is hidden
    assert all(isinstance(v, bytes) for _, v in out)
    assert codec.loads(out[3][1]) == [3, "v3"]
    decoded = LMDBDataDecoder(df, lambda k, v: None if k.endswith(b"2") else codec.loads(v))
    decoded.reset_state()
    assert [dp[0] for dp in decoded] == [0, 1, 3, 4]


def test_raw_reader_on_a_foreign_database(tmp_path: Path) -> None:
    path = str(tmp_path / "foreign")
    env = lmdb.open(path, map_size=1 << 20)  # a directory with data.mdb and lock.mdb
    with env.begin(write=True) as txn:
        for i in range(12):
            txn.put(b"img-%03d" % i, b"payload %d" % i)
    env.close()
    scanned = LMDBData(path, shuffle=True, seed=1)
    scanned.reset_state()
    assert sorted(k for k, _ in scanned) == [b"img-%03d" % i for i in range(12)]
    fmt = LMDBData(path, shuffle=True, keys="img-{:03d}")
    fmt.reset_state()
    assert sorted(v for _, v in fmt) == sorted(b"payload %d" % i for i in range(12))
    chosen = LMDBData(path, shuffle=True, keys=["img-001", b"img-005"])
    chosen.reset_state()
    assert len(chosen) == 2 and sorted(v for _, v in chosen) == [b"payload 1", b"payload 5"]
    with pytest.raises(FormatError, match="written neither by LMDBSerializer"):
        LMDBSerializer.load(path).reset_state()


def test_corrupt_value_raises_codec_error_naming_the_key(tmp_path: Path) -> None:
    path = _save(tmp_path)
    _put(path, b"%010d" % 7, b"DFC\x01 garbage")
    df = LMDBSerializer.load(path, shuffle=False)
    df.reset_state()
    with pytest.raises(codec.CodecError, match=r"key b'0000000007'"):
        list(df)


def test_count_mismatch_is_reported(tmp_path: Path) -> None:
    path = _save(tmp_path)
    _put(path, b"%010d" % 99, codec.dumps([99]))
    with pytest.raises(FormatError, match="says 20 records but the database holds 21"):
        LMDBSerializer.load(path).reset_state()


def test_newer_format_version_is_refused(tmp_path: Path) -> None:
    path = _save(tmp_path)
    meta = {"format": "lmdb", "version": 2, "count": 20, "writer": "dataflow-ml 9.9"}
    _put(path, META_KEY, codec.dumps(meta))
    for df in (LMDBSerializer.load(path), LMDBData(path)):
        with pytest.raises(FormatError, match=r"format version 2 \(by dataflow-ml 9.9\).*upgrade"):
            df.reset_state()


def test_missing_lmdb_package_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "lmdb", None)
    with pytest.raises(ImportError, match=r'pip install "dataflow-ml\[lmdb\]"'):
        LMDBData(str(tmp_path))
    with pytest.raises(ImportError, match=r'pip install "dataflow-ml\[lmdb\]"'):
        LMDBSerializer.save(DataFromList([[1]]), str(tmp_path / "x"))
    assert list(tmp_path.iterdir()) == []


def test_iterating_before_reset_state_fails_clearly(tmp_path: Path) -> None:
    df = LMDBSerializer.load(_save(tmp_path))
    assert len(df) == 20  # the length is available before reset_state
    with pytest.raises(DataFlowNotReset):
        next(iter(df))


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="write_frequency must be >= 1"):
        LMDBSerializer.save(DataFromList([[1]]), str(tmp_path / "x"), write_frequency=0)
    with pytest.raises(TypeError, match="keys must be"):
        LMDBData(str(tmp_path), keys=5)


def test_flows_over_one_database_share_it_and_are_reentrant(tmp_path: Path) -> None:
    path = _save(tmp_path)
    a, b = LMDBSerializer.load(path, shuffle=False), LMDBSerializer.load(path, shuffle=True)
    a.reset_state()
    b.reset_state()
    pairs = list(zip(a, b, a))  # two epochs of `a` at once, and `b`, interleaved
    assert [p[0][0] for p in pairs] == [p[2][0] for p in pairs] == list(range(20))
    assert sorted(p[1][0] for p in pairs) == list(range(20))
    a.close()
    assert len(list(b)) == 20  # closing one leaves the shared environment open for the other
    b.close()


def test_workers_open_their_own_environment(tmp_path: Path) -> None:
    from dataflow.parallel._runners import MultiProcessRunnerZMQ

    path = _save(tmp_path, 50)
    df = LMDBSerializer.load(path, shuffle=True)
    df.reset_state()  # opened in the parent too: the forked workers must not use this one
    with MultiProcessRunnerZMQ(df, num_proc=2) as runner:
        runner.reset_state()
        # a runner epoch is len(ds) datapoints from any worker: 4 epochs hold a full pass of one
        seen = [dp[0] for _ in range(4) for dp in runner]
    assert set(seen) == set(range(50))
    df.reset_state()  # the runner closed it; it opens again in this process
    assert len(list(df)) == 50
    df.close()


def test_interrupted_save_into_a_directory_leaves_it_empty(tmp_path: Path) -> None:
    (tmp_path / "db").mkdir()
    with pytest.raises(RuntimeError):
        LMDBSerializer.save(FailingFlow(10, RuntimeError("x")), str(tmp_path / "db"), write_frequency=3)
    assert list((tmp_path / "db").iterdir()) == []
