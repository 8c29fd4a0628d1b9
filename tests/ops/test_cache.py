"""dataflow/ops/_cache.py: CacheData."""

from __future__ import annotations

import pytest

from dataflow import DataFlowReentrantError, LengthUnknownError
from dataflow.ops._cache import CacheData
from dataflow.ops._map import MapData
from tests.helpers import ListFlow, collect, epochs


def _vals(ep: list) -> list:
    return [dp[0] for dp in ep]


def test_second_epoch_comes_from_cache() -> None:
    items = [[i] for i in range(5)]
    src = ListFlow(items)
    df = CacheData(src)
    e1, e2, e3 = epochs(df, 3)
    assert e1 == e2 == e3 == items
    assert src.epochs == 1 and src.produced == 5
    assert all(a is b for a, b in zip(e1, e2))  # the same objects are replayed


def test_abandoned_first_pass_is_not_cached() -> None:
    src = ListFlow([[i] for i in range(5)])
    df = CacheData(src)
    df.reset_state()
    it = iter(df)
    assert [next(it), next(it)] == [[0], [1]]
    it.close()  # type: ignore[attr-defined]
    assert _vals(collect(df)) == [0, 1, 2, 3, 4]  # read the upstream again, nothing lost
    assert src.epochs == 2
    assert _vals(collect(df)) == [0, 1, 2, 3, 4]
    assert src.epochs == 2  # now cached


def test_shuffle_replays_permutations_first_pass_in_order() -> None:
    src = ListFlow([[i] for i in range(30)])
    df = CacheData(src, shuffle=True, seed=0)
    e1, e2, e3 = (_vals(e) for e in epochs(df, 3))
    assert e1 == list(range(30))
    assert sorted(e2) == sorted(e3) == list(range(30))
    assert e2 != e1 and e3 != e2
    assert src.epochs == 1


def test_shuffle_seed_reproducible() -> None:
    def run(seed: int) -> list:
        return epochs(CacheData(ListFlow([[i] for i in range(30)]), shuffle=True, seed=seed), 3)

    assert run(4) == run(4)
    assert run(4) != run(5)


def test_reset_state_drops_cache() -> None:
    src = ListFlow([[1], [2]])
    df = CacheData(src)
    epochs(df, 2)
    assert src.epochs == 1
    src.items.append([3])
    epochs(df, 0)  # reset_state only
    assert _vals(collect(df)) == [1, 2, 3]
    assert src.epochs == 2 and src.resets == 2


def test_len_upstream_until_cached_then_cache() -> None:
    src = ListFlow([[i] for i in range(6)])
    df = CacheData(MapData(src, lambda dp: dp if dp[0] % 2 else None))
    assert len(df) == 6  # upstream's upper bound
    epochs(df, 1)
    assert len(df) == 3


def test_len_unknown_until_cached() -> None:
    df = CacheData(ListFlow([[1], [2]], has_len=False))
    with pytest.raises(LengthUnknownError):
        len(df)
    epochs(df, 1)
    assert len(df) == 2


def test_first_pass_not_reentrant() -> None:
    df = CacheData(ListFlow([[1], [2]]))
    df.reset_state()
    it = iter(df)
    next(it)
    with pytest.raises(
        DataFlowReentrantError, match="CacheData is not reentrant: it is already being iterated"
    ):
        next(iter(df))


def test_forwards_close() -> None:
    src = ListFlow([[1]])
    with CacheData(src):
        pass
    assert src.closes == 1


def test_bad_seed() -> None:
    with pytest.raises(ValueError, match="CacheData: seed must be a non-negative int or None, got -1"):
        CacheData(ListFlow([[1]]), seed=-1)
