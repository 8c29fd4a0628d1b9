"""The node-local shard cache (``cache_dir=``, ``cache_limit=``) evicts by use: whatever the
reading order and however far ahead shards are fetched, a shard is never evicted between its
download and its read, and once an epoch is read the cache holds exactly the shards read
last that fit in its limit (hypothesis)."""

from __future__ import annotations

import os
import tempfile
from collections import deque

from hypothesis import given, settings
from hypothesis import strategies as st

from dataflow.formats._shard_cache import ShardCache

SIZE = 100


def _url(shard: int) -> str:
    return f"s3://bucket/train-{shard:03d}.tfrecord"


@settings(max_examples=60, deadline=None)
@given(
    order=st.lists(st.integers(0, 9), min_size=1, max_size=30),
    window=st.integers(1, 6),
    room=st.integers(1, 4),
)
def test_read_ahead_never_evicts_an_unread_shard_and_keeps_the_last_read(
    order: list[int], window: int, room: int
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        cache = ShardCache(folder, limit=room * SIZE + SIZE // 2)
        downloads: list[int] = []

        def fetch(shard: int) -> None:
            def download() -> bytes:
                downloads.append(shard)
                return bytes([shard]) * SIZE

            cache.get(_url(shard), SIZE, download, pinned=True)[0].close()

        ahead: deque[int] = deque()
        upcoming = iter(order)
        read: list[int] = []
        while True:  # as ShardStorage.iterate: up to `window` fetched ahead, read in order
            while len(ahead) < window and (shard := next(upcoming, None)) is not None:
                fetch(shard)
                ahead.append(shard)
            if not ahead:
                break
            shard = ahead.popleft()
            assert all(os.path.exists(cache.path_for(_url(s), SIZE)) for s in ahead), "unread shard evicted"
            cache.used(_url(shard), SIZE)
            read.append(shard)
        last: list[int] = []
        for shard in reversed(read):  # the distinct shards read last that fit
            if shard not in last and len(last) < room:
                last.append(shard)
        kept = {s for s in range(10) if os.path.exists(cache.path_for(_url(s), SIZE))}
        assert kept == set(last)
