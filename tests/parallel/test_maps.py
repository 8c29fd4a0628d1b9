"""dataflow/parallel/_maps.py: MultiProcessMapDataZMQ (alias MultiProcessMapData) and
MultiProcessMapAndBatchDataZMQ. Behaviour shared with the thread map is in
test_map_semantics.py."""

from __future__ import annotations

import math
import os
import time

import numpy as np
import pytest

from dataflow import (
    MultiProcessMapAndBatchDataZMQ,
    MultiProcessMapData,
    MultiProcessMapDataZMQ,
    WorkerDied,
)
from dataflow.ops._batch import BatchData
from dataflow.ops._map import MapData
from dataflow.parallel._maps import FLOOR_TASKS_PER_WORKER, QUEUE_SECONDS
from tests.helpers import ListFlow
from tests.parallel import _util as u

pytestmark = pytest.mark.timeout(60)


def _src(n: int = 30) -> ListFlow:
    return ListFlow([[i] for i in range(n)])


# --- MultiProcessMapDataZMQ ---------------------------------------------------------------


def test_alias() -> None:
    assert MultiProcessMapData is MultiProcessMapDataZMQ


def test_tensorpack_signature_and_defaults() -> None:
    src = _src(20)
    df = MultiProcessMapData(src, 2, u.double)  # (ds, num_proc, map_func), non-strict
    assert df.num_proc == 2 and df.buffer_size == 200 and df.strict is False and df.ordered is False
    with df:
        df.reset_state()
        assert src.resets == 1  # the upstream is read in this process
        for _ in range(3):
            out = list(df)
            assert len(out) == len(df) == 20
            assert {dp[0] for dp in out} <= {2 * i for i in range(20)}


def test_work_is_done_in_the_workers() -> None:
    """A map slower than the start-up budget (``maps.LAZY_BUDGET_S`` of queued work per
    worker) spreads even a 40-datapoint epoch over every worker. (A cheap one may be served
    by worker 0 alone while the others start: see test_startup.py.)"""
    with MultiProcessMapDataZMQ(_src(40), 2, u.with_pid_slowly, strict=True, ordered=True) as df:
        assert df.worker_pids == []
        df.reset_state()
        pids = df.worker_pids
        assert len(pids) == 2 and os.getpid() not in pids
        out = list(df)
    assert [dp[0] for dp in out] == list(range(40))
    assert {dp[1] for dp in out} == set(pids)  # both workers got work
    assert df.worker_pids == []


def _sleep_40ms(dp: list) -> list:
    time.sleep(0.04)
    return dp


def test_slow_map_queues_little_work_per_worker() -> None:
    """Once a slow map is measured, the tasks in flight stay within ``QUEUE_SECONDS`` of its
    work per worker (at least ``FLOOR_TASKS_PER_WORKER`` tasks each), not ``buffer_size``: the
    upstream is read only that far ahead of the results yielded (so no worker holds a long
    queue at the end of a pass)."""
    src = _src(16)
    with MultiProcessMapDataZMQ(src, 2, _sleep_40ms, buffer_size=200, strict=True) as df:
        df.reset_state()
        ahead = [src.produced - k for k, _ in enumerate(df, 1)]
    assert len(ahead) == 16
    assert max(ahead) <= 2 * max(FLOOR_TASKS_PER_WORKER, math.ceil(QUEUE_SECONDS / 0.04))


def test_numpy_results_round_trip() -> None:
    def big(dp: list) -> list:
        return [dp[0], np.full((200, 100), dp[0], dtype=np.float64)]

    with MultiProcessMapDataZMQ(_src(10), 2, big, strict=True, ordered=True) as df:
        df.reset_state()
        out = list(df)
    assert [dp[0] for dp in out] == list(range(10))
    for i, dp in enumerate(out):
        assert dp[1].shape == (200, 100) and (dp[1] == i).all()


@pytest.mark.parametrize(
    "func, code, word", [(u.exit_on_3, 3, "exit code 3"), (u.sigkill_on_3, -9, "SIGKILL")]
)
@pytest.mark.parametrize("strict", [True, False])
def test_worker_death_in_map_func(func: object, code: int, word: str, strict: bool) -> None:
    with MultiProcessMapDataZMQ(_src(), 2, func, buffer_size=4, strict=strict) as df:  # type: ignore[arg-type]
        df.reset_state()
        pids = df.worker_pids
        t0 = time.monotonic()
        with pytest.raises(WorkerDied) as info:
            for _ in range(3):
                list(df)
        assert time.monotonic() - t0 < 5
    err = info.value
    assert err.pid in pids and err.exitcode == code
    assert str(err.pid) in str(err) and word in str(err)


@pytest.mark.timeout(15)
@pytest.mark.parametrize("ordered", [False, True])
def test_death_noticed_while_another_worker_keeps_mapping(tmp_path, ordered: bool) -> None:  # type: ignore[no-untyped-def]
    """Non-strict: the upstream repeats forever. One worker dies on its first 5; the other
    keeps mapping. The death must still be raised within a few seconds."""
    func = u.ClaimOnce(str(tmp_path / "claim"))
    with MultiProcessMapDataZMQ(_src(), 2, func, strict=False, ordered=ordered) as df:
        df.reset_state()
        t0 = time.monotonic()
        with pytest.raises(WorkerDied) as info:
            while time.monotonic() - t0 < 6:
                for _ in df:
                    pass
        assert time.monotonic() - t0 < 5
    assert info.value.exitcode == 5


