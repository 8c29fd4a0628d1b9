"""Shards as the unit of work: resuming a remote epoch re-reads no consumed shard, shard order
is shuffled per epoch (seeded), and data-parallel ranks split the shards, each fetching only
its own; all checked against the S3 server's own request log."""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import dataflow as D

from ._servers import S3Server
from ._stores import Store, epoch, epochs, plain, upload_shards, write_tfrecord_shards

PER_SHARD = 5
SHARDS = 4


def _dataset(s3: S3Server, bucket: str, folder: Path, counts: list[int]) -> tuple[Store, list[Path]]:
    store = Store("s3", s3, bucket)
    files = write_tfrecord_shards(folder, counts)
    upload_shards(store, files)
    s3.clear()
    return store, files


def _shard_gets(s3: S3Server, bucket: str) -> Counter[str]:
    """How often each shard (not index) object was fetched since the last clear."""
    return Counter(g.rsplit("/", 1)[1] for g in s3.gets(f"/{bucket}/") if g.endswith(".tfrecord"))


def _take(flow: D.DataFlow[Any], k: int, s3: S3Server) -> tuple[list[Any], dict[str, Any]]:
    """The first ``k`` datapoints of an epoch, and the state after them (through JSON, as a
    checkpoint file would keep it); then the job is "killed": its iterator closed and the
    server's log cleared once the fetches it had started have landed."""
    flow.reset_state()
    it = iter(flow)
    head = [plain(next(it)) for _ in range(k)]
    state = json.loads(json.dumps(flow.state_dict()))
    getattr(it, "close", lambda: None)()
    s3.wait_idle()
    s3.clear()
    return head, state


def _names(files: list[Path]) -> list[str]:
    return [f.name for f in files]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("k", [0, 3, PER_SHARD, 2 * PER_SHARD, 2 * PER_SHARD + 2, SHARDS * PER_SHARD])
