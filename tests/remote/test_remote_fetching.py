"""How remote shards are fetched, counted by the servers themselves: few requests (listing
once per open), ``io_stats()``, read-ahead, retries of transient failures, clear errors for
missing or changed objects, timeouts instead of hangs, and the node-local shard cache."""

from __future__ import annotations

import multiprocessing
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import dataflow as D

from ._servers import HTTPFiles, S3Server
from ._stores import Store, epoch, epochs, plain, upload_shards, write_tfrecord_shards


def _s3_shards(
    s3: S3Server, bucket: str, folder: Path, counts: list[int]
) -> tuple[Store, list[Path], list[str]]:
    store = Store("s3", s3, bucket)
    files = write_tfrecord_shards(folder, counts)
    urls = upload_shards(store, files)
    s3.clear()
    return store, files, urls


def _http_shards(http: HTTPFiles, folder: Path, counts: list[int]) -> tuple[list[Path], list[str]]:
    files = write_tfrecord_shards(folder, counts)
    urls = upload_shards(Store("http", http), files)
    http.clear()
    return files, urls


def _local(files: list[Path]) -> list[Any]:
    return epoch(D.TFRecordData([str(f) for f in files]))


# -- requests ---------------------------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("how", ["glob", "list"])
def test_requests_per_epoch_are_bounded(s3: S3Server, bucket: str, tmp_path: Path, how: str) -> None:
    """One epoch of N shards: at most 2 requests per shard (the shard, its index) plus the
    listing; a second epoch lists nothing and asks for no index again."""
    n = 6
    store, files, urls = _s3_shards(s3, bucket, tmp_path, [5, 3, 4, 1, 6, 2])
    flow = D.TFRecordData(store.url("train-*.tfrecord") if how == "glob" else urls,
                          storage_options=s3.storage_options)
    flow.reset_state()
    first = [plain(dp) for dp in flow]
    assert len(flow) == 21
    assert first == _local(files)
    assert len(s3.of_bucket(bucket)) <= 2 * n + 2, s3.of_bucket(bucket)
    assert len(s3.listings(bucket)) <= (1 if how == "glob" else 0)
    assert set(Counter(g for g in s3.gets(f"/{bucket}/") if g.endswith(".tfrecord")).values()) == {1}
    s3.clear()
    assert [plain(dp) for dp in flow] == first
    assert s3.listings(bucket) == []
    assert not [g for g in s3.gets(f"/{bucket}/") if g.endswith(".index")], "index files fetched again"
    assert len(s3.of_bucket(bucket)) <= n


@pytest.mark.timeout(60)
def test_io_stats_count_requests_bytes_and_retries(s3: S3Server, bucket: str, tmp_path: Path) -> None:
    store, files, urls = _s3_shards(s3, bucket, tmp_path, [5, 3, 4])
    flow = D.TFRecordData(urls, storage_options=s3.storage_options)
    stats = flow.io_stats()
    assert {"requests", "bytes", "retries"} <= set(stats)
    assert all(isinstance(v, int) for v in stats.values())
    assert epoch(flow) == _local(files)
    stats = flow.io_stats()
    sizes = {f"/{bucket}/{f.name}": f.stat().st_size for f in files}
    sizes |= {f"/{bucket}/{f.name}.index": Path(f"{f}.index").stat().st_size for f in files}
    fetched = s3.gets(f"/{bucket}/")
    assert _per_key(s3, bucket) == Counter({f"/{bucket}/{f.name}": 1 for f in files})
    assert stats["bytes"] == sum(sizes[g] for g in fetched)  # the shards (+ the indexes fetched)
    assert stats["bytes"] >= sum(f.stat().st_size for f in files)
    assert stats["retries"] == 0
    assert 1 <= stats["requests"] <= len(s3.of_bucket(bucket))


