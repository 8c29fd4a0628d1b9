"""The workers of a rank split the rank's shards (issue 25 item 2): ``rank.shard(m, w)`` on a
``.shard()`` read by index or by file gives worker ``w`` a part of the rank's epoch, reading
only that part. For any sizes, ranks and workers (hypothesis): the parts of all ranks and
workers are disjoint, together they are each rank's epoch, each worker reads only its own
indices/files, and a worker resumed from its state yields the rest of its epoch."""

from __future__ import annotations

import itertools
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import dataflow as D
from dataflow._errors import StateError
from dataflow.formats._storage import ShardStorage
from dataflow.sources._indexed import IndexedSource

fsspec = pytest.importorskip("fsspec")

SETTINGS = settings(max_examples=25, deadline=None)
pytestmark = pytest.mark.timeout(120)


class Recorded(IndexedSource[int]):
    """``0..n-1`` by index; every index read is appended to ``reads`` (shared by copies)."""

    def __init__(self, n: int, shuffle: bool, reads: list[int]) -> None:
        super().__init__(seed=3)
        self.n, self._shuffle, self.reads = n, shuffle, reads

    def _num_items(self) -> int:
        return self.n

    def _getter(self) -> Callable[[int], int]:
        reads = self.reads

        def get(i: int) -> int:
            reads.append(i)
            return i

        return get


def _epoch(flow: D.DataFlow[Any], exact: bool = True) -> list[Any]:
    flow.reset_state()
    out = [tuple(dp) if isinstance(dp, list) else dp for dp in flow]
    assert len(out) == len(flow) or (not exact and len(out) <= len(flow))
    return out


