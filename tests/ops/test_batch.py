"""dataflow/ops/_batch.py: BatchData (dtype promotion, shape/key errors, remainder, len) and
BatchDataByShape."""

from __future__ import annotations

import numpy as np
import pytest

from dataflow import ComponentError, LengthUnknownError
from dataflow.ops._batch import BatchData, BatchDataByShape
from tests.helpers import ListFlow, epochs


def _one_batch(items: list, **kw: object) -> object:
    df = BatchData(ListFlow(items), len(items), **kw)  # type: ignore[arg-type]
    out = epochs(df, 1)[0]
    assert len(out) == 1
    return out[0]


# --- ordering, epochs, len -----------------------------------------------------------------


def test_batches_keep_order_and_epochs_repeat() -> None:
    df = BatchData(ListFlow([[i, float(i)] for i in range(7)]), 3)
    assert len(df) == 2
    e1, e2 = epochs(df, 2)
    for ep in (e1, e2):
        assert [b[0].tolist() for b in ep] == [[0, 1, 2], [3, 4, 5]]
        assert [b[1].tolist() for b in ep] == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
        assert all(type(b) is list for b in ep)


@pytest.mark.parametrize(("n", "bs", "remainder", "expected"), [
    (10, 3, False, 3), (10, 3, True, 4), (9, 3, False, 3), (9, 3, True, 3),
    (1, 1, False, 1), (2, 5, True, 1),
])
def test_len_floor_or_ceil(n: int, bs: int, remainder: bool, expected: int) -> None:
    df = BatchData(ListFlow([[i] for i in range(n)]), bs, remainder=remainder)
    assert len(df) == expected
    out = epochs(df, 1)[0]
    assert len(out) == expected
    sizes = [len(b[0]) for b in out]
    assert sum(sizes) == (n if remainder else expected * bs)
    assert [x for b in out for x in b[0].tolist()] == list(range(sum(sizes)))


def test_remainder_batch_is_last_and_smaller() -> None:
    df = BatchData(ListFlow([[i] for i in range(5)]), 2, remainder=True)
    out = epochs(df, 2)
    for ep in out:
        assert [b[0].tolist() for b in ep] == [[0, 1], [2, 3], [4]]


def test_nothing_carried_between_epochs() -> None:
    df = BatchData(ListFlow([[i] for i in range(5)]), 2)
    e1, e2 = epochs(df, 2)
    assert [b[0].tolist() for b in e1] == [[0, 1], [2, 3]]
    assert [b[0].tolist() for b in e2] == [[0, 1], [2, 3]]


def test_len_unknown_propagates() -> None:
    df = BatchData(ListFlow([[1]], has_len=False), 4)
    with pytest.raises(LengthUnknownError):
        len(df)
    assert epochs(df, 1)[0] == []  # no full batch, dropped


@pytest.mark.parametrize("bs", [0, -3])
def test_batch_size_not_positive(bs: int) -> None:
    with pytest.raises(ValueError, match=rf"BatchData: batch_size must be >= 1, got {bs}"):
        BatchData(ListFlow([[1]]), bs)


@pytest.mark.parametrize("bs", [2.0, "4", None, True])
def test_batch_size_not_int(bs: object) -> None:
    with pytest.raises(TypeError, match=rf"BatchData: batch_size must be an int, got {type(bs).__name__}"):
        BatchData(ListFlow([[1], [2], [3]]), bs)  # type: ignore[arg-type]


def test_batch_size_numpy_int_accepted() -> None:
    df = BatchData(ListFlow([[1], [2]]), np.int64(2))  # type: ignore[arg-type]
    assert df.batch_size == 2 and type(df.batch_size) is int


def test_batch_size_larger_than_len_without_remainder() -> None:
    with pytest.raises(
        ValueError,
        match=r"BatchData: batch_size 5 is larger than the upstream's length 3, so with remainder=False "
        r"no batch would ever be produced",
    ):
        BatchData(ListFlow([[1], [2], [3]]), 5)
    df = BatchData(ListFlow([[1], [2], [3]]), 5, remainder=True)
    assert len(df) == 1
    assert [b[0].tolist() for b in epochs(df, 1)[0]] == [[1, 2, 3]]


