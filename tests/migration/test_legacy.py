"""Code written against tensorpack's DataFlow runs: the old ``get_data``/``size`` protocol,
``self.rng`` with ``RandomState``'s methods (seeded, per worker, checkpointed), and random
sources with no state of their own resuming exactly."""

from __future__ import annotations

import pickle
import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dataflow
from dataflow import BatchData, CompatGenerator, DataFlow, ProxyDataFlow, RNGDataFlow, StateError
from tests.checkpoint._harness import check_resume


class TensorpackSource(RNGDataFlow):
    """A random source as tensorpack users wrote them (tensorpack's example code's calls)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __iter__(self):  # type: ignore[no-untyped-def]
        idxs = np.arange(self.n)
        self.rng.shuffle(idxs)
        for i in idxs:
            yield [
                int(i),
                self.rng.randint(0, 10),
                self.rng.rand(2),
                self.rng.randn(),
                self.rng.uniform(-1, 1),
                self.rng.choice([3, 5, 7]),
                self.rng.permutation(3),
                self.rng.random_sample(),
                self.rng.random_integers(1, 3),
            ]


def _epoch(df: DataFlow) -> list[Any]:
    return [[np.asarray(c).tolist() for c in dp] for dp in df]


def test_tensorpack_style_rng_source_runs_and_reproduces_with_set_seed() -> None:
    runs = []
    for _ in range(2):
        dataflow.set_seed(7)
        try:
            df = TensorpackSource(6)
            df.reset_state()
            runs.append([_epoch(df), _epoch(df)])
        finally:
            dataflow.set_seed(None)
    assert runs[0] == runs[1]
    assert runs[0][0] != runs[0][1]  # a new draw each epoch
    assert sorted(dp[0] for dp in runs[0][0]) == list(range(6))
    for dp in runs[0][0]:
        assert 0 <= dp[1] < 10 and len(dp[2]) == 2 and -1 <= dp[4] < 1 and dp[5] in (3, 5, 7)
        assert sorted(dp[6]) == [0, 1, 2] and 0 <= dp[7] < 1 and 1 <= dp[8] <= 3


class ReplayedSource(TensorpackSource):
    """The same source, opted in to resuming by replay."""

    resumes_by_replay = True

    def __iter__(self):  # type: ignore[no-untyped-def]
        return super().__iter__()


def test_tensorpack_style_rng_source_refuses_to_checkpoint_until_it_opts_in() -> None:
    df = TensorpackSource(5)
    df.reset_state()
    it = iter(df)
    next(it)
    with pytest.raises(dataflow.StateUnsupportedError, match="resumes_by_replay = True"):
        df.state_dict()


def test_rng_source_opted_in_to_replay_checkpoints_and_resumes_exactly() -> None:
    assert check_resume(lambda: ReplayedSource(5), epochs=2) > 10
    assert check_resume(lambda: BatchData(ReplayedSource(7), 3), epochs=2) > 4


def test_replayed_source_resume_rejects_a_state_of_another_pipeline() -> None:
    df = ReplayedSource(4)
    df.reset_state()
    next(iter(df))
    state = df.state_dict()
    with pytest.raises(StateError):
        dataflow.DataFromList([[1]]).load_state_dict(state)


def test_rng_is_a_generator_with_randomstate_methods_on_one_stream() -> None:
    df = TensorpackSource(1)
    df.reset_state()
    rng = df.rng
    assert isinstance(rng, np.random.Generator) and isinstance(rng, CompatGenerator)
    state = rng.bit_generator.state
    a = [rng.randint(100), rng.integers(100), rng.rand(), rng.random()]
    rng.bit_generator.state = state
    b = [rng.randint(100), rng.integers(100), rng.rand(), rng.random()]
    assert a == b  # both method sets advance the same bit generator
    assert rng.rand(2, 3).shape == (2, 3) and rng.randn(4).shape == (4,) and np.ndim(rng.randn()) == 0
    assert rng.randint(5, size=(3,)).dtype == np.int64
    s = rng.get_state()
    x = rng.tomaxint()
    rng.set_state(s)
    assert rng.tomaxint() == x
    with pytest.raises(ValueError, match="RandomState"):
        rng.set_state(np.random.RandomState(0).get_state())
    rng.seed(3)
    first = rng.randint(1 << 30)
    rng.seed(3)
    assert rng.randint(1 << 30) == first
    clone = pickle.loads(pickle.dumps(rng))
    assert type(clone) is CompatGenerator and clone.randint(1 << 30) == rng.randint(1 << 30)


@settings(max_examples=50, deadline=None)
@given(low=st.integers(-1000, 1000), span=st.integers(1, 1000), seed=st.integers(0, 2**32 - 1))
def test_randint_and_random_integers_stay_in_range(low: int, span: int, seed: int) -> None:
    rng = CompatGenerator(np.random.PCG64(seed))
    draws = rng.randint(low, low + span, size=20)
    assert ((draws >= low) & (draws < low + span)).all()
    inclusive = rng.random_integers(low, low + span - 1, size=20)
    assert ((inclusive >= low) & (inclusive <= low + span - 1)).all()
    assert ((rng.randint(span, size=20) >= 0) & (rng.randint(span, size=20) < span)).all()


def test_seeded_rng_matches_the_documented_default_rng_stream() -> None:
    df = dataflow.DataFromList(list(range(10)), shuffle=True, seed=5)
    df.reset_state()
    ref = np.random.default_rng(np.random.SeedSequence(5))
    assert df.rng.integers(1 << 30) == ref.integers(1 << 30)


def test_workers_draw_distinct_reproducible_streams_through_legacy_methods() -> None:
    def run(num_proc: int) -> list[int]:
        df = dataflow.MultiProcessRunnerZMQ(_Draws(), num_proc=num_proc, seed=11)
        df.reset_state()
        try:
            return [int(dp[0]) for dp in df]
        finally:
            df.close()

    assert run(1) == run(1)  # reproducible in a worker
    both = run(2)
    assert len(both) == 8 and len(set(both)) == 8  # two workers: two streams, not one forked twice


class _Draws(RNGDataFlow):
    def __len__(self) -> int:
        return 8

    def __iter__(self):  # type: ignore[no-untyped-def]
        for _ in range(8):
            yield [self.rng.randint(1 << 40)]


# -- the get_data()/size() protocol -----------------------------------------------------------


def test_subclass_defining_only_get_data_and_size_works_and_warns_once_per_class() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")

        class Old(DataFlow):
            def get_data(self):  # type: ignore[no-untyped-def]
                yield from ([i] for i in range(3))

            def size(self) -> int:
                return 3

        class OldProxy(ProxyDataFlow):
            def get_data(self):  # type: ignore[no-untyped-def]
                for dp in self.ds:
                    yield [dp[0] * 10]

    messages = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
    assert len([m for m in messages if m.startswith("Old ")]) == 2  # get_data and size, once each
    assert len([m for m in messages if m.startswith("OldProxy ")]) == 1
    assert all(w.filename == __file__ for w in caught)
    df = OldProxy(Old())
    df.reset_state()
    assert list(df) == [[0], [10], [20]] and len(df) == 3 and len(Old()) == 3
    with warnings.catch_warnings(record=True) as again:
        warnings.simplefilter("always")
        list(OldProxy(Old()))
    assert not again  # warned at the class definition, not per use


def test_get_data_and_size_calls_are_deprecated_spellings(recwarn: pytest.WarningsRecorder) -> None:
    from dataflow import _deprecation

    _deprecation._warned.difference_update({"DataFlow.get_data", "DataFlow.size"})
    warnings.simplefilter("always")
    df = dataflow.DataFromList([[1], [2]], shuffle=False)
    for _ in range(3):
        assert list(df.get_data()) == [[1], [2]] and df.size() == 2
    hits = [w for w in recwarn.list if issubclass(w.category, DeprecationWarning)]
    assert sorted(str(w.message).split(" ")[0] for w in hits) == ["df.get_data()", "df.size()"]


def test_subclass_with_both_spellings_keeps_its_own_iter() -> None:
    class Both(DataFlow):
        def __iter__(self):  # type: ignore[no-untyped-def]
            yield [1]

        def get_data(self):  # type: ignore[no-untyped-def]
            yield [2]

    assert list(Both()) == [[1]]
