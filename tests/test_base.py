"""The protocol in dataflow/base.py: DataFlow, ProxyDataFlow, RNGDataFlow, ReentrancyGuard, and
the fluent methods building the same objects as the class spelling."""

from __future__ import annotations

import operator
import pickle
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from dataflow._errors import (
    DataFlowError,
    DataFlowNotReset,
    DataFlowReentrantError,
    LengthUnknownError,
)
from dataflow.base import DataFlow, ProxyDataFlow, ReentrancyGuard, RNGDataFlow
from dataflow.ops._batch import BatchData
from dataflow.ops._cache import CacheData
from dataflow.ops._interleave import InterleaveData
from dataflow.ops._map import FilterData, MapData, MapDataComponent, SelectComponent
from dataflow.ops._padded_batch import PaddedBatchData
from dataflow.ops._repeat import FixedSizeData, RepeatedData, TakeData
from dataflow.ops._shuffle import LocallyShuffleData
from dataflow.parallel._maps import MultiProcessMapDataZMQ
from dataflow.parallel._runners import MultiProcessRunnerZMQ
from dataflow.parallel._threads import MultiThreadMapData, ThreadPrefetchData
from tests.helpers import ListFlow, collect


class _NoLen(DataFlow):
    def __iter__(self) -> Iterator[Any]:
        yield from ([i] for i in range(4))


# --- DataFlow ------------------------------------------------------------------------------


def test_default_len_raises_length_unknown_error_that_is_type_and_not_implemented_error() -> None:
    df = _NoLen()
    with pytest.raises(LengthUnknownError, match="_NoLen does not know its length"):
        len(df)
    assert issubclass(LengthUnknownError, TypeError)
    assert issubclass(LengthUnknownError, NotImplementedError)
    assert issubclass(LengthUnknownError, DataFlowError)
    with pytest.raises(NotImplementedError):  # tensorpack-era code catches this
        len(df)


def test_list_of_flow_without_len_works() -> None:
    df = _NoLen()
    assert list(df) == [[0], [1], [2], [3]]
    assert operator.length_hint(df, 7) == 7


def test_base_iter_not_implemented_names_class() -> None:
    class Bare(DataFlow):
        pass

    with pytest.raises(NotImplementedError, match="Bare must implement __iter__"):
        iter(Bare())


def test_context_manager_returns_self_and_calls_close() -> None:
    src = ListFlow([[1]])
    with src as df:
        assert df is src
        assert src.closes == 0
    assert src.closes == 1


def test_context_manager_closes_on_exception() -> None:
    src = ListFlow([[1]])
    with pytest.raises(KeyError):
        with src:
            raise KeyError("boom")
    assert src.closes == 1


def test_base_reset_state_and_close_are_noops() -> None:
    df = _NoLen()
    df.reset_state()
    df.close()
    assert collect(df) == [[0], [1], [2], [3]]


# --- ProxyDataFlow -------------------------------------------------------------------------


def test_proxy_forwards_reset_close_len_and_iter() -> None:
    src = ListFlow([[1], [2], [3]])
    proxy = ProxyDataFlow(src)
    proxy.reset_state()
    assert src.resets == 1
    assert len(proxy) == 3
    assert collect(proxy) == [[1], [2], [3]]
    proxy.close()
    assert src.closes == 1
    with proxy:
        pass
    assert src.closes == 2


def test_proxy_len_unknown_propagates() -> None:
    with pytest.raises(LengthUnknownError):
        len(ProxyDataFlow(ListFlow([[1]], has_len=False)))


def test_proxy_of_plain_list_suggests_data_from_list() -> None:
    with pytest.raises(
        TypeError, match=r"ProxyDataFlow: the upstream must be a DataFlow.*got list.*DataFromList"
    ):
        ProxyDataFlow([[1], [2]])  # type: ignore[arg-type]


def test_proxy_of_a_class_instead_of_an_instance() -> None:
    # a forgotten "()": the class has __iter__ and reset_state attributes, but is no flow
    with pytest.raises(TypeError, match=r"BatchData: .*ListFlow"):
        BatchData(ListFlow, 2)  # type: ignore[arg-type]


