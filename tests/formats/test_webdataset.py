"""WebDataset tar shards: :class:`dataflow.WebDatasetData` and :class:`dataflow.WebDatasetSerializer`,
checked against the ``webdataset`` package both ways (it reads our shards, we read its), and
for decoding, shard shuffling, rank splits, resume at any cut, remote shards and damaged tars."""

from __future__ import annotations

import io
import json
import os
import re
import tarfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dataflow as D
from dataflow import FormatError, LengthUnknownError
from dataflow.checkpoint import reshard
from tests.checkpoint._harness import check_resume

SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))


def _samples(n: int, start: int = 0, prefix: str = "s") -> list[dict[str, Any]]:
    rng = np.random.default_rng(start)
    return [
        {
            "__key__": f"{prefix}{i:05d}",
            "bin": rng.bytes(int(rng.integers(0, 1500))),
            "cls": i,
            "txt": f"text {i} ✓",
            "json": {"i": i, "name": f"n{i}"},
            "npy": np.arange(i % 5, dtype=np.int16),
        }
        for i in range(start, start + n)
    ]


def _save(folder: Path, counts: list[int], name: str = "shard") -> list[str]:
    """One shard per count, written by our serializer; returns their paths."""
    paths: list[str] = []
    start = 0
    for k, c in enumerate(counts):
        df = _flow(_samples(c, start))
        paths += D.WebDatasetSerializer.save(
            df, str(folder / f"{name}-%06d.tar"), maxcount=max(c, 1), start_shard=k, progress=False
        )
        start += c
    return paths


def _flow(items: list[Any]) -> D.DataFlow[Any]:
    """A flow of ``items`` (empty ones too, which DataFromList refuses)."""
    return D.DataFromGenerator(lambda: iter(items))


def _read(df: D.DataFlow[Any]) -> list[Any]:
    df.reset_state()
    return list(df)


def _theirs(urls: list[str]) -> list[dict[str, Any]]:
    import webdataset as wds

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = []
        for s in wds.WebDataset(urls, shardshuffle=False, empty_check=False):
            s.pop("__local_path__", None)  # webdataset's own addition for local files
            out.append(s)
        return out


def _keys(samples: list[dict[str, Any]]) -> list[str]:
    return [s["__key__"] for s in samples]


# --- round trips with the webdataset package ----------------------------------------------------


def test_webdataset_reads_our_shards_as_we_do(tmp_path: Path) -> None:
    items = _samples(23)
    paths = D.WebDatasetSerializer.save(
        D.DataFromList(items, shuffle=False), str(tmp_path / "s-%04d.tar"), maxcount=10, progress=False
    )
    assert [os.path.basename(p) for p in paths] == ["s-0000.tar", "s-0001.tar", "s-0002.tar"]
    ours = _read(D.WebDatasetData(paths, decode=False))
    theirs = _theirs(paths)
    assert ours == theirs
    assert _keys(ours) == [s["__key__"] for s in items]
    assert ours[0]["__url__"] == paths[0]
    decoded = _read(D.WebDatasetData(paths))
    for got, want in zip(decoded, items):
        assert got["cls"] == want["cls"] and got["txt"] == want["txt"] and got["json"] == want["json"]
        assert got["bin"] == want["bin"]
        np.testing.assert_array_equal(got["npy"], want["npy"])
        assert got["npy"].dtype == np.int16


def test_we_read_shards_written_by_webdataset(tmp_path: Path) -> None:
    import webdataset as wds

    items = _samples(25)
    with wds.ShardWriter(str(tmp_path / "w-%06d.tar"), maxcount=7, verbose=0) as writer:
        for s in items:
            writer.write(s)
    paths = sorted(str(p) for p in tmp_path.glob("w-*.tar"))
    assert len(paths) == 4
    ours = _read(D.WebDatasetData(str(tmp_path / "w-*.tar"), decode=False))
    assert ours == _theirs(paths)
    decoded = _read(D.WebDatasetData(paths))
    assert [s["cls"] for s in decoded] == list(range(25))
    assert [s["json"] for s in decoded] == [s["json"] for s in items]


def _tar(path: Path, members: list[tuple[str, bytes]], fmt: int = tarfile.GNU_FORMAT) -> None:
    with tarfile.open(path, "w", format=fmt) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            if data == b"<dir>":
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
                continue
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