def test_forwards_reset_and_close() -> None:
    src = ListFlow([[1], [2]])
    df = BatchData(src, 2)
    df.reset_state()
    df.close()
    assert (src.resets, src.closes) == (1, 1)


# --- dtype promotion -----------------------------------------------------------------------


def test_uint8_and_int8_arrays_promote_to_int16() -> None:
    b = _one_batch([[np.array([250, 1], np.uint8)], [np.array([-3, 2], np.int8)]])
    assert b[0].dtype == np.int16
    assert b[0].tolist() == [[250, 1], [-3, 2]]


def test_dtype_from_all_elements_not_first() -> None:
    b = _one_batch([[np.array([1], np.int32)], [np.array([2**40], np.int64)]])
    assert b[0].dtype == np.int64
    assert b[0].tolist() == [[1], [2**40]]
    b = _one_batch([[np.array([1], np.int32)], [np.array([0.5], np.float32)]])
    assert b[0].dtype == np.float64
    assert b[0].tolist() == [[1.0], [0.5]]


def test_python_ints_give_int64() -> None:
    b = _one_batch([[1], [2], [3]])
    assert b[0].dtype == np.int64 and b[0].tolist() == [1, 2, 3]
    b = _one_batch([[1], [2**40]])
    assert b[0].dtype == np.int64 and b[0].tolist() == [1, 2**40]


def test_python_floats_give_float64() -> None:
    b = _one_batch([[0.5], [1.25]])
    assert b[0].dtype == np.float64 and b[0].tolist() == [0.5, 1.25]


def test_ints_beyond_int64_give_uint64() -> None:
    b = _one_batch([[2**63], [1]])
    assert b[0].dtype == np.uint64
    assert b[0].tolist() == [2**63, 1]
    b = _one_batch([[1], [2**64 - 1]])
    assert b[0].dtype == np.uint64 and b[0].tolist() == [1, 2**64 - 1]


def test_ints_beyond_uint64_raise() -> None:
    with pytest.raises(
        ComponentError,
        match=r"BatchData: component 0 holds integers that fit neither int64 nor uint64 "
        r"\(min 1, max 18446744073709551616\); use use_list=True",
    ):
        _one_batch([[1], [2**64]])


def test_big_and_negative_ints_raise() -> None:
    with pytest.raises(
        ComponentError, match=r"component 0 holds integers that fit neither int64 nor uint64 \(min -1"
    ):
        _one_batch([[2**63], [-1]])


def test_uint64_and_int64_numpy_scalars_do_not_wrap() -> None:
    # numpy promotes uint64 with int64 to float64; the values here all fit int64
    b = _one_batch([[np.uint64(5)], [np.int64(-1)]])
    assert b[0].tolist() == [5, -1]
    b = _one_batch([[np.int8(-1)], [np.uint64(7)]])
    assert b[0].tolist() == [-1, 7]


def test_negative_python_int_with_uint64_scalar_fits_int64() -> None:
    b = _one_batch([[-1], [np.uint64(7)]])
    assert b[0].dtype == np.int64 and b[0].tolist() == [-1, 7]


def test_big_ints_kept_with_use_list() -> None:
    b = _one_batch([[1], [2**70]], use_list=True)
    assert b == [[1, 2**70]]


def test_int_and_float_give_float64() -> None:
    b = _one_batch([[1], [2.5]])
    assert b[0].dtype == np.float64 and b[0].tolist() == [1.0, 2.5]
    b = _one_batch([[2.5], [1]])
    assert b[0].dtype == np.float64 and b[0].tolist() == [2.5, 1.0]


def test_numpy_uint8_scalar_with_python_300_does_not_wrap() -> None:
    b = _one_batch([[np.uint8(5)], [300]])
    assert b[0].tolist() == [5, 300]
    assert np.can_cast(b[0].dtype, np.int64) and b[0].dtype.itemsize >= 2
    b = _one_batch([[300], [np.uint8(5)]])
    assert b[0].tolist() == [300, 5]


def test_numpy_scalars_keep_their_dtype() -> None:
    b = _one_batch([[np.float32(1.5)], [np.float32(2.0)]])
    assert b[0].dtype == np.float32 and b[0].tolist() == [1.5, 2.0]
    b = _one_batch([[np.uint8(1)], [np.int8(-1)]])
    assert b[0].dtype == np.int16 and b[0].tolist() == [1, -1]