def test_subclass_of_proxy_names_itself_and_suggests_data_from_iterable() -> None:
    with pytest.raises(
        TypeError, match=r"MapData: the upstream must be a DataFlow.*got range.*DataFromIterable"
    ):
        MapData(range(3), lambda dp: dp)  # type: ignore[arg-type]


# --- RNGDataFlow ---------------------------------------------------------------------------


class _Draws(RNGDataFlow):
    def __iter__(self) -> Iterator[Any]:
        for _ in range(3):
            yield [float(self.rng.random())]


def test_rng_before_reset_raises_not_reset() -> None:
    df = _Draws(seed=1)
    with pytest.raises(DataFlowNotReset, match=r"_Draws was iterated before reset_state\(\)"):
        collect(df)
    assert issubclass(DataFlowNotReset, RuntimeError)


def test_rng_is_numpy_generator_and_seeded() -> None:
    df = _Draws(seed=5)
    df.reset_state()
    assert isinstance(df.rng, np.random.Generator)
    expected = np.random.default_rng(np.random.SeedSequence(5)).random(3).tolist()
    assert [dp[0] for dp in collect(df)] == expected


def test_same_seed_same_stream_and_reset_restarts_it() -> None:
    a, b = _Draws(seed=11), _Draws(seed=11)
    a.reset_state()
    b.reset_state()
    first = collect(a)
    assert first == collect(b)
    a.reset_state()
    assert collect(a) == first
    c = _Draws(seed=12)
    c.reset_state()
    assert collect(c) != first


def test_without_seed_fresh_entropy() -> None:
    a, b = _Draws(), _Draws()
    a.reset_state()
    b.reset_state()
    assert collect(a) != collect(b)


@pytest.mark.parametrize("seed", [-1, 1.5, "3", True])
def test_bad_seed_rejected(seed: object) -> None:
    with pytest.raises(ValueError, match=rf"_Draws: seed must be a non-negative int or None, got {seed!r}"):
        _Draws(seed=seed)  # type: ignore[arg-type]


def test_tensorpack_style_subclass_without_super_init() -> None:
    class Old(RNGDataFlow):
        def __init__(self, n: int) -> None:  # never calls super().__init__()
            self.n = n

        def __iter__(self) -> Iterator[Any]:
            for _ in range(self.n):
                yield [int(self.rng.integers(0, 100))]

    df = Old(4)
    with pytest.raises(DataFlowNotReset):
        collect(df)
    df.reset_state()
    out = collect(df)
    assert len(out) == 4 and all(0 <= dp[0] < 100 for dp in out)


def test_rng_setter() -> None:
    df = _Draws()
    df.rng = np.random.default_rng(3)
    assert [dp[0] for dp in collect(df)] == np.random.default_rng(3).random(3).tolist()


# --- ReentrancyGuard -----------------------------------------------------------------------


def test_guard_direct_use() -> None:
    guard = ReentrancyGuard("Thing")
    with guard:
        with pytest.raises(
            DataFlowReentrantError, match="Thing is not reentrant: it is already being iterated"
        ):
            with guard:
                pass
    with guard:  # released
        pass


def test_fixed_size_iterated_twice_at_once_raises_then_works_after_exhaustion() -> None:
    df = FixedSizeData(ListFlow([[i] for i in range(1, 6)]), 3, keep_state=False)
    df.reset_state()
    it1 = iter(df)
    assert next(it1) == [1]
    it2 = iter(df)
    with pytest.raises(
        DataFlowReentrantError,
        match=r"FixedSizeData is not reentrant: it is already being iterated\. Finish or close the first",
    ):
        next(it2)
    assert issubclass(DataFlowReentrantError, RuntimeError)
    assert list(it1) == [[2], [3]]
    assert collect(df) == [[1], [2], [3]]


