"""RayMapData: the same results as the serial map, errors as the user's type, faults
survived, actors gone after close()."""

from __future__ import annotations

import logging
import os
import re
import time

import numpy as np
import psutil
import pytest

from dataflow import DataFromGenerator, DataFromList, MapData, MultiThreadMapData, WorkerDied
from dataflow.on_ray import RayMapData, RayRunner
from dataflow.on_ray._maps import BUFFER_BYTES, CALL_SECONDS, MAX_CHUNK

from . import _funcs

ray = pytest.importorskip("ray")

pytestmark = pytest.mark.timeout(120)


def _src(n: int = 50) -> DataFromList:
    return DataFromList([[i] for i in range(n)], shuffle=False)


def _run(df, epochs: int = 1) -> list[list]:
    df.reset_state()
    try:
        return [list(df) for _ in range(epochs)]
    finally:
        df.close()


@pytest.mark.parametrize("chunk", [1, 16])
def test_ordered_strict_equals_serial_map(chunk: int) -> None:
    expected = _run(MapData(_src(), _funcs.double), 2)
    got = _run(RayMapData(_src(), 2, _funcs.double, strict=True, chunk=chunk, buffer_size=20), 2)
    assert got == expected


def test_unordered_gives_the_same_multiset_and_drops_none_results() -> None:
    got = _run(RayMapData(_src(), 2, _funcs.drop_odd, strict=True, ordered=False, chunk=4), 1)[0]
    assert sorted(dp[0] for dp in got) == list(range(0, 50, 2))


def test_auto_chunks_grow_for_a_cheap_map_and_keep_order(caplog: pytest.LogCaptureFixture) -> None:
    # the defaults: chunk="auto", buffer_size="auto"; one datapoint per call until measured
    with caplog.at_level(logging.DEBUG, logger="dataflow.autotune"):
        got = _run(RayMapData(_src(5000), 2, _funcs.double, strict=True), 2)
    assert got == [[[2 * i] for i in range(5000)]] * 2
    sizes = [
        int(m.group(1))
        for r in caplog.records
        if (m := re.search(r"(\d+) datapoint\(s\) per Ray call", r.getMessage()))
    ]
    assert sizes and max(sizes) == MAX_CHUNK, sizes  # a cheap map: the largest chunks


def test_auto_chunks_stay_small_for_a_slow_map() -> None:
    df = RayMapData(_src(12), 2, _funcs.slow_double, strict=True)  # 10 ms a datapoint
    got = _run(df, 1)[0]
    assert got == [[2 * i] for i in range(12)]
    assert df._chunk <= round(CALL_SECONDS / 0.01)  # sleeping only takes longer, never less


def test_auto_buffer_bounds_the_bytes_in_flight() -> None:
    df = RayMapData(_src(40), 2, _funcs.big_array, strict=True)  # 1 MiB results
    got = _run(df, 1)[0]
    assert [dp[0] for dp in got] == list(range(40))
    assert df.buffer_size <= BUFFER_BYTES // (1 << 20)


def test_non_strict_epochs_have_len_items_and_lose_nothing() -> None:
    df = RayMapData(_src(20), 2, _funcs.double, chunk=3, buffer_size=9)
    epochs = _run(df, 3)
    assert [len(e) for e in epochs] == [20, 20, 20]
    flat = [dp[0] for e in epochs for dp in e]
    assert flat == [2 * (i % 20) for i in range(60)]  # ordered: the repeated upstream, in order


def test_item_rng_gives_the_same_randomness_as_threads() -> None:
    kw = dict(strict=True, ordered=True, item_rng=True, seed=7)
    threads = _run(MultiThreadMapData(_src(30), 2, _funcs.noisy, 20, **kw), 1)
    rayed = _run(RayMapData(_src(30), 2, _funcs.noisy, 20, chunk=4, **kw), 1)
    assert rayed == threads


def test_the_same_pipeline_gives_identical_results_on_processes_and_local_ray() -> None:
    on_procs = _funcs.two_epochs(_funcs.same_pipeline("processes"))
    on_ray = _funcs.two_epochs(_funcs.same_pipeline("ray"))
    assert on_ray == on_procs
    assert on_procs[0] != on_procs[1]  # reshuffled, new randomness: a real comparison
    assert sorted(dp[0] for dp in on_procs[0]) == list(range(40))


