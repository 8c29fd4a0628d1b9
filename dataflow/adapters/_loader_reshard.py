"""Changing the number of ranks of a job whose ranks read in torchdata ``StatefulDataLoader``
workers: :func:`reshard_loader` (exported by :mod:`dataflow.adapters.torch`).

A ``StatefulDataLoader`` over ``to_torch(rank_flow)`` saves, for each of its workers, the
state of that worker's flow (``rank_flow.shard(num_workers, worker, equal=False)``) as of the
last batch the loader yielded from it. Those states, from every rank, are what
:func:`dataflow.checkpoint.reshard` merges; this module only reads them out of the loader's
state and writes the merged one back in the loader's layout. It needs no torch: the loader's
state is plain data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._checks import check_int
from .._errors import StateError
from ..checkpoint import reshard

__all__ = ["reshard_loader"]

_FRESH_FETCHER = {"dataset_iter_state": None, "fetcher_ended": False}


def reshard_loader(
    states: Sequence[Mapping[str, Any]], num_shards: int, num_workers: int | None = None
) -> dict[str, Any]:
    """One ``StatefulDataLoader`` state for every rank of ``num_shards`` new ranks, from the
    ``state_dict()`` of every old rank's loader over ``to_torch(rank_flow)`` (``shard=True``),
    all saved at the same step.

    The new loaders have ``num_workers`` workers (default: as many as the old ones; at least
    one, since the states are workers' states) and each new rank's workers split its part
    of what no old worker had consumed (see :func:`dataflow.checkpoint.reshard` for which
    pipelines merge). Save with ``snapshot_every_n_steps=1`` (torchdata's default): with a
    longer interval a loader's worker states are older than what it yielded, and this
    raises :class:`~dataflow._errors.StateError` rather than yield those batches twice.
    """
    num_shards = check_int("reshard_loader", "num_shards", num_shards)
    if not states:
        raise StateError("reshard_loader: give the loader states of all ranks (got none)")
    snapshots = [_snapshot(rank, st) for rank, st in enumerate(states)]
    finished = {bool(st.get("_iterator_finished", False)) for st in states}
    if len(finished) != 1:
        raise StateError(
            "reshard_loader: some loaders had ended their epoch and others not; save all ranks at "
            "the same step"
        )
    flows = [w["dataset_state"] for snap in snapshots for w in snap["_worker_snapshots"].values()]
    merged = reshard(flows, num_shards)
    old_workers = len(snapshots[0]["_worker_snapshots"])
    workers = old_workers if num_workers is None else check_int("reshard_loader", "num_workers", num_workers)
    main = dict(snapshots[0]["_main_snapshot"])
    main.update(_num_workers=workers, _sampler_iter_yielded=0)
    worker_snapshots = {
        f"worker_{w}": {"worker_id": w, "dataset_state": merged, "fetcher_state": dict(_FRESH_FETCHER)}
        for w in range(workers)
    }
    snapshot = {
        "_snapshot_step": 0,
        "_last_yielded_worker_id": workers - 1,  # the next batch comes from worker 0
        "_main_snapshot": main,
        "_worker_snapshots": worker_snapshots,
    }
    return {"_snapshot": snapshot, "_steps_since_snapshot": 0, "_iterator_finished": finished.pop()}


def _snapshot(rank: int, state: Mapping[str, Any]) -> Mapping[str, Any]:
    """The checked snapshot of old rank ``rank``'s loader state."""
    snap = state.get("_snapshot") if isinstance(state, Mapping) else None
    if not isinstance(snap, Mapping):
        snap = {}
    workers = snap.get("_worker_snapshots")
    if not isinstance(workers, Mapping) or not workers or not isinstance(snap.get("_main_snapshot"), Mapping):
        raise StateError(
            f"reshard_loader: state {rank} is not the state_dict() of a StatefulDataLoader with "
            f"worker processes (num_workers >= 1); for a flow iterated in the rank's own process, "
            f"merge its states with dataflow.checkpoint.reshard"
        )
    if state.get("_steps_since_snapshot", 0):
        raise StateError(
            f"reshard_loader: loader {rank} yielded {state['_steps_since_snapshot']} batches after "
            f"its workers' last saved states (snapshot_every_n_steps > 1), so what its workers "
            f"consumed is not known exactly; save with snapshot_every_n_steps=1"
        )
    for key, worker in workers.items():
        if not isinstance(worker, Mapping) or not isinstance(worker.get("dataset_state"), Mapping):
            raise StateError(
                f"reshard_loader: loader {rank}'s {key} has no dataflow state (is its dataset "
                f"to_torch(flow)?)"
            )
    return snap
