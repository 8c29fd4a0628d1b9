"""dataflow_to_dataset hands datapoints to tf.data in groups (dataflow/adapters/_tf_groups.py):
the same elements in the same order with the same dtypes and shapes as iterating the flow,
partial groups (end, shape change, error, time, bytes), errors mid-stream, early exits."""

from __future__ import annotations

import gc
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
tf = pytest.importorskip("tensorflow")

from dataflow import DataFromList  # noqa: E402
from dataflow.adapters import _tf_fill, _tf_groups  # noqa: E402
from dataflow.adapters.tf import dataflow_to_dataset, infer_signature  # noqa: E402
from dataflow.base import DataFlow  # noqa: E402
from dataflow.ops._batch import BatchData  # noqa: E402
from dataflow.ops._padded_batch import PaddedBatchData  # noqa: E402
from tests.helpers import ListFlow  # noqa: E402

from ._util import FailingFlow  # noqa: E402

G = _tf_groups.GROUP_MAX


def _same(got: Any, want: Any, spec: Any) -> None:
    """One element of the dataset equals the flow's datapoint, cast as the signature says."""
    if isinstance(want, dict):
        assert set(got) == set(want)
        for k in want:
            _same_leaf(got[k], want[k], spec[k])
        return
    assert len(got) == len(want)
    for g, w, s in zip(got, want, spec):
        _same_leaf(g, w, s)


def _same_leaf(g: Any, w: Any, s: Any) -> None:
    assert g.dtype == s.dtype and s.shape.is_compatible_with(g.shape)
    if s.dtype == tf.string:
        w = np.asarray(w, dtype=object)
        enc = np.vectorize(lambda x: x.encode() if isinstance(x, str) else x, otypes=[object])(w)
        assert np.asarray(g.numpy(), dtype=object).tolist() == enc.tolist()
    else:
        np.testing.assert_array_equal(g.numpy(), np.asarray(w, dtype=s.dtype.as_numpy_dtype))