@pytest.mark.timeout(60)
def test_io_stats_of_local_files_are_zero(tmp_path: Path) -> None:
    files = write_tfrecord_shards(tmp_path, [3])
    flow = D.TFRecordData([str(f) for f in files])
    epoch(flow)
    assert {k: flow.io_stats()[k] for k in ("requests", "bytes", "retries")} == {
        "requests": 0, "bytes": 0, "retries": 0}


@pytest.mark.timeout(60)
def test_shards_are_fetched_ahead(http_files: HTTPFiles, tmp_path: Path) -> None:
    """With latency, ``prefetch_shards=3`` keeps several shard fetches in flight at once
    (the server sees them overlap), and one epoch takes well under the sum of latencies."""
    files, urls = _http_shards(http_files, tmp_path, [3] * 8)
    flow = D.TFRecordData(urls, prefetch_shards=3)
    flow.reset_state()
    http_files.latency = 0.25
    start = time.monotonic()
    got = [plain(dp) for dp in iter(flow)]
    took = time.monotonic() - start
    assert got == _local(files)
    assert http_files.max_concurrent(".tfrecord") >= 2
    assert took < 8 * 0.25 * 0.9, f"an epoch of 8 shards with 0.25 s latency took {took:.2f} s"


@pytest.mark.timeout(60)
def test_auto_read_ahead_doubles_while_the_reader_waits(http_files: HTTPFiles, tmp_path: Path) -> None:
    """``prefetch_shards="auto"`` over a slow store: two fetches at first, twice as many each
    time the reader waits, so more than two (and never more than 16) are in flight at once
    (the server sees them overlap)."""
    files, urls = _http_shards(http_files, tmp_path, [2] * 24)
    flow = D.TFRecordData(urls)
    flow.reset_state()
    http_files.latency = 0.2
    assert [plain(dp) for dp in iter(flow)] == _local(files)
    assert 4 <= http_files.max_concurrent(".tfrecord") <= 16


# -- faults -----------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_http_503s_are_retried(http_files: HTTPFiles, tmp_path: Path) -> None:
    files, urls = _http_shards(http_files, tmp_path, [4, 2, 5])
    flow = D.TFRecordData(urls)
    http_files.fail_next(2, 503)
    assert epoch(flow) == _local(files)
    assert flow.io_stats()["retries"] >= 2
    assert http_files.pending_faults() == 0


@pytest.mark.timeout(60)
def test_s3_slowdown_is_retried_and_counted(s3: S3Server, bucket: str, tmp_path: Path,
                                             caplog: pytest.LogCaptureFixture) -> None:
    """S3 throttling (503 SlowDown) is retried by the reader, which counts every retry and
    logs once."""
    store, files, urls = _s3_shards(s3, bucket, tmp_path, [4, 2, 5])
    flow = D.TFRecordData(urls, storage_options=s3.storage_options)
    s3.fail_next(3, 503)
    assert epoch(flow) == _local(files)
    assert flow.io_stats()["retries"] >= 3
    retry_lines = [r for r in caplog.records if "retr" in r.getMessage().lower()]
    assert len(retry_lines) == 1, [r.getMessage() for r in retry_lines]


@pytest.mark.timeout(60)
def test_dropped_connections_are_retried(http_files: HTTPFiles, tmp_path: Path) -> None:
    files, urls = _http_shards(http_files, tmp_path, [4, 2, 5])
    flow = D.TFRecordData(urls, prefetch_shards=0)
    http_files.drop_next(3)  # aiohttp sends a dropped GET once more itself: ours retries at least once
    assert epoch(flow) == _local(files)
    assert flow.io_stats()["retries"] >= 1
    assert http_files.pending_faults() == 0


@pytest.mark.timeout(60)
def test_retries_are_bounded(http_files: HTTPFiles, tmp_path: Path) -> None:
    files, urls = _http_shards(http_files, tmp_path, [4])
    flow = D.TFRecordData(urls, retries=2)
    http_files.fail_next(100, 503)
    start = time.monotonic()
    with pytest.raises((OSError, D.FormatError)) as info:
        epoch(flow)
    assert time.monotonic() - start < 20
    assert urls[0] in str(info.value)
    assert len(http_files.gets("/train-00.tfrecord")) <= 3  # the first try and 2 retries


