"""Tests for dataflow/sources.py."""

from __future__ import annotations

import itertools
import multiprocessing
import os
import pickle
import queue
import threading

import numpy as np
import psutil
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataflow import (
    DataFromArrays,
    DataFromGenerator,
    DataFromIterable,
    DataFromList,
    DataFromQueue,
    FakeData,
    TextLineData,
)
from dataflow._errors import (
    DataFlowError,
    DataFlowNotReset,
    DataFlowReentrantError,
    LengthUnknownError,
)
from dataflow._seeding import set_seed

N = 50


def epochs(df, n=2):
    return [list(df) for _ in range(n)]


# ---------------------------------------------------------------- DataFromList


def test_list_in_order_two_epochs_without_reset():
    data = [[i] for i in range(N)]
    df = DataFromList(data, shuffle=False)
    assert len(df) == N
    assert epochs(df) == [data, data]


@pytest.mark.parametrize("lst", [(1, 2, 3), np.arange(3), range(1, 4)])
def test_list_accepts_sequences(lst):
    df = DataFromList(lst, shuffle=False)
    assert [int(x) for x in df] == [int(x) for x in lst]
    assert len(df) == 3


def test_list_shuffle_permutes_each_epoch():
    df = DataFromList(list(range(N)), shuffle=True)
    df.reset_state()
    e1, e2 = epochs(df)
    assert sorted(e1) == sorted(e2) == list(range(N))
    assert e1 != e2  # 50! permutations: equal by chance is negligible
    assert len(df) == N


def test_list_shuffle_requires_reset_state():
    with pytest.raises(DataFlowNotReset, match="DataFromList.*reset_state"):
        list(DataFromList([1, 2, 3], shuffle=True))


def test_list_seed_reproducible():
    def run(seed):
        df = DataFromList(list(range(N)), seed=seed)
        df.reset_state()
        return epochs(df, 3)

    assert run(7) == run(7)
    assert run(7) != run(8)
    first = run(7)
    assert first[0] != first[1]


def test_list_set_seed_reproducible():
    def run():
        df = DataFromList(list(range(N)))
        df.reset_state()
        return epochs(df)

    try:
        set_seed(123)
        a = run()
        set_seed(123)
        b = run()
        set_seed(124)
        c = run()
    finally:
        set_seed(None)
    assert a == b
    assert a != c


def test_list_reentrant():
    df = DataFromList(list(range(N)), seed=0)
    df.reset_state()
    it1, it2 = iter(df), iter(df)
    got1, got2 = [], []
    for a, b in zip(it1, it2):
        got1.append(a)
        got2.append(b)
    assert sorted(got1) == sorted(got2) == list(range(N))


def test_list_fluent_shuffle_method_not_shadowed():
    for df in (DataFromList([1]), DataFromArrays([[1]]), TextLineData("x")):
        assert callable(df.shuffle)


def test_list_errors():
    with pytest.raises(ValueError, match="DataFromList: lst is empty"):
        DataFromList([])
    for bad in (5, {"a": 1}, "abc", (i for i in range(3)), None):
        with pytest.raises(TypeError, match=f"DataFromList: .*got {type(bad).__name__}"):
            DataFromList(bad)
    with pytest.raises(ValueError, match="DataFromList: seed .* got -1"):
        DataFromList([1], seed=-1)


def test_list_picklable_before_reset():
    df = pickle.loads(pickle.dumps(DataFromList([1, 2, 3], seed=3)))
    df.reset_state()
    assert sorted(df) == [1, 2, 3]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(), min_size=1, max_size=200))
def test_list_shuffle_is_permutation_property(lst):
    df = DataFromList(lst, shuffle=True)
    df.reset_state()
    for epoch in epochs(df, 2):
        assert sorted(epoch) == sorted(lst)


# ----------------------------------------------------------- DataFromGenerator


def test_generator_function_many_epochs():
    df = DataFromGenerator(lambda: ([i] for i in range(5)))
    assert epochs(df, 3) == [[[i] for i in range(5)]] * 3
    with pytest.raises(LengthUnknownError, match="DataFromGenerator"):
        len(df)