@SETTINGS
@given(
    total=st.integers(0, 60),
    ranks=st.integers(1, 4),
    workers=st.integers(1, 4),
    rank_mode=st.sampled_from([(False, False), (True, False), (True, True)]),
    worker_equal=st.booleans(),
    shuffle=st.booleans(),
)
def test_workers_split_a_rank_by_index(total, ranks, workers, rank_mode, worker_equal, shuffle):
    equal, pad = rank_mode
    seen: list[int] = []
    for r in range(ranks):
        rank_epoch = _epoch(Recorded(total, shuffle, []).shard(ranks, r, equal=equal, pad=pad))
        reads: list[int] = []
        rank = Recorded(total, shuffle, reads).shard(ranks, r, equal=equal, pad=pad)
        parts = []
        for w in range(workers):
            part = rank.shard(workers, w, equal=worker_equal)
            assert part.by_index
            parts.append(_epoch(part))
        got = [i for p in parts for i in p]
        assert sorted(reads) == sorted(got), "a worker read an index it did not yield"
        if worker_equal:  # equal counts, as ShardData documents
            assert [len(p) for p in parts] == [len(rank_epoch) // workers] * workers
            assert not Counter(got) - Counter(rank_epoch)
        else:
            assert Counter(got) == Counter(rank_epoch)
        seen += got
    if not pad:
        assert len(seen) == len(set(seen)), "two workers of the ranks got the same datapoint"
    if not equal and not worker_equal:
        assert sorted(seen) == list(range(total))


def _write(tmp: Path, sizes: list[int]) -> tuple[str, str]:
    """TFRecord files (with indexes) of ``sizes`` records, on disk and in memory://."""
    mem = fsspec.filesystem("memory")
    prefix = f"memory://workers-{uuid.uuid4().hex}"
    for k, n in enumerate(sizes):
        path = tmp / f"part-{k:02d}.tfrecord"
        D.TFRecordSerializer.save(
            D.DataFromList([[k, i] for i in range(max(n, 1))], shuffle=False), str(path), progress=False,
            overwrite=True,
        )
        if n == 0:
            path.write_bytes(b"")
            D.TFRecordSerializer.write_index(str(path))
        for suffix in ("", ".index"):
            mem.pipe(f"{prefix}/part-{k:02d}.tfrecord{suffix}", Path(str(path) + suffix).read_bytes())
    return str(tmp / "part-*.tfrecord"), f"{prefix}/part-*.tfrecord"


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files (local or remote) every reader of this process opened or fetched."""
    log: list[str] = []
    real_open, real_fetch = ShardStorage.open, ShardStorage.fetch

    def open_(self: ShardStorage, index: int, *args: Any, **kwargs: Any) -> Any:
        log.append(self.urls[index].rsplit("/", 1)[-1])
        return real_open(self, index, *args, **kwargs)

    def fetch(self: ShardStorage, index: int, *args: Any, **kwargs: Any) -> Any:
        log.append(self.urls[index].rsplit("/", 1)[-1])
        return real_fetch(self, index, *args, **kwargs)

    monkeypatch.setattr(ShardStorage, "open", open_)
    monkeypatch.setattr(ShardStorage, "fetch", fetch)
    return log


def _reader(src: str) -> D.DataFlow[Any]:
    remote = src.startswith("memory://")  # remote: shuffled by file and within each file
    return D.TFRecordData(src, shuffle=remote, seed=7, prefetch_shards=0)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sizes=st.lists(st.integers(0, 6), min_size=1, max_size=9),
    ranks=st.integers(1, 3),
    workers=st.integers(1, 3),
    equal=st.booleans(),
    remote=st.booleans(),
)
@example(sizes=[3, 1, 4, 1, 5, 9, 2, 6], ranks=2, workers=2, equal=True, remote=True)
@example(sizes=[3, 1, 4, 1, 5, 9, 2, 6], ranks=2, workers=2, equal=False, remote=False)
@example(sizes=[2, 2, 2, 2, 2, 2], ranks=3, workers=2, equal=True, remote=False)
def test_workers_of_a_rank_read_only_their_files(
    tmp_path_factory, opened, sizes, ranks, workers, equal, remote
):
    if remote:  # a remote shuffled reader over an empty file read whole fails (a known bug, not this test's)
        sizes = [max(n, 1) for n in sizes]
    local, mem = _write(tmp_path_factory.mktemp("f"), sizes)
    src = mem if remote else local
    every = sorted((k, i) for k, n in enumerate(sizes) for i in range(n))
    seen: list[tuple[int, int]] = []
    files_of: dict[tuple[int, int], set[str]] = {}
    for r in range(ranks):
        rank_epoch = _epoch(_reader(src).shard(ranks, r, equal=equal))
        split = all(_reader(src).shard(ranks, r, equal=equal).shard(workers, w, equal=False).by_index
                    for w in range(workers))
        got: list[tuple[int, int]] = []
        for w in range(workers):  # each worker has its own copy of the rank's flow, as after a fork
            rank = _reader(src).shard(ranks, r, equal=equal)
            rank.reset_state()  # remote: the index files are fetched here
            part = rank.shard(workers, w, equal=False)
            opened.clear()
            mine = _epoch(part)
            got += mine
            files_of[r, w] = {name for name in opened if not name.endswith(".index")}
            if not part.by_index:  # fewer files than ranks x workers: by position, still exact
                continue
            assert {f"part-{k:02d}.tfrecord" for k, _ in mine} <= files_of[r, w]
        assert Counter(got) == Counter(rank_epoch), "the workers' parts are not the rank's epoch"
        if sizes == [3, 1, 4, 1, 5, 9, 2, 6]:
            assert split
        seen += got
        if split:  # each file (piece) of the rank is read by one of its workers only
            for a, b in itertools.combinations(range(workers), 2):
                assert not files_of[r, a] & files_of[r, b], f"workers {a} and {b} of rank {r} share files"
    assert len(seen) == len(set(seen))
    if equal and len(sizes) >= ranks:
        assert len(seen) == ranks * (sum(sizes) // ranks)
    elif not equal:
        assert sorted(seen) == every


@SETTINGS
@given(
    sizes=st.lists(st.integers(0, 5), min_size=2, max_size=8),
    equal=st.booleans(),
    remote=st.booleans(),
    cut=st.integers(0, 12),
)
def test_a_worker_resumes_the_rest_of_its_part(tmp_path_factory, sizes, equal, remote, cut):
    if remote:  # see test_workers_of_a_rank_read_only_their_files
        sizes = [max(n, 1) for n in sizes]
    local, mem = _write(tmp_path_factory.mktemp("f"), sizes)
    src = mem if remote else local
    for w in range(2):
        whole = _epoch(_reader(src).shard(1, 0, equal=equal).shard(2, w, equal=False))
        part = _reader(src).shard(1, 0, equal=equal).shard(2, w, equal=False)
        part.reset_state()
        it = iter(part)
        head = [tuple(dp) for dp in itertools.islice(it, min(cut, len(whole)))]
        state = part.state_dict()
        again = _reader(src).shard(1, 0, equal=equal).shard(2, w, equal=False)
        again.load_state_dict(state)
        again.reset_state()
        assert head + [tuple(dp) for dp in again] == whole


def test_building_workers_leaves_the_rank_unchanged() -> None:
    rank = D.DataFromList(list(range(20)), shuffle=True, seed=1).shard(2, 1)
    before = _epoch(D.DataFromList(list(range(20)), shuffle=True, seed=1).shard(2, 1))
    parts = [rank.shard(3, w, equal=False) for w in range(3)]
    assert all(p.by_index for p in parts)
    assert _epoch(rank) == before
    assert sorted(i for p in parts for i in _epoch(p)) == sorted(before)


def test_workers_split_through_plain_maps_only() -> None:
    def rank() -> D.DataFlow[Any]:
        return D.DataFromList(list(range(30)), shuffle=False).shard(2, 0, equal=False)

    mapped = [rank().map(lambda x: x * 10 if x % 4 else None).shard(2, w, equal=False) for w in range(2)]
    assert all(p.by_index for p in mapped)
    got = sorted(i for p in mapped for i in _epoch(p, exact=False))
    assert got == [x * 10 for x in range(0, 30, 2) if x % 4]
    with pytest.warns(UserWarning, match="sharding by position"):
        with_rng = rank().map(lambda x, rng: x, item_rng=True, seed=1).shard(2, 0, equal=False)
    assert not with_rng.by_index  # a datapoint's RNG depends on its position: not split below
    with pytest.warns(UserWarning, match="sharding by position"):
        assert not rank().map(lambda x: x).shard(2, 0, equal=True).by_index  # a map may drop: no equal counts
    with pytest.warns(UserWarning, match="sharding by position"):
        assert not rank().batch(2).shard(2, 0, equal=False).by_index


def test_a_worker_state_loads_into_the_same_rank_and_worker_only() -> None:
    """Unmerged, a worker's state is its own part's (``reshard`` merges all workers' states
    for another layout: tests/checkpoint/test_reshard_workers.py)."""
    flow = D.DataFromList(list(range(40)), shuffle=True, seed=2).shard(2, 1).shard(2, 0, equal=False)
    flow.reset_state()
    it = iter(flow)
    next(it)
    state = flow.state_dict()
    other = D.DataFromList(list(range(40)), shuffle=True, seed=2).shard(2, 1).shard(4, 0, equal=False)
    with pytest.raises(StateError, match="shard 0 of 2 but this pipeline is shard 0 of 4"):
        other.load_state_dict(state)


@pytest.mark.filterwarnings("ignore:.*sharding by position")
@pytest.mark.parametrize("other", [{"equal": False}, {"equal": True, "pad": True}])
def test_a_state_of_another_split_mode_is_refused(other: dict[str, bool]) -> None:
    """equal=True and equal=False (or pad) give a rank other datapoints: a position saved under
    one would stop early or read past its part under the other."""
    flow = D.DataFromList([[i] for i in range(41)], shuffle=True, seed=2).batch(2).shard(2, 1, equal=True)
    flow.reset_state()
    it = iter(flow)
    next(it)
    state = flow.state_dict()
    again = D.DataFromList([[i] for i in range(41)], shuffle=True, seed=2).batch(2).shard(2, 1, **other)
    with pytest.raises(StateError, match="saved by a shard with equal=True, pad=False"):
        again.load_state_dict(state)


def _text_files(tmp: Path) -> D.DataFlow[Any]:
    for k in range(7):
        (tmp / f"t-{k}.txt").write_text("".join(f"{k}:{i}\n" for i in range(k + 2)))
    return D.TextLineData(str(tmp / "t-*.txt"))


def _parquet_files(tmp: Path) -> D.DataFlow[Any]:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    base = 0
    for k in range(4):
        ids = list(range(base, base + 3 + 2 * k))
        pq.write_table(pa.table({"id": ids}), str(tmp / f"p-{k}.parquet"), row_group_size=2)
        base += len(ids)
    return D.ParquetData(str(tmp / "p-*.parquet"))


def _tar_files(tmp: Path) -> D.DataFlow[Any]:
    start = 0
    for k in range(7):
        samples = [{"__key__": f"s{i:04d}", "cls": i} for i in range(start, start + k + 1)]
        D.WebDatasetSerializer.save(D.DataFromList(samples, shuffle=False), str(tmp / "w-%03d.tar"),
                                    maxcount=len(samples), start_shard=k, progress=False, overwrite=True)
        start += len(samples)
    return D.WebDatasetData(str(tmp / "w-*.tar"))


def _key(dp: Any) -> Any:
    if isinstance(dp, dict):
        return int(dp["id"] if "id" in dp else dp["cls"])
    return dp[0]


@pytest.mark.parametrize(
    ("make", "equal"),
    [(_text_files, False), (_parquet_files, False), (_parquet_files, True), (_tar_files, False)],
)
def test_every_file_reader_splits_a_rank_among_its_workers(tmp_path: Path, make: Any, equal: bool) -> None:
    """TextLineData, ParquetData (row groups) and WebDatasetData split a rank's part among
    its workers by file/piece: disjoint, together the rank's epoch."""
    def epoch(flow: D.DataFlow[Any]) -> list[Any]:
        flow.reset_state()
        return [_key(dp) for dp in flow]

    seen: list[Any] = []
    for r in range(2):
        rank_epoch = sorted(epoch(make(tmp_path).shard(2, r, equal=equal)))
        got = []
        for w in range(2):
            part = make(tmp_path).shard(2, r, equal=equal).shard(2, w, equal=False)
            assert part.by_index, "not split by file"
            got += epoch(part)
        assert sorted(got) == rank_epoch
        seen += got
    assert len(seen) == len(set(seen))