def test_large_arrays_come_back_intact() -> None:
    got = _run(RayMapData(_src(6), 2, _funcs.big_array, strict=True, chunk=1, buffer_size=4), 1)[0]
    assert [dp[0] for dp in got] == list(range(6))
    for i, arr in got:
        assert arr.shape == (256, 1024) and arr.dtype == np.float32 and (arr == i).all()


def _mapped_file(arr: np.ndarray) -> str | None:
    """The file mapped at the array's memory (Linux), e.g. Ray's ``/dev/shm/plasma...``."""
    addr = arr.ctypes.data
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split()
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            if lo <= addr < hi:
                return fields[5] if len(fields) > 5 else None
    return None


@pytest.mark.parametrize("stage", ["map", "runner"])
def test_large_arrays_are_store_views_without_a_copy_or_owned_with_copy_true(stage: str) -> None:
    def build(copy: bool):
        # shm_bytes=0: what a worker on another node does (tests/ray/test_cluster.py runs it there)
        if stage == "map":
            return RayMapData(_src(4), 1, _funcs.big_array, strict=True, chunk=1, copy=copy, shm_bytes=0)
        return RayRunner(_src(4).map(_funcs.big_array), 1, shard=True, chunk=1, copy=copy, shm_bytes=0)

    views = _run(build(False), 1)[0]
    owned = _run(build(True), 1)[0]
    for (i, view), (j, mine) in zip(views, owned):
        assert i == j and (view == i).all() and (mine == i).all()
        assert not view.flags.writeable  # a view of Ray's object store: not copied on receive
        assert mine.flags.writeable and mine.flags.owndata
        mine[0, 0] = -1.0  # the owned copy can be written into
        if os.path.exists("/proc/self/maps"):
            assert "plasma" in (_mapped_file(view) or ""), _mapped_file(view)
            assert "plasma" not in (_mapped_file(mine) or "")


def test_datapoints_plain_pickle_refuses_still_cross() -> None:
    # chunks are pickled by us; a lambda in a datapoint goes through cloudpickle, as Ray would
    offset = 3
    src = DataFromList([[i, lambda x: x + offset] for i in range(5)], shuffle=False)
    got = _run(RayMapData(src, 1, _funcs.double_keep_rest, strict=True, chunk=2), 1)[0]
    assert [(dp[0], dp[1](1)) for dp in got] == [(2 * i, 4) for i in range(5)]


def test_backpressure_bounds_inputs_in_flight() -> None:
    pulled: list[int] = []

    def gen_source():
        for i in range(200):
            pulled.append(i)
            yield [i]

    src = DataFromGenerator(gen_source)
    df = RayMapData(src, 2, _funcs.slow_double, strict=True, chunk=2, buffer_size=10)
    df.reset_state()
    try:
        it = iter(df)
        for k in range(5):
            next(it)
            # buffer_size inputs in flight at most, plus a chunk being read
            assert len(pulled) <= k + 1 + 10 + 2
    finally:
        df.close()


def test_map_error_is_raised_as_the_users_type_with_the_remote_traceback() -> None:
    df = RayMapData(_src(), 2, _funcs.fail_on_7, strict=True, chunk=4)
    df.reset_state()
    try:
        with pytest.raises(_funcs.MapFailed, match="bad item 7") as info:
            list(df)
        cause = info.value.__cause__
        assert cause is not None and "fail_on_7" in str(cause) and "Ray actor" in str(cause)
    finally:
        df.close()


def test_killed_actor_is_restarted_and_nothing_is_lost_or_duplicated() -> None:
    expected = _run(MapData(_src(60), _funcs.slow_double), 1)[0]
    df = RayMapData(_src(60), 2, _funcs.slow_double, strict=True, chunk=2, buffer_size=16, max_restarts=2)
    df.reset_state()
    try:
        got = []
        for i, dp in enumerate(df):
            got.append(dp)
            if i == 10:
                ray.kill(df.actors[0], no_restart=False)  # a crash: Ray restarts it
        assert got == expected
    finally:
        df.close()