def test_bools_give_bool_array() -> None:
    b = _one_batch([[True], [False]])
    assert b[0].dtype == np.bool_ and b[0].tolist() == [True, False]


def test_zero_dim_arrays_stack_to_1d() -> None:
    b = _one_batch([[np.array(1.5)], [np.array(2.5)]])
    assert b[0].shape == (2,) and b[0].tolist() == [1.5, 2.5]


def test_arrays_stack_with_new_axis() -> None:
    b = _one_batch([[np.zeros((2, 3), np.float32)], [np.ones((2, 3), np.float32)]])
    assert b[0].shape == (2, 2, 3) and b[0].dtype == np.float32
    assert b[0][1].sum() == 6


# --- strings, bytes, objects, use_list -----------------------------------------------------


def test_str_bytes_objects_become_lists() -> None:
    obj1, obj2 = object(), object()
    b = _one_batch([["a", b"x", obj1, None], ["bc", b"yz", obj2, None]])
    assert b == [["a", "bc"], [b"x", b"yz"], [obj1, obj2], [None, None]]
    assert all(type(c) is list for c in b)


def test_use_list_keeps_every_component_as_list() -> None:
    a1, a2 = np.arange(2), np.arange(3)
    b = _one_batch([[1, a1], [2, a2]], use_list=True)
    assert type(b[0]) is list and b[0] == [1, 2]
    assert b[1][0] is a1 and b[1][1] is a2


def test_mixed_number_and_str_raises_naming_types() -> None:
    with pytest.raises(
        ComponentError,
        match=r"BatchData: component 1 mixes types \['int', 'str'\] in one batch; make them uniform or "
        r"use use_list=True",
    ):
        _one_batch([[0, 1], [0, "a"]])


def test_number_then_none_raises() -> None:
    with pytest.raises(ComponentError, match=r"component 0 mixes types \['NoneType', 'int'\]"):
        _one_batch([[1], [None]])


# --- shape / structure errors --------------------------------------------------------------


def test_shape_mismatch_names_component_index_and_shapes() -> None:
    with pytest.raises(
        ComponentError,
        match=r"BatchData: component 1 cannot be stacked: its elements have different shapes "
        r"\(2,\), \(3,\)\. "
        r".*PaddedBatchData.*BatchDataByShape.*use_list=True",
    ):
        _one_batch([[0, np.zeros(2)], [0, np.zeros(3)], [0, np.zeros(2)]])


def test_shape_mismatch_names_dict_key() -> None:
    with pytest.raises(
        ValueError, match=r"BatchData: component 'img' cannot be stacked: .*shapes \(2, 2\), \(2, 3\)"
    ):
        _one_batch([{"img": np.zeros((2, 2)), "y": 1}, {"img": np.zeros((2, 3)), "y": 2}])


def test_scalar_and_array_mix_is_a_shape_error() -> None:
    with pytest.raises(ComponentError, match=r"component 0 cannot be stacked: .*different shapes"):
        _one_batch([[1], [np.zeros(2)]])


def test_different_component_counts() -> None:
    with pytest.raises(
        ComponentError,
        match=r"BatchData: datapoints in one batch have different numbers of components \[2, 3\]",
    ):
        _one_batch([[1, 2], [1, 2, 3]])


def test_dict_key_mismatch_names_keys() -> None:
    with pytest.raises(
        ComponentError,
        match=r"BatchData: dict datapoints in one batch have different keys: the first has \['a', 'b'\], "
        r"datapoint 1 has \['a', 'c'\] \(missing \['b'\], extra \['c'\]\)",
    ):
        _one_batch([{"a": 1, "b": 2}, {"a": 3, "c": 4}])


@pytest.mark.parametrize("bad", [5, "ab", np.arange(2)])
def test_non_container_datapoint(bad: object) -> None:
    with pytest.raises(
        ComponentError,
        match=rf"BatchData: a datapoint must be a list/tuple or dict of components, got {type(bad).__name__} "
        r".*wrap single values as \[value\]",
    ):
        _one_batch([[1], bad])


def test_dict_and_list_mixed() -> None:
    with pytest.raises(ComponentError, match="BatchData: a batch mixes dict and list/tuple datapoints"):
        _one_batch([[1], {"a": 1}])