def test_fixed_size_works_again_after_first_iterator_closed() -> None:
    df = FixedSizeData(ListFlow([[i] for i in range(1, 6)]), 3, keep_state=False)
    df.reset_state()
    it1 = iter(df)
    next(it1)
    it1.close()  # type: ignore[attr-defined]
    assert collect(df) == [[1], [2], [3]]


def test_fixed_size_works_again_after_first_iterator_dropped() -> None:
    df = FixedSizeData(ListFlow([[i] for i in range(1, 6)]), 3, keep_state=False)
    df.reset_state()
    it1 = iter(df)
    next(it1)
    del it1  # garbage-collected generator releases the guard
    assert collect(df) == [[1], [2], [3]]


def test_cache_first_pass_not_reentrant_but_replay_is() -> None:
    df = CacheData(ListFlow([[i] for i in range(4)]))
    df.reset_state()
    it1 = iter(df)
    next(it1)
    with pytest.raises(DataFlowReentrantError, match="CacheData is not reentrant"):
        next(iter(df))
    assert list(it1) == [[1], [2], [3]]
    # cached: two replays at once are fine
    a, b = iter(df), iter(df)
    assert next(a) == [0] and next(b) == [0]
    assert list(a) == list(b) == [[1], [2], [3]]


def test_pickle_roundtrip_of_guarded_flows_before_reset() -> None:
    for df in (
        FixedSizeData(ListFlow([[1], [2], [3]]), 2),
        CacheData(ListFlow([[1], [2], [3]]), shuffle=True, seed=3),
    ):
        clone = pickle.loads(pickle.dumps(df))
        assert type(clone) is type(df)
        assert isinstance(clone._guard, ReentrancyGuard)
        clone.reset_state()
        # the clone's guard is its own, and works
        it = iter(clone)
        first = next(it)
        with pytest.raises(DataFlowReentrantError, match=type(df).__name__):
            next(iter(clone))
        assert len([first, *it]) == len(df)


def test_a_flow_that_was_iterated_pickles_and_its_clone_starts_afresh() -> None:
    # a flow remembers its epoch generator weakly; the reference must not break pickling
    # (a used flow handed to a Ray runner or a spawned worker), and the clone is not live
    df = FixedSizeData(ListFlow([[i] for i in range(5)]), 5)
    df.reset_state()
    it = iter(df)
    next(it)
    assert df._iter_live()
    clone = pickle.loads(pickle.dumps(df))
    assert not clone._iter_live()
    clone.reset_state()
    assert list(clone) == [[i] for i in range(5)]
    assert next(it) == [1]  # the original is untouched


def test_pickle_guard_while_held_gives_free_guard() -> None:
    guard = ReentrancyGuard("X")
    with guard:
        clone = pickle.loads(pickle.dumps(guard))
    with clone:
        pass


# --- fluent spelling -----------------------------------------------------------------------


def _attrs(df: Any) -> dict[str, Any]:
    return {k: v for k, v in vars(df).items() if k not in ("_guard", "ds")}


_PLAIN = (int, float, str, bool, type(None), tuple, list, dict, np.ndarray)


def _same(a: Any, b: Any) -> None:
    """Same class, same upstream, same settings (plain attributes; internal machinery such as
    locks, queues or events is created per object and not compared)."""
    assert type(a) is type(b)
    assert a.ds is b.ds
    assert _attrs(a).keys() == _attrs(b).keys()
    for k, v in _attrs(a).items():
        w = _attrs(b)[k]
        if isinstance(v, np.ndarray):
            np.testing.assert_array_equal(v, w)
        elif callable(v) or isinstance(v, _PLAIN):
            assert v == w, k


def _inc(dp: list) -> list:
    return [dp[0] + 1, dp[1]]


def _neg(x: int) -> int:
    return -x


def _keep_even(dp: list) -> bool:
    return dp[0] % 2 == 0


def _sub(dp: list) -> list:
    return [[dp[0], k] for k in range(2)]


def _double(dp: list) -> list:
    return [dp[0] * 2, dp[1]]