def test_resume_fetches_no_consumed_shard(s3: S3Server, bucket: str, tmp_path: Path, k: int) -> None:
    store, files = _dataset(s3, bucket, tmp_path, [PER_SHARD] * SHARDS)
    pattern = store.url("train-*.tfrecord")
    kw: dict[str, Any] = {"storage_options": s3.storage_options}
    full = epoch(D.TFRecordData(pattern, **kw))
    head, state = _take(D.TFRecordData(pattern, **kw), k, s3)
    assert head == full[:k]
    fresh = D.TFRecordData(pattern, **kw)
    fresh.load_state_dict(state)
    fresh.reset_state()
    rest = [plain(dp) for dp in fresh]
    assert head + rest == full
    consumed = _names(files[: k // PER_SHARD])
    fetched = _shard_gets(s3, bucket)
    assert not set(consumed) & set(fetched), f"consumed shards fetched again after the resume: {fetched}"
    assert all(n == 1 for n in fetched.values()), fetched
    assert [plain(dp) for dp in fresh] == full  # the next epoch is whole


@pytest.mark.timeout(60)
@pytest.mark.parametrize("k", [4, 9, 17])
def test_resume_a_shuffled_epoch(s3: S3Server, bucket: str, tmp_path: Path, k: int) -> None:
    store, files = _dataset(s3, bucket, tmp_path, [PER_SHARD] * SHARDS)
    urls = [store.url(f.name) for f in files]
    kw: dict[str, Any] = {"storage_options": s3.storage_options, "shuffle": True, "seed": 5}
    full = epochs(D.TFRecordData(urls, **kw), 2)
    head, state = _take(D.TFRecordData(urls, **kw), k, s3)
    assert head == full[0][:k]
    fresh = D.TFRecordData(urls, **kw)
    fresh.load_state_dict(state)
    fresh.reset_state()
    assert head + [plain(dp) for dp in fresh] == full[0]
    assert [plain(dp) for dp in fresh] == full[1]  # and the epoch after it is the same too
    shard_counts = Counter(dp[0] for dp in head)
    consumed = {files[s].name for s, n in shard_counts.items() if n == PER_SHARD}
    s3.clear()
    again = D.TFRecordData(urls, **kw)
    again.load_state_dict(state)
    again.reset_state()
    list(iter(again))
    assert not consumed & set(_shard_gets(s3, bucket)), "a consumed shard was fetched again"


def _shard_order(datapoints: list[Any]) -> list[int]:
    """The shards in the order their first datapoint appears."""
    return list(dict.fromkeys(dp[0] for dp in datapoints))


@pytest.mark.timeout(60)
def test_shuffled_shards(s3: S3Server, bucket: str, tmp_path: Path) -> None:
    """``shuffle=True`` on remote shards: every record once per epoch, the shard order
    changes across epochs, and the same seed gives the same epochs."""
    counts = [3, 2, 4, 3, 1, 3]
    store, files = _dataset(s3, bucket, tmp_path, counts)
    urls = [store.url(f.name) for f in files]
    every = sorted(map(repr, epoch(D.TFRecordData(urls, storage_options=s3.storage_options))))
    seeded = epochs(D.TFRecordData(urls, storage_options=s3.storage_options, shuffle=True, seed=0), 3)
    for one in seeded:
        assert sorted(map(repr, one)) == every
    orders = [_shard_order(one) for one in seeded]
    assert len({tuple(o) for o in orders}) > 1, f"the same shard order every epoch: {orders}"
    assert epochs(D.TFRecordData(urls, storage_options=s3.storage_options, shuffle=True, seed=0), 3) == seeded
    other = epochs(D.TFRecordData(urls, storage_options=s3.storage_options, shuffle=True, seed=1), 3)
    assert other != seeded
    s3.clear()
    epochs(D.TFRecordData(urls, storage_options=s3.storage_options, shuffle=True, seed=0), 2)
    assert set(_shard_gets(s3, bucket).values()) == {2}, "each shard once per epoch"


@pytest.mark.timeout(120)
@settings(max_examples=12, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    num_shards=st.integers(1, 4),
    counts=st.lists(st.integers(0, 5), min_size=1, max_size=6),
    equal=st.booleans(),
)
@example(num_shards=3, counts=[1, 1, 1, 3], equal=True)  # files of different sizes
@example(num_shards=2, counts=[5, 5, 5, 5], equal=True)  # no balancing: each rank its own files
@example(num_shards=4, counts=[2, 0, 3], equal=False)  # fewer files than ranks, an empty one
@example(num_shards=1, counts=[0], equal=True)
def test_ranks_split_remote_shards(s3: S3Server, num_shards: int, counts: list[int], equal: bool) -> None:
    """``.shard(n, rank)`` on a multi-file remote reader: ranks are disjoint; with
    ``equal=False`` together complete, with ``equal=True`` each gets ``total // n``. When
    there are at least as many files as ranks and no balancing is needed, each rank fetches
    only its own files."""
    bucket = s3.make_bucket()
    with tempfile.TemporaryDirectory() as tmp:
        store, files = _dataset(s3, bucket, Path(tmp), counts)
        urls = [store.url(f.name) for f in files]
        every = [plain(dp) for dp in epoch(D.TFRecordData([str(f) for f in files]))]
    total = sum(counts)
    parts, fetched = [], []
    for rank in range(num_shards):
        s3.clear()
        flow = D.TFRecordData(urls, storage_options=s3.storage_options).shard(num_shards, rank, equal=equal)
        parts.append(epoch(flow))
        fetched.append(set(_shard_gets(s3, bucket)))
    keys = [repr(dp) for part in parts for dp in part]
    assert len(keys) == len(set(keys)), "ranks overlap"
    assert set(keys) <= {repr(dp) for dp in every}
    if equal:
        assert [len(p) for p in parts] == [total // num_shards] * num_shards
    else:
        assert sorted(keys) == sorted(repr(dp) for dp in every)
    balanced = not equal or (len(set(counts)) == 1 and len(counts) % num_shards == 0)
    if len(counts) >= num_shards and balanced:
        for a in range(num_shards):
            for b in range(a + 1, num_shards):
                both = fetched[a] & fetched[b]
                assert not both, f"ranks {a} and {b} both fetched {both}"