def test_generator_size_is_len():
    df = DataFromGenerator(lambda: iter(range(4)), size=4)
    assert len(df) == 4
    assert list(df) == [0, 1, 2, 3]


def test_generator_function_reentrant_and_closed_early():
    closed = []

    def gen():
        try:
            yield from range(10)
        finally:
            closed.append(True)

    df = DataFromGenerator(gen)
    it1, it2 = iter(df), iter(df)
    assert next(it1) == 0 and next(it2) == 0 and next(it1) == 1
    it1.close()
    assert closed == [True]
    assert list(it2) == list(range(1, 10))


def test_generator_object_one_epoch_only():
    df = DataFromGenerator(i for i in range(3))
    assert list(df) == [0, 1, 2]
    with pytest.raises(DataFlowError, match=r"DataFromGenerator.*generator \*function\*"):
        list(df)


def test_generator_object_not_concurrent():
    df = DataFromGenerator(iter(range(3)))
    it1 = iter(df)
    next(it1)
    with pytest.raises(DataFlowReentrantError, match="DataFromGenerator"):
        next(iter(df))


def test_generator_accepts_reiterable():
    df = DataFromGenerator([1, 2, 3])
    assert epochs(df) == [[1, 2, 3], [1, 2, 3]]


def test_generator_errors():
    with pytest.raises(TypeError, match="DataFromGenerator: gen must be .*got int"):
        DataFromGenerator(5)
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match=f"DataFromGenerator: size .*got {bad!r}"):
            DataFromGenerator(lambda: [], size=bad)
    with pytest.raises(TypeError, match=r"DataFromGenerator: gen\(\) must return .*got int"):
        list(DataFromGenerator(lambda: 3))


# ------------------------------------------------------------ DataFromIterable


def test_iterable_reiterable_with_len():
    df = DataFromIterable(range(4))
    assert len(df) == 4
    assert epochs(df) == [[0, 1, 2, 3]] * 2


def test_iterable_without_len():
    class Bag:
        def __iter__(self):
            return iter("ab")

    df = DataFromIterable(Bag())
    assert epochs(df) == [["a", "b"]] * 2
    with pytest.raises(LengthUnknownError, match="DataFromIterable"):
        len(df)


def test_iterable_iterator_second_epoch_raises():
    df = DataFromIterable(iter([1, 2]))
    with pytest.raises(LengthUnknownError):
        len(df)
    assert list(df) == [1, 2]
    with pytest.raises(DataFlowError, match="DataFromIterable.*read only once.*re-iterable"):
        list(df)


def test_iterable_errors():
    with pytest.raises(TypeError, match="DataFromIterable: .*got int"):
        DataFromIterable(3)


# --------------------------------------------------------------- DataFromQueue


def filled(*items):
    q = queue.Queue()
    for x in items:
        q.put(x)
    return q


@pytest.mark.timeout(10)
def test_queue_end_token_ends_each_epoch():
    df = DataFromQueue(filled(1, 2, "END", 3, "END"), end_token="END")
    assert epochs(df) == [[1, 2], [3]]
    with pytest.raises(LengthUnknownError, match="DataFromQueue"):
        len(df)


@pytest.mark.timeout(10)
def test_queue_end_token_identity():
    end = []
    df = DataFromQueue(filled([1], [], None, end, 5), end_token=end)
    assert list(df) == [[1], [], None]  # [] equals end but is not it; None is not it
    df = DataFromQueue(filled(1, None, 2), end_token=None)
    assert list(df) == [1]


@pytest.mark.timeout(10)
def test_queue_without_end_token_is_infinite():
    df = DataFromQueue(filled(*range(5)))
    assert list(itertools.islice(df, 3)) == [0, 1, 2]


@pytest.mark.timeout(10)
def test_queue_timeout():
    df = DataFromQueue(filled(1), timeout=0.2)
    it = iter(df)
    assert next(it) == 1
    with pytest.raises(TimeoutError, match=r"DataFromQueue: .*timeout=0\.2s"):
        next(it)


