"""tensorpack's files and streams: LMDB databases written by its LMDBSerializer (msgpack-numpy
values decoded safely; pickled ones only with ``allow_pickle=True``) and messages from its
``send_dataflow_zmq`` (pickle by default) received by RemoteDataZMQ under the same opt-in."""

from __future__ import annotations

import pickle
import threading
from pathlib import Path
from typing import Any

import h5py
import lmdb
import msgpack
import msgpack_numpy
import numpy as np
import pytest
import zmq

from dataflow import FormatError, HDF5Serializer, LMDBData, LMDBSerializer, NumpySerializer, RemoteDataZMQ
from dataflow.formats._tensorpack_decode import loads_tensorpack
from tests.checkpoint._harness import canon, check_resume


def _msgpack(obj: Any) -> bytes:
    """tensorpack.utils.serialize.dumps with TENSORPACK_SERIALIZE=msgpack."""
    return msgpack.packb(obj, use_bin_type=True, default=msgpack_numpy.encode)  # type: ignore[no-any-return]


def _pickle(obj: Any) -> bytes:
    """tensorpack.utils.serialize.dumps with its default, TENSORPACK_SERIALIZE=pickle."""
    return pickle.dumps(obj, protocol=-1)


def _write(path: str, datapoints: list[Any], dumps: Any) -> None:
    """The layout tensorpack 0.11's LMDBSerializer.save writes: keys ``{:08}``, ``dumps(dp)``
    values, and ``__keys__`` holding the list of keys."""
    env = lmdb.open(path, subdir=False, map_size=1 << 22, lock=False)
    keys = [f"{i:08}".encode("ascii") for i in range(len(datapoints))]
    with env.begin(write=True) as txn:
        for k, dp in zip(keys, datapoints):
            txn.put(k, dumps(dp))
        txn.put(b"__keys__", dumps(keys))
    env.close()


def _dps(n: int = 12) -> list[Any]:
    return [[i, np.arange(i, i + 3, dtype=np.float32), f"name{i}", {"box": np.eye(2) * i}] for i in range(n)]


class _Bomb:
    """Unpickling this writes a file: proof that a pickle was (not) executed."""

    def __init__(self, target: Path) -> None:
        self.target = target

    def __reduce__(self) -> Any:
        return (Path.write_text, (self.target, "pwned"))


def test_msgpack_database_reads_in_key_order_and_shuffled(tmp_path: Path) -> None:
    path = str(tmp_path / "tp.lmdb")
    _write(path, _dps(), _msgpack)
    df = LMDBSerializer.load(path, shuffle=False)
    df.reset_state()
    assert len(df) == 12
    assert [canon(dp) for dp in df] == [canon(dp) for dp in _dps()]
    shuffled = LMDBSerializer.load(path, shuffle=True, seed=3)
    shuffled.reset_state()
    got = [dp[0] for dp in shuffled]
    assert sorted(got) == list(range(12)) and got != list(range(12))


def test_msgpack_database_resumes_exactly(tmp_path: Path) -> None:
    path = str(tmp_path / "tp.lmdb")
    _write(path, _dps(9), _msgpack)
    assert check_resume(lambda: LMDBSerializer.load(path, shuffle=True, seed=1), epochs=2, max_cuts=8) > 0


def test_pickled_database_needs_allow_pickle(tmp_path: Path) -> None:
    path = str(tmp_path / "tp.lmdb")
    target = tmp_path / "pwned"
    _write(path, [*_dps(3), _Bomb(target)], _pickle)
    df = LMDBSerializer.load(path, shuffle=False)
    df.reset_state()
    with pytest.raises(FormatError, match=r"tp\.lmdb, key b'00000000'.*pickle.*allow_pickle=True"):
        next(iter(df))
    assert not target.exists()
    trusted = LMDBSerializer.load(path, shuffle=False, allow_pickle=True)
    trusted.reset_state()
    got = list(trusted)
    assert [canon(dp) for dp in got[:3]] == [canon(dp) for dp in _dps(3)]
    assert target.read_text() == "pwned"  # the user trusted it: it ran, as in tensorpack


def _ragged_database(tmp_path: Path) -> str:
    """A tensorpack msgpack database holding one array of Python objects (msgpack-numpy
    pickles those)."""
    path = str(tmp_path / "tp.lmdb")
    ragged = np.empty(2, dtype=object)
    ragged[0], ragged[1] = [1, 2], "x"
    _write(path, [[ragged]], _msgpack)
    return path


def _refused(path: str) -> None:
    df = LMDBSerializer.load(path, shuffle=False)
    df.reset_state()
    with pytest.raises(FormatError, match="array of Python objects.*allow_pickle=True"):
        list(df)


def test_object_arrays_in_msgpack_need_allow_pickle(tmp_path: Path) -> None:
    path = _ragged_database(tmp_path)
    _refused(path)
    trusted = LMDBSerializer.load(path, shuffle=False, allow_pickle=True)
    trusted.reset_state()
    [[arr]] = list(trusted)
    assert arr.dtype == object and list(arr) == [[1, 2], "x"]


