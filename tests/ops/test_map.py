"""dataflow/ops/_map.py: MapData, MapDataComponent, FilterData, SelectComponent."""

from __future__ import annotations

import re

import numpy as np
import pytest

from dataflow import ComponentError, LengthUnknownError
from dataflow.ops._map import FilterData, MapData, MapDataComponent, SelectComponent
from tests.helpers import ListFlow, collect, epochs

# --- MapData -------------------------------------------------------------------------------


def test_map_order_epochs_len() -> None:
    src = ListFlow([[i] for i in range(5)])
    df = MapData(src, lambda dp: [dp[0] * 2, "x"])
    assert len(df) == 5
    e1, e2 = epochs(df, 2)
    assert e1 == e2 == [[0, "x"], [2, "x"], [4, "x"], [6, "x"], [8, "x"]]
    assert src.resets == 1


def test_map_none_drops_datapoint_and_len_is_upper_bound() -> None:
    df = MapData(ListFlow([[i] for i in range(6)]), lambda dp: dp if dp[0] % 3 else None)
    out = epochs(df, 1)[0]
    assert out == [[1], [2], [4], [5]]
    assert len(df) == 6 >= len(out)


def test_map_falsy_results_are_kept() -> None:
    df = MapData(ListFlow([[0], [1]]), lambda dp: [] if dp[0] == 0 else {})
    assert epochs(df, 1)[0] == [[], {}]


def test_map_len_unknown_propagates() -> None:
    with pytest.raises(LengthUnknownError):
        len(MapData(ListFlow([[1]], has_len=False), lambda dp: dp))


def test_map_not_callable() -> None:
    with pytest.raises(TypeError, match=r"MapData: func must be callable, got int \(3\)"):
        MapData(ListFlow([[1]]), 3)  # type: ignore[arg-type]


def test_map_forwards_close() -> None:
    src = ListFlow([[1]])
    with MapData(src, lambda dp: dp):
        pass
    assert src.closes == 1


def test_map_func_error_propagates_unchanged() -> None:
    def bad(dp: list) -> list:
        raise KeyError("inside func")

    with pytest.raises(KeyError, match="inside func"):
        epochs(MapData(ListFlow([[1]]), bad), 1)


# --- MapDataComponent ----------------------------------------------------------------------


def test_map_component_list() -> None:
    src_items = [[i, i * 10] for i in range(4)]
    df = MapDataComponent(ListFlow(src_items), lambda x: x + 1, index=1)
    assert len(df) == 4
    e1, e2 = epochs(df, 2)
    assert e1 == e2 == [[0, 1], [1, 11], [2, 21], [3, 31]]
    assert all(type(dp) is list for dp in e1)
    assert src_items == [[i, i * 10] for i in range(4)]  # input not mutated


def test_map_component_default_index_zero_and_negative_index() -> None:
    df = MapDataComponent(ListFlow([[1, 2]]), lambda x: -x)
    assert epochs(df, 1)[0] == [[-1, 2]]
    df = MapDataComponent(ListFlow([[1, 2]]), lambda x: -x, index=-1)
    assert epochs(df, 1)[0] == [[1, -2]]


def test_map_component_tuple_returns_tuple_without_mutation() -> None:
    items = [(1, "a"), (2, "b")]
    df = MapDataComponent(ListFlow(items), str.upper, index=1)
    out = epochs(df, 1)[0]
    assert out == [(1, "A"), (2, "B")]
    assert all(type(dp) is tuple for dp in out)
    assert items == [(1, "a"), (2, "b")]


def test_map_component_dict_returns_dict_without_mutation() -> None:
    items = [{"img": np.arange(3), "label": 1}, {"img": np.arange(3) + 1, "label": 2}]
    df = MapDataComponent(ListFlow(items), lambda a: a * 2, index="img")
    out = epochs(df, 1)[0]
    assert all(type(dp) is dict for dp in out)
    assert [dp["img"].tolist() for dp in out] == [[0, 2, 4], [2, 4, 6]]
    assert [dp["label"] for dp in out] == [1, 2]
    assert [dp["img"].tolist() for dp in items] == [[0, 1, 2], [1, 2, 3]]
    assert out[0] is not items[0]


def test_map_component_none_drops() -> None:
    df = MapDataComponent(ListFlow([[i] for i in range(5)]), lambda x: x if x % 2 else None)
    out = epochs(df, 1)[0]
    assert out == [[1], [3]]
    assert len(df) == 5  # upper bound


