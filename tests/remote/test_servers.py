"""The test servers themselves, used directly through fsspec/s3fs: they must behave like the
stores they stand for (listing, byte ranges, signatures, faults) and record what they serve."""

from __future__ import annotations

import time

import fsspec
import pytest

from ._servers import SECRET, HTTPFiles, MemoryStore, S3Server

DATA = bytes(range(256)) * 40  # 10240 bytes


def _s3fs(options: dict[str, object]) -> fsspec.AbstractFileSystem:
    return fsspec.filesystem("s3", skip_instance_cache=True, **options)


def _http(**kwargs: object) -> fsspec.AbstractFileSystem:
    return fsspec.filesystem("http", skip_instance_cache=True, **kwargs)


@pytest.mark.timeout(30)
def test_s3_list_and_ranged_get(s3: S3Server, bucket: str) -> None:
    s3.put(bucket, "d/train-0.bin", DATA)
    s3.put(bucket, "d/train-1.bin", DATA[:100])
    s3.put(bucket, "d/other.bin", b"x")
    s3.clear()
    fs = _s3fs(s3.storage_options)
    train = [f"{bucket}/d/train-0.bin", f"{bucket}/d/train-1.bin"]
    assert sorted(fs.glob(f"{bucket}/d/train-*.bin")) == train
    assert fs.info(f"{bucket}/d/train-0.bin")["size"] == len(DATA)
    assert fs.cat_file(f"{bucket}/d/train-0.bin", start=1000, end=1100) == DATA[1000:1100]
    assert fs.cat_file(f"{bucket}/d/train-1.bin") == DATA[:100]
    assert s3.listings(bucket), "the glob listed the bucket"
    ranged = [r for r in s3.requests if r.method == "GET" and r.path == f"/{bucket}/d/train-0.bin"]
    assert [r.range for r in ranged] == ["bytes=1000-1099"]
    assert s3.gets(f"/{bucket}/") == [f"/{bucket}/d/train-0.bin", f"/{bucket}/d/train-1.bin"]
    assert all(r.path.startswith(f"/{bucket}") for r in s3.of_bucket(bucket))


@pytest.mark.timeout(30)
def test_s3_refuses_a_wrong_secret_and_env_credentials(s3: S3Server, bucket: str) -> None:
    s3.put(bucket, "a.bin", DATA)
    with pytest.raises(PermissionError):
        _s3fs(s3.options(secret="not-" + SECRET)).cat_file(f"{bucket}/a.bin")
    # a client without our options gets the environment's credentials: refused, never AWS
    with pytest.raises(PermissionError):
        fsspec.filesystem("s3", skip_instance_cache=True).cat_file(f"{bucket}/a.bin")
    with pytest.raises(FileNotFoundError):
        _s3fs(s3.storage_options).cat_file(f"{bucket}/missing.bin")


@pytest.mark.timeout(30)
def test_s3_buckets_are_fresh_per_test(s3: S3Server, bucket: str) -> None:
    assert s3.requests == []
    assert _s3fs(s3.storage_options).ls(bucket) == []


@pytest.mark.timeout(30)
def test_http_list_head_and_ranges(http_files: HTTPFiles) -> None:
    http_files.put("d/train-0.bin", DATA)
    http_files.put("d/train-1.bin", DATA[:10])
    http_files.put("d/other.bin", b"x")
    fs = _http()
    base = http_files.endpoint
    assert sorted(fs.glob(f"{base}/d/train-*.bin")) == [f"{base}/d/train-0.bin", f"{base}/d/train-1.bin"]
    assert fs.info(f"{base}/d/train-0.bin")["size"] == len(DATA)
    assert fs.cat_file(f"{base}/d/train-0.bin", start=5, end=25) == DATA[5:25]
    assert fs.cat_file(f"{base}/d/train-0.bin", start=10000) == DATA[10000:]
    assert fs.cat_file(f"{base}/d/train-1.bin") == DATA[:10]
    with fs.open(f"{base}/d/train-0.bin", "rb", block_size=1024) as f:
        f.seek(4000)
        assert f.read(100) == DATA[4000:4100]
    ranges = [r.range for r in http_files.requests if r.method == "GET" and r.path == "/d/train-0.bin"]
    assert "bytes=5-24" in ranges and "bytes=10000-" in ranges
    assert any(r.method == "HEAD" for r in http_files.requests)
    with pytest.raises(FileNotFoundError):
        fs.cat_file(f"{base}/d/missing.bin")


@pytest.mark.timeout(30)
def test_http_latency_is_added_to_every_request(http_files: HTTPFiles) -> None:
    url = http_files.put("a.bin", DATA)
    fs = _http()
    fs.cat_file(url)  # connect once
    http_files.latency = 0.3
    start = time.monotonic()
    assert fs.cat_file(url) == DATA
    assert fs.cat_file(url, start=0, end=10) == DATA[:10]
    assert time.monotonic() - start >= 0.6


@pytest.mark.timeout(30)
def test_http_fail_next_then_success(http_files: HTTPFiles) -> None:
    url = http_files.put("a.bin", DATA)
    fs = _http()
    http_files.fail_next(2, 503)
    for _ in range(2):
        with pytest.raises(Exception) as info:
            fs.cat_file(url)
        assert getattr(info.value, "status", None) == 503
    assert fs.cat_file(url) == DATA
    assert http_files.pending_faults() == 0
    assert len(http_files.gets("/a.bin")) == 3


@pytest.mark.timeout(30)
def test_http_drop_next_closes_without_an_answer(http_files: HTTPFiles) -> None:
    url = http_files.put("a.bin", DATA)
    fs = _http()
    http_files.drop_next(2)  # aiohttp itself sends a GET again once after a disconnect
    with pytest.raises(Exception) as info:
        fs.cat_file(url)
    assert "Disconnect" in type(info.value).__name__ or isinstance(info.value, OSError)
    assert len(http_files.gets("/a.bin")) == 2
    assert fs.cat_file(url) == DATA


@pytest.mark.timeout(30)
def test_http_timeout_against_a_slow_server(http_files: HTTPFiles) -> None:
    import aiohttp

    url = http_files.put("a.bin", DATA)
    http_files.latency = 5.0
    fs = _http(client_kwargs={"timeout": aiohttp.ClientTimeout(total=0.3)})
    start = time.monotonic()
    with pytest.raises(Exception):  # noqa: B017 - aiohttp's or asyncio's timeout error
        fs.cat_file(url)
    assert time.monotonic() - start < 3


@pytest.mark.timeout(30)
def test_memory_store(memory_store: MemoryStore) -> None:
    url = memory_store.put("d/a.bin", DATA)
    assert url.startswith("memory://")
    fs, path = fsspec.core.url_to_fs(url)
    assert fs.cat_file(path, start=3, end=9) == DATA[3:9]
    assert fs.glob(memory_store.url("d/*.bin").removeprefix("memory://")) == [path]
