"""Sharding multi-file readers by file, for any file sizes, world and cut (hypothesis):

- ``.shard(world, rank)`` right after ``TFRecordData`` over at least ``world`` files gives
  each rank whole files: ranks are disjoint, ``equal=False`` covers the epoch, ``equal=True``
  gives every rank the same count, and a rank opens only its own files;
- a rank resumed from its state yields exactly the rest of its epoch;
- ``reshard``: states saved by every rank at the same step, merged for another number of
  ranks, resume to what no old rank had consumed, each record once (``equal=False``: all of
  it; ``equal=True``: equal counts);
- the same over ``memory://`` URLs, shuffled by file and within each file.
"""

from __future__ import annotations

import itertools
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dataflow as D
from dataflow.checkpoint import reshard

fsspec = pytest.importorskip("fsspec")

SETTINGS = settings(max_examples=25, deadline=None)
pytestmark = pytest.mark.timeout(120)


def _write(tmp: Path, sizes: list[int]) -> tuple[str, str]:
    """TFRecord files (with their indexes) of ``sizes`` records, on disk and in memory://;
    the globs of both."""
    mem = fsspec.filesystem("memory")
    prefix = f"memory://shards-{uuid.uuid4().hex}"
    for k, n in enumerate(sizes):
        path = tmp / f"part-{k:02d}.tfrecord"
        D.TFRecordSerializer.save(
            D.DataFromList([[k, i] for i in range(max(n, 1))], shuffle=False),
            str(path),
            progress=False,
            overwrite=True,
        )
        if n == 0:  # an empty file, and its index
            path.write_bytes(b"")
            D.TFRecordSerializer.write_index(str(path))
        for suffix in ("", ".index"):
            mem.pipe(f"{prefix}/part-{k:02d}.tfrecord{suffix}", Path(str(path) + suffix).read_bytes())
    return str(tmp / "part-*.tfrecord"), f"{prefix}/part-*.tfrecord"


def _flow(src: str, world: int, rank: int, equal: bool) -> D.DataFlow:
    shuffle = src.startswith("memory://")  # remote: shuffled by file and within each file
    return D.TFRecordData(src, shuffle=shuffle, seed=7).shard(world, rank, equal=equal)


sizes_st = st.lists(st.integers(0, 6), min_size=1, max_size=7)


