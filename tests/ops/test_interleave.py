"""dataflow/ops/_interleave.py: InterleaveData."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from dataflow import LengthUnknownError
from dataflow.base import DataFlow
from dataflow.ops._interleave import InterleaveData
from tests.helpers import ListFlow, collect, epochs


def _three(dp: list) -> list:
    s = dp[0]
    return [[s], [s + 1], [s + 2]]


def _vals(ep: list) -> list:
    return [dp[0] for dp in ep]


def test_cycle_2_block_1_exact_order() -> None:
    df = InterleaveData(ListFlow([[0], [10], [20]]), _three, cycle_length=2, block_length=1)
    e1, e2 = epochs(df, 2)
    assert _vals(e1) == _vals(e2) == [0, 10, 1, 11, 2, 12, 20, 21, 22]


def test_cycle_2_block_2_exact_order() -> None:
    df = InterleaveData(ListFlow([[0], [10], [20]]), _three, cycle_length=2, block_length=2)
    # slot A: 0 1 | slot B: 10 11 | A: 2 (ends; 20 opens in A) | B: 12 (ends) | A: 20 21 | A: 22
    assert _vals(epochs(df, 1)[0]) == [0, 1, 10, 11, 2, 12, 20, 21, 22]


def test_cycle_1_is_flat_map() -> None:
    df = InterleaveData(ListFlow([[0], [10], [20]]), _three, cycle_length=1, block_length=2)
    assert _vals(epochs(df, 1)[0]) == [0, 1, 2, 10, 11, 12, 20, 21, 22]


def test_cycle_3_uneven_lengths() -> None:
    # element s gives s // 10 + 1 datapoints: 0 -> 1, 10 -> 2, 20 -> 3, 30 -> 4
    def sub(dp: list) -> list:
        s = dp[0]
        return [[s + k] for k in range(s // 10 + 1)]

    df = InterleaveData(ListFlow([[0], [10], [20], [30]]), sub, cycle_length=3)
    # slots [0, 10, 20] give 0 10 20; slot 0 ends -> 30 opens there and waits its turn;
    # 11 21 30; slot 1 ends (no more input); 22 31; slot 2 ends; 32 33 (as tf.data)
    assert _vals(epochs(df, 1)[0]) == [0, 10, 20, 11, 21, 30, 22, 31, 32, 33]


def test_cycle_longer_than_upstream() -> None:
    df = InterleaveData(ListFlow([[0], [10]]), _three, cycle_length=5)
    assert _vals(epochs(df, 1)[0]) == [0, 10, 1, 11, 2, 12]


def test_empty_sub_flows_and_empty_upstream() -> None:
    df = InterleaveData(ListFlow([[0], [1], [2]]), lambda dp: [] if dp[0] != 1 else [["x"]], cycle_length=2)
    assert epochs(df, 1)[0] == [["x"]]
    assert epochs(InterleaveData(ListFlow([]), _three), 1)[0] == []


def test_sub_flows_get_reset_state() -> None:
    made: list[ListFlow] = []

    def func(dp: list) -> ListFlow:
        flow = ListFlow(_three(dp))
        made.append(flow)
        return flow

    df = InterleaveData(ListFlow([[0], [10], [20]]), func, cycle_length=2)
    assert _vals(epochs(df, 1)[0]) == [0, 10, 1, 11, 2, 12, 20, 21, 22]
    assert len(made) == 3
    assert [f.resets for f in made] == [1, 1, 1]
    assert [f.finished for f in made] == [1, 1, 1]


def test_sub_flow_iterators_closed_when_interleave_iterator_closed() -> None:
    made: list[ListFlow] = []

    def func(dp: list) -> ListFlow:
        made.append(ListFlow(_three(dp)))
        return made[-1]

    it = iter(InterleaveData(ListFlow([[0], [10], [20]]), func, cycle_length=2))
    assert [next(it), next(it), next(it)] == [[0], [10], [1]]
    it.close()  # type: ignore[attr-defined]
    assert [f.aborted for f in made] == [1, 1]


def test_sub_dataflows_are_closed() -> None:
    """func's DataFlows are reset here, so they must also be close()d here (they may own workers)."""
    made: list[ListFlow] = []

    def func(dp: list) -> ListFlow:
        made.append(ListFlow(_three(dp)))
        return made[-1]

    df = InterleaveData(ListFlow([[0], [10], [20]]), func, cycle_length=2)
    epochs(df, 1)
    assert [f.closes for f in made] == [1, 1, 1]

    made.clear()
    it = iter(df)
    next(it)
    it.close()  # type: ignore[attr-defined]
    assert [f.closes for f in made] == [1, 1]


def test_sub_generators_work() -> None:
    def gen(dp: list) -> Iterator[Any]:
        for k in range(2):
            yield [dp[0], k]

    df = InterleaveData(ListFlow([["a"], ["b"]]), gen, cycle_length=2)
    assert epochs(df, 1)[0] == [["a", 0], ["b", 0], ["a", 1], ["b", 1]]


def test_upstream_read_lazily() -> None:
    src = ListFlow([[i * 10] for i in range(100)])
    it = iter(InterleaveData(src, _three, cycle_length=2))
    for _ in range(4):
        next(it)
    assert src.produced == 2


def test_len_unknown() -> None:
    with pytest.raises(LengthUnknownError, match="InterleaveData: the total length depends on the sub-flows"):
        len(InterleaveData(ListFlow([[1]]), _three))


def test_bad_func_return_value() -> None:
    df = InterleaveData(ListFlow([[7]]), lambda dp: 5)
    with pytest.raises(
        TypeError,
        match=r"InterleaveData: func must return a DataFlow or an iterable, got int for element \[7\]",
    ):
        epochs(df, 1)


def test_bad_arguments() -> None:
    with pytest.raises(TypeError, match=r"InterleaveData: func must be callable, got int \(3\)"):
        InterleaveData(ListFlow([[1]]), 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="InterleaveData: cycle_length must be >= 1, got 0"):
        InterleaveData(ListFlow([[1]]), _three, cycle_length=0)
    with pytest.raises(ValueError, match="InterleaveData: block_length must be >= 1, got -1"):
        InterleaveData(ListFlow([[1]]), _three, block_length=-1)


def test_forwards_reset_and_close() -> None:
    src = ListFlow([[1]])
    with InterleaveData(src, _three) as df:
        df.reset_state()
        assert _vals(collect(df)) == [1, 2, 3]
    assert (src.resets, src.closes) == (1, 1)


class _Owned(DataFlow):
    """A sub-flow that must be reset before iterating."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.ready = False

    def reset_state(self) -> None:
        self.ready = True

    def __iter__(self) -> Iterator[Any]:
        assert self.ready, "iterated before reset_state"
        yield from ([self.n, k] for k in range(2))


def test_sub_flow_reset_before_iteration() -> None:
    df = InterleaveData(ListFlow([[1], [2]]), lambda dp: _Owned(dp[0]), cycle_length=2)
    assert epochs(df, 1)[0] == [[1, 0], [2, 0], [1, 1], [2, 1]]
