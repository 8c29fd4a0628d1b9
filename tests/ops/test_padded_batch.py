"""dataflow/ops/_padded_batch.py: PaddedBatchData."""

from __future__ import annotations

import numpy as np
import pytest

from dataflow import ComponentError
from dataflow.ops._padded_batch import PaddedBatchData
from tests.helpers import ListFlow, epochs


def test_pads_1d_to_batch_max_with_zero() -> None:
    items = [[np.array([1, 2])], [np.array([3])], [np.array([4, 5, 6])], [np.array([7])]]
    df = PaddedBatchData(ListFlow(items), 2)
    assert len(df) == 2
    e1, e2 = epochs(df, 2)
    for ep in (e1, e2):
        assert [b[0].tolist() for b in ep] == [[[1, 2], [3, 0]], [[4, 5, 6], [7, 0, 0]]]
        assert all(b[0].dtype == np.int64 for b in ep)


def test_pads_every_axis_with_scalar_value() -> None:
    a = np.ones((1, 3), np.float32)
    b = np.full((2, 1), 2, np.float32)
    out = epochs(PaddedBatchData(ListFlow([[a], [b]]), 2, padding_value=-1), 1)[0]
    assert len(out) == 1
    batch = out[0][0]
    assert batch.shape == (2, 2, 3) and batch.dtype == np.float32
    assert batch.tolist() == [[[1, 1, 1], [-1, -1, -1]], [[2, -1, -1], [2, -1, -1]]]


def test_padding_value_mapping_per_component() -> None:
    items = [
        [np.array([1]), np.array([1.5, 2.5]), np.array([9])],
        [np.array([2, 3]), np.array([0.5]), np.array([8, 7])],
    ]
    df = PaddedBatchData(ListFlow(items), 2, padding_value={0: -1, 1: np.nan})
    [[c0, c1, c2]] = epochs(df, 1)[0]
    assert c0.tolist() == [[1, -1], [2, 3]]
    assert c1[0].tolist() == [1.5, 2.5] and c1[1][0] == 0.5 and np.isnan(c1[1][1])
    assert c2.tolist() == [[9, 0], [8, 7]]  # not in the mapping: 0


def test_lists_of_numbers_as_components() -> None:
    out = epochs(PaddedBatchData(ListFlow([[[1, 2, 3]], [[4]], [[]]]), 3), 1)[0]
    assert out[0][0].tolist() == [[1, 2, 3], [4, 0, 0], [0, 0, 0]]
    assert isinstance(out[0][0], np.ndarray)


def test_dtype_promoted_over_all_elements() -> None:
    items = [[np.array([200], np.uint8)], [np.array([-1, 1], np.int8)]]
    [[c]] = epochs(PaddedBatchData(ListFlow(items), 2), 1)[0]
    assert c.dtype == np.int16
    assert c.tolist() == [[200, 0], [-1, 1]]


def test_dict_datapoints() -> None:
    items = [
        {"ids": np.array([1, 2, 3]), "label": 0, "name": "a"},
        {"ids": np.array([4]), "label": 1, "name": "b"},
    ]
    df = PaddedBatchData(ListFlow(items), 2, padding_value={"ids": 99})
    [b] = epochs(df, 1)[0]
    assert type(b) is dict
    assert b["ids"].tolist() == [[1, 2, 3], [4, 99, 99]]
    assert b["label"].tolist() == [0, 1] and b["label"].dtype == np.int64
    assert b["name"] == ["a", "b"]


def test_scalars_and_strings_batched_as_batchdata() -> None:
    [b] = epochs(PaddedBatchData(ListFlow([[1, 0.5, "x"], [2, 1.5, "y"]]), 2), 1)[0]
    assert b[0].tolist() == [1, 2] and b[0].dtype == np.int64
    assert b[1].tolist() == [0.5, 1.5]
    assert b[2] == ["x", "y"]


def test_same_shapes_are_just_stacked() -> None:
    [b] = epochs(PaddedBatchData(ListFlow([[np.zeros((2, 2))], [np.ones((2, 2))]]), 2), 1)[0]
    assert b[0].shape == (2, 2, 2) and b[0][1].sum() == 4


