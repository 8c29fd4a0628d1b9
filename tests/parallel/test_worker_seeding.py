"""Seeding of worker processes (dataflow/_seeding.py as used by dataflow/parallel): each worker
gets a distinct stream, reproducible with ``seed=`` or ``dataflow.set_seed``."""

from __future__ import annotations

import tempfile
import time

import pytest

from dataflow import _seeding as seeding
from dataflow.parallel._maps import MultiProcessMapDataZMQ
from dataflow.parallel._runners import MultiProcessRunnerZMQ
from tests.helpers import ListFlow
from tests.parallel import _probes as p
from tests.parallel import _util as u

pytestmark = pytest.mark.timeout(60)

K = 5


def _runner_streams(
    flow_seed: int | None = None, runner_seed: int | None = None, start_method: str | None = None
) -> frozenset[tuple]:
    """Each worker's first K values of ``self.rng`` (via ``[pid, value]`` datapoints)."""
    rows: list[list] = []
    df = MultiProcessRunnerZMQ(
        u.PidRng(seed=flow_seed), num_proc=2, seed=runner_seed, start_method=start_method
    )
    with df:
        df.reset_state()
        pids = set(df.worker_pids)
        it = iter(df)
        # until each worker gave K rows: a spawned worker can start seconds after the other,
        # so wait on a deadline, keeping only the first K rows of each worker
        counts = dict.fromkeys(pids, 0)
        deadline = time.monotonic() + 30
        while min(counts.values()) < K and time.monotonic() < deadline:
            row = next(it)
            if counts.get(row[0], K) < K:
                counts[row[0]] += 1
                rows.append(row)
        it.close()
    streams = p.per_worker(rows, 0, 1, K)
    assert len(streams) == 2, "both workers must have produced"
    return streams


@pytest.mark.parametrize("where", ["flow", "runner"])
def test_runner_over_rngdataflow_is_reproducible(where: str) -> None:
    def run(seed: int) -> frozenset[tuple]:
        return _runner_streams(**({"flow_seed": seed} if where == "flow" else {"runner_seed": seed}))

    a, b, c = run(123), run(123), run(124)
    assert a == b  # same seed: the same per-worker streams
    assert a != c  # another seed: others
    s1, s2 = sorted(a)
    assert s1 != s2  # the two workers draw distinct streams
    assert not set(s1) & set(s2)


def test_runner_with_set_seed_is_reproducible() -> None:
    seeding.set_seed(77)
    a = _runner_streams()
    seeding.set_seed(77)
    b = _runner_streams()
    seeding.set_seed(78)
    c = _runner_streams()
    seeding.set_seed(None)
    assert a == b and a != c
    assert len(set(sorted(a)[0]) & set(sorted(a)[1])) == 0


def test_runner_without_seed_workers_differ_and_runs_differ() -> None:
    a, b = _runner_streams(), _runner_streams()
    s1, s2 = sorted(a)
    assert s1 != s2
    assert a != b


# spawn and forkserver workers get their seed the same way (resolved in the parent,
# dataflow/parallel/_pool.py): each test takes one of them
@pytest.mark.parametrize("method", ["spawn"])
def test_runner_seeds_with_other_start_methods(method: str) -> None:
    a, b = (
        _runner_streams(runner_seed=3, start_method=method),
        _runner_streams(runner_seed=3, start_method=method),
    )
    assert a == b
    assert a == _runner_streams(runner_seed=3)  # the same streams as under fork
    s1, s2 = sorted(a)
    assert not set(s1) & set(s2)


@pytest.mark.parametrize("method", ["forkserver"])
def test_set_seed_reaches_spawned_workers(method: str) -> None:
    """``set_seed`` in the parent must make spawn/forkserver workers reproducible too (the
    runner's ``seed`` default is "set_seed's"); such workers do not inherit the parent's
    module state, so the runner has to pass it."""
    seeding.set_seed(21)
    a = _runner_streams(start_method=method)
    seeding.set_seed(21)
    b = _runner_streams(start_method=method)
    seeding.set_seed(21)
    ma = _map_values(start_method=method)
    seeding.set_seed(21)
    mb = _map_values(start_method=method)
    seeding.set_seed(None)
    assert a == b, "runner workers ignore set_seed"
    assert ma == mb, "map workers ignore set_seed"


def _map_values(**kwargs: object) -> tuple[frozenset[tuple], frozenset[tuple]]:
    """Per-worker first K values of np.random.random() and random.random() in map workers."""
    src = ListFlow([[i] for i in range(40)])
    with tempfile.TemporaryDirectory() as started:
        func = u.AfterAllStarted(started, 2, u.global_random_map)
        with MultiProcessMapDataZMQ(src, 2, func, strict=True, ordered=True, **kwargs) as df:  # type: ignore[arg-type]
            df.reset_state()
            rows = list(df)
    assert [r[0] for r in rows] == list(range(40))
    np_streams = p.per_worker(rows, 1, 2, K)
    py_streams = p.per_worker(rows, 1, 3, K)
    assert len(np_streams) == len(py_streams) == 2, "both workers must have mapped"
    return np_streams, py_streams


def test_map_workers_draw_different_global_random_values() -> None:
    for streams in _map_values():  # no seed at all: still different across workers
        s1, s2 = sorted(streams)
        assert s1 != s2 and not set(s1) & set(s2)


def test_map_workers_reproducible_with_seed() -> None:
    a, b, c = _map_values(seed=5), _map_values(seed=5), _map_values(seed=6)
    assert a == b
    assert a[0] != c[0] and a[1] != c[1]
    for streams in a:
        s1, s2 = sorted(streams)
        assert s1 != s2


def test_map_workers_reproducible_with_set_seed() -> None:
    seeding.set_seed(11)
    a = _map_values()
    seeding.set_seed(11)
    b = _map_values()
    seeding.set_seed(12)
    c = _map_values()
    seeding.set_seed(None)
    assert a == b and a != c
    d, e = _map_values(), _map_values()  # back to fresh entropy
    assert d != e
