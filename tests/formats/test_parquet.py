"""ParquetData, ParquetSerializer and to_arrow: round trips with pyarrow, pandas, polars, DuckDB
and Hugging Face ``datasets``; projection, filters, batches; shuffle, shards, resume and
reshard at any cut (hypothesis), over local files and memory:// URLs; len from the footers alone; errors."""

from __future__ import annotations

import itertools
import os
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dataflow as D
from dataflow.checkpoint import reshard
from tests.checkpoint._harness import canon, check_resume

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
fsspec = pytest.importorskip("fsspec")

SETTINGS = settings(max_examples=20, deadline=None)
pytestmark = pytest.mark.timeout(180)


def _rows(n: int, base: int = 0) -> list[dict[str, Any]]:
    return [
        {"id": base + i, "x": np.full(3, base + i, np.float32), "s": f"row {base + i}", "b": bytes([i % 256])}
        for i in range(n)
    ]


def _write(tmp: Path, groups: list[list[int]], name: str = "part") -> tuple[str, str]:
    """Files whose row groups have the given sizes (rows numbered across all files), on disk
    and in memory://; the globs of both."""
    mem = fsspec.filesystem("memory")
    prefix = f"memory://pq-{uuid.uuid4().hex}"
    base = 0
    for k, sizes in enumerate(groups):
        path = tmp / f"{name}-{k:02d}.parquet"
        schema = pa.schema([("id", pa.int64()), ("x", pa.list_(pa.float32(), 3)), ("s", pa.string())])
        with pq.ParquetWriter(str(path), schema) as writer:
            for n in sizes:
                ids = np.arange(base, base + n)
                x = pa.FixedSizeListArray.from_arrays(pa.array(np.repeat(ids, 3).astype(np.float32)), 3)
                writer.write_table(pa.table({"id": ids, "x": x, "s": [f"r{i}" for i in ids]}, schema=schema))
                base += n
        mem.pipe(f"{prefix}/{name}-{k:02d}.parquet", path.read_bytes())
    return str(tmp / f"{name}-*.parquet"), f"{prefix}/{name}-*.parquet"


def _plain(batch: dict[str, Any]) -> dict[str, Any]:
    return {k: v.tolist() if v.dtype == object else v for k, v in batch.items()}


def _ids(flow: D.DataFlow) -> list[int]:
    out: list[int] = []
    for dp in flow:
        out += list(np.atleast_1d(dp["id"]).tolist())
    return out


# --- round trips ---------------------------------------------------------------------------


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    rows = [
        {
            "i": i,
            "f": float(i) / 2,
            "f32": np.float32(i),
            "flag": i % 2 == 0,
            "s": f"text {i}",
            "b": b"\x00" * i,
            "img": np.arange(6, dtype=np.uint8).reshape(2, 3) + i,
            "var": np.arange(i % 4, dtype=np.int32),
            "maybe": None if i % 3 else i,
        }
        for i in range(25)
    ]
    path = tmp_path / "t.parquet"
    D.ParquetSerializer.save(D.DataFromList(rows, shuffle=False), path, rows_per_group=7, progress=False)
    assert pq.read_metadata(str(path)).num_row_groups == 4
    df = D.ParquetSerializer.load(str(path))
    df.reset_state()
    assert len(df) == 25
    got = list(df)
    for want, have in zip(rows, got):
        assert set(have) == set(want)
        assert have["i"] == want["i"] and isinstance(have["i"], np.int64)
        assert have["f"] == want["f"] and have["f32"].dtype == np.float32
        assert bool(have["flag"]) == want["flag"]
        assert have["s"] == want["s"] and have["b"] == want["b"]
        assert have["img"].dtype == np.uint8 and np.array_equal(have["img"], want["img"])
        assert have["img"].flags.writeable
        assert have["var"].dtype == np.int32 and np.array_equal(have["var"], want["var"])
        assert have["maybe"] == want["maybe"]


def test_list_datapoints_become_columns_0_1(tmp_path: Path) -> None:
    path = tmp_path / "l.parquet"
    rows = D.DataFromList([[i, f"s{i}"] for i in range(5)], shuffle=False)
    D.ParquetSerializer.save(rows, path, progress=False)
    assert pq.read_schema(str(path)).names == ["0", "1"]
    df = D.ParquetData(str(path))
    df.reset_state()
    assert [(dp["0"], dp["1"]) for dp in df] == [(i, f"s{i}") for i in range(5)]