def test_actor_dead_beyond_the_restart_limit_is_a_clear_error() -> None:
    df = RayMapData(_src(60), 2, _funcs.slow_double, strict=True, chunk=2, buffer_size=16, max_restarts=0)
    df.reset_state()
    try:
        with pytest.raises(WorkerDied, match=r"Ray actor 0 .*max_restarts=0"):
            for i, _ in enumerate(df):
                if i == 5:
                    ray.kill(df.actors[0], no_restart=False)
    finally:
        df.close()


def test_close_kills_every_actor() -> None:
    df = RayMapData(_src(), 2, _funcs.double, strict=True)
    df.reset_state()
    list(df)
    actors, pids = df.actors, df.worker_pids
    df.close()
    assert df.actors == [] and len(pids) == 2
    assert_actors_gone(actors, pids)


def assert_actors_gone(actors: list, pids: list[int], within: float = 60.0) -> None:
    """Every actor answers RayActorError and its process has exited (``ray.kill`` is
    asynchronous: calls made just after it may still be served)."""
    deadline = time.monotonic() + within
    for actor in actors:
        while True:
            try:
                ray.get(actor.pid.remote(), timeout=10)
            except ray.exceptions.RayActorError:
                break
            assert time.monotonic() < deadline, "an actor still answers after close()"
            time.sleep(0.1)
    while any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in pids):
        assert time.monotonic() < deadline, f"actor processes still alive after close(): {pids}"
        time.sleep(0.1)


def test_close_in_the_middle_of_an_epoch_then_reset_starts_clean() -> None:
    df = RayMapData(_src(), 2, _funcs.double, strict=True, chunk=4)
    df.reset_state()
    it = iter(df)
    next(it)
    df.close()
    del it
    assert _run(df, 1)[0] == [[2 * i] for i in range(50)]


def test_bad_arguments_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="RayMapData: num_actors must be >= 1, got 0"):
        RayMapData(_src(), 0, _funcs.double)
    with pytest.raises(TypeError, match="RayMapData: ray_remote_args must be a dict"):
        RayMapData(_src(), 1, _funcs.double, ray_remote_args=["num_cpus", 1])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="may not set \\['max_restarts'\\]"):
        RayMapData(_src(), 1, _funcs.double, ray_remote_args={"max_restarts": 1})
    with pytest.raises(ValueError, match="RayMapData: chunk must be >= 1, got 0"):
        RayMapData(_src(), 1, _funcs.double, chunk=0)
    with pytest.raises(
        ValueError, match="RayMapData: buffer_size must be an int >= 1 or \"auto\", got 'big'"
    ):
        RayMapData(_src(), 1, _funcs.double, buffer_size="big")
    with pytest.raises(ValueError, match="RayMapData: shm_bytes must be >= 0"):
        RayMapData(_src(), 1, _funcs.double, shm_bytes=-1)


def test_unschedulable_actors_time_out_with_the_resources_named() -> None:
    df = RayMapData(_src(), 1, _funcs.double, timeout=3, ray_remote_args={"resources": {"no_such_node": 1}})
    start = time.monotonic()
    with pytest.raises(TimeoutError, match="did not answer to start .*available"):
        df.reset_state()
    assert time.monotonic() - start < 60
    df.close()


def test_fluent_backend_ray_is_one_line_from_processes() -> None:
    on_ray = _src().parallel_map(_funcs.double, num_proc=2, backend="ray", chunk=4)
    assert isinstance(on_ray, RayMapData) and on_ray.ordered and on_ray.strict
    assert _src().parallel_map(_funcs.double, num_proc=2, backend="ray")._auto_buffer  # sized by measures
    on_procs = _src().parallel_map(_funcs.double, num_proc=2)
    assert _run(on_ray, 2) == _run(on_procs, 2) == [[[2 * i] for i in range(50)]] * 2
    with pytest.raises(ValueError, match="backend must be 'processes' or 'ray', got 'dask'"):
        _src().parallel_map(_funcs.double, num_proc=2, backend="dask")
