"""RayRunner: copies of a flow on Ray workers, merged deterministically; shards make one
pass over the data; errors and dead workers are clear; close() leaves no actor."""

from __future__ import annotations

import functools
import time

import psutil
import pytest

from dataflow import DataFromList, MapData, WorkerDied
from dataflow.on_ray import RayRunner

from . import _funcs
from .test_maps import assert_actors_gone

ray = pytest.importorskip("ray")

pytestmark = pytest.mark.timeout(120)


def _src(n: int = 20) -> DataFromList:
    return DataFromList([[i] for i in range(n)], shuffle=False)


def _run(df, epochs: int = 1) -> list[list]:
    df.reset_state()
    try:
        return [list(df) for _ in range(epochs)]
    finally:
        df.close()


def test_shard_mode_epoch_is_one_pass_over_the_data() -> None:
    epochs = _run(RayRunner(_src(20), 2, shard=True, chunk=3), 3)
    for epoch in epochs:
        assert sorted(dp[0] for dp in epoch) == list(range(20))
    assert epochs[0] == epochs[1] == epochs[2]  # the round-robin merge is deterministic


def test_shard_mode_merges_round_robin_chunk_by_chunk() -> None:
    got = _run(RayRunner(_src(12), 2, shard=True, chunk=2), 1)[0]
    w0 = [dp[0] for dp in _run(_src(12).shard(2, 0), 1)[0]]
    w1 = [dp[0] for dp in _run(_src(12).shard(2, 1), 1)[0]]
    expected = w0[0:2] + w1[0:2] + w0[2:4] + w1[2:4] + w0[4:6] + w1[4:6]
    assert [dp[0] for dp in got] == expected


@pytest.mark.filterwarnings("ignore:ShardData. sharding by position")
def test_large_datapoints_make_smaller_pulls_by_chunk_bytes() -> None:
    flow = _src(12).map(_funcs.big_array)  # 1 MiB arrays: 2 fit in 2.5 MiB, so pulls of 2
    got = _run(RayRunner(flow, 2, shard=True, chunk=8, chunk_bytes=5 << 19), 1)[0]
    shards = [[dp[0] for dp in _run(_src(12).shard(2, w), 1)[0]] for w in range(2)]
    assert [dp[0] for dp in got] == merged(shards, 2)


def test_whole_copies_have_the_flows_length_per_epoch_and_carry_the_rest_over() -> None:
    df = RayRunner(_funcs.build_counter_flow, 2, chunk=7)
    epochs = _run(df, 4)
    assert [len(e) for e in epochs] == [20] * 4
    flat = [dp[0] for e in epochs for dp in e]
    # each worker pulls chunks of 7 that end with its passes: 0-6, 7-13, 14-19, 0-6, ...;
    # the merge takes one chunk of worker 0, then one of worker 1, and so on
    chunks = [list(range(0, 7)), list(range(7, 14)), list(range(14, 20))] * 3
    merged = [i for c in chunks for i in c + c]
    assert flat == merged[:80]


def test_workers_are_seeded_apart() -> None:
    df = RayRunner(_funcs.build_random_flow, 2, chunk=12, seed=3)
    df.reset_state()
    try:
        a = [dp[0] for dp in df]  # chunk=12: worker 0's first pass, then worker 1's
        b = [dp[0] for dp in df]
    finally:
        df.close()
    assert sorted(a) == sorted(b) == list(range(12))
    assert a != b
    again = _run(RayRunner(_funcs.build_random_flow, 2, chunk=12, seed=3), 1)[0][:12]
    assert [dp[0] for dp in again] == a  # seed= makes the run reproducible


def test_an_error_in_the_flow_is_raised_as_the_users_type() -> None:
    df = RayRunner(MapData(_src(20), _funcs.fail_on_7), 2, chunk=2)
    df.reset_state()
    try:
        with pytest.raises(_funcs.MapFailed, match="bad item 7") as info:
            list(df)
        assert "RayRunner" in str(info.value.__cause__)
    finally:
        df.close()


def kill(df: RayRunner, worker: int) -> None:
    """``ray.kill`` the worker and wait until its process has exited: the kill is
    asynchronous, and a pull sent before the process is gone may still be served."""
    pid = df.worker_pids[worker]
    ray.kill(df.actors[worker])
    deadline = time.monotonic() + 60
    while True:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        assert time.monotonic() < deadline, f"worker {worker} (pid {pid}) still runs 60 s after ray.kill"
        time.sleep(0.05)


