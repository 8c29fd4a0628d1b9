"""from_ray / to_ray: Ray Data datasets as flows and flows as datasets, streamed."""

from __future__ import annotations

import numpy as np
import pytest

import dataflow
import dataflow.on_ray
from dataflow import DataFromList
from dataflow.on_ray import DataFromRay, from_ray, to_ray

ray = pytest.importorskip("ray")

pytestmark = pytest.mark.timeout(180)


def _double_id(row: dict) -> dict:
    return {"id": row["id"], "twice": row["id"] * 2}


def test_from_ray_yields_the_rows_every_epoch() -> None:
    ds = ray.data.range(30).map(_double_id)
    df = dataflow.on_ray.from_ray(ds)
    df.reset_state()
    try:
        epochs = [list(df) for _ in range(2)]
    finally:
        df.close()
    for rows in epochs:
        assert sorted((int(r["id"]), int(r["twice"])) for r in rows) == [(i, 2 * i) for i in range(30)]


def test_from_ray_batches_are_dicts_of_arrays_and_compose_with_our_transforms() -> None:
    summary = lambda b: {"n": len(b["id"]), "sum": int(b["id"].sum())}  # noqa: E731
    df = from_ray(ray.data.range(10), batch_size=4).map(summary)
    df.reset_state()
    got = list(df)
    assert sum(b["n"] for b in got) == 10 and sum(b["sum"] for b in got) == sum(range(10))
    assert all(b["n"] <= 4 for b in got)


def test_from_ray_streams_without_running_the_whole_plan() -> None:
    df = DataFromRay(ray.data.range(100_000, override_num_blocks=100).map(_double_id))
    df.reset_state()
    it = iter(df)
    first = [next(it) for _ in range(3)]
    assert all(r["twice"] == 2 * r["id"] for r in first)
    del it


def test_to_ray_gives_the_flows_rows_lazily() -> None:
    flow = DataFromList([[i, np.full(3, i)] for i in range(20)], shuffle=False)
    ds = to_ray(flow, columns=["i", "arr"])
    rows = ds.take_all()
    assert [int(r["i"]) for r in rows] == list(range(20))
    assert all((r["arr"] == r["i"]).all() for r in rows)


def test_to_ray_shards_read_the_flow_in_parallel_once() -> None:
    flow = DataFromList([{"x": i} for i in range(25)], shuffle=False)
    rows = to_ray(flow, num_shards=3).take_all()
    assert sorted(int(r["x"]) for r in rows) == list(range(24))  # equal shards: 3 x 8


def test_round_trip_through_ray_data() -> None:
    flow = DataFromList([{"x": i} for i in range(12)], shuffle=False)
    df = from_ray(to_ray(flow).map(lambda r: {"x": r["x"] + 100}))
    df.reset_state()
    assert sorted(int(r["x"]) for r in df) == list(range(100, 112))


def test_bad_inputs() -> None:
    with pytest.raises(TypeError, match="DataFromRay: expected a ray.data.Dataset, got list"):
        from_ray([1, 2])
    with pytest.raises(TypeError, match="to_ray: expected a DataFlow"):
        to_ray([1, 2])  # type: ignore[arg-type]