@pytest.mark.parametrize("fmt", [tarfile.GNU_FORMAT, tarfile.PAX_FORMAT, tarfile.USTAR_FORMAT])
def test_long_names_directories_and_metadata_are_read_as_webdataset_reads_them(
    tmp_path: Path, fmt: int
) -> None:
    deep = "/".join(["folder"] * 14)  # 97 characters: with the file name, past ustar's 100
    members = [
        ("__meta__", b"skipped"),
        ("data/", b"<dir>"),
        ("data/a.JPG", b"1"),
        ("data/a.seg.png", b"2"),
        ("data/noext", b"no dot: skipped"),
        (f"{deep}/b.cls", b"3"),
        (f"{deep}/b.txt", b"three"),
        ("__dir__/c.txt", b"metadata folder: skipped"),
        ("c.txt", b"x" * 1000),
    ]
    if fmt != tarfile.USTAR_FORMAT:
        members.append(("d" * 150 + ".txt", "ünïcode".encode()))  # too long even for ustar's prefix
    path = tmp_path / "t.tar"
    _tar(path, members, fmt)
    ours = _read(D.WebDatasetData(str(path), decode=False))
    assert ours == _theirs([str(path)])
    assert _keys(ours)[:3] == ["data/a", f"{deep}/b", "c"]
    assert set(ours[0]) == {"__key__", "__url__", "jpg", "seg.png"}  # extensions lowercased
    assert _read(D.WebDatasetData(str(path), decode={"cls": int}))[1]["cls"] == 3


def test_our_long_keys_are_written_in_pax_headers_that_tar_and_webdataset_read(tmp_path: Path) -> None:
    keys = ["a" * 99, "dir/" * 30 + "b", "c" * 200, "ü" * 80]
    items = [{"__key__": k, "txt": k} for k in keys]
    [path] = D.WebDatasetSerializer.save(
        D.DataFromList(items, shuffle=False), str(tmp_path / "%d.tar"), progress=False
    )
    with tarfile.open(path) as tar:
        assert tar.getnames() == [f"{k}.txt" for k in keys]
    ours = _read(D.WebDatasetData(path))
    assert _keys(ours) == keys and [s["txt"] for s in ours] == keys
    assert _read(D.WebDatasetData(path, decode=False)) == _theirs([path])


# --- decoding -----------------------------------------------------------------------------------


def test_default_decoders_by_extension(tmp_path: Path) -> None:
    cv2 = pytest.importorskip("cv2")
    img = np.zeros((4, 6, 3), np.uint8)
    img[..., 0] = 200  # red in RGB
    ok, png = cv2.imencode(".png", cv2.cvtColor(img, cv2.COLOR_RGB2BGR))
    assert ok
    npz = io.BytesIO()
    np.savez(npz, a=np.ones(3, np.float32), b=np.arange(2))
    sample = {
        "__key__": "k",
        "png": bytes(png),
        "seg.png": bytes(png),
        "json": json.dumps([1, {"a": None}]).encode(),
        "npz": npz.getvalue(),
        "idx": b"12\n",
        "id": b"7",
        "text": "é".encode(),
        "other": b"raw",
    }
    [path] = D.WebDatasetSerializer.save(
        D.DataFromList([sample], shuffle=False), str(tmp_path / "%d.tar"), progress=False
    )
    [got] = _read(D.WebDatasetData(path))
    np.testing.assert_array_equal(got["png"], img)
    assert got["png"].dtype == np.uint8 and got["seg.png"].shape == (4, 6, 3)
    assert got["json"] == [1, {"a": None}] and got["idx"] == 12 and got["id"] == 7 and got["text"] == "é"
    assert set(got["npz"]) == {"a", "b"} and got["npz"]["a"].dtype == np.float32
    assert got["other"] == b"raw"


def test_npy_members_are_never_unpickled(tmp_path: Path) -> None:
    buf = io.BytesIO()
    np.save(buf, np.array([{"evil": 1}], dtype=object), allow_pickle=True)
    [path] = D.WebDatasetSerializer.save(
        D.DataFromList([{"__key__": "k", "npy": buf.getvalue()}], shuffle=False),
        str(tmp_path / "%d.tar"),
        progress=False,
    )
    with pytest.raises(FormatError, match=r"sample 'k': its \.npy member does not decode"):
        _read(D.WebDatasetData(path))