@pytest.mark.timeout(60)
@pytest.mark.parametrize("where", ["first", "middle"])
def test_a_missing_object_names_its_url(store: Store, tmp_path: Path, where: str) -> None:
    """No partial datapoint: the shards before the missing one are read whole, then the
    error names the missing object."""
    files = write_tfrecord_shards(tmp_path, [3, 4])
    urls = upload_shards(store, files)
    missing = store.url("train-gone.tfrecord")
    paths = [missing, *urls] if where == "first" else [urls[0], missing, urls[1]]
    flow = D.TFRecordData(paths, storage_options=store.options)
    got: list[Any] = []
    with pytest.raises((FileNotFoundError, D.FormatError)) as info:
        flow.reset_state()
        for dp in flow:
            got.append(plain(dp))
    assert missing in str(info.value)
    assert got == ([] if where == "first" else _local(files[:1]))


@pytest.mark.timeout(60)
def test_an_object_changed_after_the_listing_is_refused(s3: S3Server, bucket: str, tmp_path: Path) -> None:
    """The glob's listing gave each object's size; an object of another size when fetched
    raises FormatError naming it, after the whole shards before it."""
    store, files, urls = _s3_shards(s3, bucket, tmp_path, [3, 4, 2])
    flow = D.TFRecordData(store.url("train-*.tfrecord"), storage_options=s3.storage_options,
                          prefetch_shards=0)
    s3.put(bucket, files[1].name, files[1].read_bytes() + files[2].read_bytes())  # another size
    got: list[Any] = []
    with pytest.raises(D.FormatError) as info:
        flow.reset_state()
        for dp in flow:
            got.append(plain(dp))
    assert urls[1] in str(info.value)
    assert got == _local(files[:1])


@pytest.mark.timeout(30)
def test_a_slow_server_raises_instead_of_hanging(http_files: HTTPFiles, tmp_path: Path) -> None:
    files, urls = _http_shards(http_files, tmp_path, [4, 4])
    http_files.latency = 5.0
    start = time.monotonic()
    with pytest.raises((OSError, D.FormatError)) as info:  # TimeoutError is an OSError
        flow = D.TFRecordData(urls, timeout=0.5, retries=1)
        epoch(flow)
    assert time.monotonic() - start < 10
    assert any(u in str(info.value) for u in urls) or any(u + ".index" in str(info.value) for u in urls)


# -- the shard cache --------------------------------------------------------------------------


def _per_key(s3: S3Server, bucket: str) -> Counter[str]:
    return Counter(g for g in s3.gets(f"/{bucket}/") if g.endswith(".tfrecord"))


@pytest.mark.timeout(60)
def test_two_flows_sharing_a_cache_fetch_each_shard_once(s3: S3Server, bucket: str, tmp_path: Path) -> None:
    store, files, urls = _s3_shards(s3, bucket, tmp_path / "local", [3, 4, 2, 5])
    cache = str(tmp_path / "cache")
    expected = _local(files)
    a = D.TFRecordData(urls, storage_options=s3.storage_options, cache_dir=cache)
    b = D.TFRecordData(urls, storage_options=s3.storage_options, cache_dir=cache)
    assert epochs(a, 2) == [expected, expected]
    assert epoch(b) == expected
    assert _per_key(s3, bucket) == Counter({f"/{bucket}/{f.name}": 1 for f in files})
    assert b.io_stats()["bytes"] <= sum(Path(f"{f}.index").stat().st_size for f in files)


def _read_in_child(urls: list[str], options: dict[str, Any], cache: str, out: Any) -> None:
    try:
        flow = D.TFRecordData(urls, storage_options=options, cache_dir=cache)
        out.put(("ok", epoch(flow)))
    except BaseException as e:  # report it to the parent
        out.put(("error", repr(e)))