@pytest.mark.timeout(10)
def test_queue_multiprocessing_with_pickled_end_token():
    q = multiprocessing.Queue()
    for x in (np.arange(3), "END", 7):
        q.put(x)
    df = DataFromQueue(q, end_token="END", timeout=5)
    (arr,) = list(df)
    np.testing.assert_array_equal(arr, np.arange(3))
    it = iter(df)
    assert next(it) == 7
    it.close()
    q.close()
    q.join_thread()


@pytest.mark.timeout(10)
def test_queue_not_reentrant():
    df = DataFromQueue(filled(1, 2))
    it = iter(df)
    next(it)
    with pytest.raises(DataFlowReentrantError, match="DataFromQueue"):
        next(iter(df))
    it.close()
    assert next(iter(df)) == 2


def test_queue_errors():
    with pytest.raises(TypeError, match="DataFromQueue: queue must have a get.*got list"):
        DataFromQueue([1, 2])
    for bad in (0, -1, "1", True):
        with pytest.raises(ValueError, match=f"DataFromQueue: timeout .*got {bad!r}"):
            DataFromQueue(queue.Queue(), timeout=bad)


# -------------------------------------------------------------------- FakeData


def test_fake_shapes_dtypes_len_and_domain():
    df = FakeData([[2, 3], [4], []], size=20, dtype=["float32", "uint8", "float64"],
                  domain=[(-2, 2), (0, 1), (5, 6)], seed=0)
    df.reset_state()
    assert len(df) == 20
    dps = list(df)
    assert len(dps) == 20
    for a, b, c in dps:
        assert a.shape == (2, 3) and a.dtype == np.float32 and (-2 <= a).all() and (a < 2).all()
        assert b.shape == (4,) and b.dtype == np.uint8
        assert c.shape == () and c.dtype == np.float64 and 5 <= c < 6
    assert {int(v) for dp in dps for v in dp[1]} - set(range(256)) == set()
    assert max(int(dp[1].max()) for dp in dps) > 1  # default int domain: [0, 256)


@pytest.mark.parametrize(("dtype", "domain", "low", "high"), [
    ("int8", (0, 1), 0, 128), ("int32", (0, 1), 0, 256), ("int64", (-5, 5), -5, 5),
    ("bool", (0, 1), 0, 2), ("float16", (0, 1), 0, 1), ("float32", (3, 4), 3, 4),
    ("float16", (0, 0.001), 0, 0.001),  # float16 rounding must not reach high
])
def test_fake_value_ranges(dtype, domain, low, high):
    df = FakeData([[1000]], size=2, dtype=dtype, domain=domain, seed=1)
    df.reset_state()
    for (a,) in df:
        assert a.dtype == np.dtype(dtype)
        assert low <= a.min() and a.max() < high
        assert len(np.unique(a)) > 1


def test_fake_random_true_new_values():
    df = FakeData([[8]], size=3, seed=0)
    df.reset_state()
    e1, e2 = epochs(df)
    assert not np.array_equal(e1[0][0], e1[1][0])
    assert not np.array_equal(e1[0][0], e2[0][0])


def test_fake_random_false_same_arrays():
    df = FakeData([[8], [2]], size=4, random=False, seed=0)
    df.reset_state()
    e1, e2 = epochs(df)
    assert len(e1) == 4
    for dp in e1 + e2:
        assert dp[0] is e1[0][0] and dp[1] is e1[0][1]
    assert e1[0] is not e1[1]  # a new list each time


def test_fake_requires_reset_state():
    for random in (True, False):
        with pytest.raises(DataFlowNotReset, match="FakeData"):
            list(FakeData([[1]], size=2, random=random))


