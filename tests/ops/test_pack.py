"""PackData: the packed layout, where sequences go, overlong modes, errors and exact resume."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataflow import DataFromList, LengthUnknownError, PackData, StateError
from tests.checkpoint._harness import check_resume

pytestmark = pytest.mark.timeout(120)

SETTINGS = settings(max_examples=60, deadline=None)
METHODS = ("first_fit", "best_fit", "concat")


def _source(lengths: list[int], seed: int = 0) -> DataFromList:
    """Datapoints whose tokens are distinct ids (so each can be traced) and a second key
    derived from them (so the keys can be checked to be packed alike)."""
    items, nxt = [], 1
    for n in lengths:
        tokens = np.arange(nxt, nxt + n, dtype=np.int64)
        nxt += n
        items.append({"tokens": tokens, "labels": (tokens * 2).astype(np.int32), "id": seed})
    return DataFromList(items, shuffle=False)


def _rows(df: Any) -> list[dict[str, np.ndarray]]:
    df.reset_state()
    return list(df)


def _segments(row: dict[str, np.ndarray], key: str = "tokens") -> list[np.ndarray]:
    seg = row[key + "_segment_ids"]
    return [row[key][seg == s] for s in range(1, int(seg.max(initial=0)) + 1)]


def _check_layout(rows: list[dict[str, np.ndarray]], seq_len: int, keys: tuple[str, ...]) -> None:
    for row in rows:
        assert set(row) == {f"{k}{s}" for k in keys for s in ("", "_segment_ids", "_positions")}
        for k in keys:
            tokens, seg, pos = row[k], row[k + "_segment_ids"], row[k + "_positions"]
            assert tokens.shape == seg.shape == pos.shape == (seq_len,)
            assert seg.dtype == pos.dtype == np.int32
            fill = int(np.count_nonzero(seg))
            assert fill > 0
            assert (seg[fill:] == 0).all() and (pos[fill:] == 0).all() and (tokens[fill:] == 0).all()
            # segment ids 1, 2, ... in order, each a contiguous run; positions restart at 0
            assert (np.diff(seg[:fill]) >= 0).all() and (np.diff(seg[:fill]) <= 1).all() and seg[0] == 1
            starts = np.r_[True, seg[1:fill] != seg[: fill - 1]]
            expect = np.arange(fill) - np.maximum.accumulate(np.where(starts, np.arange(fill), 0))
            np.testing.assert_array_equal(pos[:fill], expect)
            np.testing.assert_array_equal(seg, row[keys[0] + "_segment_ids"])


@given(
    lengths=st.lists(st.integers(0, 40), min_size=1, max_size=40),
    seq_len=st.integers(1, 32),
    method=st.sampled_from(METHODS),
    num_bins=st.integers(1, 5),
    overlong=st.sampled_from(("truncate", "split")),
)
@SETTINGS
def test_every_token_once_and_the_layout(
    lengths: list[int], seq_len: int, method: str, num_bins: int, overlong: str
) -> None:
    df = PackData(_source(lengths), seq_len, keys=("tokens", "labels"), method=method, num_bins=num_bins,
                  overlong=overlong)
    for _epoch in range(2):
        rows = _rows(df)
        _check_layout(rows, seq_len, ("tokens", "labels"))
        kept = [t for n, start in zip(lengths, np.cumsum([1, *lengths]))
                for t in range(int(start), int(start) + (min(n, seq_len) if overlong == "truncate" else n))]
        got = [int(t) for row in rows for s in _segments(row) for t in s]
        assert sorted(got) == kept  # every kept token exactly once
        for row in rows:  # the keys were packed alike
            fill = np.count_nonzero(row["tokens_segment_ids"])
            np.testing.assert_array_equal(row["labels"][:fill], row["tokens"][:fill] * 2)
        stats = df.stats()
        assert stats["rows"] == len(rows) and stats["tokens"] == len(kept)
        if rows:
            assert stats["padding"] == pytest.approx(1 - len(kept) / (len(rows) * seq_len))
        if method == "concat":  # only the last row is padded
            assert all(np.count_nonzero(r["tokens_segment_ids"]) == seq_len for r in rows[:-1])
        else:  # a sequence (or a split piece) is never cut across rows: each segment is whole
            pieces = {(int(s[0]), len(s)) for row in rows for s in _segments(row)}
            expect = set()
            for n, start in zip(lengths, np.cumsum([1, *lengths])):
                if n and overlong == "truncate":
                    expect.add((int(start), min(n, seq_len)))
                else:
                    expect |= {(int(start) + s, min(seq_len, n - s)) for s in range(0, n, seq_len)}
            assert pieces == expect
            assert len(rows) <= len(expect)


@given(
    lengths=st.lists(st.integers(1, 20), min_size=1, max_size=30),
    method=st.sampled_from(("first_fit", "best_fit")),
    num_bins=st.integers(1, 4),
)
@SETTINGS
def test_rows_are_produced_in_the_documented_order(lengths: list[int], method: str, num_bins: int) -> None:
    """A straightforward model of the documented rules gives the same rows."""
    seq_len = 20
    open_rows: list[list[int]] = []  # lengths per open row, oldest first
    out: list[list[int]] = []
    for n in lengths:
        fits = [r for r in open_rows if seq_len - sum(r) >= n]
        if fits:
            row = fits[0] if method == "first_fit" else min(fits, key=lambda r: seq_len - sum(r))
            row.append(n)
            if sum(row) == seq_len:
                open_rows.remove(row)
                out.append(row)
            continue
        if len(open_rows) >= num_bins:
            fullest = max(open_rows, key=sum)
            open_rows.remove(fullest)
            out.append(fullest)
        if n == seq_len:
            out.append([n])
        else:
            open_rows.append([n])
    out += open_rows
    rows = _rows(PackData(_source(lengths), seq_len, method=method, num_bins=num_bins))
    assert [[len(s) for s in _segments(r)] for r in rows] == out


def test_best_fit_pads_less_than_first_fit_on_long_tailed_lengths() -> None:
    rng = np.random.default_rng(0)
    lengths = np.minimum(rng.pareto(1.2, 3000) * 60 + 1, 512).astype(int).tolist()
    pads = {m: PackData(_source(lengths), 512, method=m, num_bins=64) for m in METHODS}
    for df in pads.values():
        _rows(df)
    assert pads["concat"].stats()["padding"] < pads["best_fit"].stats()["padding"]
    assert pads["best_fit"].stats()["padding"] <= pads["first_fit"].stats()["padding"]
    assert pads["best_fit"].stats()["padding"] < 0.1


def test_fluent_lists_and_dtypes() -> None:
    df = DataFromList([[[1, 2, 3]], [[4, 5]]], shuffle=False).pack(4, keys=(0,), method="concat")
    rows = _rows(df)
    np.testing.assert_array_equal(rows[0]["0"], [1, 2, 3, 4])
    np.testing.assert_array_equal(rows[0]["0_segment_ids"], [1, 1, 1, 2])
    np.testing.assert_array_equal(rows[1]["0"], [5, 0, 0, 0])
    np.testing.assert_array_equal(rows[1]["0_positions"], [0, 0, 0, 0])  # a continued piece starts at 0
    small = _rows(DataFromList([{"tokens": np.array([7, 8], np.uint16)}], shuffle=False).pack(3))
    assert small[0]["tokens"].dtype == np.uint16
    with pytest.raises(LengthUnknownError, match="PackData"):
        len(df)


def test_overlong_modes() -> None:
    src = _source([10])
    assert [len(s) for r in _rows(PackData(src, 4, overlong="split")) for s in _segments(r)] == [4, 4, 2]
    df = PackData(src, 4, overlong="truncate")
    rows = _rows(df)
    np.testing.assert_array_equal(rows[0]["tokens"], [1, 2, 3, 4])
    assert len(rows) == 1 and df.stats()["dropped"] == 6
    with pytest.raises(ValueError, match=r"PackData: datapoint 0 .* 10 tokens, longer than seq_len=4"):
        _rows(PackData(src, 4, overlong="error"))


def test_errors_name_the_stage_and_value() -> None:
    src = _source([3])
    with pytest.raises(ValueError, match="PackData: method must be one of .*'fifo'"):
        PackData(src, 8, method="fifo")
    with pytest.raises(ValueError, match="PackData: overlong must be one of .*'drop'"):
        PackData(src, 8, overlong="drop")
    with pytest.raises(ValueError, match="PackData: seq_len must be >= 1, got 0"):
        PackData(src, 0)
    with pytest.raises(ValueError, match="PackData: num_bins must be >= 1, got 0"):
        PackData(src, 8, num_bins=0)
    with pytest.raises(TypeError, match="PackData: keys must be a sequence"):
        PackData(src, 8, keys="tokens")
    with pytest.raises(ValueError, match="non-empty and distinct"):
        PackData(src, 8, keys=("tokens", "tokens"))
    bad = DataFromList([{"a": np.arange(3), "b": np.arange(3)}, {"a": np.arange(3), "b": np.arange(4)}],
                       shuffle=False)
    with pytest.raises(ValueError, match=r"PackData: the keys of datapoint 1 .*'a': 3, 'b': 4"):
        _rows(PackData(bad, 8, keys=("a", "b")))
    floats = DataFromList([{"tokens": np.ones(3)}], shuffle=False)
    with pytest.raises(TypeError, match="PackData: 'tokens' of datapoint 0 .* 1-D integer array, got float"):
        _rows(PackData(floats, 8))
    with pytest.raises(Exception, match="PackData: key 'text' is not in the datapoint"):
        _rows(PackData(src, 8, keys=("text",)))


@given(
    lengths=st.lists(st.integers(0, 30), min_size=1, max_size=25),
    method=st.sampled_from(METHODS),
    num_bins=st.integers(1, 4),
    overlong=st.sampled_from(("truncate", "split")),
)
@settings(max_examples=15, deadline=None)
def test_resume_at_every_cut_equals_the_uninterrupted_stream(
    lengths: list[int], method: str, num_bins: int, overlong: str
) -> None:
    def build() -> PackData:
        return PackData(_source(lengths), 12, keys=("tokens", "labels"), method=method, num_bins=num_bins,
                        overlong=overlong)

    assert check_resume(build, epochs=2, max_cuts=30) >= 1


def test_resume_keeps_the_stats_and_a_shuffled_upstream() -> None:
    rng = np.random.default_rng(1)
    lengths = rng.integers(1, 30, 60).tolist()

    def build() -> PackData:
        items = [{"tokens": np.arange(n) + 1} for n in lengths]
        return DataFromList(items, shuffle=True).shuffle(8, seed=5).pack(32, method="best_fit", num_bins=3)

    assert check_resume(build, epochs=2, max_cuts=25) > 20
    a, b = build(), build()
    a.reset_state()
    it = iter(a)
    for _ in range(5):
        next(it)
    b.load_state_dict(a.state_dict())
    b.reset_state()
    list(b)
    list(it)
    assert b.stats() == a.stats()


def test_a_corrupted_state_is_refused() -> None:
    df = PackData(_source([5, 6, 7]), 8, num_bins=2)
    df.reset_state()
    it = iter(df)
    next(it)
    state = df.state_dict()
    other = PackData(_source([5, 6, 7]), 4, num_bins=2)  # the saved rows do not fit seq_len=4
    with pytest.raises(StateError, match="PackData"):
        other.load_state_dict(state)


def _tokenize(dp: list[Any]) -> dict[str, np.ndarray]:
    """A stand-in tokenizer run in worker processes (module level: spawn pickles it)."""
    return {"tokens": np.arange(dp[0] % 13 + 1, dtype=np.int32) + 100 * dp[0]}


def test_resume_behind_two_process_workers() -> None:
    """Tokenizing in 2 worker processes, then packing: the resumed stream is the same."""

    def build() -> Any:
        src = DataFromList([[i] for i in range(40)], shuffle=True)
        return src.parallel_map(_tokenize, num_proc=2, timeout=60).pack(16, method="best_fit", num_bins=3)

    assert check_resume(build, epochs=1, max_cuts=4, resave_every=0) >= 4
