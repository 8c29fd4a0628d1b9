"""The bookkeeping that rebuilds a dead RayRunner worker: runs of equal pulls, and a
snapshot that replaces the start and drops the pulls logged before it."""

from __future__ import annotations

from dataflow.on_ray._restart import Lineage


def test_equal_pulls_are_one_run_and_the_replay_lists_them_in_order() -> None:
    lin = Lineage((0, False, None))
    for _ in range(3):
        lin.record(1, 4, 4, False)
    lin.record(1, 4, 2, True)
    lin.record(2, 4, 4, False)
    assert lin.replay() == [(1, 4, 4, False, 3), (1, 4, 2, True, 1), (2, 4, 4, False, 1)]


def test_an_adopted_snapshot_drops_the_pulls_before_it() -> None:
    lin = Lineage((0, False, None))
    for _ in range(3):
        lin.record(1, 4, 4, False)
    lin.adopt((1, True, {"root": {}}))
    assert lin.start == (1, True, {"root": {}}) and lin.replay() == []
    lin.record(2, 4, 4, False)
    assert lin.replay() == [(2, 4, 4, False, 1)]


def test_a_snapshot_the_flow_could_not_take_keeps_the_old_start_and_stops_asking() -> None:
    lin = Lineage((0, False, None))
    lin.record(1, 4, 4, False)
    lin.record(1, 4, 4, False)
    lin.adopt(None)
    assert lin.start == (0, False, None) and not lin.snapshots
    assert lin.replay() == [(1, 4, 4, False, 2)]