def _mixed_items(n: int) -> list[list[Any]]:
    """Shapes that change every 5 datapoints (groups break there), strings, Python scalars."""
    rng = np.random.default_rng(0)
    out = []
    for i in range(n):
        rows = 2 + (i // 5) % 3
        out.append([rng.random((rows, 4), dtype=np.float32), i, f"s{i}", bool(i % 2), np.int16(-i)])
    return out


@pytest.mark.parametrize("n", [1, G - 1, G, G + 1, 3 * G + 7])
def test_elements_are_the_flows_datapoints_in_order_over_epochs(n: int) -> None:
    items = _mixed_items(n)
    df = ListFlow(items)
    sig = infer_signature(df, num_samples=20)
    finished, aborted = df.finished, df.aborted  # what the inference did
    ds = dataflow_to_dataset(df, sig)
    for _ in range(2):
        out = list(ds)
        assert len(out) == n
        for got, want in zip(out, items):
            _same(got, want, sig)
    assert df.finished == finished + 2 and df.aborted == aborted


def test_dict_datapoints_and_string_arrays() -> None:
    items = [
        {"img": np.full((3, 3), i, np.uint8), "names": np.array([f"a{i}", "b"]), "y": float(i)}
        for i in range(2 * G + 3)
    ]
    df = ListFlow(items)
    ds = dataflow_to_dataset(df)
    out = list(ds)
    assert len(out) == len(items)
    for got, want in zip(out, items):
        _same(got, want, ds.element_spec)


def test_values_are_cast_to_the_signature_as_from_generator_does() -> None:
    items = [[np.arange(4, dtype=np.float64) + i, np.uint8(200 + i)] for i in range(G + 2)]
    sig = (tf.TensorSpec((4,), tf.float32), tf.TensorSpec((), tf.int32))
    out = list(dataflow_to_dataset(ListFlow(items), sig))
    assert out[3][0].dtype == tf.float32 and out[3][0].numpy().tolist() == [3.0, 4.0, 5.0, 6.0]
    assert out[17][1].dtype == tf.int32 and int(out[17][1]) == 217


@pytest.mark.parametrize("good", [0, 3, G, 2 * G + 5])
def test_an_error_mid_stream_comes_after_every_datapoint_before_it(good: int) -> None:
    ds = dataflow_to_dataset(FailingFlow(good=good, message="corrupt record"), (tf.TensorSpec((), tf.int64),))
    seen = []
    with pytest.raises(tf.errors.OpError, match="RuntimeError: corrupt record"):
        for (x,) in ds:
            seen.append(int(x))
    assert seen == list(range(good))


def test_a_fast_flow_is_read_one_group_ahead_and_a_slow_one_is_not() -> None:
    fast = ListFlow([[i] for i in range(5 * G)])
    it = iter(dataflow_to_dataset(fast, (tf.TensorSpec((), tf.int64),)))
    assert int(next(it)[0]) == 0
    assert fast.produced == G  # one group
    assert [int(next(it)[0]) for _ in range(G)] == list(range(1, G + 1))
    assert fast.produced == 2 * G

    class Slow(DataFlow):
        produced = 0

        def __iter__(self) -> Iterator[Any]:
            for i in range(5):
                time.sleep(3 * _tf_groups.GROUP_WINDOW_S)
                self.produced += 1
                yield [i]

    slow = Slow()
    it = iter(dataflow_to_dataset(slow, (tf.TensorSpec((), tf.int64),)))
    assert int(next(it)[0]) == 0 and slow.produced == 1  # a group of one: no waiting for more
    assert [int(x[0]) for x in it] == [1, 2, 3, 4]


def test_large_datapoints_cross_in_small_groups() -> None:
    each = 8 * 2**20
    df = ListFlow([[np.full(each, i % 256, np.uint8)] for i in range(9)])
    it = iter(dataflow_to_dataset(df, (tf.TensorSpec((each,), tf.uint8),)))
    first = next(it)[0]
    assert first.shape == (each,) and int(first[-1]) == 0
    per_group = _tf_groups.GROUP_BYTES // each
    # the first group, and at most the next one that tf.data's thread may be filling already
    assert per_group <= df.produced <= 2 * per_group < 9
    assert [int(x[0][-1]) for x in it] == list(range(1, 9))


def test_leaving_early_closes_the_flows_epoch_and_leaves_no_thread() -> None:
    threads_before = set(threading.enumerate())
    df = ListFlow([[i] for i in range(10 * G)])
    ds = dataflow_to_dataset(df, (tf.TensorSpec((), tf.int64),))
    for (x,) in ds:
        if int(x) == 3:
            break
    del x
    gc.collect()
    assert df.aborted == 1 and df.produced == G
    assert [int(x[0]) for x in ds.take(2)] == [0, 1]  # a new iteration, a new epoch
    gc.collect()
    assert df.aborted == 2 and df.epochs == 2
    ours = [t for t in set(threading.enumerate()) - threads_before if t.name.startswith("dataflow")]
    assert ours == []


def test_a_datapoint_that_does_not_match_the_signature_is_named() -> None:
    sig = (tf.TensorSpec((2, 3), tf.float32), tf.TensorSpec((), tf.int64))
    bad_shape = ListFlow([[np.zeros((2, 3), np.float32), 0], [np.zeros((4, 3), np.float32), 1]])
    out: list[Any] = []
    named = r"component 0 has shape \(4, 3\), but the signature says \(2, 3\)"
    with pytest.raises(tf.errors.OpError, match=named):
        for e in dataflow_to_dataset(bad_shape, sig):
            out.append(e)
    assert len(out) == 1  # the good datapoint before it
    with pytest.raises(tf.errors.OpError, match="2 components, the flow yielded a list of 3 components"):
        list(dataflow_to_dataset(ListFlow([[np.zeros((2, 3), np.float32), 0, 0]]), sig))
    with pytest.raises(tf.errors.OpError, match=r"the signature has keys \['a'\], the flow yielded a dict"):
        list(dataflow_to_dataset(ListFlow([{"b": 1}]), {"a": tf.TensorSpec((), tf.int64)}))
    with pytest.raises(tf.errors.OpError, match="component 'a' .* cannot be converted"):
        list(dataflow_to_dataset(ListFlow([{"a": "text"}]), {"a": tf.TensorSpec((), tf.int64)}))


def test_a_value_that_cannot_be_cast_ends_the_group_after_the_rows_before_it() -> None:
    """A string column is filled before the number that fails: the group handed over still
    has as many strings as numbers, and the error comes after them."""
    sig = (tf.TensorSpec((), tf.string), tf.TensorSpec((), tf.int32))
    seen = []
    with pytest.raises(tf.errors.OpError, match="component 1 .* cannot be converted"):
        for s, x in dataflow_to_dataset(ListFlow([("a", 1), ("b", 2), ("c", "x")]), sig):
            seen.append((s.numpy(), int(x)))
    assert seen == [(b"a", 1), (b"b", 2)]


def test_signatures_that_are_not_flat_tensor_specs_are_handed_over_one_by_one() -> None:
    sig = (tf.TensorSpec((), tf.int64), (tf.TensorSpec((2,), tf.float32),))  # nested
    assert _tf_groups.flat_signature(sig) is None
    df = ListFlow([(i, (np.full(2, i, np.float32),)) for i in range(G + 3)])
    out = list(dataflow_to_dataset(df, sig))
    assert [int(a) for a, _ in out] == list(range(G + 3))
    assert out[5][1][0].numpy().tolist() == [5.0, 5.0]
    ragged = {"r": tf.RaggedTensorSpec((None,), tf.int64, ragged_rank=0)}
    assert _tf_groups.flat_signature(ragged) is None


def test_group_buffers_are_aligned_and_reused_only_once_nothing_refers_to_them() -> None:
    """TensorFlow may share a group's aligned buffer instead of copying it: a buffer must not
    be refilled while any array (TensorFlow's or the consumer's) still views it."""
    col = _tf_fill.GroupColumn(0, tf.TensorSpec((5, 7), tf.float32))

    def group(value: float, rows: int = 3) -> np.ndarray:
        col.open((5, 7), rows)
        for r in range(rows):
            col.put(r, np.full((5, 7), value))  # float64, cast to the signature's float32
        return col.take(rows)

    held = group(1.0)
    assert held.ctypes.data % 64 == 0 and held.dtype == np.float32 and held.shape == (3, 5, 7)
    for i in range(2, 12):
        out = group(float(i))
        assert out.ctypes.data % 64 == 0 and out.ctypes.data != held.ctypes.data
        assert float(out[-1, -1, -1]) == i
        reused = out.ctypes.data
        del out
    col.open((5, 7), 1)  # the open group's buffer is in use too, until the next one opens
    assert len(col._pool._pool) == 3  # the held one, the open one, one reused over and over
    assert group(0.0, 1).ctypes.data == reused  # free again once the next group opened
    np.testing.assert_array_equal(held, 1.0)  # never overwritten
    del held
    assert len(col._pool._pool) <= _tf_fill._POOL


def _images(n: int, shape: tuple[int, ...] = (16, 32, 32), dtype: Any = np.float32) -> list[list[Any]]:
    rng = np.random.default_rng(n)
    return [[rng.random(shape).astype(dtype), np.int64(i)] for i in range(n)]


def _copies(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Record, for every numeric value put into a group, whether it had to be copied."""
    record: list[bool] = []
    put = _tf_fill.GroupColumn.put

    def spy(self: Any, row: int, value: Any) -> None:
        if not self.string:
            record.append(value is not self.placed)
        put(self, row, value)

    monkeypatch.setattr(_tf_fill.GroupColumn, "put", spy)
    return record


def test_a_batch_flows_batches_are_stacked_straight_into_the_group(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a plain BatchData last, each batch's large component is written once, into the
    group handed to TensorFlow; only the epoch's first batch (read before a group is open) is
    copied. The elements are those of iterating the flow."""
    copies = _copies(monkeypatch)
    df = BatchData(DataFromList(_images(8 * (2 * G + 3)), shuffle=False), 8)  # 2 groups and 3
    ds = dataflow_to_dataset(df)
    df.reset_state()
    want = list(df)
    for _ in range(2):
        copies.clear()
        got = list(ds)
        assert len(got) == len(want) == 2 * G + 3
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g[0].numpy(), w[0])
            np.testing.assert_array_equal(g[1].numpy(), w[1])
        images = copies[0::2]  # the labels (64 bytes a batch) are always copied
        assert images.count(True) == 1 and len(images) == len(want)


@pytest.mark.parametrize(
    "make",
    [
        lambda items: BatchData(DataFromList(items, shuffle=False), 8, use_list=True),
        lambda items: PaddedBatchData(DataFromList(items, shuffle=False), 8),
        lambda items: BatchData(DataFromList(items, shuffle=False), 8).map(lambda b: b),
    ],
    ids=["use_list", "a subclass", "not last"],
)
def test_other_batching_is_copied_as_any_datapoint(make: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    copies = _copies(monkeypatch)
    df = make(_images(8 * 5, shape=(64, 64)))
    df.reset_state()
    want = list(df)
    got = list(dataflow_to_dataset(df))
    assert len(got) == len(want) == 5
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g[0].numpy(), np.asarray(w[0], np.float32))
    assert copies and all(copies)


def test_stacking_into_the_group_casts_changes_shape_and_resumes_like_the_flow() -> None:
    """A batch the group cannot take as it is (other dtype, the smaller last batch) is
    stacked and copied as any datapoint; a BatchData loaded with a state resumes there."""
    items = _images(8 * 4 + 3, dtype=np.float64)
    sig = (tf.TensorSpec((None, 16, 32, 32), tf.float32), tf.TensorSpec((None,), tf.int64))
    df = BatchData(DataFromList(items, shuffle=False), 8, remainder=True)
    df.reset_state()
    want = list(df)
    got = list(dataflow_to_dataset(df, sig))
    assert [len(g[1]) for g in got] == [8, 8, 8, 8, 3]
    for g, w in zip(got, want):
        assert g[0].dtype == tf.float32
        np.testing.assert_array_equal(g[0].numpy(), w[0].astype(np.float32))
    it = iter(df)
    for _ in range(2):
        next(it)
    state = df.state_dict()
    it.close()
    resumed = BatchData(DataFromList(items, shuffle=False), 8, remainder=True)
    resumed.load_state_dict(state)
    got = list(dataflow_to_dataset(resumed, sig))
    assert [int(g[1][0]) for g in got] == [16, 24, 32]
    assert [int(g[1][0]) for g in dataflow_to_dataset(resumed, sig)] == [0, 8, 16, 24, 32]