_FLUENT = [
    ("map", (_inc,), {}, lambda s: MapData(s, _inc)),
    ("map_component", (_neg, 1), {}, lambda s: MapDataComponent(s, _neg, 1)),
    ("map_component", (_neg,), {}, lambda s: MapDataComponent(s, _neg)),
    ("filter", (_keep_even,), {}, lambda s: FilterData(s, _keep_even)),
    ("select", ([1, 0],), {}, lambda s: SelectComponent(s, [1, 0])),
    ("batch", (3,), {}, lambda s: BatchData(s, 3)),
    ("batch", (4,), {"remainder": True, "use_list": True}, lambda s: BatchData(s, 4, True, True)),
    ("padded_batch", (2,), {"padding_value": -1, "remainder": True},
     lambda s: PaddedBatchData(s, 2, padding_value=-1, remainder=True)),
    ("shuffle", (4,), {"num_reuse": 2, "seed": 9}, lambda s: LocallyShuffleData(s, 4, 2, seed=9)),
    ("repeat", (2,), {}, lambda s: RepeatedData(s, 2)),
    ("repeat", (), {}, lambda s: RepeatedData(s, -1)),
    ("take", (5,), {}, lambda s: TakeData(s, 5)),
    ("cache", (), {"shuffle": True, "seed": 4}, lambda s: CacheData(s, shuffle=True, seed=4)),
    ("interleave", (_sub,), {"cycle_length": 3, "block_length": 2},
     lambda s: InterleaveData(s, _sub, cycle_length=3, block_length=2)),
    # parallel: the fluent parallel_map defaults to ordered=True, strict=True
    ("parallel_map", (_double,), {"num_proc": 2},
     lambda s: MultiProcessMapDataZMQ(s, 2, _double, 200, True, ordered=True)),
    ("parallel_map", (_double,), {"num_thread": 2, "buffer_size": 8},
     lambda s: MultiThreadMapData(s, 2, _double, 8, True, ordered=True)),
    ("parallel", (1,), {}, lambda s: MultiProcessRunnerZMQ(s, 1)),
    ("prefetch", (3,), {}, lambda s: ThreadPrefetchData(s, 3)),
    ("prefetch", (), {}, lambda s: ThreadPrefetchData(s, 2)),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("method", "args", "kwargs", "build"), _FLUENT, ids=[f[0] for f in _FLUENT])
def test_fluent_builds_same_object_and_output_as_class(
    method: str, args: tuple, kwargs: dict, build: Any
) -> None:
    src = ListFlow([[i, i * 10] for i in range(10)])
    fluent = getattr(src, method)(*args, **kwargs)
    cls = build(src)
    _same(fluent, cls)
    with fluent, cls:
        fluent.reset_state()
        cls.reset_state()
        take = 25  # RepeatedData(-1) is infinite
        a = [dp for _, dp in zip(range(take), fluent)]
        b = [dp for _, dp in zip(range(take), cls)]
        assert repr(a) == repr(b)
        assert a  # produced something


@pytest.mark.parametrize("kwargs", [{}, {"num_proc": 1, "num_thread": 1}])
def test_fluent_parallel_map_needs_exactly_one_of_proc_or_thread(kwargs: dict) -> None:
    with pytest.raises(ValueError, match="parallel_map: give exactly one of num_proc= .* or num_thread="):
        ListFlow([[1]]).parallel_map(_double, **kwargs)


def test_fluent_chain_equals_class_chain() -> None:
    src = ListFlow([[i] for i in range(10)])
    fluent = src.map(lambda dp: [dp[0] * 2]).filter(lambda dp: dp[0] % 3).batch(2, remainder=True)
    assert type(fluent) is BatchData
    assert type(fluent.ds) is FilterData
    assert type(fluent.ds.ds) is MapData
    assert fluent.ds.ds.ds is src
    fluent.reset_state()
    out = collect(fluent)
    assert [b[0].tolist() for b in out] == [[2, 4], [8, 10], [14, 16]]