def test_other_tools_read_what_save_writes(tmp_path: Path) -> None:
    path = tmp_path / "o.parquet"
    D.ParquetSerializer.save(D.DataFromList(_rows(20), shuffle=False), path, rows_per_group=8, progress=False)
    table = pq.read_table(str(path))
    assert table.column("id").to_pylist() == list(range(20))
    assert table.schema.field("x").type == pa.list_(pa.float32(), 3)
    pandas = pytest.importorskip("pandas")
    frame = pandas.read_parquet(path)
    assert list(frame["s"]) == [f"row {i}" for i in range(20)]
    assert np.array_equal(np.stack(frame["x"].to_numpy()), np.repeat(np.arange(20.0), 3).reshape(20, 3))
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_parquet(str(path), cache_dir=str(tmp_path / "hf"))
    assert ds.num_rows == 20 and ds[3]["id"] == 3 and ds[3]["x"] == [3.0, 3.0, 3.0] and ds[3]["s"] == "row 3"
    polars = pytest.importorskip("polars")
    frame_pl = polars.read_parquet(path)
    assert frame_pl["id"].to_list() == list(range(20)) and frame_pl["s"][3] == "row 3"
    assert frame_pl["x"][3].to_list() == [3.0, 3.0, 3.0]
    duckdb = pytest.importorskip("duckdb")
    rows = duckdb.sql(f"SELECT id, s, x FROM read_parquet('{path}') ORDER BY id").fetchall()
    assert len(rows) == 20 and rows[3][:2] == (3, "row 3") and list(rows[3][2]) == [3.0, 3.0, 3.0]


def test_save_is_atomic_and_names_the_datapoint_that_does_not_fit(tmp_path: Path) -> None:
    path = tmp_path / "a.parquet"
    D.ParquetSerializer.save(D.DataFromList(_rows(5), shuffle=False), path, progress=False)
    before = path.read_bytes()
    bad = _rows(30)
    bad[17]["x"] = np.zeros(4, np.float32)  # another shape
    with pytest.raises(D.FormatError, match=r"datapoint 17, column 'x'"):
        D.ParquetSerializer.save(D.DataFromList(bad, shuffle=False), path, rows_per_group=8, overwrite=True,
                                 progress=False)
    bad = _rows(12)
    bad[10]["id"] = "ten"
    with pytest.raises(D.FormatError, match=r"datapoint 10, column 'id'"):
        D.ParquetSerializer.save(D.DataFromList(bad, shuffle=False), path, rows_per_group=8, overwrite=True,
                                 progress=False)
    bad = _rows(12)
    del bad[9]["s"]
    with pytest.raises(D.FormatError, match=r"datapoint 9 has the columns"):
        D.ParquetSerializer.save(D.DataFromList(bad, shuffle=False), path, overwrite=True, progress=False)
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["a.parquet"]  # no temporary file left
    with pytest.raises(FileExistsError):
        D.ParquetSerializer.save(D.DataFromList(_rows(2), shuffle=False), path, progress=False)


def test_save_with_a_given_schema(tmp_path: Path) -> None:
    path = tmp_path / "s.parquet"
    schema = pa.schema([("id", pa.int32()), ("s", pa.large_string())])
    D.ParquetSerializer.save(
        D.DataFromList([{"id": i, "s": str(i)} for i in range(4)], shuffle=False), path, schema=schema,
        compression="snappy", progress=False,
    )
    assert pq.read_schema(str(path)).field("id").type == pa.int32()
    df = D.ParquetData(str(path))
    df.reset_state()
    assert [(int(dp["id"]), dp["s"]) for dp in df] == [(i, str(i)) for i in range(4)]
    D.ParquetSerializer.save(D.DataFromIterable([]), tmp_path / "e.parquet", schema=schema,
                             progress=False)
    empty = D.ParquetData(str(tmp_path / "e.parquet"))
    empty.reset_state()
    assert len(empty) == 0 and list(empty) == []


# --- reading -------------------------------------------------------------------------------


def test_columns_and_filters(tmp_path: Path) -> None:
    local, _ = _write(tmp_path, [[5, 5], [4]])
    df = D.ParquetData(local, columns=["s"])
    df.reset_state()
    assert [dp for dp in df][:2] == [{"s": "r0"}, {"s": "r1"}]
    df = D.ParquetData(local, columns=["s"], filters=[("id", ">=", 3), ("id", "<", 7)])
    df.reset_state()
    assert list(df) == [{"s": f"r{i}"} for i in range(3, 7)]
    with pytest.raises(D.LengthUnknownError):
        len(df)
    import pyarrow.compute as pc

    df = D.ParquetData(local, filters=pc.is_in(pc.field("id"), pa.array([0, 4, 8, 12])), batch_rows=2)
    df.reset_state()
    assert _ids(df) == [0, 4, 8, 12]
    with pytest.raises(ValueError, match=r"column 'nope' is not in .*part-00\.parquet"):
        bad = D.ParquetData(local, columns=["nope"])
        bad.reset_state()


