"""Checkpoints of the parallel flows: maps (processes and threads), map-and-batch, runners,
prefetch; exact resume, elastic worker counts, nothing lost or duplicated, clear refusals."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import dataflow as D
from dataflow import _seeding as seeding
from tests.checkpoint._harness import check_resume

pytestmark = pytest.mark.timeout(240)


def _src(n: int = 12) -> D.DataFlow:
    return D.DataFromList([[i] for i in range(n)], shuffle=False)


def double(dp: list[int]) -> list[int]:
    return [dp[0] * 2]


def drop_some(dp: list[int]) -> list[int] | None:
    return None if dp[0] % 3 == 1 else [dp[0] * 2]


def noisy(dp: list[int], rng: np.random.Generator) -> list[Any]:
    return [dp[0], float(rng.random())]


def _pmap(n: int, func: Callable[..., Any] = double, **kw: Any) -> D.DataFlow:
    kw.setdefault("strict", True)
    kw.setdefault("ordered", True)
    return D.MultiProcessMapDataZMQ(_src(), n, func, timeout=60, **kw)


def _tmap(n: int, func: Callable[..., Any] = double, **kw: Any) -> D.DataFlow:
    return D.MultiThreadMapData(_src(), n, func, strict=True, ordered=True, timeout=60, **kw)


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_ordered_process_map_resumes_exactly(start_method: str) -> None:
    """A strict ordered process map resumes at every cut to the uninterrupted stream."""
    cuts = 10 if start_method == "fork" else 2  # spawn: the same state, only sent pickled
    check_resume(lambda: _pmap(2, drop_some, start_method=start_method), epochs=2, max_cuts=cuts)


@pytest.mark.parametrize(
    "build",
    [
        lambda: _tmap(2, drop_some),
        lambda: _pmap(2, noisy, item_rng=True, seed=7),
        lambda: D.MultiProcessMapAndBatchDataZMQ(_src(13), 2, drop_some, 3, strict=True, ordered=True,
                                                 remainder=True, timeout=60),
        lambda: D.ThreadPrefetchData(_src(20).shuffle(5, seed=1), 3, timeout=60),
        lambda: D.BatchData(_pmap(2), 5, remainder=True),
    ],
    ids=["thread_map", "item_rng", "map_and_batch", "prefetch", "batch_of_map"],
)
def test_parallel_stage_resumes_exactly(build: Callable[[], D.DataFlow]) -> None:
    """Every ordered parallel stage resumes exactly, inside an epoch and between epochs."""
    check_resume(build, epochs=2, max_cuts=10)


def _cut(df: D.DataFlow, k: int) -> tuple[list[Any], dict[str, Any]]:
    df.reset_state()
    it = iter(df)
    head = [next(it) for _ in range(k)]
    state = df.state_dict()
    df.close()
    return head, state


def _rest(df: D.DataFlow, state: dict[str, Any], epochs: int = 2) -> list[list[Any]]:
    df.load_state_dict(state)
    df.reset_state()
    try:
        return [list(df) for _ in range(epochs)]
    finally:
        df.close()


@pytest.mark.parametrize(
    ("saved", "resumed"),
    [(lambda: _pmap(2, noisy, item_rng=True, seed=1), lambda: _pmap(1, noisy, item_rng=True, seed=1)),
     (lambda: _pmap(1, noisy, item_rng=True, seed=1), lambda: _pmap(3, noisy, item_rng=True, seed=1)),
     (lambda: _pmap(2, noisy, item_rng=True, seed=1), lambda: _tmap(2, noisy, item_rng=True, seed=1))],
    ids=["2_to_1_workers", "1_to_3_workers", "processes_to_threads"],
)
def test_ordered_map_resumes_at_another_worker_count(
    saved: Callable[[], D.DataFlow], resumed: Callable[[], D.DataFlow]
) -> None:
    """Elastic resume: the state holds inputs, not workers, so an ordered map saved with N
    workers resumes identically with M (and with per-item RNGs, identical random draws)."""
    full = saved()
    full.reset_state()
    reference = [list(full) for _ in range(2)]
    full.close()
    for k in (0, 5, 12):
        head, state = _cut(saved(), k)
        rest = _rest(resumed(), state)
        assert head + rest[0] == reference[0], f"cut at {k}"
        assert rest[1] == reference[1]


@pytest.mark.parametrize("kind", ["process", "thread"])
def test_unordered_map_loses_and_repeats_nothing(kind: str) -> None:
    """An unordered map's resumed epoch has, with what came before the checkpoint, every
    datapoint of the epoch exactly once (the order is the workers')."""
    def build() -> D.DataFlow:
        if kind == "process":
            return D.MultiProcessMapDataZMQ(_src(30), 2, drop_some, strict=True, ordered=False, timeout=60)
        return D.MultiThreadMapData(_src(30), 2, drop_some, strict=True, ordered=False, timeout=60)

    expected = Counter(tuple(out) for i in range(30) if (out := drop_some([i])) is not None)
    for k in (0, 3, 11, len(expected)):
        head, state = _cut(build(), k)
        rest = _rest(build(), state)
        assert Counter(tuple(x) for x in head + rest[0]) == expected, f"cut at {k}"
        assert Counter(tuple(x) for x in rest[1]) == expected


class HoldTask:
    """Maps ``[i] -> [i]``; once ``hold`` names a chunk of 4 (its first datapoint), that
    chunk's datapoints wait until ``go`` is set (at most 10 s)."""

    def __init__(self) -> None:
        self.hold: int | None = None
        self.go = threading.Event()

    def __call__(self, dp: list[int]) -> list[int]:
        if self.hold is not None and self.hold <= dp[0] < self.hold + 4:
            self.go.wait(10)
        return dp


def test_unordered_resume_skips_what_its_partial_task_delivered_whatever_finishes_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A checkpoint taken while a task of 4 outputs is half yielded resumes it skipping those
    2 outputs. An unordered map must skip them from that task even when another task's result
    comes back first (here: forced, the partial task waits until the consumer has received
    another result); skipping the first result received instead repeated the 2 delivered
    datapoints and lost 2 others."""
    func = HoldTask()

    def build() -> D.DataFlow:
        return D.MultiThreadMapData(
            _src(40), 2, func, buffer_size=8, strict=True, ordered=False, chunk=4, timeout=60
        )

    df = build()
    df.reset_state()
    it = iter(df)
    head = [next(it), next(it)]
    state = df.state_dict()
    it.close()
    df.close()
    first = head[0][0] // 4 * 4  # the released task whose outputs were being yielded
    assert all(first <= dp[0] < first + 4 for dp in head)

    receive = D.MultiThreadMapData._receive

    def receive_then_release(self: Any) -> Any:
        task_id, kind, payload = receive(self)
        if not any(func.hold <= dp[0] < func.hold + 4 for dp in payload):
            func.go.set()  # another task's result came first: now the partial task may finish
        return task_id, kind, payload

    monkeypatch.setattr(D.MultiThreadMapData, "_receive", receive_then_release)
    func.hold = first
    df = build()
    df.reset_state()
    df.load_state_dict(state)
    rest = list(df)
    df.close()
    assert func.go.is_set()
    assert Counter(dp[0] for dp in head + rest) == Counter(range(40))


def test_non_strict_map_continues_its_endless_stream() -> None:
    """tensorpack's default (strict=False): in-flight results carry over epochs; a resumed
    ordered one yields the same stream, epoch by epoch."""
    check_resume(lambda: _pmap(2, double, strict=False), epochs=3, max_cuts=12)


def _tagged(dp: list[int]) -> list[Any]:
    return [dp[0], seeding._worker_key[-1] if seeding._worker_key else -1]


def _thread_tagged(dp: list[int]) -> list[Any]:
    return [dp[0], __import__("threading").current_thread().name]


def _thread_flow() -> D.DataFlow:
    return D.DataFromList([[i] for i in range(10)], shuffle=True, seed=5).map(_thread_tagged)


def _runner(kind: str) -> D.DataFlow:
    flow = D.DataFromList([[i] for i in range(10)], shuffle=True, seed=5).map(_tagged)
    if kind == "process":
        return D.MultiProcessRunnerZMQ(flow, num_proc=2, timeout=60)
    return D.MultiThreadRunner(_thread_flow, 4, 2, timeout=60)


def _per_worker(items: list[Any]) -> dict[Any, list[int]]:
    out: dict[Any, list[int]] = {}
    for value, worker in items:
        out.setdefault(worker, []).append(value)
    return out


@pytest.mark.parametrize("kind", ["process", "thread"])
def test_runner_resumes_every_worker_stream(kind: str) -> None:
    """Each worker's (thread's) stream continues exactly where the consumer stopped taking
    from it: what a worker had sent but the consumer not yielded comes first, nothing is lost
    or repeated, and epochs keep len(ds) datapoints."""
    full = _runner(kind)
    full.reset_state()
    reference: dict[Any, list[int]] = {}
    deadline = time.monotonic() + 120  # a worker forked late, on a busy machine, still shows
    while time.monotonic() < deadline:  # until every worker's stream is long enough
        for value, worker in full:
            stream = reference.setdefault(worker, [])
            if len(stream) < 100:  # a resumed chain takes at most 40 of one worker's stream
                stream.append(value)
        if len(reference) == 2 and min(len(v) for v in reference.values()) >= 40:
            break
    full.close()
    for k in (0, 7, 10):
        head, state = _cut(_runner(kind), k)
        rest = _rest(_runner(kind), state, epochs=3)
        assert [len(ep) for ep in rest] == [10 - k, 10, 10]
        got = _per_worker(head + [x for ep in rest for x in ep])
        for worker, values in got.items():
            assert worker in reference and len(values) <= len(reference[worker]), (worker, k)
            assert values == reference[worker][: len(values)], f"worker {worker}, cut at {k}"


def test_runner_needs_the_same_worker_count() -> None:
    """A runner's workers run their own copies of the flow: another num_proc is refused,
    saying why and what resumes at any worker count."""
    _, state = _cut(_runner("process"), 3)
    other = D.MultiProcessRunnerZMQ(D.DataFromList([[i] for i in range(10)], shuffle=False), num_proc=3)
    with pytest.raises(D.StateError, match="num_proc"):
        other.load_state_dict(state)


def test_runner_over_a_flow_without_state_names_it() -> None:
    """A worker whose flow cannot save its position makes state_dict() raise that error, in
    the consumer, as its own type."""
    flow = D.DataFromQueue(__import__("queue").Queue())
    with D.MultiProcessRunnerZMQ(D.DataFromList([[1]], shuffle=False).map(double), num_proc=1) as ok:
        ok.reset_state()
        next(iter(ok))
        assert ok.state_dict()["root"]["state"]["num_proc"] == 1
    endless = D.DataFromGenerator(lambda: ([i] for i in __import__("itertools").count()))
    runner = D.MultiProcessRunnerZMQ(endless, num_proc=1, timeout=60)
    with runner:
        runner.reset_state()
        next(iter(runner))
        with pytest.raises(D.StateUnsupportedError, match="DataFromGenerator"):
            runner.state_dict()
    del flow


def test_remote_stream_refuses_to_checkpoint() -> None:
    """A remote stream cannot be rewound: RemoteDataZMQ says so and points to the sender."""
    remote = D.RemoteDataZMQ("tcp://127.0.0.1:1")
    with pytest.raises(D.StateUnsupportedError, match="sender"):
        remote.state_dict()
