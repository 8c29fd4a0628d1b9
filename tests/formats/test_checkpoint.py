"""Every storage-format reader checkpoints, resumes and shards (issue: resumable pipelines):
at every cut the resumed reader yields exactly what the uninterrupted one would have, and
resuming reads nothing that was consumed (by index for LMDB, NumPy and HDF5; by byte offset
for TFRecord). Wrappers that decode entry by entry (``LMDBDataDecoder``, ``CaffeLMDB``)
resume through their reader, and a run resumed, checkpointed and resumed again, three times
in a row, gives the uninterrupted stream."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lmdb
import numpy as np
import pytest

import dataflow as D
from dataflow import (
    CaffeLMDB,
    HDF5Data,
    HDF5Serializer,
    LMDBData,
    LMDBDataDecoder,
    LMDBSerializer,
    NumpySerializer,
    StateError,
    TFRecordData,
    TFRecordSerializer,
)
from dataflow.formats import _tfrecord as tfrecord
from tests.checkpoint._harness import canon, check_resume

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "tensorpack_migration"))
import synthetic  # noqa: E402

N = 13


def _rows() -> D.DataFlow:
    return D.DataFromList([[i, np.full(3, i, dtype=np.int32), f"s{i}"] for i in range(N)], shuffle=False)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("formats")
    out = {k: str(tmp / k) for k in ("db.lmdb", "data.npz", "data.h5", "a.tfrecord", "b.tfrecord")}
    LMDBSerializer.save(_rows(), out["db.lmdb"])
    NumpySerializer.save(_rows(), out["data.npz"])
    HDF5Serializer.save(_rows().map(lambda dp: [dp[0], dp[1]]), out["data.h5"], ["id", "vec"])
    TFRecordSerializer.save(_rows(), out["a.tfrecord"])
    TFRecordSerializer.save(_rows().take(5), out["b.tfrecord"])
    foreign = str(tmp / "foreign")
    env = lmdb.open(foreign, map_size=1 << 20)
    with env.begin(write=True) as txn:
        for i in range(N):
            txn.put(b"img-%03d" % i, b"payload %d" % i)
    env.close()
    out["foreign"] = foreign
    out["caffe"] = str(tmp / "caffe")
    synthetic.write_caffe_lmdb(Path(out["caffe"]), n=N)
    return out


def _reversed(key: bytes, value: bytes) -> list[Any]:
    return [bytes(key), bytes(value)[::-1]]


def _all_but_threes(key: bytes, value: bytes) -> list[Any] | None:
    return None if key.endswith(b"3") else [bytes(key)]


READERS: dict[str, Callable[[dict[str, str]], D.DataFlow]] = {
    "lmdb in order": lambda f: LMDBSerializer.load(f["db.lmdb"], shuffle=False),
    "lmdb shuffled": lambda f: LMDBSerializer.load(f["db.lmdb"], shuffle=True, seed=3),
    "lmdb raw, foreign, in order": lambda f: LMDBData(f["foreign"], shuffle=False),
    "lmdb raw, foreign, shuffled": lambda f: LMDBData(f["foreign"], shuffle=True, seed=3),
    "lmdb sharded": lambda f: LMDBSerializer.load(f["db.lmdb"], shuffle=True, seed=3).shard(3, 1),
    "numpy in order": lambda f: NumpySerializer.load(f["data.npz"], shuffle=False),
    "numpy shuffled, sharded": lambda f: NumpySerializer.load(f["data.npz"], True, seed=4).shard(2, 0),
    "hdf5 in order": lambda f: HDF5Data(f["data.h5"], ["id", "vec"], shuffle=False),
    "hdf5 shuffled": lambda f: HDF5Data(f["data.h5"], ["id", "vec"], shuffle=True, seed=5),
    "tfrecord, two files": lambda f: TFRecordData([f["a.tfrecord"], f["b.tfrecord"]]),
    "tfrecord raw records": lambda f: TFRecordData(f["a.tfrecord"], decode=False),
    "tfrecord shuffled, two files": lambda f: TFRecordData(
        [f["a.tfrecord"], f["b.tfrecord"]], shuffle=True, seed=3
    ),
    "tfrecord shuffled, sharded": lambda f: TFRecordSerializer.load(
        f["a.tfrecord"], shuffle=True, seed=3
    ).shard(3, 1),
    "lmdb then shuffle buffer and batch": lambda f: (
        LMDBSerializer.load(f["db.lmdb"], shuffle=False).shuffle(4, seed=1).batch(3, remainder=True)
    ),
    "LMDBDataDecoder over shuffled LMDBData": lambda f: LMDBDataDecoder(
        LMDBData(f["foreign"], shuffle=True, seed=3), _reversed
    ),
    "LMDBDataDecoder dropping entries": lambda f: LMDBDataDecoder(
        LMDBData(f["foreign"], shuffle=True, seed=3), _all_but_threes
    ),
    "CaffeLMDB shuffled": lambda f: CaffeLMDB(f["caffe"], shuffle=True, seed=2),
    "CaffeLMDB in order": lambda f: CaffeLMDB(f["caffe"], shuffle=False),
    "LMDBDataDecoder, shuffle buffer, batch": lambda f: (
        LMDBDataDecoder(LMDBData(f["foreign"], shuffle=True, seed=3), _reversed)
        .shuffle(4, seed=1)
        .batch(3, remainder=True)
    ),
}


@pytest.mark.parametrize("name", list(READERS))
def test_reader_resumes_exactly_at_every_cut(name: str, files: dict[str, str]) -> None:
    """Resume inside an epoch, at its end and between epochs, before and after reset_state."""
    cuts = check_resume(lambda: READERS[name](files), epochs=2)
    assert cuts >= 2 * (N // 3) + 3


def _resumed_three_times(build: Callable[[], D.DataFlow], stops: list[int], epochs: int) -> None:
    """Run ``build()`` for ``epochs`` epochs in segments, each in a fresh copy that loads the
    state the previous segment saved (the first starts fresh; segment ``k`` ends once
    ``stops[k]`` datapoints were received in all, epoch boundaries included, and saves with
    its iterator still open); the last copy runs to the end. The stream must equal the
    uninterrupted one, epoch boundaries included."""
    D.set_seed(1234)
    ref = build()
    ref.reset_state()
    expected: list[Any] = []
    for _ in range(epochs):
        expected += [canon(dp) for dp in ref] + ["end of epoch"]
    ref.close()
    got: list[Any] = []
    state: dict[str, Any] | None = None
    done = 0  # epochs finished
    for stop in [*stops, None]:
        D.set_seed(1234 if state is None else 99)  # a resumed copy's RNGs come from the state
        df = build()
        if state is not None:
            df.load_state_dict(state)
        df.reset_state()
        it = iter(df)
        while done < epochs and (stop is None or sum(x != "end of epoch" for x in got) < stop):
            try:
                got.append(canon(next(it)))
            except StopIteration:
                got.append("end of epoch")
                done += 1
                if done < epochs:
                    it = iter(df)
        state = D.codec.loads(D.codec.dumps(df.state_dict()))
        del it
        df.close()
    assert got == expected


THREE_TIMES = [
    "LMDBDataDecoder over shuffled LMDBData",
    "LMDBDataDecoder dropping entries",
    "CaffeLMDB shuffled",
    "lmdb shuffled",
    "tfrecord, two files",
    "LMDBDataDecoder, shuffle buffer, batch",
]


@pytest.mark.parametrize("name", THREE_TIMES)
def test_reader_resumed_three_times_across_epochs(name: str, files: dict[str, str]) -> None:
    """Preempted in epoch 0, 1 and 2, each time resumed into a fresh pipeline."""
    _resumed_three_times(lambda: READERS[name](files), stops=[5, N + 4, 2 * N + 2], epochs=3)


@pytest.mark.parametrize("name", THREE_TIMES)
def test_reader_resumed_three_times_in_one_epoch(name: str, files: dict[str, str]) -> None:
    """Preempted three times inside the first epoch, each time resumed into a fresh pipeline."""
    _resumed_three_times(lambda: READERS[name](files), stops=[3, 6, 10], epochs=2)


def test_lmdb_resume_reads_no_consumed_entry(files: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """No replay: a resumed in-order LMDB reader seeks its cursor to the position's key and
    never decodes an entry before it."""
    df = LMDBSerializer.load(files["db.lmdb"], shuffle=False)
    df.reset_state()
    it = iter(df)
    for _ in range(9):
        next(it)
    state = df.state_dict()
    decoded: list[Any] = []
    real = D.codec.loads

    def spy(data: Any) -> Any:
        out = real(data)
        if isinstance(out, list):  # a datapoint (not the metadata dict)
            decoded.append(out[0])
        return out

    monkeypatch.setattr(D.codec, "loads", spy)
    again = LMDBSerializer.load(files["db.lmdb"], shuffle=False)
    again.load_state_dict(state)
    again.reset_state()
    assert [dp[0] for dp in again] == list(range(9, N))
    assert decoded == list(range(9, N))  # nothing before position 9 was read


def test_tfrecord_resume_seeks_to_the_byte_offset(
    files: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No replay: a resumed TFRecord reader starts reading at the saved byte offset."""
    df = TFRecordData(files["a.tfrecord"])
    df.reset_state()
    it = iter(df)
    for _ in range(7):
        next(it)
    state = df.state_dict()
    starts: list[tuple[int, int]] = []
    real = tfrecord.read_records_from

    def spy(stage: str, path: str, f: Any, verify_crc: bool = True, offset: int = 0, index: int = 0) -> Any:
        starts.append((offset, index))
        assert f.tell() == offset  # the file is opened at the offset: nothing before it is read
        return real(stage, path, f, verify_crc, offset, index)

    monkeypatch.setattr(tfrecord, "read_records_from", spy)
    again = TFRecordData(files["a.tfrecord"])
    again.load_state_dict(state)
    again.reset_state()
    assert [dp[0] for dp in again] == list(range(7, N))
    offsets = tfrecord.read_index("test", files["a.tfrecord"])
    assert offsets is not None and starts == [(int(offsets[7]), 7)], (
        starts
    )  # reset_state reads only the index


