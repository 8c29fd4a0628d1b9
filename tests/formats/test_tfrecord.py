"""TFRecord: CRC-32C, framing, raw records of foreign files, corrupt and truncated files,
the index file beside ours (count, version, offsets), files of the earlier layout (a header
record), and TensorFlow's reader when it is installed."""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import struct
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dataflow import DataFromList, FormatError, LengthUnknownError, TFRecordData, TFRecordSerializer, codec
from dataflow.formats._crc32c import crc32c, crc32c_parts, crc32c_python, masked_crc32c
from dataflow.formats._tfrecord import HEADER_MAGIC, frame, read_index, read_records, write_index


def _save(tmp_path: Path, n: int = 10) -> Path:
    path = tmp_path / "d.tfrecord"
    TFRecordSerializer.save(
        DataFromList([[i, np.full(100, i, np.int16)] for i in range(n)], shuffle=False), path
    )
    return path


def _legacy(path: Path, datapoints: list, version: int = 1) -> Path:
    """A file of the earlier layout: a header record (magic, count, metadata), no index."""
    meta = {"format": "tfrecord", "version": version, "writer": "dataflow-ml 0.0.1"}
    header = HEADER_MAGIC + struct.pack("<Q", len(datapoints)) + codec.dumps(meta)
    path.write_bytes(frame(header) + b"".join(frame(codec.dumps(dp)) for dp in datapoints))
    return path


# --- CRC-32C -----------------------------------------------------------------------------


@pytest.mark.parametrize("impl", [crc32c, crc32c_python], ids=["selected", "pure-python"])
def test_crc32c_known_vectors(impl) -> None:  # type: ignore[no-untyped-def]
    assert impl(b"123456789") == 0xE3069283
    assert impl(b"") == 0
    assert impl(bytes(32)) == 0x8A9136AA  # RFC 3720, B.4: 32 bytes of zeros
    assert impl(b"\xff" * 32) == 0x62A8AB43  # ... 32 bytes of 0xff
    assert impl(bytes(range(32))) == 0x46DD794E  # ... incrementing bytes


def test_pure_python_crc_matches_the_selected_one_on_every_length() -> None:
    rng = np.random.default_rng(0)
    for n in [*range(0, 40), 1000, 4099]:
        data = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        assert crc32c_python(data) == crc32c(data), n


def test_pure_python_fallback_without_google_crc32c_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    """google-crc32c is a core dependency; a broken install still reads files, and says why
    it is slow."""
    from dataflow.formats import _crc32c

    monkeypatch.setitem(sys.modules, "google_crc32c", None)
    try:
        importlib.reload(_crc32c)
        with pytest.warns(RuntimeWarning, match="google-crc32c .* is not installed.*pure-Python CRC-32C"):
            assert _crc32c.implementation() == "python"
        assert _crc32c.crc32c(b"123456789") == 0xE3069283
    finally:
        monkeypatch.undo()
        importlib.reload(_crc32c)


