"""profile(): per-stage timings, the slowest stage, chain walking and restoring ``.ds``."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from typing import Any

import pytest

from dataflow.base import DataFlow
from dataflow.ops._batch import BatchData
from dataflow.ops._combine import ConcatData
from dataflow.ops._map import MapData
from dataflow.tools._profiling import ProfileResult, StageTiming, profile
from tests.helpers import ListFlow


def _points(n: int) -> list[list[int]]:
    return [[i] for i in range(n)]


def _identity(dp: Any) -> Any:
    return dp


def _sleepy(dp: Any) -> Any:
    time.sleep(0.002)
    return dp


def _chain(n: int = 1000) -> tuple[ListFlow, MapData, MapData, MapData, BatchData]:
    src = ListFlow(_points(n))
    m1 = MapData(src, _identity)
    slow = MapData(m1, _sleepy)
    m3 = MapData(slow, _identity)
    top = BatchData(m3, 4)
    return src, m1, slow, m3, top


def _stages(top: DataFlow) -> list[Any]:
    out = [top]
    while hasattr(out[-1], "ds"):
        out.append(out[-1].ds)
    return out


def test_names_the_sleeping_stage_as_slowest() -> None:
    src, m1, slow, m3, top = _chain()
    result = profile(top, size=30, warmup=2)
    assert isinstance(result, ProfileResult)
    assert result.slowest.flow is slow
    assert result.slowest.label == "MapData(_sleepy)"
    assert result.slowest.share > 50
    text = str(result)
    assert "slowest: #2 MapData(_sleepy)" in text


def test_stages_from_source_to_top_with_counts() -> None:
    src, m1, slow, m3, top = _chain()
    result = profile(top, size=10, warmup=3)
    assert [s.flow for s in result.stages] == [src, m1, slow, m3, top]
    assert [s.index for s in result.stages] == [0, 1, 2, 3, 4]
    assert [s.name for s in result.stages] == ["ListFlow", "MapData", "MapData", "MapData", "BatchData"]
    assert [s.detail for s in result.stages] == ["", "_identity", "_sleepy", "_identity", ""]
    # warmup is excluded from the counts: 10 batches of 4, nothing more
    assert [s.items for s in result.stages] == [40, 40, 40, 40, 10]
    assert result.count == 10 and result.warmup == 3
    assert math.isclose(sum(s.share for s in result.stages), 100.0, rel_tol=1e-6)
    assert all(s.own_seconds >= 0 and not s.includes_upstream for s in result.stages)
    assert all(isinstance(s, StageTiming) for s in result.stages)
    assert src.resets == 1


def test_restores_every_ds_and_the_chain_still_works() -> None:
    chain = list(_chain(40))
    top = chain[-1]
    before = _stages(top)
    profile(top, size=5, warmup=0)
    assert all(a is b for a, b in zip(_stages(top), before)) and len(_stages(top)) == len(before)
    assert all(type(s).__name__ != "_TimedUpstream" for s in _stages(top))
    assert len(list(top)) == 10


def test_restores_ds_when_a_stage_raises() -> None:
    def boom(dp: Any) -> Any:
        if dp[0] == 7:
            raise RuntimeError("boom at 7")
        return dp

    src = ListFlow(_points(20))
    mid = MapData(src, boom)
    top = MapData(mid, _identity)
    with pytest.raises(RuntimeError, match="boom at 7"):
        profile(top, size=15, warmup=0)
    assert top.ds is mid and mid.ds is src


def test_single_stage_chain() -> None:
    src = ListFlow(_points(10))
    result = profile(src, size=25, warmup=1)
    assert len(result.stages) == 1
    only = result.stages[0]
    assert only.flow is src and only.items == 25 and not only.includes_upstream
    assert result.slowest is only
    assert "ListFlow" in str(result)


class _ReadOnlyDs(DataFlow):
    """Has ``ds`` as a read-only property."""

    def __init__(self, upstream: DataFlow) -> None:
        self._up = upstream

    @property
    def ds(self) -> DataFlow:
        return self._up

    def reset_state(self) -> None:
        self._up.reset_state()

    def __iter__(self) -> Iterator[Any]:
        yield from self._up


def test_read_only_ds_property_is_treated_as_source() -> None:
    src = ListFlow(_points(10))
    ro = _ReadOnlyDs(src)
    top = MapData(ro, _identity)
    result = profile(top, size=12, warmup=0)
    assert [s.flow for s in result.stages] == [ro, top]
    assert result.stages[0].includes_upstream
    assert "includes the time of its upstream" in str(result)
    assert ro.ds is src and top.ds is ro


def test_multi_upstream_flow_is_treated_as_source() -> None:
    a, b = ListFlow(_points(3)), ListFlow(_points(4))
    concat = ConcatData([a, b])
    top = MapData(concat, _identity)
    result = profile(top, size=7, warmup=0)
    assert [s.flow for s in result.stages] == [concat, top]
    assert result.stages[0].includes_upstream and result.stages[0].items == 7
    assert concat.df_lists[0] is a and concat.df_lists[1] is b


class _CapturesUpstream(DataFlow):
    """Has ``.ds`` but iterates an object captured at construction (like a runner would)."""

    def __init__(self, upstream: DataFlow) -> None:
        self.ds = upstream
        self._captured = upstream

    def reset_state(self) -> None:
        self._captured.reset_state()

    def __iter__(self) -> Iterator[Any]:
        yield from self._captured


def test_stage_that_bypasses_ds_is_reported_as_including_upstream() -> None:
    src = ListFlow(_points(10))
    cap = _CapturesUpstream(src)
    result = profile(cap, size=5, warmup=0)
    assert [s.flow for s in result.stages] == [src, cap]
    assert result.stages[1].includes_upstream
    assert result.stages[0].items == 0


def test_small_flow_restarts_epochs() -> None:
    src = ListFlow(_points(3))
    top = MapData(src, _identity)
    result = profile(top, size=10, warmup=2)
    assert result.stages[-1].items == 10
    assert src.epochs == 4  # 2 warmup + 10 timed = 12 = 4 epochs of 3


def test_empty_flow_raises() -> None:
    with pytest.raises(ValueError, match="profile: MapData produced no datapoint"):
        profile(MapData(ListFlow([]), _identity), size=5)


@pytest.mark.parametrize(
    ("kwargs", "exc", "pattern"),
    [
        ({"size": 0}, ValueError, r"profile: size .*got 0"),
        ({"warmup": -1}, ValueError, r"profile: warmup .*got -1"),
        ({"size": "5"}, TypeError, r"profile: size must be an int, got str"),
    ],
)
def test_bad_arguments(kwargs: dict[str, Any], exc: type[Exception], pattern: str) -> None:
    with pytest.raises(exc, match=pattern):
        profile(ListFlow(_points(3)), **kwargs)


def test_reset_false_does_not_reset() -> None:
    src = ListFlow(_points(5))
    profile(MapData(src, _identity), size=3, warmup=0, reset=False)
    assert src.resets == 0


def test_progress_bar(capsys: pytest.CaptureFixture[str]) -> None:
    profile(ListFlow(_points(5)), size=8, warmup=0, progress=True)
    assert "8/8" in capsys.readouterr().err
