"""``reshard`` of a job whose ranks split their part among workers (hypothesis): the states
of every (rank, worker) saved at one step, merged, and loaded by every worker of another
number of ranks with another number of workers each, resume to exactly what no old worker
had consumed, each datapoint once (``equal=False``: all of it; ``equal=True``: the new
ranks get equal counts, less at most the rows of ranks the old and new splits drop):

- by index: a random-access source, shuffled or not, through a map;
- by file: TFRecord files on disk (in file order) and in ``memory://`` (shuffled by file
  and within each file); Parquet row groups; the new workers split by file, or by position
  where a new rank has fewer pieces than workers.

A runner's or a by-position worker's state is refused with a message that says why.
"""

from __future__ import annotations

import itertools
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import dataflow as D
from dataflow._errors import StateError
from dataflow.checkpoint import reshard
from dataflow.parallel._runners import MultiProcessRunnerZMQ

SETTINGS = settings(max_examples=30, deadline=None)
pytestmark = pytest.mark.timeout(180)

Build = Callable[[int, int, int, int], D.DataFlow[Any]]  # (ranks, rank, workers, worker) -> flow


def _run_job(build: Build, old: tuple[int, int], new: tuple[int, int], cuts: list[int]) -> tuple[
    list[Any], list[list[Any]]
]:
    """What every old worker yielded before the cut (``cuts``, one per worker, rank-major,
    clipped to its part), and what every new rank yielded (its workers' parts together)
    after loading the merged state."""
    ranks, workers = old
    seen: list[Any] = []
    states = []
    for k, (rank, worker) in enumerate(itertools.product(range(ranks), range(workers))):
        flow = build(ranks, rank, workers, worker)
        flow.reset_state()
        it = iter(flow)
        seen += [_key(dp) for dp in itertools.islice(it, min(cuts[k % len(cuts)], len(flow)))]
        states.append(flow.state_dict())
    merged = reshard(states[::-1], new[0])  # any order
    rest = []
    for rank in range(new[0]):
        part: list[Any] = []
        for worker in range(new[1]):
            flow = build(new[0], rank, new[1], worker)
            flow.load_state_dict(merged)
            flow.reset_state()
            part += [_key(dp) for dp in flow]
        rest.append(part)
    return seen, rest


def _key(dp: Any) -> Any:
    return tuple(int(v) for v in dp)


def _check(
    seen: list[Any], rest: list[list[Any]], every: set[Any], equal: bool, ranks: tuple[int, int]
) -> None:
    """Each datapoint once; ``equal=True``: equal new ranks, at most the rows the old and the
    new ranks drop missing (``ranks``: old, new)."""
    everything = seen + [dp for part in rest for dp in part]
    assert len(set(everything)) == len(everything), "a datapoint was seen twice in the epoch"
    assert set(everything) <= every
    if equal:
        assert len({len(part) for part in rest}) == 1, "the new ranks got unequal counts"
        assert len(every) - len(everything) <= ranks[0] - 1 + ranks[1] - 1
    else:
        assert set(everything) == every


shape_st = st.tuples(st.integers(1, 4), st.integers(1, 3))
cuts_st = st.lists(st.integers(0, 6), min_size=1, max_size=12)


@SETTINGS
@given(st.integers(1, 60), shape_st, shape_st, cuts_st, st.booleans(), st.booleans())
def test_workers_by_index_resume_on_other_ranks_and_workers(
    n: int, old: tuple[int, int], new: tuple[int, int], cuts: list[int], shuffle: bool, equal: bool
) -> None:
    def build(ranks: int, rank: int, workers: int, worker: int) -> D.DataFlow[Any]:
        source = D.DataFromList([[i] for i in range(n)], shuffle=shuffle, seed=3)
        return source.shard(ranks, rank, equal=equal).map(lambda dp: dp).shard(workers, worker, equal=False)

    seen, rest = _run_job(build, old, new, cuts)
    _check(seen, rest, {(i,) for i in range(n)}, equal, (old[0], new[0]))


def _tfrecords(tmp: Path, sizes: list[int], remote: bool) -> str:
    """TFRecord files of ``sizes`` records with their indexes, on disk or in memory://."""
    fsspec = pytest.importorskip("fsspec")
    prefix = f"memory://reshard-{uuid.uuid4().hex}"
    for k, size in enumerate(sizes):
        path = tmp / f"part-{k:02d}.tfrecord"
        rows = D.DataFromList([[k, i] for i in range(size)], shuffle=False)
        D.TFRecordSerializer.save(rows, str(path), progress=False, overwrite=True)
        if remote:
            for suffix in ("", ".index"):
                fsspec.filesystem("memory").pipe(
                    f"{prefix}/part-{k:02d}.tfrecord{suffix}", Path(str(path) + suffix).read_bytes()
                )
    return f"{prefix}/part-*.tfrecord" if remote else str(tmp / "part-*.tfrecord")


