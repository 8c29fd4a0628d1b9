"""The resume contract, stage by stage: every source and transform, alone and composed, saved
at every cut (inside an epoch, at its last datapoint, between epochs; loaded before and after
``reset_state()``), resumes in a freshly built pipeline to exactly the uninterrupted stream —
later epochs, shuffles and random draws included. Plus the refusals: flows that cannot seek
say so, states of another shape are rejected naming the stage, and the state is plain data
that ``torch.load(weights_only=True)`` and JSON accept."""

from __future__ import annotations

import io
import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dataflow as D
from dataflow.checkpoint import state_from_json, state_to_json
from tests.checkpoint._harness import (
    canon,
    check_chain,
    check_resume,
    cut_and_save,
    positions,
    reference_run,
    run_epochs,
)


def _list(n: int = 12, shuffle: bool = False, seed: int | None = 3) -> D.DataFlow:
    return D.DataFromList([[i, np.full(2, i, np.int16)] for i in range(n)], shuffle=shuffle, seed=seed)


def _jitter(dp: list[Any], rng: np.random.Generator) -> list[Any]:
    return [dp[0], dp[1] + rng.integers(0, 100, 2)]


def _sized(dp: list[Any]) -> list[Any]:
    return [dp[0], np.zeros(dp[0] % 3 + 1, np.float32)]


def _sub(dp: list[Any]) -> D.DataFlow:
    return D.DataFromList([[dp[0], k] for k in range(dp[0] % 3 + 1)], shuffle=False)


BUILDERS: dict[str, Callable[[], D.DataFlow]] = {
    "DataFromList": lambda: _list(),
    "DataFromList shuffled": lambda: _list(shuffle=True),
    "DataFromArrays shuffled": lambda: D.DataFromArrays([np.arange(10), np.arange(10) * 2], True, seed=1),
    "DataFromIterable over a list": lambda: D.DataFromIterable([[i] for i in range(9)]),
    "FakeData": lambda: D.FakeData([[2], [3]], size=8, seed=4),
    "map": lambda: _list().map(lambda dp: [dp[0] * 3, dp[1]]),
    "map with item_rng": lambda: _list(shuffle=True).map(_jitter, item_rng=True, seed=9),
    "filter": lambda: _list().filter(lambda dp: dp[0] % 3 != 1),
    "MapDataComponent": lambda: D.MapDataComponent(_list(), lambda c: c + 1, 0),
    "SelectComponent": lambda: D.SelectComponent(_list(), [1, 0]),
    "batch": lambda: _list(13).batch(4),
    "batch with remainder": lambda: _list(13, shuffle=True).batch(4, remainder=True),
    "padded batch": lambda: _list(10).map(_sized).padded_batch(3, remainder=True),
    "BatchDataByShape": lambda: D.BatchDataByShape(_list(14).map(_sized), 2, 1, remainder=True),
    "repeat": lambda: _list(5).repeat(3),
    "RepeatedDataPoint": lambda: D.RepeatedDataPoint(_list(5), 2),
    "take": lambda: _list(10, shuffle=True).take(6),
    "FixedSizeData": lambda: D.FixedSizeData(_list(7), 5),
    "shuffle buffer": lambda: _list(20).shuffle(6, seed=2),
    "shuffle buffer with reuse": lambda: D.LocallyShuffleData(_list(12), 5, num_reuse=2, seed=2),
    "cache": lambda: _list(8).map(lambda dp: [dp[0] + 1]).cache(),
    "cache shuffled": lambda: _list(8).cache(shuffle=True, seed=6),
    # below a stage that yields after its upstream ended (a remainder, a shuffle buffer's drain):
    # a cut in that tail resumes the upstream at its epoch's end, not at a fresh epoch
    "cache below a batch with remainder": lambda: _list(5).cache().batch(2, remainder=True),
    "FixedSizeData below a shuffle buffer": lambda: D.FixedSizeData(_list(5), 7).shuffle(3, seed=1),
    "FixedSizeData of FixedSizeData, no state kept": lambda: D.FixedSizeData(
        D.FixedSizeData(_list(2), 2, keep_state=False), 3, keep_state=False
    ),
    "ConcatData": lambda: D.ConcatData([_list(4), _list(5, shuffle=True)]),
    "JoinData": lambda: D.JoinData([_list(6), _list(6, shuffle=True, seed=8)]),
    "RandomChooseData": lambda: D.RandomChooseData([_list(6), _list(6, shuffle=True)], seed=5).take(10),
    "RandomMixData": lambda: D.RandomMixData([_list(4), _list(5, shuffle=True)], seed=5),
    "interleave": lambda: D.InterleaveData(_list(7), _sub, cycle_length=3, block_length=2),
    "shard by index": lambda: _list(14, shuffle=True).shard(3, 1),
    "shard by position": lambda: _list(14).filter(lambda dp: dp[0] != 4).shard(3, 2, equal=False),
    "shard padded": lambda: _list(13, shuffle=True).shard(4, 3, pad=True),
    "PrintData": lambda: D.PrintData(_list(6), num=1, file=io.StringIO()),
    "composed: shuffle, map, shuffle buffer, batch, repeat": lambda: (
        _list(17, shuffle=True).map(_jitter, item_rng=True, seed=1).shuffle(5, seed=3).batch(3).repeat(2)
    ),
}


