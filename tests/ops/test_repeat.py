"""dataflow/ops/_repeat.py: RepeatedData, RepeatedDataPoint, FixedSizeData, TakeData."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from dataflow import DataFlowReentrantError, LengthUnknownError
from dataflow.base import DataFlow
from dataflow.ops._repeat import FixedSizeData, RepeatedData, RepeatedDataPoint, TakeData
from tests.helpers import ListFlow, collect, epochs


def _vals(ep: list) -> list:
    return [dp[0] for dp in ep]


# --- RepeatedData --------------------------------------------------------------------------


def test_repeated_num_epochs() -> None:
    src = ListFlow([[1], [2], [3]])
    df = RepeatedData(src, 2)
    assert len(df) == 6
    e1, e2 = epochs(df, 2)
    assert _vals(e1) == _vals(e2) == [1, 2, 3, 1, 2, 3]
    assert src.epochs == 4


def test_repeated_forever_prefix() -> None:
    df = RepeatedData(ListFlow([[1], [2], [3]]), -1)
    df.reset_state()
    assert _vals(itertools.islice(df, 10)) == [1, 2, 3, 1, 2, 3, 1, 2, 3, 1]
    with pytest.raises(LengthUnknownError, match=r"RepeatedData\(num=-1\) is infinite and has no length"):
        len(df)


@pytest.mark.timeout(10)
def test_repeated_forever_empty_upstream_raises_instead_of_hanging() -> None:
    df = RepeatedData(ListFlow([]), -1)
    df.reset_state()
    with pytest.raises(ValueError, match="RepeatedData: the upstream ListFlow produced an empty epoch"):
        next(iter(df))


@pytest.mark.timeout(10)
def test_repeated_forever_upstream_empty_later_raises() -> None:
    class Shrinking(DataFlow):
        def __init__(self) -> None:
            self.n = 2

        def __iter__(self) -> Iterator[Any]:
            self.n -= 1
            yield from ([i] for i in range(max(self.n, 0)))

    df = RepeatedData(Shrinking(), -1)
    it = iter(df)
    assert next(it) == [0]
    with pytest.raises(ValueError, match="RepeatedData: the upstream Shrinking produced an empty epoch"):
        next(it)


@pytest.mark.parametrize("num", [0, -2])
def test_repeated_bad_num(num: int) -> None:
    with pytest.raises(ValueError, match=rf"RepeatedData: num must be >= 1 \(or -1\), got {num}"):
        RepeatedData(ListFlow([[1]]), num)


def test_repeated_num_type() -> None:
    with pytest.raises(TypeError, match=r"RepeatedData: num must be an int, got float \(2.0\)"):
        RepeatedData(ListFlow([[1]]), 2.0)  # type: ignore[arg-type]


def test_repeated_len_unknown_upstream() -> None:
    with pytest.raises(LengthUnknownError):
        len(RepeatedData(ListFlow([[1]], has_len=False), 3))


# --- RepeatedDataPoint ---------------------------------------------------------------------


def test_repeated_datapoint() -> None:
    items = [[1], [2]]
    df = RepeatedDataPoint(ListFlow(items), 3)
    assert len(df) == 6
    e1, e2 = epochs(df, 2)
    assert _vals(e1) == _vals(e2) == [1, 1, 1, 2, 2, 2]
    assert e1[0] is e1[1] is e1[2] is items[0]


@pytest.mark.parametrize("num", [0, -1])
def test_repeated_datapoint_bad_num(num: int) -> None:
    with pytest.raises(ValueError, match=rf"RepeatedDataPoint: num must be >= 1, got {num}"):
        RepeatedDataPoint(ListFlow([[1]]), num)


# --- FixedSizeData -------------------------------------------------------------------------


def test_fixed_size_keep_state_continues() -> None:
    src = ListFlow([[i] for i in range(1, 6)])
    df = FixedSizeData(src, 3)
    assert len(df) == 3
    assert [_vals(e) for e in epochs(df, 3)] == [[1, 2, 3], [4, 5, 1], [2, 3, 4]]


def test_fixed_size_no_keep_state_restarts() -> None:
    df = FixedSizeData(ListFlow([[i] for i in range(1, 6)]), 3, keep_state=False)
    assert [_vals(e) for e in epochs(df, 3)] == [[1, 2, 3]] * 3


def test_fixed_size_larger_than_upstream_wraps() -> None:
    df = FixedSizeData(ListFlow([[1], [2]]), 5, keep_state=False)
    assert [_vals(e) for e in epochs(df, 2)] == [[1, 2, 1, 2, 1]] * 2
    df = FixedSizeData(ListFlow([[1], [2]]), 5)
    assert [_vals(e) for e in epochs(df, 2)] == [[1, 2, 1, 2, 1], [2, 1, 2, 1, 2]]


def test_fixed_size_reset_state_starts_over() -> None:
    df = FixedSizeData(ListFlow([[i] for i in range(1, 6)]), 3)
    epochs(df, 1)
    assert [_vals(e) for e in epochs(df, 2)] == [[1, 2, 3], [4, 5, 1]]


def test_fixed_size_abandoned_epoch_does_not_keep_state() -> None:
    df = FixedSizeData(ListFlow([[i] for i in range(1, 6)]), 3)
    df.reset_state()
    it = iter(df)
    next(it)
    it.close()  # type: ignore[attr-defined]
    assert _vals(collect(df)) == [1, 2, 3]


def test_fixed_size_not_reentrant() -> None:
    df = FixedSizeData(ListFlow([[1], [2]]), 2)
    df.reset_state()
    it = iter(df)
    next(it)
    with pytest.raises(DataFlowReentrantError, match="FixedSizeData is not reentrant"):
        next(iter(df))


@pytest.mark.timeout(10)
def test_fixed_size_empty_upstream() -> None:
    df = FixedSizeData(ListFlow([]), 3)
    df.reset_state()
    with pytest.raises(ValueError, match="FixedSizeData: the upstream ListFlow produced an empty epoch"):
        collect(df)


def test_fixed_size_len_does_not_need_upstream_len() -> None:
    assert len(FixedSizeData(ListFlow([[1]], has_len=False), 4)) == 4


@pytest.mark.parametrize("size", [0, -1])
def test_fixed_size_bad_size(size: int) -> None:
    with pytest.raises(ValueError, match=rf"FixedSizeData: size must be >= 1, got {size}"):
        FixedSizeData(ListFlow([[1]]), size)


# --- TakeData ------------------------------------------------------------------------------


class _GenFlow(DataFlow):
    """An infinite generator-based flow that records how far it got and whether it was closed."""

    def __init__(self) -> None:
        self.produced = 0
        self.closed_iterators = 0

    def __iter__(self) -> Iterator[Any]:
        try:
            i = 0
            while True:
                self.produced += 1
                yield [i]
                i += 1
        finally:
            self.closed_iterators += 1


def test_take_prefix_and_len() -> None:
    src = ListFlow([[i] for i in range(10)])
    df = TakeData(src, 4)
    assert len(df) == 4
    e1, e2 = epochs(df, 2)
    assert _vals(e1) == _vals(e2) == [0, 1, 2, 3]


def test_take_more_than_upstream() -> None:
    df = TakeData(ListFlow([[1], [2]]), 5)
    assert len(df) == 2
    assert _vals(epochs(df, 1)[0]) == [1, 2]


def test_take_zero() -> None:
    src = ListFlow([[1], [2]])
    df = TakeData(src, 0)
    assert len(df) == 0
    assert epochs(df, 1) == [[]]
    assert src.produced == 0


def test_take_len_unknown_upstream_is_n() -> None:
    assert len(TakeData(ListFlow([[1]], has_len=False), 3)) == 3


def test_take_closes_upstream_iterator_early() -> None:
    src = _GenFlow()
    df = TakeData(src, 3)
    df.reset_state()
    assert _vals(collect(df)) == [0, 1, 2]
    assert src.produced == 3  # no datapoint beyond n was pulled
    assert src.closed_iterators == 1
    assert _vals(collect(df)) == [0, 1, 2]
    assert src.closed_iterators == 2


def test_take_closes_upstream_when_own_iterator_closed() -> None:
    src = ListFlow([[i] for i in range(10)])
    it = iter(TakeData(src, 5))
    next(it)
    it.close()  # type: ignore[attr-defined]
    assert src.aborted == 1


def test_take_bad_n() -> None:
    with pytest.raises(ValueError, match="TakeData: n must be >= 0, got -1"):
        TakeData(ListFlow([[1]]), -1)
    with pytest.raises(TypeError, match=r"TakeData: n must be an int, got str \('3'\)"):
        TakeData(ListFlow([[1]]), "3")  # type: ignore[arg-type]