def merged(shards: list[list], chunk: int) -> list:
    """The round-robin merge, chunk by chunk, of equal-length shard streams."""
    out: list = []
    for start in range(0, len(shards[0]), chunk):
        for shard in shards:
            out += shard[start : start + chunk]
    return out


@pytest.mark.filterwarnings("ignore:ShardData. sharding by position")
def test_killed_sharded_worker_resumes_its_shard_from_its_snapshot() -> None:
    flow = _src(48).shuffle(6, seed=2).map(_funcs.double)
    local = []
    for i in range(2):  # the reference: each shard read here, two passes
        shard = flow.shard(2, i)
        shard.reset_state()
        local.append([list(shard) for _ in range(3)])
    expected = [merged([local[0][e], local[1][e]], 4) for e in range(3)]
    df = RayRunner(flow, 2, shard=True, chunk=4, snapshot_every=2, timeout=60)
    df.reset_state()
    try:
        first_pids, first_actors = df.worker_pids, df.actors
        got = []
        # worker 1 mid-pass, then worker 0 late in a pass; the third pass needs the replacement
        # even if the second one's last pulls were served before the kill
        for e, kill_at in enumerate([13, 30, None]):
            epoch = []
            for i, dp in enumerate(df):
                epoch.append(dp)
                if i == kill_at:
                    kill(df, 1 - e)
            got.append(epoch)
        assert got == expected  # nothing lost or repeated, same order
        assert all(a != b for a, b in zip(df.worker_pids, first_pids))  # both were replaced
        actors = first_actors + df.actors
    finally:
        df.close()
    assert_actors_gone(actors, first_pids + df.worker_pids)


def test_killed_copy_is_replayed_from_its_start_without_snapshots() -> None:
    df = RayRunner(_funcs.build_counter_flow, 2, chunk=7, snapshot_every=None, timeout=60)
    df.reset_state()
    first_pid = df.worker_pids[0]
    try:
        epochs = []
        for e in range(4):
            epoch = []
            for i, dp in enumerate(df):
                epoch.append(dp[0])
                if (e, i) == (1, 2):  # worker 0 still owes 4 pulls, at most 2 in flight
                    kill(df, 0)
            epochs.append(epoch)
        assert df.worker_pids[0] != first_pid
    finally:
        df.close()
    chunks = [list(range(0, 7)), list(range(7, 14)), list(range(14, 20))] * 3
    merged_copies = [i for c in chunks for i in c + c]
    assert [i for e in epochs for i in e] == merged_copies[:80]


def test_a_dead_worker_beyond_max_restarts_is_a_clear_error() -> None:
    df = RayRunner(MapData(_src(200), _funcs.slow_double), 2, chunk=2, max_restarts=0)
    df.reset_state()
    try:
        with pytest.raises(WorkerDied, match=r"Ray worker 1 .* died.*max_restarts=0"):
            for i, _ in enumerate(df):
                if i == 3:
                    kill(df, 1)
    finally:
        df.close()


def test_a_flow_that_replays_differently_is_a_clear_error(tmp_path) -> None:
    build = functools.partial(_funcs.build_growing_flow, str(tmp_path / "builds"))
    df = RayRunner(build, 1, chunk=3, timeout=60)
    df.reset_state()
    try:
        received = 0
        with pytest.raises(RuntimeError, match="replaying the lost worker's stream gave 3 datapoints"):
            for _ in range(6):  # epochs of 5
                for _dp in df:
                    received += 1
                    if received == 7:
                        ray.kill(df.actors[0])
    finally:
        df.close()


def test_close_kills_every_worker() -> None:
    df = RayRunner(_src(), 2, shard=True)
    df.reset_state()
    list(df)
    actors, pids = df.actors, df.worker_pids
    df.close()
    assert df.actors == []
    assert_actors_gone(actors, pids)


def test_bad_arguments() -> None:
    with pytest.raises(TypeError, match="RayRunner: flow must be a DataFlow"):
        RayRunner(42, 2)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="RayRunner: num_workers must be >= 1"):
        RayRunner(_src(), 0)