def test_masked_crc() -> None:
    crc = crc32c(b"123456789")
    assert masked_crc32c(b"123456789") == (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def test_frame_layout() -> None:
    rec = frame(b"hello")
    assert rec[:8] == struct.pack("<Q", 5)
    assert rec[8:12] == struct.pack("<I", masked_crc32c(struct.pack("<Q", 5)))
    assert rec[12:17] == b"hello" and rec[17:] == struct.pack("<I", masked_crc32c(b"hello"))


# --- reading -----------------------------------------------------------------------------


def test_raw_records_of_a_foreign_file(tmp_path: Path) -> None:
    path = tmp_path / "foreign.tfrecord"
    records = [b"", b"a", os.urandom(5000), b"tf.train.Example bytes"]
    path.write_bytes(b"".join(frame(r) for r in records))
    df = TFRecordData(str(path), decode=False)
    df.reset_state()
    assert list(df) == records and list(df) == records  # two epochs
    with pytest.raises(LengthUnknownError, match="pass size="):
        len(df)
    assert len(TFRecordData(str(path), decode=False, size=4)) == 4
    decoded = TFRecordData(str(path), decode=True)
    decoded.reset_state()
    with pytest.raises(codec.CodecError, match=r"foreign.tfrecord: record 0 at byte offset 0.*decode=False"):
        list(decoded)


def test_several_files_in_order_decoded_and_raw(tmp_path: Path) -> None:
    a, b = tmp_path / "a.tfrecord", tmp_path / "b.tfrecord"
    TFRecordSerializer.save(DataFromList([[1], [2]], shuffle=False), str(a))
    TFRecordSerializer.save(DataFromList([[3]], shuffle=False), str(b))
    df = TFRecordData([str(a), b], decode=True)
    assert len(df) == 3
    df.reset_state()
    assert [dp[0] for dp in df] == [1, 2, 3]
    raw = TFRecordData(str(a), decode=False)
    raw.reset_state()
    assert [codec.loads(r) for r in raw] == [[1], [2]]


def test_flipped_byte_names_the_file_record_and_offset(tmp_path: Path) -> None:
    path = _save(tmp_path)
    data = bytearray(path.read_bytes())
    mid = len(data) // 2
    data[mid] ^= 0x40
    path.write_bytes(bytes(data))
    df = TFRecordSerializer.load(str(path))
    df.reset_state()
    with pytest.raises(FormatError, match=r"d\.tfrecord: record \d+ at byte offset \d+: corrupt") as info:
        list(df)
    found = re.search(r"record (\d+) at byte offset (\d+)", str(info.value))
    assert found is not None
    index, offset = map(int, found.groups())
    record_len = len(frame(codec.dumps([0, np.full(100, 0, np.int16)])))  # all 10 are this long
    assert index > 0 and offset <= mid < offset + record_len  # names the damaged record


def test_flipped_length_byte_is_a_corrupt_length(tmp_path: Path) -> None:
    path = _save(tmp_path)
    data = bytearray(path.read_bytes())
    first = struct.unpack_from("<Q", data, 0)[0] + 16  # the second record starts here
    data[first + 1] ^= 0x01
    path.write_bytes(bytes(data))
    df = TFRecordData(str(path), decode=False)
    df.reset_state()
    with pytest.raises(FormatError, match=f"record 1 at byte offset {first}: corrupt record length"):
        list(df)


@pytest.mark.parametrize("cut", [3, 20, 300])
def test_truncated_file(tmp_path: Path, cut: int) -> None:
    path = _save(tmp_path)
    offsets = read_index("test", str(path))
    assert offsets is not None
    data = path.read_bytes()
    path.write_bytes(data[:-cut])
    df = TFRecordSerializer.load(str(path))
    with pytest.raises(
        FormatError, match=rf"d\.tfrecord has {len(data) - cut} bytes but its index .* says {len(data)}"
    ):
        df.reset_state()  # the index knows the size: caught before the first record
    Path(str(path) + ".index").unlink()  # without the index: caught at the damaged record
    record = max(i for i, o in enumerate(offsets.tolist()) if o < len(data) - cut)
    df = TFRecordSerializer.load(str(path))
    df.reset_state()
    with pytest.raises(
        FormatError, match=f"d.tfrecord: record {record} at byte offset {offsets[record]}.*truncated"
    ):
        list(df)


def test_file_cut_at_a_record_boundary_is_caught(tmp_path: Path) -> None:
    path = _save(tmp_path)
    data = path.read_bytes()
    last = len(frame(codec.dumps([9, np.full(100, 9, np.int16)])))
    path.write_bytes(data[:-last])
    with pytest.raises(FormatError, match="the file is truncated"):
        TFRecordSerializer.load(str(path)).reset_state()
    legacy = _legacy(tmp_path / "old.tfrecord", [[i] for i in range(10)])
    legacy.write_bytes(legacy.read_bytes()[: -len(frame(codec.dumps([9])))])
    df = TFRecordSerializer.load(str(legacy))
    df.reset_state()
    with pytest.raises(FormatError, match="the header says 10 records but the file has 9"):
        list(df)


def test_our_file_holds_only_datapoint_records_and_an_index_beside_it(tmp_path: Path) -> None:
    path = _save(tmp_path, 4)
    records = [data for _, _, data in read_records("test", str(path))]
    assert [codec.loads(r)[0] for r in records] == [0, 1, 2, 3]  # no header record
    offsets = read_index("test", str(path))
    assert offsets is not None and offsets.tolist() == [
        sum(len(r) + 16 for r in records[:i]) for i in range(4)
    ]
    meta = codec.loads(Path(str(path) + ".index").read_bytes())
    assert (
        meta["format"] == "tfrecord-index"
        and meta["count"] == 4
        and meta["data_bytes"] == path.stat().st_size
    )
    assert len(TFRecordSerializer.load(str(path))) == 4


def test_files_of_the_earlier_layout_with_a_header_record_are_still_read(tmp_path: Path) -> None:
    path = _legacy(tmp_path / "old.tfrecord", [[i, np.arange(i)] for i in range(5)])
    df = TFRecordSerializer.load(str(path))
    assert len(df) == 5
    df.reset_state()
    assert [dp[0] for dp in df] == [0, 1, 2, 3, 4]
    raw = TFRecordData(str(path), decode=False)
    raw.reset_state()
    assert [codec.loads(r)[0] for r in raw] == [0, 1, 2, 3, 4]  # the header is never yielded
    assert write_index(str(path)) == 5  # its index leaves the header out: shuffling works too
    shuffled = TFRecordData(str(path), shuffle=True, seed=1)
    shuffled.reset_state()
    assert sorted(dp[0] for dp in shuffled) == [0, 1, 2, 3, 4]


def test_a_stale_or_damaged_index_is_refused_naming_it(tmp_path: Path) -> None:
    path = _save(tmp_path, 3)
    ipath = Path(str(path) + ".index")
    ipath.write_bytes(ipath.read_bytes()[:-5])
    with pytest.raises(FormatError, match=r"d\.tfrecord\.index: the index file is damaged"):
        TFRecordSerializer.load(str(path)).reset_state()
    meta = {"format": "tfrecord-index", "version": 2, "count": 0, "writer": "dataflow-ml 9.9"}
    ipath.write_bytes(codec.dumps({**meta, "data_bytes": 0, "offsets": np.zeros(0, np.uint64)}))
    with pytest.raises(FormatError, match=r"tfrecord-index format version 2 \(by dataflow-ml 9.9\)"):
        len(TFRecordData(str(path)))
    TFRecordSerializer.save(DataFromList([[1], [2]]), str(tmp_path / "other.tfrecord"))
    ipath.write_bytes(Path(str(tmp_path / "other.tfrecord") + ".index").read_bytes())
    with pytest.raises(FormatError, match="rewritten without its index"):
        len(TFRecordData(str(path)))


def test_write_index_for_a_foreign_file(tmp_path: Path) -> None:
    path = tmp_path / "foreign.tfrecord"
    records = [b"a", b"", os.urandom(3000), b"zz"]
    path.write_bytes(b"".join(frame(r) for r in records))
    with pytest.raises(LengthUnknownError, match="write_index"):
        len(TFRecordData(str(path), decode=False))
    assert write_index(str(path)) == 4
    df = TFRecordData(str(path), decode=False)
    assert len(df) == 4
    df.reset_state()
    assert list(df) == records


def test_crc_check_can_be_skipped_for_data_only(tmp_path: Path) -> None:
    path = tmp_path / "r.tfrecord"
    rec = bytearray(frame(b"payload"))
    rec[-1] ^= 0xFF  # wrong data CRC
    path.write_bytes(bytes(rec))
    unchecked = TFRecordData(str(path), decode=False, verify_crc=False)
    unchecked.reset_state()
    assert list(unchecked) == [b"payload"]
    with pytest.raises(FormatError, match="record 0 at byte offset 0: corrupt record data"):
        TFRecordData(str(path), decode=False).reset_state()  # reset_state reads the first record


def test_newer_format_version_is_refused(tmp_path: Path) -> None:
    path = _legacy(tmp_path / "new.tfrecord", [[1]], version=2)
    with pytest.raises(
        FormatError, match=r"format version 2 \(by dataflow-ml 0.0.1\), newer than the version 1"
    ):
        TFRecordSerializer.load(str(path)).reset_state()
    with pytest.raises(FormatError, match="format version 2"):
        len(TFRecordData(str(path), decode=False))


def test_shuffled_reads_every_record_of_every_file_once_per_epoch(tmp_path: Path) -> None:
    a, b = tmp_path / "a.tfrecord", tmp_path / "b.tfrecord"
    TFRecordSerializer.save(DataFromList([[i] for i in range(7)], shuffle=False), str(a))
    TFRecordSerializer.save(DataFromList([[i] for i in range(7, 12)], shuffle=False), str(b))
    df = TFRecordData([str(a), b], shuffle=True, seed=5)
    assert isinstance(df, TFRecordData) and len(df) == 12
    df.reset_state()
    first, second = [dp[0] for dp in df], [dp[0] for dp in df]
    assert sorted(first) == sorted(second) == list(range(12)) and first != second
    again = TFRecordData([str(a), str(b)], shuffle=True, seed=5)
    again.reset_state()
    assert [dp[0] for dp in again] == first  # the seed fixes the permutations
    shards = []
    for rank in range(3):
        part = TFRecordSerializer.load(str(a), shuffle=True, seed=1).shard(3, rank)
        part.reset_state()
        shards.append([dp[0] for dp in part])
    assert all(len(p) == 2 for p in shards) and len({i for p in shards for i in p}) == 6  # by index


def test_shuffled_needs_the_index_and_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "foreign.tfrecord"
    path.write_bytes(frame(b"x"))
    with pytest.raises(FormatError, match=r"foreign\.tfrecord has no index file .*write_index"):
        TFRecordData(str(path), decode=False, shuffle=True).reset_state()


def test_shuffled_damaged_record_names_file_record_and_offset(tmp_path: Path) -> None:
    path = _save(tmp_path)
    offsets = read_index("test", str(path))
    assert offsets is not None
    data = bytearray(path.read_bytes())
    data[int(offsets[4]) + 20] ^= 0x01  # inside record 4's data
    path.write_bytes(bytes(data))
    df = TFRecordData(str(path), shuffle=True, seed=0)
    df.reset_state()
    with pytest.raises(FormatError, match=f"record 4 at byte offset {offsets[4]}: corrupt record data"):
        list(df)


def test_writer_survives_short_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write may stop short (a signal, a pipe); the writer goes on where it stopped."""
    real = os.writev
    calls = []

    def short(fd: int, buffers: list) -> int:
        calls.append(len(buffers))
        first = bytes(buffers[0])[:7]  # at most 7 bytes per call
        return real(fd, [first])

    monkeypatch.setattr(os, "writev", short)
    rows = [[i, np.arange(i * 40_000, dtype=np.int32)] for i in range(3)]  # small and large records
    TFRecordSerializer.save(DataFromList(rows, shuffle=False), str(tmp_path / "s.tfrecord"))
    monkeypatch.undo()
    assert len(calls) > 100
    df = TFRecordSerializer.load(str(tmp_path / "s.tfrecord"))
    df.reset_state()
    assert [(dp[0], len(dp[1])) for dp in df] == [(0, 0), (1, 40_000), (2, 80_000)]


def test_save_replaces_a_stale_index_and_readers_pickle(tmp_path: Path) -> None:
    import pickle

    path = tmp_path / "t.tfrecord"
    Path(str(path) + ".index").write_bytes(b"left over from a killed save")
    TFRecordSerializer.save(DataFromList([[1], [2], [3]], shuffle=False), str(path))
    for df in (TFRecordSerializer.load(str(path)), TFRecordSerializer.load(str(path), shuffle=True, seed=2)):
        copy = pickle.loads(pickle.dumps(df))  # what spawned workers receive
        assert type(copy) is type(df) and len(copy) == 3
        copy.reset_state()
        assert sorted(dp[0] for dp in copy) == [1, 2, 3]


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="path must be"):
        TFRecordData(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="path must be"):
        TFRecordData([])
    with pytest.raises(ValueError, match="size must be"):
        TFRecordData("x", size=-1)


@pytest.mark.skipif(
    importlib.util.find_spec("tensorflow") is None,
    reason="TensorFlow is not installed; CI installs it for the adapters and runs this test there",
)
@pytest.mark.framework
def test_tensorflow_reads_our_file(tmp_path: Path) -> None:
    import tensorflow as tf

    path = _save(tmp_path, 5)
    records = [r.numpy() for r in tf.data.TFRecordDataset(str(path))]
    assert len(records) == 5  # datapoints only: nothing to skip
    for i, rec in enumerate(records):
        dp = codec.loads(rec)
        assert dp[0] == i and (dp[1] == i).all()
    ours = TFRecordData(str(path), decode=False)
    ours.reset_state()
    assert list(ours) == records


@given(st.lists(st.tuples(st.binary(max_size=300), st.sampled_from(["bytes", "array", "memoryview"])), max_size=6))  # noqa: E501
def test_crc_over_parts_equals_the_crc_of_their_concatenation(parts: list[tuple[bytes, str]]) -> None:
    """What the writer checksums record by record, without joining a datapoint's buffers."""
    as_kind = {
        "bytes": lambda b: b,
        "array": lambda b: np.frombuffer(bytearray(b), np.uint8),  # writable, like a user's array
        "memoryview": lambda b: memoryview(bytearray(b)),
    }
    buffers = [as_kind[kind](data) for data, kind in parts]
    assert crc32c_parts(buffers) == crc32c_python(b"".join(data for data, _ in parts))
