"""``repr(flow)`` / ``print(flow)`` shows the pipeline as a tree of stages with their key
parameters (dataflow/_repr.py), for every exported flow, without touching the data."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dataflow
from dataflow import ConcatData, DataFlow, DataFromArrays, DataFromList, FakeData
from dataflow.parallel._maps import MultiProcessMapDataZMQ
from dataflow.parallel._runners import MultiProcessRunnerZMQ

from .test_contract import FACTORIES


def parse(dp: Any) -> Any:
    return dp


def test_fluent_pipeline_prints_as_a_tree() -> None:
    flow = DataFromList([[i] for i in range(100)], shuffle=False).map(parse).shuffle(50, seed=3).batch(8)
    assert repr(flow) == (
        "BatchData(batch_size=8)\n"
        "└─ LocallyShuffleData(buffer_size=50, seed=3)\n"
        "   └─ MapData(func=parse)\n"
        "      └─ DataFromList(lst=<list of 100>, shuffle=False)"
    )
    assert str(flow) == repr(flow)


def test_branches_parallel_stages_and_runners() -> None:
    src = DataFromList([[1], [2], [3]], shuffle=False)
    left = MultiProcessMapDataZMQ(src, 3, functools.partial(parse), ordered=True)
    right = MultiProcessRunnerZMQ(DataFromArrays({"x": np.zeros((4, 2))}), 2).prefetch(4)
    text = repr(ConcatData([left, right]))
    assert text.splitlines() == [
        "ConcatData()",
        "├─ MultiProcessMapDataZMQ(num_proc=3, map_func=partial(parse), ordered=True)",
        "│  └─ DataFromList(lst=[[1], [2], [3]], shuffle=False)",
        "└─ ThreadPrefetchData(num_prefetch=4)",
        "   └─ MultiProcessRunnerZMQ(num_proc=2)",  # the flow it runs in its workers hangs below
        "      └─ DataFromArrays(rows=4, columns=['x'])",
    ]
    left.close()
    right.close()
    runner = MultiProcessRunnerZMQ(src)  # how parallel a stage is shows even at the default
    assert repr(runner).splitlines()[0] == "MultiProcessRunnerZMQ(num_proc=1)"
    runner.close()


def test_a_stage_used_twice_is_shown_once() -> None:
    src = FakeData([[2, 2]], 5, seed=1)
    lines = repr(ConcatData([src, src])).splitlines()
    assert lines == [
        "ConcatData()",
        "├─ FakeData(shapes=[(2, 2)], size=5, seed=1)",
        "└─ FakeData(shapes=[(2, 2)], size=5, seed=1) (shown above)",
    ]


class _Squares(DataFlow):
    """A user's flow in the tensorpack style: parameters as attributes, no hooks."""

    def __init__(self, n: int, scale: float = 1.0, name: str = "sq") -> None:
        self.n = n
        self.scale = scale
        self._name = name

    def __iter__(self) -> Iterator[Any]:
        raise AssertionError("repr must not iterate")


class _Custom(_Squares):
    def _repr_args(self) -> dict[str, Any]:
        return {"n": self.n, "note": "mine"}


def test_user_flows_show_their_init_arguments_and_can_override() -> None:
    assert repr(_Squares(4)) == "_Squares(n=4)"  # defaults are left out
    assert repr(_Squares(4, 2.5, "big")) == "_Squares(n=4, scale=2.5, name='big')"
    assert repr(_Custom(3).map(parse)) == "MapData(func=parse)\n└─ _Custom(n=3, note='mine')"


def test_large_inputs_are_summarised_not_printed() -> None:
    flow = DataFromList(list(range(100_000)), shuffle=False)
    assert repr(flow) == "DataFromList(lst=<list of 100000>, shuffle=False)"
    flow = DataFromArrays([np.zeros((1000, 3), np.float32)] * 2)
    assert repr(flow) == "DataFromArrays(rows=1000, columns=2)"


def test_a_failing_repr_args_does_not_break_repr() -> None:
    class Broken(_Squares):
        def _repr_args(self) -> dict[str, Any]:
            raise RuntimeError("boom")

    assert repr(Broken(1).take(1)) == "TakeData(n=1)\n└─ Broken(...)"


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_every_exported_flow_has_a_readable_repr(name: str, tmp_path: Path) -> None:
    flow = FACTORIES[name].build(tmp_path)
    try:
        text = repr(flow)
        assert text.splitlines()[0].startswith(f"{type(flow).__name__}("), text
        assert " object at 0x" not in text, text
        assert getattr(dataflow, name) in type(flow).__mro__
    finally:
        flow.close()
