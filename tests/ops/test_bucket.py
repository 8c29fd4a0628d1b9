"""dataflow/ops/_bucket.py: BucketByLengthData (and ``df.bucket_by_length``)."""

from __future__ import annotations

import bisect
from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dataflow
from dataflow import DataFlow, LengthUnknownError, StateError
from dataflow.ops._bucket import BucketByLengthData
from tests.checkpoint._harness import check_resume
from tests.helpers import ListFlow, epochs

pytestmark = pytest.mark.timeout(120)


def _rows(lengths: list[int]) -> list[list[Any]]:
    return [[np.arange(n, dtype=np.int32) + 1, i] for i, n in enumerate(lengths)]


def _length(dp: list[Any]) -> int:
    return len(dp[0])


Setup = tuple[list[int], list[int], list[int], bool, int]  # lengths, boundaries, batch sizes, drop, seed


@st.composite
def _setups(draw: Any) -> Setup:
    lengths = draw(st.lists(st.integers(0, 12), min_size=1, max_size=30))
    bounds = sorted(draw(st.sets(st.integers(1, 12), max_size=3)))
    sizes = draw(st.lists(st.integers(1, 4), min_size=len(bounds) + 1, max_size=len(bounds) + 1))
    return lengths, bounds, sizes, draw(st.booleans()), draw(st.integers(0, 2**16))


def _build(lengths: list[int], bounds: list[int], sizes: list[int], drop: bool, seed: int) -> DataFlow:
    src = dataflow.DataFromList(_rows(lengths), shuffle=True, seed=seed)
    return BucketByLengthData(src, _length, bounds, sizes, drop_remainder=drop)


def test_bucket_assignment_batch_sizes_and_order() -> None:
    lengths = [1, 5, 2, 9, 3, 7, 0, 4, 6]
    df = dataflow.DataFromList(_rows(lengths), shuffle=False).bucket_by_length(_length, [3, 6], [2, 2, 3])
    for ep in epochs(df, 2):
        ids = [b[1].tolist() for b in ep]
        # full batches in the order they fill, then the partial buckets in bucket order
        assert ids == [[0, 2], [1, 4], [3, 5, 8], [6], [7]]
        assert [b[0].shape for b in ep] == [(2, 2), (2, 5), (3, 9), (1, 0), (1, 4)]


def test_pads_per_batch_with_padding_value() -> None:
    items = [[np.array([1, 2, 3]), "a"], [np.array([4]), "b"], [np.array([5, 6, 7, 8, 9])]]
    df = BucketByLengthData(ListFlow(items[:2]), _length, [10], [2, 2], padding_value={0: -1})
    [[tokens, names]] = epochs(df, 1)[0]
    assert tokens.tolist() == [[1, 2, 3], [4, -1, -1]] and tokens.dtype == np.int64
    assert names == ["a", "b"]
    dicts = [{"tokens": np.arange(n), "n": n} for n in (2, 4)]
    first, second = epochs(BucketByLengthData(ListFlow(dicts), lambda d: d["n"], [3], [1, 1]), 1)[0]
    assert first["tokens"].tolist() == [[0, 1]] and first["n"].tolist() == [2]
    assert second["tokens"].tolist() == [[0, 1, 2, 3]]


def test_drop_remainder_drops_partial_buckets() -> None:
    df = BucketByLengthData(ListFlow(_rows([1, 1, 1, 5])), _length, [3], [2, 2], drop_remainder=True)
    assert [b[1].tolist() for b in epochs(df, 1)[0]] == [[0, 1]]


def test_len_is_unknown() -> None:
    df = BucketByLengthData(ListFlow(_rows([1])), _length, [3], [2, 2])
    with pytest.raises(LengthUnknownError, match="BucketByLengthData"):
        len(df)


