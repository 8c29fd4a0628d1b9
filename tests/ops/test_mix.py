"""dataflow/ops/_mix.py: WeightedMixData / dataflow.mix."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dataflow as D
from dataflow import StateError, WeightedMixData
from tests.checkpoint._harness import check_resume

TAGS = "abcd"


def _src(tag: str, n: int, shuffle: bool = False, seed: int = 3) -> D.DataFlow:
    return D.DataFromList([(tag, i) for i in range(n)], shuffle=shuffle, seed=seed)


def _sources(sizes: list[int], shuffle: bool = False) -> list[D.DataFlow]:
    return [_src(TAGS[k], n, shuffle=shuffle, seed=10 + k) for k, n in enumerate(sizes)]


def _take(df: D.DataFlow, n: int) -> list[Any]:
    return list(itertools.islice(iter(df), n))


def _by_source(dps: list[Any]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tag, i in dps:
        out.setdefault(tag, []).append(i)
    return out


# --- proportions and reproducibility -------------------------------------------------------


_WEIGHTS = st.lists(st.floats(0, 10, allow_nan=False), min_size=1, max_size=4).filter(lambda w: sum(w) > 0.05)


@settings(max_examples=6, deadline=None)
@given(weights=_WEIGHTS)
def test_proportions_within_statistical_bounds_over_100k_draws(weights: list[float]) -> None:
    n = 100_000
    df = D.mix(_sources([1000] * len(weights)), weights, seed=7, stop="never")
    df.reset_state()
    counts = Counter(tag for tag, _ in _take(df, n))
    total = sum(weights)
    for k, w in enumerate(weights):
        p = w / total
        got = counts.get(TAGS[k], 0)
        if w == 0:
            assert got == 0
            continue
        sigma = math.sqrt(n * p * (1 - p))
        assert abs(got - n * p) <= 5 * sigma + 1, (weights, counts)
    assert df.counts == [counts.get(TAGS[k], 0) for k in range(len(weights))]


def test_same_seed_same_stream_other_seed_other_stream() -> None:
    def run(seed: int) -> list[Any]:
        df = D.mix(_sources([50, 50, 50], shuffle=True), [1, 2, 3], seed=seed)
        df.reset_state()
        return [list(df), list(df)]

    assert run(1) == run(1)
    assert run(1) != run(2)
    first, second = run(1)
    assert first != second  # each epoch draws anew


def test_stream_follows_set_seed_without_own_seed() -> None:
    def run() -> list[Any]:
        df = D.mix(_sources([30, 30]), [1, 1])
        df.reset_state()
        return list(df)

    D.set_seed(5)
    try:
        a = run()
        D.set_seed(5)
        b = run()
    finally:
        D.set_seed(None)
    assert a == b


# --- stop modes ----------------------------------------------------------------------------


def test_stop_first_ends_when_a_source_is_exhausted() -> None:
    df = D.mix(_sources([5, 200]), [1, 1], seed=0, stop="first")
    df.reset_state()
    for _ in range(3):
        per = _by_source(list(df))
        assert per["a"] == list(range(5))  # the short one ended the epoch
        assert per["b"] == list(range(len(per["b"])))
        assert df.counts == [5, len(per["b"])]


def test_stop_all_gives_every_source_whole_and_skips_zero_weights() -> None:
    df = D.mix(_sources([5, 40, 7]), [1, 3, 0], seed=0, stop="all")
    df.reset_state()
    for _ in range(2):
        per = _by_source(list(df))
        assert per == {"a": list(range(5)), "b": list(range(40))}
        assert df.counts == [5, 40, 0]


def test_stop_never_restarts_sources() -> None:
    df = D.mix(_sources([3, 4]), [1, 1], seed=0, stop="never")
    df.reset_state()
    per = _by_source(_take(df, 200))
    assert per["a"] == [i % 3 for i in range(len(per["a"]))]
    assert per["b"] == [i % 4 for i in range(len(per["b"]))]


def test_stop_never_with_an_empty_source_raises() -> None:
    df = D.mix([_src("a", 3), D.FilterData(_src("b", 3), lambda dp: False)], [1, 1], seed=0, stop="never")
    df.reset_state()
    with pytest.raises(ValueError, match=r"WeightedMixData: flow #1 \(FilterData\) gave an empty epoch"):
        _take(df, 50)


# --- argument checks ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("weights", "err", "msg"),
    [
        ([1], ValueError, r"WeightedMixData: got 1 weights for 2 flows"),
        ([1, -1], ValueError, r"WeightedMixData: weights must be finite and >= 0, got \[1.0, -1.0\]"),
        ([1, float("nan")], ValueError, r"finite and >= 0"),
        ([1, float("inf")], ValueError, r"finite and >= 0"),
        ([0, 0], ValueError, r"WeightedMixData: at least one weight must be > 0, got \[0.0, 0.0\]"),
        ("ab", TypeError, r"WeightedMixData: weights must be a sequence"),
        ([1, "x"], TypeError, r"WeightedMixData: weights must be numbers"),
    ],
)
def test_bad_weights_raise_naming_stage_and_value(weights: Any, err: type, msg: str) -> None:
    with pytest.raises(err, match=msg):
        D.mix(_sources([3, 3]), weights)
    df = D.mix(_sources([3, 3]), [1, 1])
    with pytest.raises(err, match=msg):
        df.set_weights(weights)
    assert df.weights == [1.0, 1.0]


def test_bad_flows_stop_and_seed_raise() -> None:
    with pytest.raises(ValueError, match=r"WeightedMixData: flows must be a non-empty list of DataFlows"):
        D.mix([], [])
    with pytest.raises(TypeError, match="WeightedMixData"):
        D.mix([_src("a", 3), [1, 2]], [1, 1])  # type: ignore[list-item]
    with pytest.raises(ValueError, match=r"WeightedMixData: stop must be one of .*, got 'most'"):
        D.mix(_sources([3]), [1], stop="most")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"WeightedMixData: seed must be a non-negative int"):
        D.mix(_sources([3]), [1], seed=-1)


# --- repr / describe ----------------------------------------------------------------------


def test_repr_and_describe_show_weights_and_counts() -> None:
    df = D.mix(_sources([5, 50]), [0.75, 0.25], seed=0)
    assert "WeightedMixData(weights=[0.75, 0.25], seed=0, stop='first')" in repr(df)
    df.reset_state()
    list(df)
    assert f"counts={df.counts}" in repr(df)
    text = df.describe()
    assert "weight 0.75" in text and "( 75.0%)" in text
    assert f"gave {df.counts[0]}" in text and f"gave {df.counts[1]}" in text


# --- checkpoints --------------------------------------------------------------------------


@pytest.mark.parametrize("cut", [1, 10, 1024, 1030, 2100])
@pytest.mark.parametrize("stop", ["first", "all"])
def test_counts_after_a_resume_equal_the_uninterrupted_counts(cut: int, stop: str) -> None:
    """``counts`` (also shown by repr/describe and saved in the state) counts each draw once,
    also for the draws of a block a resumed run started in the middle of."""
    def build() -> WeightedMixData:
        return D.mix(_sources([1500, 3000]), [1, 2], seed=0, stop=stop)  # type: ignore[arg-type]

    after = 7
    ref = build()
    ref.reset_state()
    ref_it = iter(ref)  # held: a dropped iterator ends the epoch
    assert len(list(itertools.islice(ref_it, cut + after))) == cut + after
    first = build()
    first.reset_state()
    first_it = iter(first)
    assert len(list(itertools.islice(first_it, cut))) == cut
    again = build()
    again.reset_state()
    again.load_state_dict(first.state_dict())
    again_it = iter(again)
    assert len(list(itertools.islice(again_it, after))) == after
    assert again.counts == ref.counts and sum(again.counts) == cut + after


@pytest.mark.parametrize("stop", ["first", "all"])
@pytest.mark.parametrize("shuffle", [False, True])
def test_resume_at_every_cut_equals_uninterrupted(stop: str, shuffle: bool) -> None:
    def build() -> WeightedMixData:
        return D.mix(_sources([4, 9, 3], shuffle=shuffle), [2, 1, 1], seed=4, stop=stop)  # type: ignore[arg-type]

    assert check_resume(build) > 20


def test_resume_never_at_every_cut_equals_uninterrupted() -> None:
    assert check_resume(
        lambda: D.TakeData(D.mix(_sources([3, 5], shuffle=True), [1, 2], seed=4, stop="never"), 25), epochs=3
    ) > 50


def test_resume_with_fresh_entropy_seed_kept_by_state() -> None:
    first = D.mix(_sources([40, 60]), [1, 1])
    first.reset_state()
    _take(first, 17)
    state = first.state_dict()
    second = D.mix(_sources([40, 60]), [1, 1])
    second.reset_state()
    second.load_state_dict(state)
    assert [list(second), list(second)] == [list(first), list(first)]


def _reference_choices(weights: list[float], n: int) -> list[str]:
    df = D.mix(_sources([4000] * 3), weights, seed=9, stop="never")
    df.reset_state()
    return [tag for tag, _ in _take(df, n)]


@pytest.mark.parametrize("how", ["set_weights", "constructor"])
@pytest.mark.parametrize("cut", [0, 1, 37, 1023, 1024, 1500])
def test_weight_change_at_resume_continues_each_source_exactly(how: str, cut: int) -> None:
    old, new = [1.0, 1.0, 1.0], [0.0, 1.0, 3.0]
    total = 3000

    def build(weights: list[float], from_state: bool = True) -> WeightedMixData:
        flows = _sources([7, 11, 13], shuffle=True)
        return D.mix(flows, weights, seed=9, stop="never", weights_from_state=from_state)

    first = build(old)
    first.reset_state()
    it = iter(first)  # one epoch in progress ("never": the only one)
    before = list(itertools.islice(it, cut))
    state = first.state_dict()
    untouched = before + list(itertools.islice(it, total - cut))  # the uninterrupted run

    if how == "set_weights":
        second = build(old)
        second.reset_state()
        second.load_state_dict(state)
        second.set_weights(new)
    else:
        second = build(new, from_state=False)
        second.reset_state()
        second.load_state_dict(state)
    after = _take(second, total - cut)
    assert second.weights == new

    # each source goes on where it was: its sequence is the uninterrupted source's sequence
    for k, tag in enumerate("abc"):
        got = [i for t, i in before + after if t == tag]
        assert got == _source_stream(k, len(got)), f"source {tag} replayed or skipped at cut {cut}"
    # the draws: old weights before the cut, new weights from the cut on (same per-position numbers)
    assert [t for t, _ in before] == _reference_choices(old, cut)
    assert [t for t, _ in after] == _reference_choices(new, total)[cut:]
    assert "a" not in {t for t, _ in after}
    assert [t for t, _ in untouched] == _reference_choices(old, total)
    counts = Counter(t for t, _ in after)
    assert counts["c"] > 2 * counts["b"]


def _source_stream(k: int, n: int) -> list[int]:
    sizes = [7, 11, 13]
    src = _src(TAGS[k], sizes[k], shuffle=True, seed=10 + k)
    src.reset_state()
    out: list[int] = []
    while len(out) < n:
        out.extend(i for _, i in src)
    return out[:n]


def test_set_weights_during_an_epoch_applies_from_the_next_datapoint() -> None:
    df = D.mix(_sources([1000] * 2), [1, 1], seed=2, stop="never")
    df.reset_state()
    it = iter(df)
    head = [next(it) for _ in range(100)]
    df.set_weights([0, 1])
    tail = [next(it) for _ in range(500)]
    assert {t for t, _ in head} == {"a", "b"}
    assert {t for t, _ in tail} == {"b"}
    from_b = [i for t, i in head + tail if t == "b"]
    assert from_b == list(range(len(from_b)))


def test_loaded_state_restores_saved_weights_by_default() -> None:
    df = D.mix(_sources([100, 100]), [1, 1], seed=2, stop="never")
    df.reset_state()
    _take(df, 10)
    df.set_weights([1, 4])
    state = df.state_dict()
    again = D.mix(_sources([100, 100]), [1, 1], seed=2, stop="never")
    again.load_state_dict(state)
    again.reset_state()
    assert _take(again, 50) == _take(df, 50)
    assert again.weights == [1.0, 4.0]


def test_set_weights_before_iterating_is_saved_with_the_loaded_state() -> None:
    df = D.mix(_sources([100, 100]), [1, 1], seed=2, stop="never")
    df.reset_state()
    _take(df, 10)
    state = df.state_dict()
    again = D.mix(_sources([100, 100]), [1, 1], seed=2, stop="never")
    again.reset_state()
    again.load_state_dict(state)
    again.set_weights([0, 1])
    resaved = again.state_dict()  # a checkpoint right after resuming keeps the new weights
    third = D.mix(_sources([100, 100]), [1, 1], seed=2, stop="never")
    third.reset_state()
    third.load_state_dict(resaved)
    assert {t for t, _ in _take(third, 50)} == {"b"}


def test_state_for_another_number_of_flows_is_refused() -> None:
    df = D.mix(_sources([5, 5]), [1, 1], seed=2)
    df.reset_state()
    _take(df, 3)
    state = df.state_dict()
    other = D.mix(_sources([5, 5, 5]), [1, 1, 1], seed=2)
    with pytest.raises(StateError):
        other.load_state_dict(state)


def _double(dp: Any) -> Any:
    return (dp[0], 2 * dp[1])


@pytest.mark.timeout(300)
def test_resume_behind_two_process_workers_equals_uninterrupted() -> None:
    def build() -> D.DataFlow:
        mixed = D.mix(_sources([4, 7], shuffle=True), [1, 2], seed=4, stop="all")
        return D.MultiProcessMapData(mixed, 2, _double, strict=True, ordered=True)

    assert check_resume(build, max_cuts=6, resave_every=0) >= 6


def test_set_weights_leaving_no_flow_with_weight_ends_an_all_epoch() -> None:
    df = D.mix(_sources([3, 500]), [5, 1], seed=1, stop="all")
    df.reset_state()
    it = iter(df)
    got = list(itertools.islice(it, 60))
    assert df.counts[0] == 3  # "a" is exhausted by now (it had 3 datapoints at weight 5/6)
    df.set_weights([1, 0])  # only the exhausted flow keeps a weight
    assert list(it) == []
    assert df.counts == [3, len(got) - 3]
    assert _by_source(list(df)) == {"a": [0, 1, 2]}  # the next epoch with these weights
