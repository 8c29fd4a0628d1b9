"""Start methods (dataflow/parallel/_pool.py): fork, forkserver and spawn run runners and
process maps over module-level flows/functions; under spawn/forkserver an unpicklable
map_func or flow is refused with a TypeError naming it, before any worker starts."""

from __future__ import annotations

import threading

import pytest

from dataflow import MultiProcessMapAndBatchDataZMQ, MultiProcessMapDataZMQ
from dataflow.parallel._runners import MultiProcessRunnerZMQ
from tests._leaks import live_children, pid_alive, wait_until
from tests.parallel import _util as u

pytestmark = pytest.mark.timeout(60)

METHODS = ["fork", "forkserver", "spawn"]


@pytest.mark.parametrize("method", METHODS)
def test_runner_with_start_method(method: str) -> None:
    with MultiProcessRunnerZMQ(u.Range(10), num_proc=2, start_method=method) as df:
        df.reset_state()
        pids = df.worker_pids
        for _ in range(2):
            out = list(df)
            assert len(out) == 10 and {dp[0] for dp in out} <= set(range(10))
    assert wait_until(lambda: not any(pid_alive(x) for x in pids), 5)  # type: ignore[arg-type]


# Under spawn and forkserver, dataflow pickles a worker's arguments and rebuilds them the same
# way (_pool.py, _worker.py): the runner runs under every start method; the maps and
# the refusals of unpicklable objects each take one of the two (fork is every other test's).
@pytest.mark.parametrize("method", ["forkserver"])
def test_process_map_with_start_method(method: str) -> None:
    df = MultiProcessMapDataZMQ(u.Range(20), 2, u.with_pid, strict=True, ordered=True, start_method=method)
    with df:
        df.reset_state()
        pids = df.worker_pids
        out = list(df)
    assert [dp[0] for dp in out] == list(range(20))
    assert {dp[1] for dp in out} <= set(pids)
    assert wait_until(lambda: not any(pid_alive(x) for x in pids), 5)  # type: ignore[arg-type]


@pytest.mark.parametrize("method", ["spawn"])
def test_map_and_batch_with_start_method(method: str) -> None:
    with MultiProcessMapAndBatchDataZMQ(
        u.Range(12), 2, u.to_pair, 4, strict=True, ordered=True, start_method=method
    ) as df:
        df.reset_state()
        out = list(df)
    assert [b[0].tolist() for b in out] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]


@pytest.mark.parametrize("method", ["forkserver"])
def test_errors_cross_spawned_workers(method: str) -> None:
    with MultiProcessMapDataZMQ(u.Range(10), 2, u.fail_on_3, strict=True, start_method=method) as df:
        df.reset_state()
        with pytest.raises(u.MyError) as info:
            list(df)
    u.check_user_error(info.value, u.MyError, "bad value 3", "fail_on_3", "MultiProcessMapDataZMQ")


@pytest.mark.parametrize("method", ["spawn"])
def test_unpicklable_map_func_refused_before_workers_start(method: str) -> None:
    before = live_children()
    df = MultiProcessMapDataZMQ(u.Range(10), 2, lambda dp: dp, strict=True, start_method=method)
    with pytest.raises(TypeError, match="<lambda>") as info:
        df.reset_state()
    assert "map_func" in str(info.value) and method in str(info.value)
    assert df.worker_pids == []
    assert live_children() - before == set()
    df.close()


@pytest.mark.parametrize(
    "method, flow", [("forkserver", u.LockFlow(5)), ("spawn", u.GeneratorFlow(5))], ids=["lock", "generator"]
)
def test_unpicklable_flow_refused_before_workers_start(method: str, flow: u.Range) -> None:
    before = live_children()
    df = MultiProcessRunnerZMQ(flow, num_proc=2, start_method=method)
    with pytest.raises(TypeError, match=type(flow).__name__) as info:
        df.reset_state()
    assert "flow" in str(info.value)
    assert df.worker_pids == []
    assert live_children() - before == set()
    df.close()


def test_unpicklable_objects_fine_with_fork() -> None:
    lock = threading.Lock()

    def closure(dp: list) -> list:
        with lock:
            return [dp[0] + 1]

    with MultiProcessMapDataZMQ(u.Range(6), 2, closure, strict=True, ordered=True, start_method="fork") as df:
        df.reset_state()
        assert list(df) == [[i + 1] for i in range(6)]
    with MultiProcessRunnerZMQ(u.LockFlow(4), num_proc=1, start_method="fork") as df:
        df.reset_state()
        assert list(df) == [[i] for i in range(4)]


@pytest.mark.parametrize("cls", ["runner", "map"])
def test_bad_start_method_raises_value_error(cls: str) -> None:
    with pytest.raises(ValueError, match="start_method") as info:
        if cls == "runner":
            df = MultiProcessRunnerZMQ(u.Range(3), num_proc=1, start_method="thread")
        else:
            df = MultiProcessMapDataZMQ(u.Range(3), 1, u.double, start_method="thread")
        df.reset_state()
        df.close()
    assert "'thread'" in str(info.value)