def test_object_arrays_stay_refused_after_import_tensorpack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``import tensorpack`` runs ``msgpack_numpy.patch()``, whose ``msgpack.unpackb`` unpickles
    object arrays before any hook sees them; the decoder must not go through it."""
    patched = ("Packer", "Unpacker", "load", "loads", "dump", "dumps", "pack", "packb", "unpack", "unpackb")
    for name in patched:
        monkeypatch.setattr(msgpack, name, getattr(msgpack, name))  # restored after the test
    msgpack_numpy.patch()
    _refused(_ragged_database(tmp_path))


def test_other_databases_are_refused_naming_the_reader(tmp_path: Path) -> None:
    path = str(tmp_path / "other.lmdb")
    env = lmdb.open(path, subdir=False, map_size=1 << 20, lock=False)
    with env.begin(write=True) as txn:
        txn.put(b"a", b"1")
    env.close()
    with pytest.raises(FormatError, match="neither by LMDBSerializer.*nor by tensorpack.*LMDBData"):
        LMDBSerializer.load(path).reset_state()
    raw = LMDBData(path, shuffle=False)
    raw.reset_state()
    assert list(raw) == [[b"a", b"1"]]


@pytest.mark.parametrize("junk", [b"", b"\xc1", b"\x80\x04\x95junk", b"\x92\x01"])
def test_undecodable_values_raise_format_error(junk: bytes) -> None:
    with pytest.raises(FormatError, match="somewhere"):
        loads_tensorpack(junk, allow_pickle=True, where="somewhere")


def _push(addr: str, messages: list[bytes]) -> None:
    """tensorpack's send_dataflow_zmq: a PUSH socket sending one frame per datapoint."""
    ctx = zmq.Context.instance()
    sock = ctx.socket(zmq.PUSH)
    sock.connect(addr)
    try:
        for m in messages:
            sock.send(m)
    finally:
        sock.close(linger=10_000)


def test_remote_receives_a_tensorpack_sender_with_allow_pickle(tmp_path: Path) -> None:
    addr = f"ipc://{tmp_path}/tp.sock"
    df = RemoteDataZMQ(addr, timeout=30, allow_pickle=True)
    df.reset_state()
    try:
        messages = [_pickle(dp) for dp in _dps(4)] + [_msgpack(dp) for dp in _dps(2)]
        sender = threading.Thread(target=_push, args=(addr, messages))
        sender.start()
        it = iter(df)
        got = [next(it) for _ in range(6)]
        sender.join(30)
    finally:
        df.close()
    assert [canon(dp) for dp in got] == [canon(dp) for dp in _dps(4) + _dps(2)]
    assert df.malformed == 0


def test_remote_without_allow_pickle_warns_once_and_counts(tmp_path: Path) -> None:
    addr = f"ipc://{tmp_path}/tp.sock"
    target = tmp_path / "pwned"
    df = RemoteDataZMQ(addr, timeout=30)
    df.reset_state()
    try:
        from dataflow import codec

        good = [bytes(f) for f in codec.dumps_frames([7])]
        ctx = zmq.Context.instance()
        sock = ctx.socket(zmq.PUSH)
        sock.connect(addr)
        for _ in range(5):
            sock.send(_pickle(_Bomb(target)))
        sock.send_multipart(good)
        with pytest.warns(RuntimeWarning, match="tensorpack.*allow_pickle") as record:
            assert next(iter(df)) == [7]
        sock.close(linger=0)
    finally:
        df.close()
    assert df.malformed == 5
    assert len([w for w in record if "RemoteDataZMQ" in str(w.message)]) == 1  # one warning, a counter
    assert not target.exists()


def _write_tensorpack_npz(path: Path, datapoints: list[Any]) -> None:
    """What tensorpack 0.11's NumpySerializer.save writes: one pickled object array."""
    buffer = np.empty((len(datapoints), len(datapoints[0])), dtype=object)
    for i, dp in enumerate(datapoints):
        for j, c in enumerate(dp):
            buffer[i, j] = c
    np.savez_compressed(path, buffer=buffer)


def test_tensorpack_npz_needs_allow_pickle(tmp_path: Path) -> None:
    path = tmp_path / "tp.npz"
    _write_tensorpack_npz(path, _dps(5))
    with pytest.raises(FormatError, match=r"tp\.npz was written by tensorpack's Numpy.*allow_pickle"):
        NumpySerializer.load(str(path)).reset_state()
    df = NumpySerializer.load(str(path), shuffle=False, allow_pickle=True)
    df.reset_state()
    assert len(df) == 5
    assert [canon(dp) for dp in df] == [canon(dp) for dp in _dps(5)]
    assert check_resume(lambda: NumpySerializer.load(str(path), seed=2, allow_pickle=True), max_cuts=6) > 0


def test_tensorpack_hdf5_reads_as_written(tmp_path: Path) -> None:
    """tensorpack's HDF5Serializer wrote one dataset per component path: HDF5Data reads it."""
    path = tmp_path / "tp.h5"
    with h5py.File(path, "w") as hf:
        hf.create_dataset("img", data=np.arange(24, dtype=np.uint8).reshape(4, 2, 3))
        hf.create_dataset("label", data=np.arange(4))
    df = HDF5Serializer.load(str(path), ["img", "label"], shuffle=False)
    df.reset_state()
    got = list(df)
    assert [int(dp[1]) for dp in got] == [0, 1, 2, 3]
    assert np.array_equal(got[2][0], np.arange(24, dtype=np.uint8).reshape(4, 2, 3)[2])