def test_fake_seed_and_set_seed():
    def run(seed=None):
        df = FakeData([[5]], size=3, seed=seed)
        df.reset_state()
        return np.stack([dp[0] for dp in df])

    np.testing.assert_array_equal(run(3), run(3))
    assert not np.array_equal(run(3), run(4))
    try:
        set_seed(9)
        a = run()
        set_seed(9)
        b = run()
    finally:
        set_seed(None)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"shapes": []}, r"FakeData: shapes must be a non-empty list .*got \[\]"),
    ({"shapes": 3}, "FakeData: shapes must be a non-empty list .*got 3"),
    ({"shapes": (3, 4)}, "FakeData: each shape must be .*got 3"),
    ({"shapes": [[3, -1]]}, r"FakeData: each shape .*got \[3, -1\]"),
    ({"shapes": [[2.5]]}, r"FakeData: each shape .*got \[2.5\]"),
    ({"shapes": [[1]], "size": 0}, "FakeData: size must be an int >= 1, got 0"),
    ({"shapes": [[1]], "dtype": "nope"}, "FakeData: unknown dtype 'nope'"),
    ({"shapes": [[1]], "dtype": "complex64"}, "FakeData: dtype must be .*'complex64'"),
    ({"shapes": [[1]], "dtype": "U3"}, "FakeData: dtype must be .*'U3'"),
    ({"shapes": [[1]], "dtype": ["f4", "f4"]}, "FakeData: got 2 dtypes for 1 shapes"),
    ({"shapes": [[1], [1]], "domain": [(0, 1)] * 3}, "FakeData: got 3 domains for 2 shapes"),
    ({"shapes": [[1]], "domain": (1, 0)}, r"FakeData: domain must be .*got \(1, 0\)"),
    ({"shapes": [[1]], "domain": "ab"}, "FakeData: domain must be .*got 'ab'"),
    ({"shapes": [[1]], "dtype": "uint8", "domain": (0, 300)},
     r"FakeData: domain \(0, 300\) must be integers within \[0, 256\] for dtype uint8"),
    ({"shapes": [[1]], "dtype": "int32", "domain": (0.5, 3)}, r"FakeData: domain \(0.5, 3\)"),
])
def test_fake_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        FakeData(**kwargs)


# -------------------------------------------------------------- DataFromArrays


def test_arrays_list_columns_are_views():
    x = np.arange(12).reshape(6, 2)
    y = np.arange(6) * 10
    df = DataFromArrays([x, y])
    assert len(df) == 6
    e1, e2 = epochs(df)
    assert [[a.tolist(), int(b)] for a, b in e1] == [[x[i].tolist(), y[i]] for i in range(6)]
    assert [[a.tolist(), int(b)] for a, b in e2] == [[a.tolist(), int(b)] for a, b in e1]
    assert np.shares_memory(e1[2][0], x)


def test_arrays_dict_and_list_columns():
    df = DataFromArrays({"img": np.zeros((3, 2)), "label": [7, 8, 9]})
    dps = list(df)
    assert [sorted(dp) for dp in dps] == [["img", "label"]] * 3
    assert [dp["label"] for dp in dps] == [7, 8, 9]
    assert dps[0]["img"].shape == (2,)


def test_arrays_shuffle():
    x = np.arange(N)
    df = DataFromArrays((x, x * 2), shuffle=True, seed=5)
    with pytest.raises(DataFlowNotReset, match="DataFromArrays"):
        list(df)
    df.reset_state()
    e1, e2 = epochs(df)
    for e in (e1, e2):
        assert sorted(int(a) for a, _ in e) == list(range(N))
        assert all(b == 2 * a for a, b in e)
    assert [int(a) for a, _ in e1] != [int(a) for a, _ in e2]
    df2 = DataFromArrays((x, x * 2), shuffle=True, seed=5)
    df2.reset_state()
    assert [int(a) for a, _ in df2] == [int(a) for a, _ in e1]


def test_arrays_errors():
    with pytest.raises(ValueError, match=r"DataFromArrays: all columns .*'x': 3, 'y': 2"):
        DataFromArrays({"x": np.zeros(3), "y": np.zeros(2)})
    with pytest.raises(ValueError, match=r"DataFromArrays: all columns .*0: 3, 1: 4"):
        DataFromArrays([np.zeros(3), [1, 2, 3, 4]])
    for empty in ([], {}):
        with pytest.raises(ValueError, match="DataFromArrays: arrays has no columns"):
            DataFromArrays(empty)
    with pytest.raises(ValueError, match="DataFromArrays: the columns have zero rows"):
        DataFromArrays([np.zeros((0, 3))])
    with pytest.raises(TypeError, match=r"DataFromArrays: arrays must be .*got ndarray.*\[array\]"):
        DataFromArrays(np.zeros(3))
    for scalar in (np.float32(1), np.array(2.0), 5):
        with pytest.raises(ValueError, match="DataFromArrays: column 'a' has no first dimension"):
            DataFromArrays({"a": scalar})


