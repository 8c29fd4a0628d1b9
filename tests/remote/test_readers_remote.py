"""Every file reader reads the same datapoints from ``s3://`` (moto's S3 server),
``http://`` (a local HTTP server) and ``memory://`` as from the local file; lists of URLs and
globs (expanded once, sorted) too; and credentials given in ``storage_options=`` reach the
store but never show in a ``repr``, an error, a log line, a saved state or the cache."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dataflow as D

from ._servers import SECRET, HTTPFiles, S3Server
from ._stores import Store, epoch, plain, record, upload_shards, write_tfrecord_shards

#: The keyword arguments of remote files, not at their defaults, passed to every reader.
KW: dict[str, Any] = {"prefetch_shards": 1, "retries": 3, "timeout": 30.0}

Build = Callable[[list[str], dict[str, Any]], D.DataFlow[Any]]


def _tfrecord_case(decode: Any) -> Callable[[Path], tuple[list[Path], list[Path], Build]]:
    def case(folder: Path) -> tuple[list[Path], list[Path], Build]:
        files = write_tfrecord_shards(folder, [3, 0, 4])
        indexes = [Path(f"{f}.index") for f in files]
        return files, indexes, lambda p, kw: D.TFRecordData(p, decode=decode, **kw)
    return case


def _tfrecord_no_index(folder: Path) -> tuple[list[Path], list[Path], Build]:
    files = write_tfrecord_shards(folder, [2, 5])
    return files, [], lambda p, kw: D.TFRecordData(p, decode="raw", **kw)


def _tfrecord_serializer(folder: Path) -> tuple[list[Path], list[Path], Build]:
    files = write_tfrecord_shards(folder, [6])
    return files, [Path(f"{files[0]}.index")], lambda p, kw: D.TFRecordSerializer.load(p[0], **kw)


def _text(folder: Path) -> tuple[list[Path], list[Path], Build]:
    folder.mkdir(parents=True, exist_ok=True)
    a, b = folder / "a.txt", folder / "b.txt"
    a.write_bytes(b"first\nsecond line\n\nfourth (after an empty one)\n")
    b.write_bytes("windows\r\nlines, unicode: \u00e9\u00e8\r\nno newline at the end".encode())
    return [a, b], [], lambda p, kw: D.TextLineData(p, shuffle=False, **kw)


def _numpy(folder: Path) -> tuple[list[Path], list[Path], Build]:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "data.npz"
    D.NumpySerializer.save(D.DataFromList([record(0, i) for i in range(9)], shuffle=False), str(path),
                           progress=False)
    return [path], [], lambda p, kw: D.NumpySerializer.load(p[0], shuffle=False, **kw)


def _hdf5_rows() -> list[list[Any]]:
    return [[np.full((2, 3), i, np.float32), i * 10] for i in range(7)]


def _hdf5_serializer(folder: Path) -> tuple[list[Path], list[Path], Build]:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "data.h5"
    D.HDF5Serializer.save(D.DataFromList(_hdf5_rows(), shuffle=False), str(path), ["x", "y"], progress=False)
    return [path], [], lambda p, kw: D.HDF5Serializer.load(p[0], ["x", "y"], shuffle=False, **kw)


def _hdf5_data(folder: Path) -> tuple[list[Path], list[Path], Build]:
    files, _, _ = _hdf5_serializer(folder)
    return files, [], lambda p, kw: D.HDF5Data(p[0], ["y", "x"], shuffle=False, **kw)


def _svmlight(folder: Path) -> tuple[list[Path], list[Path], Build]:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "data.svm"
    path.write_text("# a comment\n1 1:0.5 3:2.0\n0 2:1.5\n-1 qid:3 1:1 4:-2.5  # trailing\n")
    return [path], [], lambda p, kw: D.SVMLightData(p[0], shuffle=False, **kw)


READERS: dict[str, Callable[[Path], tuple[list[Path], list[Path], Build]]] = {
    "TFRecordData": _tfrecord_case(True),
    "TFRecordData-raw": _tfrecord_case("raw"),
    "TFRecordData-raw-no-index": _tfrecord_no_index,
    "TFRecordSerializer.load": _tfrecord_serializer,
    "TextLineData": _text,
    "NumpySerializer.load": _numpy,
    "HDF5Serializer.load": _hdf5_serializer,
    "HDF5Data": _hdf5_data,
    "SVMLightData": _svmlight,
}


def _upload(store: Store, files: list[Path], sidecars: list[Path]) -> list[str]:
    for side in sidecars:
        store.put_file(side.name, side)
    return [store.put_file(f.name, f) for f in files]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("reader", READERS)
def test_reader_reads_a_remote_file_as_the_local_one(store: Store, reader: str, tmp_path: Path) -> None:
    files, sidecars, build = READERS[reader](tmp_path / "local")
    urls = _upload(store, files, sidecars)
    expected = epoch(build([str(f) for f in files], {}))
    assert expected, "the case must have data"
    flow = build(urls, {"storage_options": store.options, **KW})
    assert epoch(flow) == expected
    if hasattr(flow, "paths") or reader in ("TFRecordData", "TextLineData"):
        assert flow.paths == urls


@pytest.mark.timeout(60)
@pytest.mark.parametrize("reader", ["TFRecordData", "TextLineData", "NumpySerializer.load", "SVMLightData"])
def test_reader_through_a_cache_dir(store: Store, reader: str, tmp_path: Path) -> None:
    """``cache_dir=``/``cache_limit=`` change where bytes come from, never what is read."""
    files, sidecars, build = READERS[reader](tmp_path / "local")
    urls = _upload(store, files, sidecars)
    expected = epoch(build([str(f) for f in files], {}))
    kw = {"storage_options": store.options, "cache_dir": str(tmp_path / "cache"), "cache_limit": 1 << 20}
    assert epoch(build(urls, {**kw, **KW})) == expected
    assert epoch(build(urls, {**kw, **KW})) == expected  # from the cache this time


@pytest.mark.timeout(60)
def test_file_url_is_the_local_file(tmp_path: Path) -> None:
    files = write_tfrecord_shards(tmp_path, [4, 2])
    expected = epoch(D.TFRecordData([str(f) for f in files]))
    assert epoch(D.TFRecordData([f.as_uri() for f in files])) == expected


@pytest.mark.timeout(60)
def test_glob_is_expanded_once_and_sorted(store: Store, tmp_path: Path) -> None:
    files = write_tfrecord_shards(tmp_path, [2, 3, 0, 4, 1])
    for f in reversed(files):  # uploaded out of order: the reader sorts
        upload_shards(store, [f])
    store.put("other-00.tfrecord", b"not a match")
    store.put("train-notes.txt", b"not a match either")
    expected = epoch(D.TFRecordData([str(f) for f in files]))
    store.clear_log()
    flow = D.TFRecordData(store.url("train-*.tfrecord"), storage_options=store.options, **KW)
    assert flow.paths == [store.url(f.name) for f in files]
    listed = store.requests()
    store.put("train-99.tfrecord", files[0].read_bytes())  # appears after the open: not read
    store.clear_log()
    got = [plain(dp) for dp in _two_epochs(flow)]
    assert got == expected + expected
    if store.kind == "s3":
        assert listed is not None and listed >= 1
        gets = store.gets()
        assert gets is not None and "train-99.tfrecord" not in gets
        assert store.server.listings(store.bucket) == [], "listed again after the open"


def _two_epochs(flow: D.DataFlow[Any]) -> list[Any]:
    flow.reset_state()
    return [*flow, *flow]


@pytest.mark.timeout(60)
def test_a_list_of_globs_and_urls(store: Store, tmp_path: Path) -> None:
    files = write_tfrecord_shards(tmp_path, [2, 2, 3])
    urls = upload_shards(store, files)
    expected = epoch(D.TFRecordData([str(f) for f in files]))
    flow = D.TFRecordData([urls[0], store.url("train-0[12].tfrecord")], storage_options=store.options)
    assert flow.paths == urls
    assert epoch(flow) == expected


@pytest.mark.timeout(60)
def test_a_glob_matching_nothing_names_it(store: Store) -> None:
    store.put("x.bin", b"x")
    pattern = store.url("train-*.tfrecord")
    with pytest.raises((FileNotFoundError, D.FormatError)) as info:
        flow = D.TFRecordData(pattern, storage_options=store.options)
        epoch(flow)
    assert pattern in str(info.value)


@pytest.mark.timeout(60)
def test_a_missing_object_is_named_as_missing_not_as_lacking_an_index(store: Store) -> None:
    """Without an index beside it, a shard's count is unknown; without the shard itself, the
    error says so (it said to write an index, or that the length was unknown)."""
    url = store.url("no-such-shard.tfrecord")
    with pytest.raises(FileNotFoundError, match=r"TFRecordData: no such object: .*no-such-shard\.tfrecord"):
        len(D.TFRecordData(url, storage_options=store.options))
    flow = D.TFRecordData(url, storage_options=store.options).shard(2, 0)  # equal=True counts records
    with pytest.raises(FileNotFoundError, match=r"no such object"):
        flow.reset_state()
        list(flow)


# -- credentials ------------------------------------------------------------------------------


def _full_text(error: BaseException) -> str:
    """Everything a traceback of ``error`` shows, its causes included."""
    return "".join(traceback.format_exception(error))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("how", ["url", "glob"])
def test_storage_options_reach_s3fs(s3: S3Server, bucket: str, tmp_path: Path, how: str) -> None:
    """A wrong secret is refused by the server: a clear error naming the URL, quickly."""
    files = write_tfrecord_shards(tmp_path, [3, 3])
    store = Store("s3", s3, bucket)
    urls = upload_shards(store, files)
    path = urls[0] if how == "url" else store.url("train-*.tfrecord")
    wrong = "wrong-secret-4f9a"
    start = time.monotonic()
    with pytest.raises((OSError, D.FormatError)) as info:
        flow = D.TFRecordData(path, storage_options=s3.options(secret=wrong), retries=2, timeout=10.0)
        epoch(flow)
    assert time.monotonic() - start < 20, "a refused request must not be retried for long"
    assert path in str(info.value)
    assert wrong not in _full_text(info.value) and SECRET not in _full_text(info.value)
    # the right secret reads it
    assert len(epoch(D.TFRecordData(path, storage_options=s3.storage_options))) == (3 if how == "url" else 6)


@pytest.mark.timeout(60)
def test_the_secret_never_shows(s3: S3Server, bucket: str, tmp_path: Path,
                                caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    files = write_tfrecord_shards(tmp_path / "local", [3, 4, 2])
    store = Store("s3", s3, bucket)
    upload_shards(store, files)
    cache = tmp_path / "cache"
    flow = D.TFRecordData(store.url("train-*.tfrecord"), storage_options=s3.storage_options,
                          cache_dir=str(cache), shuffle=True, seed=3)
    pipeline = flow.map(lambda dp: dp).shard(2, 0, equal=False)
    shown = [repr(flow), str(flow), repr(pipeline), str(pipeline), json.dumps(flow.state_dict())]
    pipeline.reset_state()
    it = iter(pipeline)
    next(it)
    shown += [repr(flow), json.dumps(flow.state_dict()), json.dumps(pipeline.state_dict())]
    list(it)
    shown += [json.dumps(pipeline.state_dict()), str(flow.io_stats())]
    s3.fail_next(1)  # a logged retry
    assert epoch(D.TFRecordData(store.url("train-00.tfrecord"), storage_options=s3.storage_options))
    with pytest.raises((OSError, D.FormatError)) as info:  # an error about an object
        epoch(D.TFRecordData(store.url("missing.tfrecord"), storage_options=s3.storage_options))
    shown.append(_full_text(info.value))
    shown.append(caplog.text)
    for text in shown:
        assert SECRET not in text
    for path in cache.rglob("*"):
        assert SECRET not in path.name
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes()


@pytest.mark.timeout(60)
def test_credentials_in_a_url_never_show(http_files: HTTPFiles, tmp_path: Path) -> None:
    """``user:password@`` in a URL reaches the server but is left out of what is shown."""
    files = write_tfrecord_shards(tmp_path, [3])
    http_files.put_file(files[0].name, files[0])
    http_files.put_file(files[0].name + ".index", f"{files[0]}.index")
    netloc = http_files.endpoint.removeprefix("http://")
    url = f"http://reader:{SECRET}@{netloc}/{files[0].name}"
    flow = D.TFRecordData(url)
    assert epoch(flow) == epoch(D.TFRecordData(str(files[0])))
    shown = [repr(flow), str(flow), json.dumps(flow.state_dict())]
    with pytest.raises((OSError, D.FormatError)) as info:
        epoch(D.TFRecordData(f"http://reader:{SECRET}@{netloc}/missing.tfrecord"))
    shown.append(_full_text(info.value))
    assert f"{http_files.endpoint.removeprefix('http://')}/missing.tfrecord" in str(info.value)
    for text in shown:
        assert SECRET not in text


# -- the options themselves -------------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("reader", ["TFRecordData", "TextLineData"])
@pytest.mark.parametrize("bad", [
    {"retries": -1}, {"timeout": 0}, {"prefetch_shards": -1}, {"cache_limit": 1000},
    {"cache_limit": 0, "cache_dir": "x"}, {"storage_options": "key=secret"},
])
def test_bad_options_name_the_reader(memory_store: Any, reader: str, bad: dict[str, Any]) -> None:
    url = memory_store.put("a.txt", b"line\n")
    cls = getattr(D, reader)
    with pytest.raises((ValueError, TypeError)) as info:
        cls(url, **bad)
    assert reader in str(info.value) and next(iter(bad)) in str(info.value)


@pytest.mark.timeout(60)
def test_local_reading_imports_no_fsspec(tmp_path: Path) -> None:
    """``import dataflow`` and reading local files import none of fsspec/s3fs/aiohttp."""
    files = write_tfrecord_shards(tmp_path, [3])
    code = (
        "import sys, dataflow as D\n"
        f"f = D.TFRecordData({str(files[0])!r}); f.reset_state(); assert len(list(f)) == 3\n"
        "t = D.TextLineData([" + repr(str(files[0]) + ".txt") + "]); t.reset_state(); assert list(t)\n"
        "loaded = sorted(m for m in ('fsspec', 's3fs', 'aiohttp', 'botocore') if m in sys.modules)\n"
        "assert not loaded, loaded\n"
    )
    Path(f"{files[0]}.txt").write_text("a\n")
    root = str(Path(D.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": root}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