def test_map_component_index_out_of_range() -> None:
    df = MapDataComponent(ListFlow([[1, 2]]), lambda x: x, index=5)
    with pytest.raises(
        ComponentError,
        match="MapDataComponent: component index 5 is out of range for a datapoint of 2 components",
    ):
        epochs(df, 1)
    assert issubclass(ComponentError, ValueError)


def test_map_component_missing_key() -> None:
    df = MapDataComponent(ListFlow([{"a": 1}]), lambda x: x, index="b")
    with pytest.raises(
        ComponentError, match=r"MapDataComponent: key 'b' is not in the datapoint \(keys: \['a'\]\)"
    ):
        epochs(df, 1)


def test_map_component_str_index_on_list() -> None:
    df = MapDataComponent(ListFlow([[1]]), lambda x: x, index="a")
    with pytest.raises(
        ComponentError, match="MapDataComponent: component 'a' cannot index a list; use an int"
    ):
        epochs(df, 1)


@pytest.mark.parametrize("dp", [5, "abc", np.arange(3)])
def test_map_component_non_container_datapoint(dp: object) -> None:
    df = MapDataComponent(ListFlow([dp]), lambda x: x, index=0)
    with pytest.raises(
        ComponentError,
        match=rf"MapDataComponent: the datapoint must be a list/tuple or dict of components to take "
        rf"component 0, got {type(dp).__name__} .*wrap single values as \[value\]",
    ):
        epochs(df, 1)


def test_map_component_not_callable() -> None:
    with pytest.raises(TypeError, match="MapDataComponent: func must be callable, got str"):
        MapDataComponent(ListFlow([[1]]), "f")  # type: ignore[arg-type]


# --- FilterData ----------------------------------------------------------------------------


def test_filter_keeps_order_epochs_and_len_upper_bound() -> None:
    df = FilterData(ListFlow([[i] for i in range(10)]), lambda dp: dp[0] % 3 == 0)
    e1, e2 = epochs(df, 2)
    assert e1 == e2 == [[0], [3], [6], [9]]
    assert len(df) == 10


def test_filter_not_callable() -> None:
    with pytest.raises(TypeError, match=r"FilterData: predicate must be callable, got NoneType \(None\)"):
        FilterData(ListFlow([[1]]), None)  # type: ignore[arg-type]


# --- SelectComponent -----------------------------------------------------------------------


def test_select_lists_and_tuples_reorder_and_repeat() -> None:
    df = SelectComponent(ListFlow([[1, 2, 3], (4, 5, 6)]), [2, 0, 2])
    assert len(df) == 2
    e1, e2 = epochs(df, 2)
    assert e1 == e2 == [[3, 1, 3], [6, 4, 6]]
    assert all(type(dp) is list for dp in e1)


def test_select_dicts() -> None:
    df = SelectComponent(ListFlow([{"a": 1, "b": 2, "c": 3}]), ["c", "a"])
    out = epochs(df, 1)[0]
    assert out == [{"c": 3, "a": 1}]
    assert list(out[0]) == ["c", "a"]


def test_select_missing_index_names_it() -> None:
    df = SelectComponent(ListFlow([[1, 2]]), [0, 3])
    with pytest.raises(
        ComponentError, match="SelectComponent: component index 3 is out of range for a datapoint of 2"
    ):
        epochs(df, 1)


def test_select_missing_key_names_it() -> None:
    df = SelectComponent(ListFlow([{"a": 1}]), ["a", "zz"])
    with pytest.raises(
        ComponentError, match=r"SelectComponent: key 'zz' is not in the datapoint \(keys: \['a'\]\)"
    ):
        epochs(df, 1)


def test_select_non_container_datapoint() -> None:
    df = SelectComponent(ListFlow([7]), [0])
    with pytest.raises(
        ComponentError, match="SelectComponent: the datapoint must be a list/tuple or dict.*got int"
    ):
        epochs(df, 1)


@pytest.mark.parametrize("idxs", [0, "a", [], None])
def test_select_bad_idxs(idxs: object) -> None:
    with pytest.raises(
        ValueError, match=r"SelectComponent: idxs must be a non-empty list .*got " + re.escape(repr(idxs))
    ):
        SelectComponent(ListFlow([[1]]), idxs)  # type: ignore[arg-type]


def test_select_does_not_iterate_or_reset_at_construction() -> None:
    src = ListFlow([[1]])
    SelectComponent(src, [0])
    assert src.epochs == 0 and src.resets == 0
    assert collect(SelectComponent(src, [0])) == [[1]]