@SETTINGS
@given(
    sizes=st.lists(st.integers(1, 5), min_size=12, max_size=16),  # a piece for each (rank, worker)
    old=shape_st,
    new=shape_st,
    cuts=cuts_st,
    equal=st.booleans(),
    remote=st.booleans(),
)
def test_workers_by_file_resume_on_other_ranks_and_workers(
    tmp_path_factory: pytest.TempPathFactory,
    sizes: list[int],
    old: tuple[int, int],
    new: tuple[int, int],
    cuts: list[int],
    equal: bool,
    remote: bool,
) -> None:
    glob = _tfrecords(tmp_path_factory.mktemp("t"), sizes, remote)

    def build(ranks: int, rank: int, workers: int, worker: int) -> D.DataFlow[Any]:
        rank_flow = D.TFRecordData(glob, shuffle=remote, seed=5).shard(ranks, rank, equal=equal)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # too few pieces for the workers: by position
            return rank_flow.shard(workers, worker, equal=False)

    # the old workers split by file (by position they are refused: see below); the new ones
    # may split by position where the rest has too few pieces
    assume(all(build(old[0], i, old[1], 0).by_index for i in range(old[0])))
    seen, rest = _run_job(build, old, new, cuts)
    _check(seen, rest, {(k, i) for k, size in enumerate(sizes) for i in range(size)}, equal, (old[0], new[0]))


@SETTINGS
@given(
    groups=st.lists(st.integers(1, 5), min_size=8, max_size=12),
    old=shape_st,
    new=shape_st,
    cuts=cuts_st,
    equal=st.booleans(),
    shuffle=st.booleans(),
)
def test_parquet_workers_resume_on_other_ranks_and_workers(
    tmp_path_factory: pytest.TempPathFactory,
    groups: list[int],
    old: tuple[int, int],
    new: tuple[int, int],
    cuts: list[int],
    equal: bool,
    shuffle: bool,
) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    pa = pytest.importorskip("pyarrow")
    tmp = tmp_path_factory.mktemp("p")
    rows = [(k, i) for k, size in enumerate(groups) for i in range(size)]
    for half, part in enumerate((rows[: len(rows) // 2], rows[len(rows) // 2 :])):
        table = pa.table({"k": [r[0] for r in part], "i": [r[1] for r in part]})
        pq.write_table(table, tmp / f"part-{half}.parquet", row_group_size=2)

    def build(ranks: int, rank: int, workers: int, worker: int) -> D.DataFlow[Any]:
        reader = D.ParquetData(str(tmp / "part-*.parquet"), shuffle=shuffle, seed=4)
        rank_flow = reader.shard(ranks, rank, equal=equal).map(lambda r: [r["k"], r["i"]])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return rank_flow.shard(workers, worker, equal=False)

    # the old workers split by file (by position they are refused: see below); the new ones
    # may split by position where the rest has too few pieces
    assume(all(build(old[0], i, old[1], 0).by_index for i in range(old[0])))
    seen, rest = _run_job(build, old, new, cuts)
    _check(seen, rest, set(rows), equal, (old[0], new[0]))


def test_workers_that_split_by_position_are_refused() -> None:
    def build(rank: int, worker: int) -> D.DataFlow[Any]:
        rank_flow = D.DataFromList([[i] for i in range(20)], shuffle=False).shard(2, rank).batch(2)
        with pytest.warns(UserWarning, match="sharding by position"):
            return rank_flow.shard(2, worker, equal=False)

    states = []
    for rank, worker in itertools.product(range(2), range(2)):
        flow = build(rank, worker)
        flow.reset_state()
        it = iter(flow)
        next(it)
        states.append(flow.state_dict())
    with pytest.raises(StateError, match="by position"):
        reshard(states, 3)


def test_missing_or_repeated_parts_are_refused() -> None:
    def state(rank: int, worker: int) -> dict[str, Any]:
        flow = D.DataFromList(list(range(20)), shuffle=False).shard(2, rank).shard(2, worker, equal=False)
        flow.reset_state()
        it = iter(flow)
        next(it)
        return flow.state_dict()

    every = [state(r, w) for r in range(2) for w in range(2)]
    with pytest.raises(StateError, match=r"all ranks and workers.*\(1, 1\)"):
        reshard(every[:3], 2)
    with pytest.raises(StateError, match=r"given twice \[\(0, 0\)\]"):
        reshard([*every[:3], every[0]], 2)


@pytest.mark.timeout(120)
def test_a_process_runner_is_refused_with_the_elastic_way() -> None:
    states = []
    for rank in range(2):
        rank_flow = D.DataFromList(list(range(40)), shuffle=False).shard(2, rank)
        with MultiProcessRunnerZMQ(rank_flow, 2, shard=True) as runner:
            runner.reset_state()
            it = iter(runner)
            next(it)
            states.append(runner.state_dict())
    with pytest.raises(StateError, match="process runner.*reshard_loader"):
        reshard(states, 3)


@pytest.mark.parametrize("equal", [False, True])
def test_new_workers_that_split_by_position_resume_the_rest(tmp_path: Path, equal: bool) -> None:
    """2 ranks x 2 workers by file, resumed on 4 ranks x 3 workers: a new rank has fewer
    pieces than workers, so its workers split by position (each reads the rank's rest and
    keeps its part, counted from the merged state's start)."""
    sizes = [3, 4, 5, 2, 6, 3, 4, 5]
    glob = _tfrecords(tmp_path, sizes, remote=False)

    def build(ranks: int, rank: int, workers: int, worker: int) -> D.DataFlow[Any]:
        rank_flow = D.TFRecordData(glob).shard(ranks, rank, equal=equal).map(lambda dp: dp)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return rank_flow.shard(workers, worker, equal=False)

    assert not all(build(4, r, 3, 0).by_index for r in range(4))
    seen, rest = _run_job(build, (2, 2), (4, 3), [2])
    _check(seen, rest, {(k, i) for k, n in enumerate(sizes) for i in range(n)}, equal, (2, 4))