def test_reader_state_for_other_data_is_refused(files: dict[str, str]) -> None:
    """A state saved for a file with other contents (another length or file count) raises
    StateError naming the stage instead of resuming at a wrong place."""
    df = TFRecordData([files["a.tfrecord"], files["b.tfrecord"]])
    df.reset_state()
    next(iter(df))
    with pytest.raises(StateError, match="TFRecordData"):
        TFRecordData(files["a.tfrecord"]).load_state_dict(df.state_dict())
    short = NumpySerializer.load(files["data.npz"], shuffle=False)
    short.reset_state()
    next(iter(short))
    state = short.state_dict()
    state["root"]["state"]["items"] = N + 1
    with pytest.raises(StateError, match="datapoints"):
        NumpySerializer.load(files["data.npz"], shuffle=False).load_state_dict(state)


def test_lmdb_shards_are_disjoint_and_cover_the_database(files: dict[str, str]) -> None:
    """Index-based sharding of a shuffled LMDB reader: equal, disjoint shares per rank."""
    seen = []
    for rank in range(3):
        df = LMDBSerializer.load(files["db.lmdb"], shuffle=True, seed=9).shard(3, rank)
        df.reset_state()
        seen.append([dp[0] for dp in df])
    assert {len(s) for s in seen} == {N // 3}
    flat = [i for s in seen for i in s]
    assert len(set(flat)) == len(flat) and set(flat) <= set(range(N))