@pytest.mark.timeout(90)
def test_processes_sharing_a_cache_fetch_each_shard_once(s3: S3Server, bucket: str, tmp_path: Path) -> None:
    """Several processes of one node (forked, reading at the same time) download each shard
    once between them, and every one reads every datapoint."""
    store, files, urls = _s3_shards(s3, bucket, tmp_path / "local", [3, 4, 2, 5, 1])
    cache = str(tmp_path / "cache")
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    args = (urls, s3.storage_options, cache, out)
    procs = [ctx.Process(target=_read_in_child, args=args) for _ in range(3)]
    for p in procs:
        p.start()
    results = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    expected = _local(files)
    assert results == [("ok", expected)] * 3
    assert _per_key(s3, bucket) == Counter({f"/{bucket}/{f.name}": 1 for f in files})
    assert not [p for p in Path(cache).rglob("*") if p.is_file() and ".tmp" in p.name], "a torn download"


def _cache_bytes(cache: Path) -> int:
    return sum(p.stat().st_size for p in cache.rglob("*") if p.is_file())


@pytest.mark.timeout(60)
def test_cache_limit_evicts_the_least_recently_used(s3: S3Server, bucket: str, tmp_path: Path) -> None:
    store, files, urls = _s3_shards(s3, bucket, tmp_path / "local", [20] * 6)
    size = max(f.stat().st_size for f in files)
    cache = tmp_path / "cache"
    limit = int(size * 2.5)  # room for two shards
    kw: dict[str, Any] = {
        "storage_options": s3.storage_options, "cache_dir": str(cache), "cache_limit": limit,
    }
    expected = _local(files)
    assert epoch(D.TFRecordData(urls, **kw)) == expected
    assert _cache_bytes(cache) <= limit
    s3.clear()
    assert epoch(D.TFRecordData(urls[-1:], **kw)) == expected[-20:]  # the last read: still cached
    assert _per_key(s3, bucket) == Counter()
    assert epoch(D.TFRecordData(urls[:1], **kw)) == expected[:20]  # the first read: evicted
    assert _per_key(s3, bucket) == Counter({f"/{bucket}/{files[0].name}": 1})
    assert _cache_bytes(cache) <= limit


def test_a_shard_fetched_ahead_is_not_evicted_before_it_is_read(tmp_path: Path) -> None:
    """Read-ahead downloads shards out of their reading order; the cache evicts by *use*: a
    shard fetched early, then passed by later downloads, stays until it has been read, and
    the shards read last are the ones kept."""
    from dataflow.formats._shard_cache import ShardCache

    cache = ShardCache(str(tmp_path), limit=2 * 100 + 50)  # room for two shards of 100 bytes
    downloads: list[str] = []

    def fetch(url: str, pinned: bool) -> None:
        def download() -> bytes:
            downloads.append(url)
            return url.encode().ljust(100, b".")

        cache.get(url, 100, download, pinned)[0].close()

    for url in ("s://0", "s://1", "s://2"):  # read one after another: the oldest go
        fetch(url, False)
    fetch("s://5", True)  # the reader's window: 5 arrives first...
    fetch("s://3", True)
    fetch("s://4", True)  # ...and without pins, 5 (the oldest download) would go here
    assert os.path.exists(cache.path_for("s://5", 100))
    for url in ("s://3", "s://4", "s://5"):
        cache.used(url, 100)
    kept = {u for u in (f"s://{i}" for i in range(6)) if os.path.exists(cache.path_for(u, 100))}
    assert kept == {"s://4", "s://5"}  # the two read last, and the cache within its limit
    downloads.clear()
    fetch("s://5", False)
    assert downloads == []
    fetch("s://6", True)
    fetch("s://7", False)
    fetch("s://8", False)
    assert os.path.exists(cache.path_for("s://6", 100))  # the oldest, but not read yet
    cache.unpin("s://6", 100)  # fetched ahead, never read (an epoch cut short): evictable again
    fetch("s://9", False)
    assert not os.path.exists(cache.path_for("s://6", 100))