def test_user_decoders_dict_and_function(tmp_path: Path) -> None:
    paths = _save(tmp_path, [3])
    got = _read(D.WebDatasetData(paths, decode={"cls": lambda b: -int(b), "txt": bytes.upper}))
    assert [s["cls"] for s in got] == [0, -1, -2]
    assert got[0]["txt"] == "TEXT 0 ✓".encode() and isinstance(got[0]["json"], bytes)
    calls: list[tuple[str, str]] = []

    def fn(key: str, ext: str, data: bytes) -> int:
        calls.append((key, ext))
        return len(data)

    got = _read(D.WebDatasetData(paths, decode=fn))
    assert got[1]["cls"] == 1 and ("s00001", "npy") in calls
    merged = _read(D.WebDatasetData(paths, decode={**D.WebDatasetData.DECODERS, "bin": len}))
    assert merged[2]["cls"] == 2 and isinstance(merged[2]["bin"], int)


def test_bad_arguments(tmp_path: Path) -> None:
    paths = _save(tmp_path, [2])
    with pytest.raises(ValueError, match="handler must be one of"):
        D.WebDatasetData(paths, handler="skip")
    with pytest.raises(TypeError, match="decode must be"):
        D.WebDatasetData(paths, decode="pil")
    with pytest.raises(TypeError, match="urls must be"):
        D.WebDatasetData(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="seed"):
        D.WebDatasetData(paths, seed=-1)