# --- containers ----------------------------------------------------------------------------


def test_dict_datapoints_give_dict_batches() -> None:
    df = BatchData(ListFlow([{"x": np.full(2, i), "y": i, "name": f"n{i}"} for i in range(4)]), 2)
    e1, e2 = epochs(df, 2)
    for ep in (e1, e2):
        assert [type(b) for b in ep] == [dict, dict]
        assert ep[0]["x"].tolist() == [[0, 0], [1, 1]]
        assert ep[1]["y"].tolist() == [2, 3] and ep[1]["y"].dtype == np.int64
        assert ep[1]["name"] == ["n2", "n3"]


def test_dict_use_list() -> None:
    b = _one_batch([{"a": 1}, {"a": 2}], use_list=True)
    assert b == {"a": [1, 2]}


def test_tuple_datapoints_give_list_batches() -> None:
    b = _one_batch([(1, "a"), (2, "b")])
    assert type(b) is list
    assert b[0].tolist() == [1, 2] and b[1] == ["a", "b"]


def test_aggregate_batch_static_helper() -> None:
    b = BatchData.aggregate_batch([[1, "a"], [2, "b"]])
    assert b[0].tolist() == [1, 2] and b[1] == ["a", "b"]
    assert BatchData.aggregate_batch([[1], [2]], use_list=True) == [[1, 2]]


# --- BatchDataByShape ----------------------------------------------------------------------


def test_by_shape_groups_and_drops_remainder() -> None:
    items = [[np.zeros(2) + i, i] for i in (0, 1)] + [[np.zeros(3) + 2, 2]] + [[np.zeros(2) + 3, 3]] \
        + [[np.zeros(3) + i, i] for i in (4, 5)] + [[np.zeros(2) + 6, 6], [np.zeros(4), 7]]
    df = BatchDataByShape(ListFlow(items), 2, idx=0)
    assert len(df) == 4  # 8 // 2, an upper bound
    e1, e2 = epochs(df, 2)
    for ep in (e1, e2):
        assert [b[1].tolist() for b in ep] == [[0, 1], [2, 4], [3, 6]]
        assert [b[0].shape for b in ep] == [(2, 2), (2, 3), (2, 2)]
        assert len(ep) <= len(df)


def test_by_shape_remainder_in_first_appearance_order() -> None:
    items = [[np.zeros(3), 0], [np.zeros(2), 1], [np.zeros(2), 2], [np.zeros(2), 3], [np.zeros(4), 4]]
    df = BatchDataByShape(ListFlow(items), 2, 0, remainder=True)
    e1, e2 = epochs(df, 2)
    for ep in (e1, e2):
        assert [b[1].tolist() for b in ep] == [[1, 2], [0], [3], [4]]
    with pytest.raises(LengthUnknownError, match="BatchDataByShape"):
        len(df)


def test_by_shape_dict_key() -> None:
    items = [{"a": np.zeros(k), "i": i} for i, k in enumerate([1, 2, 1, 2])]
    df = BatchDataByShape(ListFlow(items), 2, "a")
    out = epochs(df, 1)[0]
    assert [b["i"].tolist() for b in out] == [[0, 2], [1, 3]]


def test_by_shape_batch_size_larger_than_len_is_allowed() -> None:
    df = BatchDataByShape(ListFlow([[np.zeros(1)]]), 4, 0)
    assert len(df) == 0
    assert epochs(df, 1)[0] == []


def test_by_shape_non_array_component() -> None:
    df = BatchDataByShape(ListFlow([[1, 2]]), 1, 0)
    with pytest.raises(
        TypeError, match="BatchDataByShape: component 0 must be a numpy array to group by shape, got int"
    ):
        epochs(df, 1)


def test_by_shape_missing_component() -> None:
    df = BatchDataByShape(ListFlow([[np.zeros(1)]]), 1, 3)
    with pytest.raises(ComponentError, match="BatchDataByShape: component index 3 is out of range"):
        epochs(df, 1)


def test_by_shape_bad_batch_size() -> None:
    with pytest.raises(ValueError, match="BatchDataByShape: batch_size must be >= 1, got 0"):
        BatchDataByShape(ListFlow([[np.zeros(1)]]), 0, 0)