@pytest.mark.filterwarnings("ignore:ShardData. sharding by position")
@pytest.mark.parametrize("name", list(BUILDERS))
def test_stage_resumes_to_the_uninterrupted_stream(name: str) -> None:
    cuts = check_resume(BUILDERS[name], epochs=2, max_cuts=40)
    assert cuts > 3


TAIL_BUILDERS = [
    "cache below a batch with remainder",
    "FixedSizeData below a shuffle buffer",
    "FixedSizeData of FixedSizeData, no state kept",
]


TWICE_EXTRA: dict[str, Callable[[], D.DataFlow]] = {
    "cache shuffled below a shuffle buffer": lambda: _list(7).cache(shuffle=True, seed=3).shuffle(3, seed=4),
    "FixedSizeData no keep, shuffled": lambda: D.FixedSizeData(
        _list(5).shuffle(3, seed=1), 3, keep_state=False
    ),
}


@pytest.mark.parametrize("name", [*TAIL_BUILDERS, *TWICE_EXTRA])
def test_preempted_twice_at_the_same_point_resumes_to_the_uninterrupted_stream(name: str) -> None:
    """Saved, resumed, its iterator opened, saved again at the same point, resumed again: an
    epoch resumed at its end saves again as such (it had drawn no permutation and had nothing
    left), at every position of the run."""
    build = TWICE_EXTRA.get(name) or BUILDERS[name]
    reference = reference_run(build, 3)
    for cut in range(len(positions([len(ep) for ep in reference]))):
        check_chain(build, [cut, cut], 3, reference=reference)


def test_text_lines_resume_by_byte_offset(tmp_path: Path) -> None:
    paths = []
    for k in range(3):
        p = tmp_path / f"f{k}.txt"
        p.write_text("".join(f"line {k}-{i}\n" for i in range(4 + k)))
        paths.append(str(p))
    check_resume(lambda: D.TextLineData(paths, shuffle=True, seed=2), epochs=2)


def test_state_is_plain_data_for_torch_and_json() -> None:
    """The state loads with torch.load(weights_only=True) inside a checkpoint, and through
    JSON (bytes as base64), and resumes the same."""
    build = BUILDERS["composed: shuffle, map, shuffle buffer, batch, repeat"]
    df = build()
    df.reset_state()
    state, it = cut_and_save(df, 0, 4, False)
    assert it is not None
    rest = [canon(dp) for dp in it]
    torch = pytest.importorskip("torch")
    buf = io.BytesIO()
    torch.save({"model": {}, "data": state}, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=True)["data"]
    via_json = state_from_json(json.loads(json.dumps(state_to_json(state))))
    for s in (loaded, via_json):
        again = build()
        again.load_state_dict(s)
        again.reset_state()
        assert run_epochs(again, 1) == [rest]


def test_state_of_another_pipeline_names_the_first_differing_stage() -> None:
    df = _list().map(lambda dp: dp).batch(3)
    df.reset_state()
    next(iter(df))
    state = df.state_dict()
    other = _list().map(lambda dp: dp).shuffle(4, seed=1).batch(3)
    with pytest.raises(D.StateError, match="LocallyShuffleData|MapData|BatchData"):
        other.load_state_dict(state)
    with pytest.raises(D.StateError):
        _list(13).map(lambda dp: dp).batch(3).load_state_dict(state)  # another source length


def test_corrupted_state_is_refused_before_anything_changes() -> None:
    df = _list(shuffle=True)
    df.reset_state()
    it = iter(df)
    next(it)
    state = df.state_dict()
    state["root"]["state"]["position"] = "seven"
    fresh = _list(shuffle=True)
    with pytest.raises(D.StateError):
        fresh.load_state_dict(state)
    fresh.reset_state()
    assert len(list(fresh)) == 12  # untouched: a plain first epoch


def test_generator_refuses_then_fast_forwards_on_request() -> None:
    """A generator cannot seek: state_dict() says so and names it; with
    allow_fast_forward=True it saves a count and resuming re-runs and skips, with a warning."""

    def gen() -> Any:
        yield from ([i] for i in range(10))

    df = D.DataFromGenerator(gen).map(lambda dp: dp)
    df.reset_state()
    it = iter(df)
    head = [next(it) for _ in range(4)]
    with pytest.raises(D.StateUnsupportedError, match="DataFromGenerator"):
        df.state_dict()
    state = df.state_dict(allow_fast_forward=True)
    again = D.DataFromGenerator(gen).map(lambda dp: dp)
    again.load_state_dict(state)
    again.reset_state()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rest = list(again)
    assert head + rest == [[i] for i in range(10)]
    assert any("fast-forward" in str(w.message).lower() or "skip" in str(w.message).lower() for w in caught)


def test_no_replay_at_ten_million() -> None:
    """Resuming DataFromList deep into an epoch reads no earlier datapoint (the source's
    __getitem__ is never asked for an index before the position)."""

    class Spy(list):  # type: ignore[type-arg]
        asked: list[int] = []

        def __getitem__(self, i: Any) -> Any:
            if isinstance(i, int):
                Spy.asked.append(i)
            return super().__getitem__(i)

    n, k = 10_000_050, 10_000_000
    df = D.DataFromList(range(n), shuffle=False)
    df.reset_state()
    it = iter(df)
    next(it)
    state = df.state_dict()
    state["root"]["state"]["position"] = k  # as if k datapoints had been consumed
    lazy = Spy()
    lazy.extend(range(n))
    again = D.DataFromList(lazy, shuffle=False)
    again.load_state_dict(state)
    again.reset_state()
    assert next(iter(again)) == k
    assert all(i >= k for i in Spy.asked)