# --- MultiProcessMapAndBatchDataZMQ ------------------------------------------------------


def _reference(func, n: int, bs: int, remainder: bool) -> list:  # type: ignore[no-untyped-def]
    ref = BatchData(MapData(_src(n), func), bs, remainder=remainder)
    ref.reset_state()
    return list(ref)


def _assert_same_batches(got: list, want: list) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert len(g) == len(w)
        for gc, wc in zip(g, w):
            assert isinstance(gc, np.ndarray)
            assert gc.dtype == wc.dtype and gc.shape == wc.shape
            np.testing.assert_array_equal(gc, wc)


def test_map_and_batch_same_arrays_as_batchdata() -> None:
    with MultiProcessMapAndBatchDataZMQ(_src(32), 2, u.to_pair, 4, strict=True, ordered=True) as df:
        assert len(df) == 8
        df.reset_state()
        for _ in range(2):
            _assert_same_batches(list(df), _reference(u.to_pair, 32, 4, False))


def test_map_and_batch_tensorpack_signature_non_strict() -> None:
    df = MultiProcessMapAndBatchDataZMQ(_src(30), 2, u.to_pair, 4)  # (ds, num_proc, map_func, batch_size)
    assert df.batch_size == 4 and df.buffer_size == 12 and df.strict is False
    with df:
        df.reset_state()
        assert len(df) == 7
        for _ in range(3):
            out = list(df)
            assert len(out) == 7
            assert all(b[0].shape == (4,) and b[1].shape == (4, 3) for b in out)


@pytest.mark.parametrize("ordered", [False, True])
def test_map_and_batch_full_batches_despite_drops(ordered: bool) -> None:
    with MultiProcessMapAndBatchDataZMQ(
        _src(30), 2, u.to_pair_drop_some, 4, strict=True, ordered=ordered
    ) as df:
        df.reset_state()
        for _ in range(2):
            out = list(df)
            # 27 survive: 6 full batches, the 3 left over are dropped (remainder=False)
            assert len(out) == 6
            assert all(b[0].shape == (4,) and b[1].shape == (4, 3) for b in out)
            values = [int(v) for b in out for v in b[0]]
            assert len(set(values)) == 24
            assert set(values) <= set(range(30)) - {1, 2, 9}
            for b in out:
                np.testing.assert_array_equal(b[1], np.repeat(b[0][:, None], 3, axis=1).astype(np.float32))


@pytest.mark.parametrize("ordered", [False, True])
def test_map_and_batch_remainder_at_end_of_strict_pass(ordered: bool) -> None:
    with MultiProcessMapAndBatchDataZMQ(
        _src(30), 2, u.to_pair_drop_some, 4, strict=True, remainder=True, ordered=ordered
    ) as df:
        assert len(df) == 8  # ceil(30 / 4): an upper bound when map_func drops
        df.reset_state()
        for _ in range(2):
            out = list(df)
            assert [len(b[0]) for b in out] == [4] * 6 + [3]
            values = sorted(int(v) for b in out for v in b[0])
            assert values == sorted(set(range(30)) - {1, 2, 9})  # each survivor exactly once


def test_map_and_batch_ordered_keeps_input_order_with_drops() -> None:
    """ordered=True promises output order == input order; with drops, the batches must be
    the ones BatchData(MapData(...)) makes."""
    with MultiProcessMapAndBatchDataZMQ(
        _src(30), 2, u.to_pair_drop_some, 4, strict=True, remainder=True, ordered=True
    ) as df:
        df.reset_state()
        got = list(df)
    _assert_same_batches(got, _reference(u.to_pair_drop_some, 30, 4, True))


def test_map_and_batch_remainder_without_drops() -> None:
    with MultiProcessMapAndBatchDataZMQ(
        _src(30), 2, u.to_pair, 4, strict=True, remainder=True, ordered=True
    ) as df:
        df.reset_state()
        _assert_same_batches(list(df), _reference(u.to_pair, 30, 4, True))


def test_map_and_batch_bad_batch_size() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        MultiProcessMapAndBatchDataZMQ(_src(), 2, u.to_pair, 0)


@pytest.mark.parametrize(
    "kwargs, word",
    [
        ({"num_proc": 0}, "num_proc"),
        ({"buffer_size": 0}, "buffer_size"),
        ({"seed": -3}, "seed"),
        ({"start_method": "threads"}, "start_method"),
    ],
)
def test_bad_arguments_rejected_at_construction(kwargs: dict, word: str) -> None:
    args = {"num_proc": 2, **kwargs}
    with pytest.raises((ValueError, TypeError), match=word) as info:
        MultiProcessMapDataZMQ(_src(), map_func=u.double, **args)
    assert "MultiProcessMapDataZMQ" in str(info.value)