def test_a_missing_shard_or_a_directory_names_the_stage_and_the_path(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.tar")
    for path, kind, message in (
        (missing, FileNotFoundError, f"WebDatasetData: no such file: {missing!r}"),
        (str(tmp_path), IsADirectoryError, f"WebDatasetData: {str(tmp_path)!r} is a directory"),
    ):
        with pytest.raises(kind, match=re.escape(message)):
            len(D.WebDatasetData(path))
        flow = D.WebDatasetData(path)
        flow.reset_state()
        with pytest.raises(kind, match=re.escape(message)):
            list(flow)


# --- writer ---------------------------------------------------------------------------------------


def test_save_splits_by_count_and_size_and_keys_default_to_the_index(tmp_path: Path) -> None:
    items = [{"bin": bytes(3000), "cls": i} for i in range(10)]
    paths = D.WebDatasetSerializer.save(
        D.DataFromList(items, shuffle=False), str(tmp_path / "a-%02d.tar"), maxcount=4, progress=False
    )
    assert len(paths) == 3
    assert [len(_read(D.WebDatasetData(p))) for p in paths] == [4, 4, 2]
    assert _keys(_read(D.WebDatasetData(paths))) == [f"{i:09d}" for i in range(10)]
    by_size = D.WebDatasetSerializer.save(
        D.DataFromList(items, shuffle=False), str(tmp_path / "b-%02d.tar"), maxsize=7000, progress=False
    )
    assert len(by_size) == 5  # two samples of ~4 KiB fill 7000 bytes, then a new shard starts
    for p in paths + by_size:
        assert os.path.getsize(p) % 10240 == 0  # padded to tar's record size, as tar writes
    [empty] = D.WebDatasetSerializer.save(_flow([]), str(tmp_path / "e-%d.tar"), progress=False)
    assert _read(D.WebDatasetData(empty)) == [] and _theirs([empty]) == []


def test_save_refuses_what_would_not_read_back_naming_the_datapoint(tmp_path: Path) -> None:
    pattern = str(tmp_path / "x-%d.tar")
    cases = [
        ([[1, 2]], "datapoint 0 is a list"),
        ([{"__key__": "a.b", "txt": "x"}], "__key__ must be"),
        ([{"__key__": "a", "txt": "x"}, {"__key__": "a", "txt": "y"}], "datapoint 1 has the same __key__"),
        ([{"__key__": "a", "bin": object()}], r"datapoint 0 \(key 'a'\): its \.bin value cannot be encoded"),
        ([{"__key__": "a", "TXT": "x"}], "lowercase"),
        ([{"__key__": "a"}], "no member"),
    ]
    for items, message in cases:
        with pytest.raises(FormatError, match=message):
            D.WebDatasetSerializer.save(
                D.DataFromList(items, shuffle=False), pattern, progress=False, overwrite=True
            )
    with pytest.raises(ValueError, match="pattern must hold"):
        D.WebDatasetSerializer.save(_flow([]), str(tmp_path / "x.tar"), progress=False)


def test_save_is_all_or_nothing_per_shard(tmp_path: Path) -> None:
    def flow() -> Iterator[dict[str, Any]]:
        for i in range(7):
            yield {"__key__": f"k{i}", "cls": i}
        raise RuntimeError("the flow failed")

    with pytest.raises(RuntimeError, match="the flow failed"):
        D.WebDatasetSerializer.save(
            D.DataFromGenerator(flow), str(tmp_path / "p-%d.tar"), maxcount=3, progress=False
        )
    assert sorted(os.listdir(tmp_path)) == ["p-0.tar", "p-1.tar"]  # complete shards only, no temporary file
    assert [s["cls"] for s in _read(D.WebDatasetData(str(tmp_path / "p-*.tar")))] == list(range(6))
    with pytest.raises(FileExistsError, match="overwrite=True"):
        D.WebDatasetSerializer.save(
            D.DataFromList(_samples(1), shuffle=False), str(tmp_path / "p-%d.tar"), progress=False
        )


# --- order, shuffle, shards -------------------------------------------------------------------------


def test_shards_shuffled_per_epoch_from_the_seed_samples_in_tar_order(tmp_path: Path) -> None:
    paths = _save(tmp_path, [3] * 8)
    df = D.WebDatasetData(paths, decode=False, shuffle=True, seed=5)
    df.reset_state()
    epochs = [_keys(list(df)) for _ in range(3)]
    for keys in epochs:
        assert sorted(keys) == [f"s{i:05d}" for i in range(24)]
        for k in range(0, 24, 3):  # each shard whole and in order
            first = int(keys[k][1:])
            assert keys[k : k + 3] == [f"s{first + j:05d}" for j in range(3)] and first % 3 == 0
    assert epochs[0] != epochs[1] != epochs[2]
    again = D.WebDatasetData(paths, decode=False, shuffle=True, seed=5)
    again.reset_state()
    assert [_keys(list(again)) for _ in range(3)] == epochs


@SETTINGS
@given(st.lists(st.integers(0, 5), min_size=1, max_size=9), st.integers(1, 4), st.booleans(), st.booleans())
def test_ranks_are_disjoint_and_complete(counts: list[int], world: int, equal: bool, shuffle: bool) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        paths = _save(Path(tmp), counts)
        parts = []
        for rank in range(world):
            df = D.WebDatasetData(paths, decode=False, shuffle=shuffle, seed=3).shard(
                world, rank, equal=equal
            )
            df.reset_state()
            parts.append(_keys(list(df)))
            if len(paths) >= world:  # by file: len() known for local shards
                assert len(df) == len(parts[-1])
        keys = [k for p in parts for k in p]
        assert len(keys) == len(set(keys))  # disjoint
        total = sum(counts)
        if not equal:
            assert len(keys) == total  # complete
        else:
            assert len({len(p) for p in parts}) == 1  # every rank as many samples
            if len(paths) < world:
                assert len(keys) == total - total % world
            else:  # by file: each rank stops at the smallest rank's count
                assert len(parts[0]) == min(sum(counts[r::world]) for r in range(world))


def test_len_of_local_shards_from_their_headers(tmp_path: Path) -> None:
    paths = _save(tmp_path, [4, 0, 7])
    assert len(D.WebDatasetData(paths)) == 11
    assert len(D.WebDatasetData(paths).shard(2, 1, equal=False)) == 0


# --- resume -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shuffle", [False, True])
def test_resume_at_every_cut(tmp_path: Path, shuffle: bool) -> None:
    paths = _save(tmp_path, [3, 1, 0, 4])
    check_resume(lambda: D.WebDatasetData(paths, shuffle=shuffle, seed=1), epochs=2)


@SETTINGS
@given(st.lists(st.integers(0, 4), min_size=1, max_size=5), st.integers(1, 3), st.integers(0, 1), st.data())
def test_resume_a_rank_at_any_cut(counts: list[int], world: int, rank: int, data: st.DataObject) -> None:
    import tempfile

    rank = min(rank, world - 1)
    with tempfile.TemporaryDirectory() as tmp:
        paths = _save(Path(tmp), counts)
        equal = data.draw(st.booleans())

        def build() -> D.DataFlow[Any]:
            return D.WebDatasetData(paths, decode=False, shuffle=True, seed=7).shard(world, rank, equal=equal)

        full = _read(build())
        cut = data.draw(st.integers(0, len(full)))
        df = build()
        df.reset_state()
        it = iter(df)
        head = [next(it) for _ in range(cut)]
        state = D.codec.loads(D.codec.dumps(df.state_dict()))
        fresh = build()
        fresh.load_state_dict(state)
        fresh.reset_state()
        assert _keys(head + list(fresh)) == _keys(full)


def test_resume_reads_no_earlier_shard_and_starts_at_the_sample(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = _save(tmp_path, [4, 4, 4])
    df = D.WebDatasetData(paths, decode=False)
    df.reset_state()
    it = iter(df)
    head = [next(it) for _ in range(6)]
    state = df.state_dict()
    opened: list[tuple[int, int]] = []
    from dataflow.formats._storage import ShardStorage

    real_open = ShardStorage.open

    def spy(self: ShardStorage, index: int, start: int = 0, end: int | None = None) -> Any:
        opened.append((index, start))
        return real_open(self, index, start, end)

    monkeypatch.setattr(ShardStorage, "open", spy)
    fresh = D.WebDatasetData(paths, decode=False)
    fresh.load_state_dict(state)
    fresh.reset_state()
    rest = list(fresh)
    assert _keys(head + rest) == [f"s{i:05d}" for i in range(12)]
    assert [i for i, _ in opened] == [1, 2]
    assert opened[0][1] > 0 and opened[0][1] % 512 == 0  # the 3rd sample's first header in shard 1


def test_reshard_splits_what_no_rank_consumed(tmp_path: Path) -> None:
    paths = _save(tmp_path, [3] * 7)
    seen: list[str] = []
    states = []
    for rank in range(2):
        df = D.WebDatasetData(paths, decode=False, shuffle=True, seed=4).shard(2, rank, equal=False)
        df.reset_state()
        it = iter(df)
        seen += _keys([next(it) for _ in range(4 + rank)])
        states.append(df.state_dict())
    merged = reshard(states, 3)
    for rank in range(3):
        df = D.WebDatasetData(paths, decode=False, shuffle=True, seed=4).shard(3, rank, equal=False)
        df.load_state_dict(merged)
        df.reset_state()
        seen += _keys(list(df))
    assert sorted(seen) == [f"s{i:05d}" for i in range(21)]


# --- remote shards --------------------------------------------------------------------------------------


@pytest.fixture
def memory_shards(tmp_path: Path) -> Iterator[list[str]]:
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    root = f"/wds-{os.getpid()}-{tmp_path.name}"
    urls = []
    for p in _save(tmp_path, [3, 2, 4]):
        url = f"memory://{root}/{os.path.basename(p)}"
        fs.pipe(url, Path(p).read_bytes())
        urls.append(url)
    yield urls
    fs.rm(root, recursive=True)


def test_remote_shards_read_resumed_and_sharded(memory_shards: list[str]) -> None:
    urls = memory_shards
    glob = urls[0].rsplit("/", 1)[0] + "/shard-*.tar"
    full = _read(D.WebDatasetData(glob, decode=False))
    assert _keys(full) == [f"s{i:05d}" for i in range(9)]
    assert full[0]["__url__"] == urls[0]
    with pytest.raises(LengthUnknownError):
        len(D.WebDatasetData(urls))
    df = D.WebDatasetData(urls, shuffle=True, seed=2)
    df.reset_state()
    it = iter(df)
    head = [next(it) for _ in range(4)]
    state = df.state_dict()
    fresh = D.WebDatasetData(urls, shuffle=True, seed=2)
    fresh.load_state_dict(state)
    fresh.reset_state()
    rest = list(fresh)
    assert sorted(_keys(head + rest)) == _keys(full)
    assert fresh.io_stats()["requests"] <= 2  # the shard in progress (from the offset) and the next
    by_file = D.WebDatasetData(urls).shard(3, 1, equal=False)
    assert by_file.by_index  # type: ignore[attr-defined]
    assert _keys(_read(by_file)) == ["s00003", "s00004"]
    by_position = D.WebDatasetData(urls).shard(3, 1)  # equal=True needs counts: remote shards have none
    assert not by_position.by_index  # type: ignore[attr-defined]
    assert _keys(_read(by_position)) == _keys(full)[1::3]


# --- damaged shards -----------------------------------------------------------------------------------------


def _damaged(tmp_path: Path, how: str) -> list[str]:
    paths = _save(tmp_path, [3, 3])
    raw = bytearray(Path(paths[0]).read_bytes())
    with tarfile.open(paths[0]) as tar:
        second = tar.getmembers()[5]  # the 1st member of sample 2 ("bin" of s00001)
    if how == "truncated":
        raw = raw[: second.offset_data + 10]
    elif how == "no end":
        with tarfile.open(paths[0]) as tar:
            last = tar.getmembers()[-1]
        raw = raw[: last.offset_data + last.size + (-last.size % 512)]
    elif how == "checksum":
        raw[second.offset + 3] ^= 0xFF
    Path(paths[0]).write_bytes(bytes(raw))
    return paths


@pytest.mark.parametrize(
    ("how", "message"),
    [
        (
            "truncated",
            r"shard-000000\.tar: member 's00001\.bin' at byte offset \d+: the archive ends inside its data",
        ),
        (
            "no end",
            r"shard-000000\.tar: at byte offset \d+: the archive ends without the end-of-archive block",
        ),
        (
            "checksum",
            r"shard-000000\.tar: member '.*' at byte offset \d+: corrupt header \(checksum mismatch\)",
        ),
    ],
)
def test_damaged_shard_raises_naming_shard_and_member(tmp_path: Path, how: str, message: str) -> None:
    paths = _damaged(tmp_path, how)
    df = D.WebDatasetData(paths, decode=False)
    df.reset_state()
    got = []
    with pytest.raises(FormatError, match="WebDatasetData: .*" + message):
        for s in df:
            got.append(s)
    assert len(got) == {"no end": 2, "truncated": 1, "checksum": 0}[how]


@pytest.mark.parametrize("handler", ["warn_and_continue", "ignore_and_continue"])
def test_handlers_skip_to_the_next_shard_and_count(tmp_path: Path, handler: str) -> None:
    paths = _damaged(tmp_path, "truncated")
    df = D.WebDatasetData(paths, decode=False, handler=handler)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = _keys(_read(df))
    assert got == ["s00000", "s00003", "s00004", "s00005"]
    assert df.io_stats()["skipped_shards"] == 1 and df.io_stats()["skipped_samples"] == 1
    warned = [str(w.message) for w in caught if "skipping" in str(w.message)]
    assert len(warned) == (1 if handler == "warn_and_continue" else 0)
    assert all("shard-000000.tar" in w for w in warned)


def test_handlers_skip_a_sample_that_does_not_decode_and_a_missing_shard(tmp_path: Path) -> None:
    items = [{"__key__": f"k{i}", "json": b"{" if i == 1 else b"[1]"} for i in range(3)]
    paths = D.WebDatasetSerializer.save(
        D.DataFromList(items, shuffle=False), str(tmp_path / "%d.tar"), progress=False
    )
    with pytest.raises(
        FormatError, match=r"WebDatasetData: .*0\.tar: sample 'k1': its \.json member does not decode"
    ):
        _read(D.WebDatasetData(paths))
    missing = str(tmp_path / "gone.tar")
    df = D.WebDatasetData([missing, *paths], handler="ignore_and_continue")
    assert _keys(_read(df)) == ["k0", "k2"]
    assert df.io_stats()["skipped_samples"] == 1 and df.io_stats()["skipped_shards"] == 1
    with pytest.raises(FileNotFoundError):
        _read(D.WebDatasetData([missing, *paths]))


def test_a_duplicate_extension_in_a_sample(tmp_path: Path) -> None:
    path = tmp_path / "dup.tar"
    _tar(path, [("a.txt", b"1"), ("a.txt", b"2"), ("b.txt", b"3")])
    with pytest.raises(
        FormatError, match=r"dup\.tar: member 'a\.txt' at byte offset 1024: sample 'a' has a second \.txt"
    ):
        _read(D.WebDatasetData(str(path)))
    df = D.WebDatasetData(str(path), handler="ignore_and_continue")
    assert _keys(_read(df)) == ["b"] and df.io_stats()["skipped_samples"] == 1


@pytest.mark.parametrize("fmt", [tarfile.GNU_FORMAT, tarfile.PAX_FORMAT])
def test_resume_at_every_cut_between_long_name_members(tmp_path: Path, fmt: int) -> None:
    """A member with a long name starts at its long-name or pax header: a resume there
    parses that header again and gets the whole name."""
    paths = []
    for k in range(2):
        path = tmp_path / f"long-{k}.tar"
        _tar(
            path,
            [(f"{'x' * (120 + i)}{k}/{i}.{ext}", b"%d" % i) for i in range(4) for ext in ("cls", "txt")],
            fmt,
        )
        paths.append(str(path))
    assert len(_read(D.WebDatasetData(paths))) == 8
    check_resume(lambda: D.WebDatasetData(paths, shuffle=True, seed=3), epochs=2)