@pytest.mark.parametrize(
    ("bounds", "sizes", "exc", "msg"),
    [
        ([3, 3], [1, 1, 1], ValueError, r"boundaries must be strictly increasing, got \[3, 3\]"),
        ([5, 2], [1, 1, 1], ValueError,
         r"strictly increasing, got \[5, 2\] \(boundaries\[1\] = 2 <= boundaries\[0\] = 5\)"),
        ([3], [1], ValueError, r"batch_sizes must have len\(boundaries\) \+ 1 = 2 entries .* got 1: \[1\]"),
        ([3], [1, 0], ValueError, r"batch_sizes\[1\] must be >= 1, got 0"),
        ([3.5], [1, 1], TypeError, r"boundaries\[0\] must be an int, got float \(3.5\)"),
        ("ab", [1, 1], TypeError, r"boundaries must be a sequence of ints, got 'ab'"),
    ],
)
def test_argument_errors_name_stage_and_value(bounds: Any, sizes: Any, exc: type, msg: str) -> None:
    with pytest.raises(exc, match="BucketByLengthData: .*" + msg):
        BucketByLengthData(ListFlow([]), _length, bounds, sizes)


@pytest.mark.parametrize("bad", [2.0, "3", None, True, -1])
def test_length_fn_must_return_an_int(bad: Any) -> None:
    df = BucketByLengthData(ListFlow(_rows([1])), lambda dp: bad, [3], [1, 1])
    with pytest.raises(TypeError, match=r"BucketByLengthData: length_fn must return an int >= 0, got "):
        epochs(df, 1)


def test_numpy_int_length_accepted() -> None:
    df = BucketByLengthData(ListFlow(_rows([4, 1])), lambda dp: np.int64(len(dp[0])), [3], [1, 1])
    assert [b[1].tolist() for b in epochs(df, 1)[0]] == [[0], [1]]


def test_state_of_other_boundaries_is_refused() -> None:
    def build(bounds: list[int], sizes: list[int]) -> BucketByLengthData:
        src = dataflow.DataFromList(_rows([1, 1, 5, 1]), shuffle=False)
        return BucketByLengthData(src, _length, bounds, sizes)

    df = build([3], [2, 2])
    df.reset_state()
    it = iter(df)
    next(it)  # ids [0, 1]
    next(it)  # the partial bucket 0 (id 3); id 2 still waits in bucket 1
    state = df.state_dict()
    with pytest.raises(StateError, match=r"BucketByLengthData: the saved buckets .* do not fit"):
        build([3, 4], [2, 2, 2]).load_state_dict(state)


@settings(max_examples=60, deadline=None)
@given(setup=_setups())
def test_every_datapoint_exactly_once_per_epoch_in_its_bucket(setup: Setup) -> None:
    lengths, bounds, sizes, drop, seed = setup
    df = _build(lengths, bounds, sizes, drop, seed)
    for ep in epochs(df, 2):
        seen: Counter[int] = Counter()
        for tokens, ids in ep:
            buckets = {bisect.bisect_right(bounds, lengths[i]) for i in ids.tolist()}
            assert len(buckets) == 1, "a batch mixes buckets"
            b = buckets.pop()
            assert 1 <= len(ids) <= sizes[b]
            assert tokens.shape == (len(ids), max(lengths[i] for i in ids.tolist()))
            for row, i in zip(tokens, ids.tolist()):  # each row: its tokens, then zeros
                assert row.tolist() == list(range(1, lengths[i] + 1)) + [0] * (tokens.shape[1] - lengths[i])
            seen.update(ids.tolist())
        assert all(n == 1 for n in seen.values())
        if drop:  # only whole batches; what is missing is less than one batch per bucket
            missing = Counter(bisect.bisect_right(bounds, n) for i, n in enumerate(lengths) if i not in seen)
            assert all(missing[b] < sizes[b] for b in missing)
        else:
            assert set(seen) == set(range(len(lengths)))


@settings(max_examples=25, deadline=None)
@given(setup=_setups())
def test_resume_at_every_cut_equals_uninterrupted(setup: Setup) -> None:
    lengths, bounds, sizes, drop, seed = setup
    check_resume(lambda: _build(lengths, bounds, sizes, drop, seed), epochs=2, max_cuts=12)


def test_resume_behind_two_process_workers() -> None:
    lengths = [(7 * i) % 13 for i in range(24)]

    def build() -> DataFlow:
        src = dataflow.DataFromList(_rows(lengths), shuffle=True, seed=3)
        mapped = dataflow.MultiProcessMapData(src, 2, _identity, strict=True, ordered=True)
        return BucketByLengthData(mapped, _length, [4, 9], [3, 2, 4])

    check_resume(build, epochs=2, max_cuts=6)


def _identity(dp: Any) -> Any:
    return dp
