"""A training job is preempted more than once: its pipeline resumed from a checkpoint, then
checkpointed and resumed again, three times in a row, gives exactly the uninterrupted stream.
Pipelines drawn by hypothesis (shuffled source, per-item random map, shuffle buffer, sharding,
batching, a thread map or a 2-process map) and cut anywhere in two epochs, within an epoch,
across epoch boundaries, and twice at the same place; and a 2-process runner, whose workers'
streams each go on exactly."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, example, given, reject, settings
from hypothesis import strategies as st

import dataflow as D
from tests.checkpoint._flows import tag_worker
from tests.checkpoint._harness import check_chain, positions, reference_run, worker_reference
from tests.checkpoint._spec_pipelines import build, specs

EPOCHS = 2
_CUTS = st.lists(st.floats(0, 1), min_size=3, max_size=3)  # shares of the run: examples stay valid
_SETTINGS = {"deadline": None, "suppress_health_check": list(HealthCheck), "database": None,
             "phases": (Phase.explicit, Phase.generate)}  # no shrinking: a failure names its cuts


def _chain(spec: dict[str, Any], at: list[float]) -> None:
    try:
        reference = reference_run(lambda: build(spec), EPOCHS)
    except ValueError:  # a batch larger than a shard without remainder: refused, rightly
        reject()
    where = positions([len(ep) for ep in reference])
    cuts = [int(f * (len(where) - 1)) for f in at]
    check_chain(lambda: build(spec), cuts, EPOCHS, reference=reference)


_SHUFFLED = {"n": 17, "shuffle": True, "aug": True, "buffer": 5, "parallel": "none", "workers": 2,
             "batch": 4, "remainder": True, "shard": 0}


@pytest.mark.timeout(300)
@settings(max_examples=25, **_SETTINGS)
@given(spec=specs(parallel=("none",)), at=_CUTS)
# DataFromList(shuffle=True) alone; a shuffle buffer alone
@example(spec={**_SHUFFLED, "batch": 0, "buffer": 0, "aug": False}, at=[0.2, 0.6, 0.7])
@example(spec={**_SHUFFLED, "shuffle": False, "aug": False, "batch": 0}, at=[0.2, 0.6, 0.7])
@example(spec=_SHUFFLED, at=[0.1, 0.55, 0.9])  # both, batched
def test_pipeline_preempted_three_times_gives_the_uninterrupted_stream(
    spec: dict[str, Any], at: list[float]
) -> None:
    _chain(spec, at)


@pytest.mark.timeout(300)
@settings(max_examples=3, **_SETTINGS)
@given(spec=specs(parallel=("thread", "fork"), workers=(2,), max_n=20), at=_CUTS)
# MultiProcessMapDataZMQ(num_proc=2), shuffled and not
@example(spec={**_SHUFFLED, "parallel": "fork"}, at=[0.1, 0.55, 0.9])
@example(spec={**_SHUFFLED, "shuffle": False, "aug": False, "buffer": 0, "parallel": "fork"},
         at=[0.6, 0.7, 0.8])
def test_parallel_pipeline_preempted_three_times_gives_the_uninterrupted_stream(
    spec: dict[str, Any], at: list[float]
) -> None:
    """The same through an ordered map of 2 workers (threads or processes)."""
    _chain(spec, at)


def _runner() -> D.DataFlow:
    """2 processes, each running a copy of: shuffled source, shuffle buffer, batch, tag."""
    items = [[i, np.full(2, i, np.int16)] for i in range(13)]
    flow = D.DataFromList(items, shuffle=True, seed=11).shuffle(4, seed=7)
    flow = flow.batch(3, remainder=True).map(tag_worker)
    return D.MultiProcessRunnerZMQ(flow, num_proc=2, timeout=60)


def _worker_of(c: Any) -> Any:
    return c[1][-1]


@pytest.mark.timeout(300)
def test_process_runner_preempted_three_times_continues_every_worker_stream() -> None:
    """MultiProcessRunnerZMQ(num_proc=2) over a shuffled, shuffle-buffered, batched flow: cut
    in both epochs and between them, each worker's stream goes on exactly and every epoch keeps
    its length."""
    reference = worker_reference(_runner, EPOCHS, _worker_of, workers=2)
    where = positions([len(ep) for ep in reference[:EPOCHS]])
    n = len(reference[0])
    for cuts in ([(0, 2, True), (1, 0, False), (1, 3, True)], [(0, n - 1, True), (0, n, True), (1, 1, True)]):
        at = [where.index(c) for c in cuts]
        check_chain(_runner, at, EPOCHS, reference=reference, worker_of=_worker_of)


def _ordered_maps() -> dict[str, Any]:
    from tests.checkpoint._flows import double, drop_some

    def src() -> D.DataFlow:
        return D.DataFromList([[i, np.full(2, i, np.int16)] for i in range(9)], shuffle=False)

    return {
        "MultiThreadMapData": lambda: D.MultiThreadMapData(src(), 2, drop_some, strict=True, ordered=True,
                                                           timeout=60),
        "MultiProcessMapDataZMQ": lambda: D.MultiProcessMapDataZMQ(src(), 2, drop_some, strict=True,
                                                                   ordered=True, timeout=60),
        "MultiProcessMapData": lambda: D.MultiProcessMapData(src(), 2, double, ordered=True, timeout=60),
    }


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", sorted(_ordered_maps()))
def test_ordered_map_over_a_plain_source_resumed_and_saved_again_in_a_later_epoch(name: str) -> None:
    """An ordered 2-worker map (strict with dropped results, or tensorpack's endless one) over
    an unshuffled source: resumed in epoch 1 and saved again there, or resumed between epochs
    and saved again, the next resume still continues the uninterrupted stream."""
    build = _ordered_maps()[name]
    reference = reference_run(build, EPOCHS)
    where = positions([len(ep) for ep in reference])
    for cuts in ([(1, 2, True), (1, 3, True)], [(1, 0, False), (1, 1, True)]):
        check_chain(build, [where.index(c) for c in cuts], EPOCHS, reference=reference)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", ["ThreadPrefetchData", "MultiThreadMapData", "LocallyShuffleData"])
def test_flow_saved_again_before_the_resumed_epoch_pulls_a_datapoint(name: str) -> None:
    """Resumed, then checkpointed again right after ``iter()`` (before the first ``next()``),
    then resumed: what the first resume had read ahead or buffered is not lost."""
    def src() -> D.DataFlow:
        return D.DataFromList([[i, np.full(2, i, np.int16)] for i in range(10)], shuffle=True, seed=3)

    build = {
        "ThreadPrefetchData": lambda: D.ThreadPrefetchData(src(), 3),
        "MultiThreadMapData": lambda: D.MultiThreadMapData(src(), 2, lambda dp: dp, strict=True, timeout=60),
        "LocallyShuffleData": lambda: D.LocallyShuffleData(src(), 4, seed=5),
    }[name]
    reference = reference_run(build, EPOCHS)
    where = positions([len(ep) for ep in reference])
    for cut in ((0, 6, True), (1, 3, True)):
        check_chain(build, [where.index(cut)] * 3, EPOCHS, reference=reference)