def test_different_ndim_raises_naming_component_and_shapes() -> None:
    with pytest.raises(
        ComponentError,
        match=r"PaddedBatchData: component 1 cannot be padded: its elements must be numeric arrays with the "
        r"same number of dimensions, got shapes \(2, 2\), \(3,\)",
    ):
        epochs(PaddedBatchData(ListFlow([[0, np.zeros(3)], [0, np.zeros((2, 2))]]), 2), 1)


def test_string_arrays_raise() -> None:
    with pytest.raises(
        ComponentError, match=r"PaddedBatchData: component 'w' cannot be padded.*dtypes \['<U1'\]"
    ):
        epochs(PaddedBatchData(ListFlow([{"w": ["a"]}, {"w": ["b", "c"]}]), 2), 1)


def test_ragged_nested_lists_raise_naming_stage() -> None:
    with pytest.raises(ComponentError, match=r"PaddedBatchData: component 0 cannot be padded"):
        epochs(PaddedBatchData(ListFlow([[[[1, 2], [3]]], [[[1]]]]), 2), 1)


def test_remainder_and_len() -> None:
    items = [[np.arange(i + 1)] for i in range(5)]
    df = PaddedBatchData(ListFlow(items), 2)
    assert len(df) == 2
    assert [b[0].shape for b in epochs(df, 1)[0]] == [(2, 2), (2, 4)]
    df = PaddedBatchData(ListFlow(items), 2, remainder=True)
    assert len(df) == 3
    out = epochs(df, 1)[0]
    assert [b[0].shape for b in out] == [(2, 2), (2, 4), (1, 5)]
    assert out[2][0].tolist() == [[0, 1, 2, 3, 4]]


def test_batch_size_checks() -> None:
    with pytest.raises(ValueError, match="PaddedBatchData: batch_size must be >= 1, got 0"):
        PaddedBatchData(ListFlow([[np.zeros(1)]]), 0)
    with pytest.raises(
        ValueError, match="PaddedBatchData: batch_size 3 is larger than the upstream's length 1"
    ):
        PaddedBatchData(ListFlow([[np.zeros(1)]]), 3)


def test_structure_errors_as_batchdata() -> None:
    with pytest.raises(
        ComponentError,
        match=r"PaddedBatchData: datapoints in one batch have different numbers of components \[1, 2\]",
    ):
        epochs(PaddedBatchData(ListFlow([[np.zeros(1)], [np.zeros(1), 1]]), 2), 1)
    with pytest.raises(
        ComponentError, match=r"PaddedBatchData: dict datapoints in one batch have different keys"
    ):
        epochs(PaddedBatchData(ListFlow([{"a": 1}, {"b": 1}]), 2), 1)


def _pad_or_stage_error(items: list, padding_value: object) -> np.ndarray | None:
    """The padded batch, or None when PaddedBatchData refused with an error naming itself."""
    df = PaddedBatchData(ListFlow(items), len(items), padding_value=padding_value)
    try:
        [[c]] = epochs(df, 1)[0]
    except ValueError as e:  # ComponentError is a ValueError
        assert "PaddedBatchData" in str(e) and repr(padding_value) in str(e)
        return None
    return c


def test_padding_value_outside_dtype_is_not_a_bare_numpy_error() -> None:
    # uint8 data padded with -1: either the batch dtype also fits -1, or a ValueError naming
    # the stage and the padding value (not numpy's bare OverflowError).
    c = _pad_or_stage_error([[np.array([1, 2], np.uint8)], [np.array([3], np.uint8)]], -1)
    if c is not None:
        assert c.tolist() == [[1, 2], [3, -1]]


def test_fractional_padding_value_is_not_silently_truncated() -> None:
    # int data padded with 0.5: either float output holding 0.5, or a ValueError naming the stage
    c = _pad_or_stage_error([[np.array([1, 2])], [np.array([3])]], 0.5)
    if c is not None:
        assert c.tolist() == [[1.0, 2.0], [3.0, 0.5]]