def test_batch_rows_are_numpy_columns_zero_copy(tmp_path: Path) -> None:
    local, _ = _write(tmp_path, [[10, 10], [5]])
    df = D.ParquetData(local, batch_rows=4)
    df.reset_state()
    batches = list(df)
    assert len(df) == len(batches) == 7
    assert [len(b["id"]) for b in batches] == [4, 4, 4, 4, 4, 4, 1]  # batches span row groups
    assert _ids(D.DataFromList(batches, shuffle=False)) == list(range(25))
    first = batches[0]
    assert first["x"].shape == (4, 3) and first["x"].dtype == np.float32
    assert not first["id"].flags.writeable and not first["x"].flags.writeable  # Arrow's memory
    assert first["s"].dtype == object and first["s"][1] == "r1"


def test_shuffle_orders_row_groups_and_rows_per_epoch(tmp_path: Path) -> None:
    local, _ = _write(tmp_path, [[8, 8], [8, 8]])
    df = D.ParquetData(local, shuffle=True, seed=3)
    df.reset_state()
    one, two = _ids(df), _ids(df)
    assert sorted(one) == sorted(two) == list(range(32)) and one != two
    for epoch in (one, two):  # a row group at a time
        assert all(len({i // 8 for i in epoch[k : k + 8]}) == 1 for k in range(0, 32, 8))
    again = D.ParquetData(local, shuffle=True, seed=3)
    again.reset_state()
    assert _ids(again) == one


@SETTINGS
@given(
    groups=st.lists(st.lists(st.integers(0, 5), max_size=4), min_size=1, max_size=4),
    world=st.integers(1, 4),
    equal=st.booleans(),
    shuffle=st.booleans(),
    remote=st.booleans(),
)
def test_ranks_read_disjoint_complete_row_groups(tmp_path_factory, groups, world, equal, shuffle, remote):
    local, mem = _write(tmp_path_factory.mktemp("p"), groups)
    total = sum(map(sum, groups))
    parts = []
    for rank in range(world):
        flow = D.ParquetData(mem if remote else local, shuffle=shuffle, seed=5)
        flow = flow.shard(world, rank, equal=equal)
        assert flow.by_index
        flow.reset_state()
        ids = _ids(flow)
        assert len(ids) == len(flow)
        parts.append(ids)
    everything = [i for p in parts for i in p]
    assert len(set(everything)) == len(everything)
    if equal:
        assert [len(p) for p in parts] == [total // world] * world
    else:
        assert sorted(everything) == list(range(total))


@SETTINGS
@given(
    groups=st.lists(st.lists(st.integers(1, 5), min_size=1, max_size=3), min_size=1, max_size=3),
    shuffle=st.booleans(),
    batch=st.sampled_from([None, 3]),
    shard=st.sampled_from([None, (2, 0, True), (2, 1, False)]),
    filtered=st.booleans(),
    remote=st.booleans(),
)
def test_resume_at_any_cut(tmp_path_factory, groups, shuffle, batch, shard, filtered, remote):
    local, mem = _write(tmp_path_factory.mktemp("p"), groups)
    filters = [("id", "!=", 2)] if filtered else None

    def build() -> D.DataFlow:
        src = mem if remote else local
        flow = D.ParquetData(src, shuffle=shuffle, batch_rows=batch, filters=filters, seed=9)
        flow = flow if shard is None else flow.shard(shard[0], shard[1], equal=shard[2])
        return flow.map(_plain) if batch else flow  # object arrays compare by value

    check_resume(build, epochs=2, max_cuts=12)


def test_resume_reads_no_earlier_row_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    local, _ = _write(tmp_path, [[4, 4, 4], [4]])
    df = D.ParquetData(local)
    df.reset_state()
    it = iter(df)
    for _ in range(10):
        next(it)
    state = df.state_dict()
    read: list[int] = []
    original = pq.ParquetFile.read_row_group

    def counting(self: Any, i: int, *args: Any, **kwargs: Any) -> Any:
        read.append(i)
        return original(self, i, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read_row_group", counting)
    again = D.ParquetData(local)
    again.load_state_dict(state)
    again.reset_state()
    assert _ids(again) == list(range(10, 16))
    assert read == [2, 0]  # the third group of the first file, then the second file's only one


@SETTINGS
@given(
    groups=st.lists(st.lists(st.integers(1, 5), min_size=1, max_size=3), min_size=1, max_size=4),
    old=st.integers(1, 3),
    new=st.integers(1, 3),
    cut=st.integers(0, 5),
    equal=st.booleans(),
    shuffle=st.booleans(),
)
def test_reshard_resumes_what_no_rank_consumed(tmp_path_factory, groups, old, new, cut, equal, shuffle):
    local, _ = _write(tmp_path_factory.mktemp("p"), groups)

    def flow(world: int, rank: int) -> D.DataFlow:
        return D.ParquetData(local, shuffle=shuffle, seed=4).shard(world, rank, equal=equal)

    lengths = []
    for rank in range(old):
        f = flow(old, rank)
        f.reset_state()
        lengths.append(len(f))
    cut = min(cut, min(lengths) - 1)
    if cut < 0:
        return
    seen, states = [], []
    for rank in range(old):
        f = flow(old, rank)
        f.reset_state()
        it = iter(f)
        seen += [int(dp["id"]) for dp in itertools.islice(it, cut)]
        states.append(f.state_dict())
    merged = reshard(states, new)
    rest = []
    for rank in range(new):
        f = flow(new, rank)
        f.load_state_dict(merged)
        f.reset_state()
        rest.append(_ids(f))
    everything = seen + [i for p in rest for i in p]
    assert len(set(everything)) == len(everything)
    if equal:
        assert len({len(p) for p in rest}) == 1
    else:
        assert sorted(everything) == list(range(sum(map(sum, groups))))


# --- remote files and len ------------------------------------------------------------------


def test_remote_reads_like_local_and_len_reads_only_footers(tmp_path: Path, monkeypatch) -> None:
    mem = fsspec.filesystem("memory")
    prefix = f"memory://pq-{uuid.uuid4().hex}"
    rng = np.random.default_rng(0)
    for k, n in enumerate([100, 30]):
        rows = [{"id": k * 100 + i, "blob": rng.bytes(2000)} for i in range(n)]
        path = tmp_path / f"big-{k}.parquet"
        D.ParquetSerializer.save(D.DataFromList(rows, shuffle=False), path, rows_per_group=50, progress=False)
        mem.pipe(f"{prefix}/big-{k}.parquet", path.read_bytes())
    remote = D.ParquetData(f"{prefix}/big-*.parquet")
    assert len(remote) == 130
    stats = remote.io_stats()
    assert stats["requests"] == 1 + 2  # the listing, then one tail per file
    assert 0 < stats["bytes"] <= 2 * (64 << 10) < (tmp_path / "big-0.parquet").stat().st_size  # footers only
    remote.reset_state()
    here = D.ParquetData(str(tmp_path / "big-*.parquet"))
    here.reset_state()
    assert [canon(dp) for dp in remote] == [canon(dp) for dp in here]
    assert remote.io_stats()["requests"] == 3 + 3  # one ranged request per row group

    def no_data(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("len() read data")

    monkeypatch.setattr(pq.ParquetFile, "read_row_group", no_data)
    monkeypatch.setattr(pq.ParquetFile, "iter_batches", no_data)
    fresh = D.ParquetData(str(tmp_path / "big-*.parquet")).shard(2, 1)
    assert len(fresh) == 65


def test_remote_projection_fetches_only_its_columns(tmp_path: Path) -> None:
    _, mem = _write(tmp_path, [[200]])
    whole, part = D.ParquetData(mem), D.ParquetData(mem, columns=["id"])
    for df in (whole, part):
        df.reset_state()
        assert len(list(df)) == 200
    assert part.io_stats()["bytes"] < whole.io_stats()["bytes"]


# --- errors --------------------------------------------------------------------------------


def test_errors_name_the_stage_and_the_value(tmp_path: Path) -> None:
    not_parquet = tmp_path / "bad.parquet"
    not_parquet.write_bytes(b"hello, this is not parquet at all")
    with pytest.raises(D.FormatError, match=r"ParquetData: .*bad\.parquet"):
        D.ParquetData(str(not_parquet)).reset_state()
    mem = fsspec.filesystem("memory")
    url = f"memory://pq-{uuid.uuid4().hex}/bad.parquet"
    mem.pipe(url, not_parquet.read_bytes())
    with pytest.raises(D.FormatError, match=r"bad\.parquet is not a Parquet file"):
        len(D.ParquetData(url))
    with pytest.raises(FileNotFoundError, match="ParquetData"):
        D.ParquetData(str(tmp_path / "missing.parquet")).reset_state()
    with pytest.raises(ValueError, match="batch_rows"):
        D.ParquetData(str(not_parquet), batch_rows=0)
    with pytest.raises(TypeError, match="columns"):
        D.ParquetData(str(not_parquet), columns="id")
    with pytest.raises(TypeError, match="filters"):
        D.ParquetData(str(not_parquet), filters="id > 3")
    with pytest.raises(D.FormatError, match=r"datapoint 0 is a int"):
        D.ParquetSerializer.save(D.DataFromList([1, 2], shuffle=False), tmp_path / "x.parquet")


def test_a_damaged_row_group_names_the_file_and_group(tmp_path: Path) -> None:
    local, _ = _write(tmp_path, [[40, 40]])
    path = tmp_path / "part-00.parquet"
    data = bytearray(path.read_bytes())
    meta = pq.read_metadata(str(path))
    col = meta.row_group(1).column(0)
    start = col.data_page_offset
    data[start : start + col.total_compressed_size] = b"\xff" * col.total_compressed_size
    path.write_bytes(bytes(data))
    df = D.ParquetData(local)
    df.reset_state()
    with pytest.raises(D.FormatError, match=r"part-00\.parquet: row group 1 cannot be read"):
        list(df)


def test_a_corrupted_state_is_refused(tmp_path: Path) -> None:
    local, _ = _write(tmp_path, [[3, 3]])
    df = D.ParquetData(local).shard(2, 0)
    df.reset_state()
    it = iter(df)
    next(it)
    state = df.state_dict()
    state["root"]["upstreams"][0]["state"]["work"] = [[0, 0, "x"]]
    fresh = D.ParquetData(local).shard(2, 0)
    with pytest.raises(D.StateError, match="work"):
        fresh.load_state_dict(state)
        fresh.reset_state()
        list(fresh)


@pytest.mark.parametrize("saved_shuffled", [True, False])
def test_a_state_of_the_other_shuffle_setting_is_refused(tmp_path: Path, saved_shuffled: bool) -> None:
    """The position counts row groups in the saved order: read in the other order it would
    lose some rows and repeat others."""
    local, _ = _write(tmp_path, [[3, 3], [3, 3]])
    saved = D.ParquetData(local, shuffle=saved_shuffled, seed=1)
    saved.reset_state()
    it = iter(saved)
    next(it)
    state = saved.state_dict()
    other = D.ParquetData(local, shuffle=not saved_shuffled, seed=1)
    with pytest.raises(D.StateError, match=f"saved by a reader with shuffle={saved_shuffled}, this one has "):
        other.load_state_dict(state)


# --- to_arrow ------------------------------------------------------------------------------


def test_to_arrow_takes_column_batches(tmp_path: Path) -> None:
    local, _ = _write(tmp_path, [[6, 6]])
    table = D.to_arrow(D.ParquetData(local, batch_rows=5))
    assert table.num_rows == 12 and table.column("id").to_pylist() == list(range(12))
    assert table.schema.field("x").type == pa.list_(pa.float32(), 3)
    batched = D.DataFromList([{"a": i, "v": np.full((2, 2), i, np.int16)} for i in range(7)], shuffle=False)
    table = D.to_arrow(batched.batch(3, remainder=True))
    assert table.column("a").to_pylist() == list(range(7))
    assert table.schema.field("v").type == pa.list_(pa.list_(pa.int16(), 2), 2)
    assert table.to_pandas()["a"].tolist() == list(range(7))
    with pytest.raises(D.FormatError, match=r"to_arrow: batch 0 is a list"):
        D.to_arrow(D.DataFromList([[1, 2]], shuffle=False))
    schema = pa.schema([("a", pa.int8()), ("v", pa.list_(pa.list_(pa.int16(), 2), 2))])
    bad = D.DataFromList([{"a": 1000, "v": np.zeros((2, 2), np.int16)}], shuffle=False).batch(1)
    with pytest.raises(D.FormatError, match=r"batch 0, column 'a'"):
        D.to_arrow(bad, schema=schema)


def test_import_dataflow_does_not_import_pyarrow() -> None:
    import subprocess
    import sys

    code = "import sys, dataflow; print(sorted(m for m in sys.modules if m.split('.')[0] == 'pyarrow'))"
    root = str(Path(__file__).resolve().parents[2])
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