# ---------------------------------------------------------------- TextLineData


@pytest.fixture
def text_files(tmp_path):
    contents = {"a.txt": "a1\na2\n", "b.txt": "b1\r\nb2", "c.txt": "", "d.txt": "d1\n\nd3\n"}
    paths = []
    for name, text in contents.items():
        p = tmp_path / name
        p.write_bytes(text.encode())
        paths.append(p)
    return paths


ALL_LINES = [["a1"], ["a2"], ["b1"], ["b2"], ["d1"], [""], ["d3"]]


def test_text_lines_two_epochs(text_files):
    df = TextLineData(text_files)
    df.reset_state()
    assert epochs(df) == [ALL_LINES, ALL_LINES]
    with pytest.raises(LengthUnknownError, match="TextLineData"):
        len(df)


def test_text_single_path_and_keep_newline(text_files):
    df = TextLineData(str(text_files[1]), strip_newline=False)
    df.reset_state()
    assert list(df) == [["b1\n"], ["b2"]]
    df = TextLineData(text_files[3], strip_newline=False, encoding="latin-1")
    df.reset_state()
    assert list(df) == [["d1\n"], ["\n"], ["d3\n"]]


def test_text_shuffle_files(tmp_path):
    paths = []
    for i in range(20):
        paths.append(tmp_path / f"{i}.txt")
        paths[-1].write_text(f"{i}-0\n{i}-1\n")

    def run(seed):
        df = TextLineData(paths, shuffle=True, seed=seed)
        df.reset_state()
        return epochs(df)

    e1, e2 = run(1)
    for e in (e1, e2):
        assert sorted(e) == sorted([f"{i}-{j}"] for i in range(20) for j in range(2))
        order = [line[0].split("-")[0] for line in e[::2]]
        assert [line[0] for line in e] == [f"{f}-{j}" for f in order for j in range(2)]
    assert e1 != e2
    assert run(1) == [e1, e2]
    assert run(2) != [e1, e2]


def test_text_requires_reset_and_checks_files_there(tmp_path, text_files):
    with pytest.raises(DataFlowNotReset, match="TextLineData"):
        list(TextLineData(text_files))
    missing = tmp_path / "missing.txt"
    df = TextLineData([text_files[0], missing])  # no error in __init__
    with pytest.raises(FileNotFoundError, match="TextLineData: no such file: .*missing.txt"):
        df.reset_state()


def test_text_early_close_closes_file(text_files):
    df = TextLineData(text_files[0])
    df.reset_state()
    proc = psutil.Process()
    path = os.path.realpath(text_files[0])

    def is_open():
        return any(os.path.realpath(f.path) == path for f in proc.open_files())

    it = iter(df)
    assert next(it) == ["a1"]
    assert is_open()
    it.close()
    assert not is_open()
    for _ in df:
        break  # the loop drops its iterator: CPython closes the generator and the file
    assert not is_open()
    assert list(df) == [["a1"], ["a2"]]
    assert not is_open()


def test_text_errors(text_files):
    with pytest.raises(ValueError, match="TextLineData: paths is empty"):
        TextLineData([])
    with pytest.raises(TypeError, match="TextLineData: paths must be .*got int"):
        TextLineData(3)
    with pytest.raises(TypeError, match="TextLineData: each path .*got None"):
        TextLineData([text_files[0], None])
    with pytest.raises(ValueError, match="TextLineData: unknown encoding 'nope'"):
        TextLineData(text_files, encoding="nope")


def test_text_picklable_and_thread_safe_epochs(text_files):
    df = pickle.loads(pickle.dumps(TextLineData(text_files)))
    df.reset_state()
    results = []
    threads = [threading.Thread(target=lambda: results.append(list(df))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [ALL_LINES] * 3
