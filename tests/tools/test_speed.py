"""TestDataSpeed and SpeedResult: counts, warmup, epoch restarts, errors, iterator cleanup."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from dataflow.base import DataFlow, ReentrancyGuard
from dataflow.tools._speed import SpeedResult, TestDataSpeed
from tests.helpers import ListFlow


class _Empty(DataFlow):
    def __iter__(self) -> Iterator[Any]:
        return iter(())


class _EmptyAfterFirst(DataFlow):
    """Two datapoints in the first epoch, none after."""

    def __init__(self) -> None:
        self.epochs = 0

    def __iter__(self) -> Iterator[Any]:
        self.epochs += 1
        if self.epochs == 1:
            yield from ([0], [1])


class _Guarded(DataFlow):
    """Not reentrant: a second concurrent iterator raises."""

    def __init__(self, n: int) -> None:
        self.n = n
        self._guard = ReentrancyGuard("_Guarded")

    def __iter__(self) -> Iterator[Any]:
        with self._guard:
            yield from ([i] for i in range(self.n))


def _points(n: int) -> list[list[int]]:
    return [[i] for i in range(n)]


def test_result_fields_are_sane() -> None:
    src = ListFlow(_points(1000))
    result = TestDataSpeed(src, size=500, progress=False).start()
    assert isinstance(result, SpeedResult)
    assert result.count == 500
    assert result.warmup == 0 and result.epochs == 1
    assert result.seconds > 0
    assert result.items_per_sec > 0
    assert math.isclose(result.items_per_sec, result.count / result.seconds)
    assert 0 <= result.latency_p50 <= result.latency_p90 <= result.latency_p99 <= result.latency_max
    assert result.latency_max <= result.seconds
    assert src.resets == 1 and src.produced == 500


def test_str_is_one_line_summary() -> None:
    result = TestDataSpeed(ListFlow(_points(50)), size=20, warmup=3, progress=False).start()
    text = str(result)
    assert "\n" not in text
    assert "20 dp in" in text and "dp/s" in text and "p50" in text and "p99" in text
    assert "3 warmup" in text


def test_result_is_frozen() -> None:
    result = TestDataSpeed(ListFlow(_points(5)), size=5, progress=False).start()
    with pytest.raises(AttributeError):
        result.count = 3  # type: ignore[misc]


def test_warmup_is_drawn_but_not_counted() -> None:
    src = ListFlow(_points(100))
    result = TestDataSpeed(src, size=10, warmup=5, progress=False).start()
    assert result.count == 10 and result.warmup == 5
    assert src.produced == 15  # exactly warmup + size, nothing more is pulled
    assert src.epochs == 1


def test_small_flow_restarts_epochs() -> None:
    src = ListFlow(_points(3))
    result = TestDataSpeed(src, size=10, progress=False).start()
    assert result.count == 10
    assert result.epochs == 4 and src.epochs == 4  # 3 + 3 + 3 + 1
    assert src.produced == 10


def test_epoch_restart_during_warmup() -> None:
    src = ListFlow(_points(3))
    result = TestDataSpeed(src, size=4, warmup=5, progress=False).start()
    assert src.produced == 9
    assert result.epochs == 3 and src.epochs == 3


def test_iterator_is_closed_after_start() -> None:
    src = ListFlow(_points(100))
    TestDataSpeed(src, size=10, progress=False).start()
    assert src.aborted == 1  # the partly consumed epoch was closed, not left suspended
    guarded = _Guarded(100)
    TestDataSpeed(guarded, size=10, progress=False).start()
    assert len(list(guarded)) == 100  # the guard was released


def test_empty_flow_raises_naming_it() -> None:
    with pytest.raises(ValueError, match=r"TestDataSpeed: _Empty produced no datapoint"):
        TestDataSpeed(_Empty(), size=10, progress=False).start()


def test_flow_that_becomes_empty_raises() -> None:
    with pytest.raises(ValueError, match="_EmptyAfterFirst produced no datapoint"):
        TestDataSpeed(_EmptyAfterFirst(), size=10, progress=False).start()
    with pytest.raises(ValueError, match="_EmptyAfterFirst produced no datapoint"):
        TestDataSpeed(_EmptyAfterFirst(), size=1, warmup=5, progress=False).start()


@pytest.mark.parametrize(
    ("kwargs", "exc", "pattern"),
    [
        ({"size": 0}, ValueError, r"TestDataSpeed: size .*got 0"),
        ({"size": -5}, ValueError, r"TestDataSpeed: size .*got -5"),
        ({"warmup": -1}, ValueError, r"TestDataSpeed: warmup .*got -1"),
        ({"size": "10"}, TypeError, r"TestDataSpeed: size must be an int, got str"),
        ({"size": 2.5}, TypeError, r"TestDataSpeed: size must be an int, got float"),
        ({"warmup": True}, TypeError, r"TestDataSpeed: warmup must be an int, got bool"),
    ],
)
def test_bad_arguments(kwargs: dict[str, Any], exc: type[Exception], pattern: str) -> None:
    with pytest.raises(exc, match=pattern):
        TestDataSpeed(ListFlow(_points(3)), **kwargs)


def test_numpy_int_arguments_are_accepted() -> None:
    result = TestDataSpeed(ListFlow(_points(3)), size=np.int64(4), warmup=np.int32(1), progress=False).start()
    assert result.count == 4 and result.warmup == 1


def test_upstream_must_be_a_flow() -> None:
    with pytest.raises(TypeError, match="TestDataSpeed"):
        TestDataSpeed([[1], [2]])  # type: ignore[arg-type]


def test_reset_state_once() -> None:
    src = ListFlow(_points(10))
    tds = TestDataSpeed(src, size=5, progress=False)
    tds.reset_state()
    tds.start()
    tds.start()
    assert src.resets == 1


def test_iterating_yields_upstream_unchanged() -> None:
    items = [[np.arange(3)], [np.arange(4)]]
    src = ListFlow(items)
    tds = TestDataSpeed(src, size=5, progress=False)
    tds.reset_state()
    out = list(tds)
    assert len(out) == 2 and all(a is b for a, b in zip(out, items))
    assert len(tds) == 2


def test_progress_bar_goes_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    TestDataSpeed(ListFlow(_points(50)), size=50, progress=True).start()
    err = capsys.readouterr().err
    assert "50/50" in err
    TestDataSpeed(ListFlow(_points(50)), size=50, progress=False).start()
    assert capsys.readouterr().err == ""


def test_speed_test_shortcut() -> None:
    src = ListFlow(_points(20))
    result = src.speed_test(size=30, warmup=2)
    assert isinstance(result, SpeedResult)
    assert result.count == 30 and result.warmup == 2 and src.resets == 1


def test_not_collected_by_pytest() -> None:
    assert TestDataSpeed.__test__ is False
