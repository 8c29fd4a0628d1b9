"""dataflow/ops/_shuffle.py: LocallyShuffleData."""

from __future__ import annotations

from collections import Counter

import pytest

from dataflow import DataFlowNotReset, LengthUnknownError
from dataflow._seeding import set_seed
from dataflow.ops._shuffle import LocallyShuffleData
from tests.helpers import ListFlow, epochs


def _values(ep: list) -> list[int]:
    return [dp[0] for dp in ep]


@pytest.mark.parametrize(
    ("n", "buffer_size", "num_reuse"), [(50, 10, 1), (50, 10, 3), (5, 100, 1), (1, 2, 1), (30, 30, 2)]
)
def test_one_epoch_is_a_permutation_with_num_reuse_copies(n: int, buffer_size: int, num_reuse: int) -> None:
    df = LocallyShuffleData(ListFlow([[i] for i in range(n)]), buffer_size, num_reuse=num_reuse, seed=0)
    assert len(df) == n * num_reuse
    for ep in epochs(df, 2):
        assert len(ep) == n * num_reuse
        assert Counter(_values(ep)) == {i: num_reuse for i in range(n)}


def test_epochs_differ_and_actually_shuffle() -> None:
    df = LocallyShuffleData(ListFlow([[i] for i in range(100)]), 20, seed=1)
    e1, e2, e3 = (_values(e) for e in epochs(df, 3))
    assert e1 != list(range(100))
    assert e1 != e2 and e2 != e3
    assert sorted(e1) == sorted(e2) == list(range(100))


def test_upstream_read_once_per_epoch() -> None:
    src = ListFlow([[i] for i in range(10)])
    df = LocallyShuffleData(src, 4, num_reuse=2, seed=0)
    epochs(df, 2)
    assert src.epochs == 2 and src.finished == 2 and src.resets == 1


def test_seed_reproducible() -> None:
    def run(seed: int) -> list[list]:
        return epochs(LocallyShuffleData(ListFlow([[i] for i in range(40)]), 8, seed=seed), 2)

    assert run(7) == run(7)
    assert run(7) != run(8)


def test_set_seed_reproducible() -> None:
    set_seed(3)
    a = epochs(LocallyShuffleData(ListFlow([[i] for i in range(40)]), 8), 2)
    set_seed(3)
    b = epochs(LocallyShuffleData(ListFlow([[i] for i in range(40)]), 8), 2)
    assert a == b


def test_reset_state_restarts_seeded_stream() -> None:
    df = LocallyShuffleData(ListFlow([[i] for i in range(40)]), 8, seed=5)
    first = epochs(df, 2)
    assert epochs(df, 2) == first


def test_buffer_is_local() -> None:
    # with a buffer of k, the datapoint at output position p came from upstream position < p + k
    n, k = 200, 5
    df = LocallyShuffleData(ListFlow([[i] for i in range(n)]), k, seed=2)
    out = _values(epochs(df, 1)[0])
    assert all(v < p + k for p, v in enumerate(out))


def test_needs_reset_state() -> None:
    df = LocallyShuffleData(ListFlow([[1], [2], [3]]), 2)
    with pytest.raises(DataFlowNotReset, match="LocallyShuffleData was iterated before reset_state"):
        list(iter(df))


def test_len_unknown_propagates() -> None:
    with pytest.raises(LengthUnknownError):
        len(LocallyShuffleData(ListFlow([[1]], has_len=False), 4))


@pytest.mark.parametrize("buffer_size", [1, 0, -5])
def test_buffer_size_too_small(buffer_size: int) -> None:
    with pytest.raises(ValueError, match=rf"LocallyShuffleData: buffer_size must be >= 2, got {buffer_size}"):
        LocallyShuffleData(ListFlow([[1]]), buffer_size)


@pytest.mark.parametrize(("buffer_size", "num_reuse"), [(3, 3), (2, 5)])
def test_buffer_size_not_larger_than_num_reuse(buffer_size: int, num_reuse: int) -> None:
    with pytest.raises(
        ValueError,
        match=rf"LocallyShuffleData: buffer_size {buffer_size} must be larger than num_reuse {num_reuse}",
    ):
        LocallyShuffleData(ListFlow([[1]]), buffer_size, num_reuse=num_reuse)


def test_bad_num_reuse_and_types() -> None:
    with pytest.raises(ValueError, match="LocallyShuffleData: num_reuse must be >= 1, got 0"):
        LocallyShuffleData(ListFlow([[1]]), 4, num_reuse=0)
    with pytest.raises(TypeError, match=r"LocallyShuffleData: buffer_size must be an int, got float \(4.0\)"):
        LocallyShuffleData(ListFlow([[1]]), 4.0)  # type: ignore[arg-type]
    with pytest.raises(
        ValueError, match="LocallyShuffleData: seed must be a non-negative int or None, got -2"
    ):
        LocallyShuffleData(ListFlow([[1]]), 4, seed=-2)


def test_shuffle_interval_accepted_for_compatibility() -> None:
    df = LocallyShuffleData(ListFlow([[i] for i in range(10)]), 4, shuffle_interval=100, seed=0)
    assert sorted(_values(epochs(df, 1)[0])) == list(range(10))


def test_forwards_reset_and_close() -> None:
    src = ListFlow([[1]])
    with LocallyShuffleData(src, 2) as df:
        df.reset_state()
    assert (src.resets, src.closes) == (1, 1)


def test_empty_upstream_gives_empty_epoch() -> None:
    df = LocallyShuffleData(ListFlow([]), 4, seed=0)
    assert epochs(df, 1) == [[]]