@SETTINGS
@given(sizes=sizes_st, world=st.integers(1, 4), equal=st.booleans(), remote=st.booleans())
def test_ranks_read_their_own_files(tmp_path_factory, sizes, world, equal, remote):
    local, mem = _write(tmp_path_factory.mktemp("f"), sizes)
    src = mem if remote else local
    parts = []
    for rank in range(world):
        flow = _flow(src, world, rank, equal)
        flow.reset_state()
        first = [tuple(dp) for dp in flow]
        assert len(first) == len(flow)
        parts.append(first)
        if len(sizes) >= world:
            assert flow.by_index  # split by file
        if len(sizes) >= world and not equal:  # whole files (equal: a boundary file is cut in two)
            files = {k for k, _ in first}
            others = [p for r, p in enumerate(parts) if r != rank]
            assert not any(k in files for p in others for k, _ in p)
    records = [r for p in parts for r in p]
    assert len(set(records)) == len(records)
    if equal and len(sizes) >= world:  # cut at the record level: total // world each
        assert [len(p) for p in parts] == [sum(sizes) // world] * world
    elif equal:
        assert len({len(p) for p in parts}) == 1
    else:
        assert sorted(records) == sorted((k, i) for k, n in enumerate(sizes) for i in range(n))


@SETTINGS
@given(
    sizes=sizes_st,
    old=st.integers(1, 4),
    new=st.integers(1, 4),
    cut=st.integers(0, 5),
    equal=st.booleans(),
    remote=st.booleans(),
)
def test_reshard_resumes_what_no_rank_consumed(tmp_path_factory, sizes, old, new, cut, equal, remote):
    local, mem = _write(tmp_path_factory.mktemp("f"), sizes)
    src = mem if remote else local
    if len(sizes) < max(old, new):
        return  # sharded by position, covered by tests/checkpoint/test_shard_properties.py
    lengths = []
    for rank in range(old):
        flow = _flow(src, old, rank, equal)
        flow.reset_state()
        lengths.append(len(flow))
    cut = min(cut, min(lengths) - 1)  # every rank still in the epoch: states saved mid-epoch
    if cut < 0:
        return
    seen, states = [], []
    for rank in range(old):
        flow = _flow(src, old, rank, equal)
        flow.reset_state()
        it = iter(flow)
        seen += [tuple(dp) for dp in itertools.islice(it, cut)]
        states.append(flow.state_dict())
    merged = reshard(states, new)
    rest = []
    for rank in range(new):
        flow = _flow(src, new, rank, equal)
        flow.load_state_dict(merged)
        flow.reset_state()
        rest.append([tuple(dp) for dp in flow])
    everything = seen + [r for p in rest for r in p]
    assert len(set(everything)) == len(everything)
    if equal:
        assert len({len(p) for p in rest}) == 1
    else:
        assert sorted(everything) == sorted((k, i) for k, n in enumerate(sizes) for i in range(n))


@SETTINGS
@given(sizes=sizes_st, world=st.integers(1, 3), cut=st.integers(0, 8), remote=st.booleans())
def test_a_rank_resumes_its_epoch(tmp_path_factory, sizes, world, cut, remote):
    local, mem = _write(tmp_path_factory.mktemp("f"), sizes)
    src = mem if remote else local
    rank = world - 1
    whole = _flow(src, world, rank, False)
    whole.reset_state()
    expected = [tuple(dp) for dp in whole]
    cut = min(cut, max(len(expected) - 1, 0))  # saved mid-epoch (at the end, the next one starts)
    flow = _flow(src, world, rank, False)
    flow.reset_state()
    it = iter(flow)
    head = [tuple(dp) for dp in itertools.islice(it, cut)]
    state = flow.state_dict()
    again = _flow(src, world, rank, False)
    again.load_state_dict(state)
    again.reset_state()
    assert head + [tuple(dp) for dp in again] == expected


def test_equal_needs_index_files(tmp_path):
    local, _ = _write(tmp_path, [2, 3])
    Path(str(tmp_path / "part-01.tfrecord.index")).unlink()
    flow = D.TFRecordData(local).shard(2, 0)
    with pytest.raises(ValueError, match=r"part-01\.tfrecord has no index file.*write_index"):
        flow.reset_state()
        list(flow)


def test_a_merged_state_needs_a_sharded_reader(tmp_path):
    local, _ = _write(tmp_path, [2, 3, 1])
    states = []
    for rank in range(3):
        flow = _flow(local, 3, rank, False)
        flow.reset_state()
        next(iter(flow))
        states.append(flow.state_dict())
    merged = reshard(states, 2)
    with pytest.raises(D.StateError):
        D.TFRecordData(local).load_state_dict(merged)



def test_a_shuffled_remote_epoch_over_an_empty_file(tmp_path):
    """A file the serializer wrote from an epoch with no datapoints, among the shards: its
    first record's offset does not exist (this raised IndexError)."""
    full, empty = tmp_path / "a.tfrecord", tmp_path / "b.tfrecord"
    five = D.DataFromList([[i] for i in range(5)], shuffle=False)
    D.TFRecordSerializer.save(five, str(full), progress=False)
    D.TFRecordSerializer.save(D.DataFromList([[0]]).filter(lambda dp: False), str(empty), progress=False)
    mem, prefix = fsspec.filesystem("memory"), f"memory://empty-{uuid.uuid4().hex}"
    for path in (full, empty):
        for suffix in ("", ".index"):
            mem.pipe(f"{prefix}/{path.name}{suffix}", Path(str(path) + suffix).read_bytes())
    flow = D.TFRecordData([f"{prefix}/a.tfrecord", f"{prefix}/b.tfrecord"], shuffle=True, seed=1)
    flow.reset_state()
    assert len(flow) == 5 and sorted(int(dp[0]) for dp in flow) == list(range(5))
