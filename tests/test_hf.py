"""Hugging Face ``datasets``: :class:`~dataflow.DataFromHF` (a ``Dataset`` as a random-access
source), :class:`~dataflow.DataFromHFIterable` (an ``IterableDataset`` as a stream checkpointed
through its own ``state_dict()``) and :func:`~dataflow.to_hf`, on small datasets made here (no
Hub access):

- rows are the dataset's own (numpy values; ``str`` and ``bytes`` for strings and binary), in
  order, through an indices mapping and the dataset's selected columns too;
- ``shuffle=True`` with a seed is one reproducible permutation per epoch;
- ranks of ``.shard()`` are disjoint and complete (by index for a Dataset; by stream shards or
  by position for a stream);
- resuming at any cut gives the uninterrupted stream (any size, shard count, batch size), and a
  Dataset's states reshard to another number of ranks;
- wrong arguments and foreign states raise errors naming the stage and the value;
- ``to_hf`` gives back a Dataset equal to the flow.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import datasets
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dataflow as D
from dataflow import StateError, StateUnsupportedError
from dataflow.checkpoint import reshard
from dataflow.sources import _hf, _hf_stream
from tests.checkpoint._harness import canon, check_resume

datasets.disable_progress_bars()
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None)


def _table(n: int) -> dict[str, Any]:
    return {
        "i": np.arange(n, dtype=np.int64),
        "x": np.arange(n * 3, dtype=np.float32).reshape(n, 3),
        "s": [f"row {i}" for i in range(n)],
        "b": [bytes([i % 256]) * (i % 4 + 1) for i in range(n)],
        "v": [list(range(i % 4)) for i in range(n)],
    }


def _ds(n: int = 10) -> datasets.Dataset:
    return datasets.Dataset.from_dict(_table(n))


def _expected(ds: Any) -> list[Any]:
    """The dataset's rows as DataFromHF gives them: ``datasets``' numpy rows, with strings and
    binary values as Python has them (its numpy format drops trailing zero bytes)."""
    python = list(ds.with_format(None))
    return [canon({k: (py[k] if isinstance(py[k], (str, bytes)) else v) for k, v in row.items()})
            for row, py in zip(ds.with_format("numpy"), python)]


def _ids(df: D.DataFlow) -> list[int]:
    return [int(dp["i"]) for dp in df]


def _gen(shards: list[int], size: int) -> Iterator[dict[str, Any]]:
    for s in shards:
        for j in range(size):
            yield {"i": s * 100 + j, "s": f"{s}-{j}"}


def _gen_stream(shards: int, size: int) -> datasets.IterableDataset:
    kwargs = {"shards": list(range(shards)), "size": size}
    return datasets.IterableDataset.from_generator(_gen, gen_kwargs=kwargs)


# --- rows ----------------------------------------------------------------------------------


def test_rows_equal_the_datasets_numpy_rows() -> None:
    ds = _ds(37)
    df = D.DataFromHF(ds)
    df.reset_state()
    rows = list(df)
    assert [canon(r) for r in rows] == _expected(ds)
    assert len(df) == 37 and type(rows[0]["s"]) is str and rows[0]["b"] == b"\x00"  # not b""
    assert rows[5]["x"].dtype == np.float32 and rows[5]["x"].shape == (3,)


def test_python_format_gives_the_datasets_own_rows() -> None:
    ds = _ds(9)
    df = D.DataFromHF(ds, format=None)
    df.reset_state()
    assert list(df) == [ds[i] for i in range(9)]


def test_indices_mapping_and_selected_columns_are_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_hf, "_BLOCK_ROWS", 4)  # several blocks
    ds = _ds(30).shuffle(seed=5).select(range(3, 20)).with_format(columns=["i", "s"])
    df = D.DataFromHF(ds)
    df.reset_state()
    rows = list(df)
    assert [r["i"] for r in rows] == [ds[k]["i"] for k in range(len(ds))]
    assert all(sorted(r) == ["i", "s"] for r in rows)


def test_shuffle_is_one_reproducible_permutation_per_epoch() -> None:
    def run(seed: int) -> list[list[int]]:
        df = D.DataFromHF(_ds(40), shuffle=True, seed=seed)
        df.reset_state()
        return [_ids(df) for _ in range(2)]

    a, b = run(3), run(3)
    assert a == b and a != run(4)
    assert sorted(a[0]) == sorted(a[1]) == list(range(40)) and a[0] != a[1]


def test_from_hf_builds_the_class_for_each_kind() -> None:
    ds = _ds(5)
    assert type(D.from_hf(ds)) is D.DataFromHF
    stream = D.from_hf(ds.to_iterable_dataset(num_shards=2))
    assert type(stream) is D.DataFromHFIterable
    assert type(D.DataFromHF(ds.to_iterable_dataset())) is D.DataFromHFIterable


@pytest.mark.parametrize("block", [1, 3, 256])
def test_stream_rows_equal_the_datasets_rows(monkeypatch: pytest.MonkeyPatch, block: int) -> None:
    monkeypatch.setattr(_hf_stream, "_BLOCK_ROWS", block)
    ds = _ds(23)
    it = ds.to_iterable_dataset(num_shards=4)
    df = D.from_hf(it)
    df.reset_state()
    first, second = [canon(r) for r in df], [canon(r) for r in df]
    assert first == _expected(it)
    it.set_epoch(1)  # the second epoch is the dataset's epoch 1, as datasets' own loop has it
    assert second == _expected(it)
    gen = D.from_hf(_gen_stream(3, 4), format=None)
    gen.reset_state()
    assert list(gen) == list(_gen_stream(3, 4))


# --- sharding ------------------------------------------------------------------------------


@SETTINGS
@given(st.integers(1, 40), st.integers(1, 5), st.booleans(), st.booleans())
def test_dataset_shards_are_disjoint_and_complete(n: int, world: int, shuffle: bool, equal: bool) -> None:
    parts = []
    for rank in range(world):
        df = D.DataFromHF(_ds(n), shuffle=shuffle, seed=7).shard(world, rank, equal=equal)
        assert df.by_index
        df.reset_state()
        parts.append(_ids(df))
    flat = [i for p in parts for i in p]
    assert len(set(flat)) == len(flat)
    if equal:
        assert [len(p) for p in parts] == [n // world] * world
    else:
        assert sorted(flat) == list(range(n))


@SETTINGS
@given(st.integers(1, 6), st.integers(0, 5), st.integers(1, 4), st.booleans())
def test_stream_shards_are_disjoint_and_complete(shards: int, size: int, world: int, equal: bool) -> None:
    parts = []
    for rank in range(world):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            df = D.from_hf(_gen_stream(shards, size)).shard(world, rank, equal=equal)
        assert df.by_index == (not equal and shards >= world)  # by stream shards, else by position
        df.reset_state()
        parts.append(_ids(df))
    flat = [i for p in parts for i in p]
    everything = [s * 100 + j for s in range(shards) for j in range(size)]
    assert len(set(flat)) == len(flat) and set(flat) <= set(everything)
    if equal:
        assert [len(p) for p in parts] == [len(everything) // world] * world
    else:
        assert sorted(flat) == everything


# --- resume --------------------------------------------------------------------------------


@SETTINGS
@given(st.integers(1, 14), st.booleans(), st.integers(1, 3), st.integers(1, 5))
def test_dataset_resumes_exactly_at_any_cut(n: int, shuffle: bool, world: int, block: int) -> None:
    old = _hf._BLOCK_ROWS
    _hf._BLOCK_ROWS = block
    ds = _ds(n)  # one in-memory table for every copy (read only; each copy is its own flow)
    try:
        check_resume(
            lambda: D.DataFromHF(ds, shuffle=shuffle, seed=2).shard(world, world - 1, equal=False)
        )
    finally:
        _hf._BLOCK_ROWS = old


@SETTINGS
@given(st.integers(1, 14), st.integers(1, 4), st.integers(1, 5), st.booleans())
def test_arrow_stream_resumes_exactly_at_any_cut(n: int, shards: int, block: int, numpy: bool) -> None:
    old = _hf_stream._BLOCK_ROWS
    _hf_stream._BLOCK_ROWS = block
    shards = min(shards, n)
    ds = _ds(n)  # one in-memory table; each copy streams it through its own IterableDataset
    try:
        check_resume(lambda: D.from_hf(ds.to_iterable_dataset(num_shards=shards),
                                       format="numpy" if numpy else None), epochs=3)
    finally:
        _hf_stream._BLOCK_ROWS = old


@SETTINGS
@given(st.integers(1, 4), st.integers(0, 4), st.integers(1, 3), st.booleans())
def test_generator_stream_resumes_exactly_at_any_cut(
    shards: int, size: int, world: int, by_shards: bool
) -> None:
    def build() -> D.DataFlow:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return D.from_hf(_gen_stream(shards, size)).shard(world, 0, equal=not by_shards)

    check_resume(build)


@SETTINGS
@given(st.integers(4, 40), st.integers(1, 4), st.integers(1, 4), st.integers(0, 12), st.booleans())
def test_dataset_states_reshard_to_another_world(
    n: int, world: int, new_world: int, step: int, shuffle: bool
) -> None:
    seen: list[int] = []
    states = []
    for rank in range(world):
        df = D.DataFromHF(_ds(n), shuffle=shuffle, seed=9).shard(world, rank, equal=False)
        df.reset_state()
        it = iter(df)
        for _ in range(min(step, len(df))):
            seen.append(int(next(it)["i"]))
        states.append(df.state_dict())
    merged = reshard(states, new_world)
    for rank in range(new_world):
        df = D.DataFromHF(_ds(n), shuffle=shuffle, seed=9).shard(new_world, rank, equal=False)
        df.load_state_dict(merged)
        df.reset_state()
        seen += _ids(df)
    assert sorted(seen) == list(range(n))


def test_stream_state_holds_the_datasets_own_state() -> None:
    df = D.from_hf(_ds(10).to_iterable_dataset(num_shards=2))
    df.reset_state()
    it = iter(df)
    for _ in range(3):
        next(it)
    state = df.state_dict()["root"]["state"]
    assert state["epochs"] == 1 and state["skip"] == 3 and state["hf"] is None  # in the first batch
    assert "examples_iterable" in df._hf.state_dict()


# --- errors --------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [[1, 2], {"a": [1]}, np.arange(3), "train", datasets.Dataset])
def test_a_non_dataset_raises_type_error_naming_stage_and_type(bad: Any) -> None:
    for make in (D.DataFromHF, D.from_hf):
        got = r"DataFromHF: ds must be a datasets.Dataset .*got (list|dict|ndarray|str|Dataset)"
        with pytest.raises(TypeError, match=got):
            make(bad)


def test_a_dataset_dict_asks_for_one_split() -> None:
    dd = datasets.DatasetDict({"train": _ds(3), "test": _ds(2)})
    splits = r"DataFromHF: ds is a DatasetDict of splits \['test', 'train'\].*ds\['test'\]"
    with pytest.raises(TypeError, match=splits):
        D.DataFromHF(dd)


def test_bad_arguments_raise_naming_the_stage() -> None:
    with pytest.raises(ValueError, match="DataFromHF: format must be one of .*got 'pandas'"):
        D.DataFromHF(_ds(3), format="pandas")
    with pytest.raises(ValueError, match="DataFromHFIterable: shuffle=True needs random access"):
        D.from_hf(_ds(3).to_iterable_dataset(), shuffle=True)
    with pytest.raises(ValueError, match="DataFromHF: the dataset has no columns"):
        D.DataFromHF(_ds(3).remove_columns(["i", "x", "s", "b", "v"]))


def test_a_buffer_shuffled_stream_refuses_to_save() -> None:
    df = D.from_hf(_ds(20).to_iterable_dataset(num_shards=2).shuffle(seed=1, buffer_size=5))
    df.reset_state()
    it = iter(df)
    next(it)
    with pytest.raises(StateUnsupportedError, match="DataFromHFIterable: the dataset shuffles with a buffer"):
        df.state_dict()


def test_a_state_of_another_dataset_is_refused() -> None:
    df = D.DataFromHF(_ds(10))
    df.reset_state()
    next(iter(df))
    wrong = "DataFromHF: the state was saved for 10 datapoints but this source has 11"
    with pytest.raises(StateError, match=wrong):
        D.DataFromHF(_ds(11)).load_state_dict(df.state_dict())
    other = D.from_hf(_gen_stream(2, 3))
    other.reset_state()
    git = iter(other)
    next(git)
    state = other.state_dict()
    with pytest.raises(StateError, match="DataFromHFIterable: the dataset's saved state is for a stream of"):
        D.from_hf(_ds(10).to_iterable_dataset(num_shards=2)).load_state_dict(state)


# --- to_hf ---------------------------------------------------------------------------------


def test_to_hf_round_trip(tmp_path: Path) -> None:
    ds = _ds(12)
    src = D.DataFromHF(ds, shuffle=True, seed=1)
    out = D.to_hf(src, features=ds.features, cache_dir=str(tmp_path))
    assert isinstance(out, datasets.Dataset) and out.features == ds.features
    src.reset_state()
    order = _ids(src)  # reset_state() seeds again: the epoch to_hf wrote, in its order
    back = D.DataFromHF(out)
    back.reset_state()
    assert len(out) == 12 and sorted(_ids(back)) == list(range(12))
    assert [out[k] for k in range(12)] == [ds[int(i)] for i in _ids(back)]
    assert order == _ids(back) and order != sorted(order)
    lists = D.to_hf(D.DataFromList([[1, "a"], [2, "b"]], shuffle=False), cache_dir=str(tmp_path))
    assert lists[:] == {"0": [1, 2], "1": ["a", "b"]}


def test_to_hf_errors_name_the_datapoint_and_pass_the_flows_own(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="to_hf: datapoint 1 is a int"):
        D.to_hf(D.DataFromList([[1], 5], shuffle=False), cache_dir=str(tmp_path))
    with pytest.raises(TypeError, match="to_hf: df must be a DataFlow instance"):
        D.to_hf([{"a": 1}], cache_dir=str(tmp_path))

    def boom(dp: Any) -> Any:
        raise KeyError("from the flow")

    with pytest.raises(KeyError, match="from the flow"):
        D.to_hf(D.DataFromList([{"a": 1}], shuffle=False).map(boom), cache_dir=str(tmp_path))
