"""Property tests (hypothesis) for the batching and shuffling invariants.

- BatchData: the batches concatenate back to the input (all of it with ``remainder=True``,
  the prefix of ``len(df) * batch_size`` without), values unchanged whatever the dtypes;
- PaddedBatchData: cutting each row back to its input's shape recovers the input;
- LocallyShuffleData, DataFromList(shuffle=True), CacheData(shuffle=True): a finite pass is a
  permutation of the input;
- RandomMixData: every element once, each flow's order kept;
- FixedSizeData(keep_state=True): k epochs in a row are the input repeated cyclically.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dataflow import DataFromList
from dataflow.ops._batch import BatchData
from dataflow.ops._cache import CacheData
from dataflow.ops._combine import RandomMixData
from dataflow.ops._padded_batch import PaddedBatchData
from dataflow.ops._repeat import FixedSizeData
from dataflow.ops._shuffle import LocallyShuffleData
from tests.helpers import ListFlow, epochs

SETTINGS = settings(max_examples=50, deadline=None)

_INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
_SEEDS = st.integers(min_value=0, max_value=2**32 - 1)


def _batch_or_error(items: list, bs: int, remainder: bool) -> BatchData | None:
    if not remainder and bs > len(items):
        with pytest.raises(ValueError, match="larger than the upstream's length"):
            BatchData(ListFlow(items), bs, remainder=remainder)
        return None
    return BatchData(ListFlow(items), bs, remainder=remainder)


@SETTINGS
@given(values=st.lists(_INT64, max_size=40), bs=st.integers(1, 45), remainder=st.booleans())
def test_batches_of_ints_concatenate_back(values: list[int], bs: int, remainder: bool) -> None:
    items = [[v, str(v)] for v in values]
    df = _batch_or_error(items, bs, remainder)
    if df is None:
        return
    batches = epochs(df, 1)[0]
    assert len(batches) == len(df)
    assert all(len(b[0]) == bs for b in batches[:-1])
    flat = [v for b in batches for v in b[0].tolist()]
    strs = [s for b in batches for s in b[1]]
    expected = values if remainder else values[: len(df) * bs]
    assert flat == expected
    assert strs == [str(v) for v in expected]
    assert all(b[0].dtype == np.int64 for b in batches)


@SETTINGS
@given(
    arrays=st.lists(
        st.one_of(
            hnp.arrays(st.sampled_from([np.uint8, np.int8, np.int16]), (2, 3)),
            hnp.arrays(np.float32, (2, 3), elements=st.floats(-1e6, 1e6, width=32)),
        ),
        max_size=25,
    ),
    bs=st.integers(1, 30),
    remainder=st.booleans(),
)
def test_batches_of_arrays_concatenate_back(arrays: list[np.ndarray], bs: int, remainder: bool) -> None:
    df = _batch_or_error([[a] for a in arrays], bs, remainder)
    if df is None:
        return
    batches = epochs(df, 1)[0]
    assert len(batches) == len(df)
    expected = arrays if remainder else arrays[: len(df) * bs]
    rows = [row for b in batches for row in b[0]]
    assert len(rows) == len(expected)
    for row, a in zip(rows, expected):
        assert row.shape == (2, 3)
        assert row.tolist() == a.tolist()  # values survive dtype promotion (no wrap-around)
    for b in batches:
        assert b[0].shape[1:] == (2, 3)


@SETTINGS
@given(
    seqs=st.lists(st.lists(st.integers(-1000, 1000), max_size=6), min_size=1, max_size=20),
    bs=st.integers(1, 8),
    pad=st.integers(-5, 5),
)
def test_padded_batch_unpadding_recovers_input(seqs: list[list[int]], bs: int, pad: int) -> None:
    items = [[np.asarray(s, dtype=np.int64), i] for i, s in enumerate(seqs)]
    df = PaddedBatchData(ListFlow(items), bs, padding_value=pad, remainder=True)
    batches = epochs(df, 1)[0]
    assert len(batches) == len(df)
    rows = [(row, int(i)) for b in batches for row, i in zip(b[0], b[1])]
    assert [i for _, i in rows] == list(range(len(seqs)))
    for (row, i), b_max in zip(rows, [b[0].shape[1] for b in batches for _ in b[1]]):
        n = len(seqs[i])
        assert row[:n].tolist() == seqs[i]
        assert row[n:].tolist() == [pad] * (b_max - n)
    for b in batches:
        assert b[0].shape[1] == max(len(seqs[int(i)]) for i in b[1])


@SETTINGS
@given(
    shapes=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=1, max_size=12),
    bs=st.integers(1, 5),
)
def test_padded_batch_2d_unpadding(shapes: list[tuple[int, int]], bs: int) -> None:
    arrays = [np.arange(r * c, dtype=np.float32).reshape(r, c) + 1 for r, c in shapes]
    df = PaddedBatchData(ListFlow([{"x": a} for a in arrays]), bs, padding_value=-1.0, remainder=True)
    rows = [row for b in epochs(df, 1)[0] for row in b["x"]]
    assert len(rows) == len(arrays)
    for row, a in zip(rows, arrays):
        r, c = a.shape
        assert row[:r, :c].tolist() == a.tolist()
        assert (row[r:, :] == -1).all() and (row[:, c:] == -1).all()


@st.composite
def _shuffle_args(draw: st.DrawFn) -> tuple[int, int, int]:
    num_reuse = draw(st.integers(1, 4))
    buffer_size = draw(st.integers(max(2, num_reuse + 1), 80))
    n = draw(st.integers(0, 60))
    return n, buffer_size, num_reuse


@SETTINGS
@given(args=_shuffle_args(), seed=_SEEDS)
def test_locally_shuffled_pass_is_permutation(args: tuple[int, int, int], seed: int) -> None:
    n, buffer_size, num_reuse = args
    df = LocallyShuffleData(ListFlow([[i] for i in range(n)]), buffer_size, num_reuse=num_reuse, seed=seed)
    for ep in epochs(df, 2):
        assert len(ep) == len(df) == n * num_reuse
        assert Counter(dp[0] for dp in ep) == Counter({i: num_reuse for i in range(n)})


@SETTINGS
@given(values=st.lists(st.integers(-5, 5), min_size=1, max_size=40), seed=st.one_of(st.none(), _SEEDS))
def test_data_from_list_shuffle_is_permutation(values: list[int], seed: int | None) -> None:
    df = DataFromList([[v] for v in values], shuffle=True, seed=seed)
    for ep in epochs(df, 2):
        assert sorted(dp[0] for dp in ep) == sorted(values)


@SETTINGS
@given(values=st.lists(st.integers(), min_size=1, max_size=30), seed=_SEEDS)
def test_cache_shuffle_replays_are_permutations(values: list[int], seed: int) -> None:
    df = CacheData(ListFlow([[v] for v in values]), shuffle=True, seed=seed)
    first, *rest = epochs(df, 3)
    assert [dp[0] for dp in first] == values
    for ep in rest:
        assert sorted(dp[0] for dp in ep) == sorted(values)


@SETTINGS
@given(sizes=st.lists(st.integers(0, 10), min_size=1, max_size=4), seed=_SEEDS)
def test_random_mix_keeps_each_flow_order(sizes: list[int], seed: int) -> None:
    flows = [ListFlow([[k, i] for i in range(n)]) for k, n in enumerate(sizes)]
    df = RandomMixData(flows, seed=seed)
    out = epochs(df, 1)[0]
    assert len(out) == len(df) == sum(sizes)
    for k, n in enumerate(sizes):
        assert [dp[1] for dp in out if dp[0] == k] == list(range(n))


@SETTINGS
@given(n=st.integers(1, 10), size=st.integers(1, 15), k=st.integers(1, 5))
def test_fixed_size_keep_state_is_cyclic_stream(n: int, size: int, k: int) -> None:
    df = FixedSizeData(ListFlow([[i] for i in range(n)]), size, keep_state=True)
    eps = epochs(df, k)
    assert all(len(ep) == size == len(df) for ep in eps)
    assert [dp[0] for ep in eps for dp in ep] == [i % n for i in range(size * k)]


@SETTINGS
@given(n=st.integers(1, 10), size=st.integers(1, 15), k=st.integers(1, 4))
def test_fixed_size_no_keep_state_restarts_each_epoch(n: int, size: int, k: int) -> None:
    df = FixedSizeData(ListFlow([[i] for i in range(n)]), size, keep_state=False)
    assert [[dp[0] for dp in ep] for ep in epochs(df, k)] == [[i % n for i in range(size)]] * k
