"""Checkpoints of the Ray flows: exact resume with the shared harness, and states that move
between the process map and the Ray map (one state kind)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import dataflow as D
from dataflow.on_ray import RayMapData, RayRunner
from tests.checkpoint._harness import check_resume

from . import _funcs

pytest.importorskip("ray")

pytestmark = pytest.mark.timeout(240)


def _src(n: int = 12) -> D.DataFlow:
    return D.DataFromList([[i] for i in range(n)], shuffle=False)


def _raymap(**kw: Any) -> D.DataFlow:
    kw.setdefault("strict", True)
    return RayMapData(_src(), 2, _funcs.drop_odd, 6, chunk=2, timeout=60, **kw)


# RayMapData passes strict and item_rng to the parallel map base class and has no code of
# its own for either (its part is the transport: chunks and their RNG keys to actors, chunk
# sizes measured with "auto"); their resume is checked on the process maps, which share the
# state code (tests/parallel/test_checkpoint.py: test_parallel_stage_resumes_exactly[item_rng],
# test_non_strict_map_continues_its_endless_stream), and tests/ray/test_maps.py checks that
# Ray's item_rng gives the threads' randomness and that non-strict epochs lose nothing
@pytest.mark.parametrize(
    "build",
    [
        lambda: _raymap(),
        lambda: RayMapData(_src(), 2, _funcs.drop_odd, strict=True, timeout=60),  # chunk, buffer "auto"
        lambda: RayRunner(_src(10).shuffle(4, seed=2), 2, shard=True, chunk=3, timeout=60),
        lambda: RayRunner(_src(7), 2, chunk=3, timeout=60),
    ],
    ids=["strict_map", "auto_map", "sharded_runner", "copies_runner"],
)
def test_ray_stage_resumes_exactly(build: Callable[[], D.DataFlow]) -> None:
    # re-saving right after a load is stage-independent (dataflow._state keeps the loaded
    # node) and checked on the process maps; here it would only add actor start-ups. Four
    # cuts spread over the run (each starts two sets of actors); every cut is checked on the
    # process maps, which share the state code
    check_resume(build, epochs=2, max_cuts=4, resave_every=0)


def _cut(df: D.DataFlow, k: int) -> tuple[list[Any], dict[str, Any]]:
    df.reset_state()
    it = iter(df)
    head = [next(it) for _ in range(k)]
    state = df.state_dict()
    df.close()
    return head, state


def _rest(df: D.DataFlow, state: dict[str, Any]) -> list[list[Any]]:
    df.load_state_dict(state)
    df.reset_state()
    try:
        return [list(df) for _ in range(2)]
    finally:
        df.close()


@pytest.mark.parametrize("direction", ["processes_to_ray", "ray_to_processes"])
def test_a_map_state_moves_between_processes_and_ray(direction: str) -> None:
    def pmap() -> D.DataFlow:
        return D.MultiProcessMapDataZMQ(_src(), 2, _funcs.double, 6, True, ordered=True, chunk=2, timeout=60)

    def rmap() -> D.DataFlow:
        return RayMapData(_src(), 3, _funcs.double, 6, True, chunk=3, timeout=60)

    saved, resumed = (pmap, rmap) if direction == "processes_to_ray" else (rmap, pmap)
    reference = [[[2 * i] for i in range(12)]] * 2
    head, state = _cut(saved(), 5)
    rest = _rest(resumed(), state)
    assert head + rest[0] == reference[0]
    assert rest[1] == reference[1]
