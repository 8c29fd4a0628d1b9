"""Sharding promises, for any size, world and seed (hypothesis):

- ``shard(world, rank, equal=False)``: the ranks' parts are disjoint and together are the
  epoch, each datapoint once;
- ``equal=True`` (default): every rank gets ``n // world`` datapoints, disjoint;
  ``pad=True``: every rank gets ``ceil(n / world)``, and together they cover the epoch;
- with a shuffled, seeded source every epoch is a global shuffle: the same on every rank,
  another each epoch;
- by index (right after a random-access source) and by position (after another stage) give
  the same promises;
- ``reshard``: states saved by every rank at the same step, merged for another number of
  ranks, resume to exactly what no old rank had consumed, each datapoint once.
"""

from __future__ import annotations

import warnings

from hypothesis import given, settings
from hypothesis import strategies as st

import dataflow as D
from dataflow.checkpoint import reshard

SETTINGS = settings(max_examples=60, deadline=None)


def _rank_flow(n: int, world: int, rank: int, *, shuffle: bool, by_index: bool, **kw: bool) -> D.DataFlow:
    src = D.DataFromList([[i] for i in range(n)], shuffle=shuffle, seed=11)
    if not by_index:
        src = src.map(lambda dp: dp)  # not random access: sharded by position
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the by-position advice
        return src.shard(world, rank, **kw)


def _epochs(df: D.DataFlow, k: int) -> list[list[int]]:
    df.reset_state()
    return [[dp[0] for dp in df] for _ in range(k)]


@SETTINGS
@given(st.integers(1, 60), st.integers(1, 6), st.booleans(), st.booleans())
def test_unequal_shards_are_disjoint_and_complete(n: int, world: int, shuffle: bool, by_index: bool) -> None:
    flows = [_rank_flow(n, world, r, shuffle=shuffle, by_index=by_index, equal=False) for r in range(world)]
    parts = [_epochs(df, 2) for df in flows]
    for epoch in range(2):
        flat = [i for p in parts for i in p[epoch]]
        assert sorted(flat) == list(range(n))


@SETTINGS
@given(st.integers(1, 60), st.integers(1, 6), st.booleans(), st.booleans(), st.booleans())
def test_equal_shards_have_equal_lengths(
    n: int, world: int, shuffle: bool, by_index: bool, pad: bool
) -> None:
    flows = [_rank_flow(n, world, r, shuffle=shuffle, by_index=by_index, pad=pad) for r in range(world)]
    parts = [_epochs(df, 1)[0] for df in flows]
    want = -(-n // world) if pad else n // world
    assert [len(p) for p in parts] == [want] * world
    flat = [i for p in parts for i in p]
    if pad:
        assert set(flat) == set(range(n))  # covering; the few padded ones repeat
    else:
        assert len(set(flat)) == len(flat) and set(flat) <= set(range(n))


@SETTINGS
@given(st.integers(8, 60), st.integers(2, 4))
def test_shuffled_shards_are_one_global_shuffle_per_epoch(n: int, world: int) -> None:
    flows = [_rank_flow(n, world, r, shuffle=True, by_index=True, equal=False) for r in range(world)]
    parts = [_epochs(df, 2) for df in flows]
    whole = _epochs(D.DataFromList([[i] for i in range(n)], shuffle=True, seed=11), 2)
    for e in range(2):  # rank r holds positions r::world of the one permutation every rank draws
        assert all(parts[r][e] == whole[e][r::world] for r in range(world))
    assert whole[0] != whole[1]  # another shuffle each epoch


@SETTINGS
@given(st.integers(4, 50), st.integers(1, 4), st.integers(1, 4), st.integers(0, 12), st.booleans())
def test_reshard_resumes_what_no_rank_consumed(
    n: int, world: int, new_world: int, step: int, shuffle: bool
) -> None:
    seen: list[int] = []
    states = []
    for rank in range(world):
        df = _rank_flow(n, world, rank, shuffle=shuffle, by_index=True, equal=False)
        df.reset_state()
        it = iter(df)
        for _ in range(min(step, len(df))):  # inside the epoch (a finished one resumes at the next)
            seen.append(next(it)[0])
        states.append(df.state_dict())
    merged = reshard(states, new_world)
    for rank in range(new_world):
        df = _rank_flow(n, new_world, rank, shuffle=shuffle, by_index=True, equal=False)
        df.load_state_dict(merged)
        df.reset_state()
        seen += [dp[0] for dp in df]
    assert sorted(seen) == list(range(n))
