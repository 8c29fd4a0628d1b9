"""Working with saved pipeline states: JSON, and changing the number of data-parallel ranks.

A state from :meth:`DataFlow.state_dict` is plain data (see :mod:`dataflow._state`): it goes
into a ``torch.save`` checkpoint as it is (``torch.load`` accepts it with its default
``weights_only=True``), into Orbax or JSON with :func:`state_to_json`, into our own files
with :func:`dataflow.codec.dumps`.

:func:`reshard` turns the states that all ranks of an index-sharded pipeline saved at the same
step into one state that every rank of a new, different number of ranks loads: the rest of the
interrupted epoch is what no old rank had consumed, split among the new ranks.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ._checks import check_int
from ._errors import StateError
from ._state import FORMAT, VERSION

__all__ = ["reshard", "state_from_json", "state_to_json"]


def _encode(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"__bytes__": base64.b64encode(value).decode("ascii")}
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"__bytes__"}:
            return base64.b64decode(value["__bytes__"])
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


def state_to_json(state: Mapping[str, Any]) -> str:
    """``state`` as JSON text, bytes as ``{"__bytes__": base64}``."""
    return json.dumps(_encode(dict(state)), separators=(",", ":"))


def state_from_json(text: str | bytes) -> dict[str, Any]:
    """The state :func:`state_to_json` wrote."""
    try:
        return _decode(json.loads(text))  # type: ignore[no-any-return]
    except (ValueError, TypeError) as e:
        raise StateError(f"state_from_json: not a JSON state: {e}") from e


def _nodes(node: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    """The stage entries of a state tree, in pre-order, with their paths."""
    if not isinstance(node, dict) or "stage" not in node:
        raise StateError(f"reshard: the state is corrupted at {path or 'the root'}")
    here = f"{path} > {node['stage']}" if path else str(node["stage"])
    out = [(here, node)]
    for i, sub in enumerate(node.get("upstreams", [])):
        out += _nodes(sub, f"{here}[{i}]")
    return out


def reshard(states: Sequence[Mapping[str, Any]], num_shards: int) -> dict[str, Any]:
    """One state for every rank of ``num_shards`` new ranks, from the states the old job
    saved at the same step: one per rank, or one per worker of every rank (the states
    torchdata's ``StatefulDataLoader`` keeps for ``to_torch(rank_flow)``'s workers; see
    :func:`dataflow.adapters.torch.reshard_loader` for its whole state), in any order.

    Works for index- or file-based sharding (``.shard()`` right after a random-access source
    or a multi-file reader; for workers, each worker's ``.shard()`` of its rank's, split by
    index or file, not by position) when the stages between the shard and the consumer keep
    no datapoints of their own at the checkpoint (batching, maps, filters do not; a shuffle
    buffer, a prefetch, a parallel map or a process runner does): their states must be equal
    in every state given, else :class:`~dataflow._errors.StateError` names the first stage
    where they differ. The rest of the interrupted epoch — every datapoint of its order that
    no old rank or worker consumed — is split among the new ranks (and, where the new
    pipeline has workers, among each new rank's workers); later epochs are sharded as usual.
    The merged state loads into a pipeline of the same shape: with a worker level if the
    states had one, at any new number of workers.
    """
    num_shards = check_int("reshard", "num_shards", num_shards)
    if not states:
        raise StateError("reshard: give the states of all ranks (got none)")
    for st in states:
        if not isinstance(st, Mapping) or st.get("format") != FORMAT or st.get("version") != VERSION:
            raise StateError("reshard: every state must be a dataflow state of this version")
    trees = [_nodes(st["root"]) for st in states]
    if len({tuple(path for path, _ in tree) for tree in trees}) != 1:
        raise StateError("reshard: the states were saved from different pipelines")
    _refuse_runners(trees[0])
    shard_at = [k for k, (_, node) in enumerate(trees[0]) if node["stage"] == "ShardData"]
    if len(shard_at) not in (1, 2):
        raise StateError(
            f"reshard: the pipeline must have one ShardData (the rank's) or two (a worker's shard of "
            f"its rank's), found {len(shard_at)}"
        )
    order = _parts(trees, shard_at)
    source_at = shard_at[-1] + 1
    source_nodes = [trees[t][source_at][1] for t in order]
    source_state = source_nodes[0].get("state", {})
    file_split = "work" in source_state or (not source_nodes[0].get("live") and "files" in source_state)
    if "items" not in source_state and not file_split:
        raise StateError(
            "reshard: the ShardData does not shard by index (it is not right after a random-access "
            "source), so its ranks read different positions of one stream: the number of shards "
            "cannot change mid-epoch. Put .shard() right after the source"
        )
    for pos, (path, node) in enumerate(trees[0]):
        if pos in shard_at or pos == source_at:
            continue
        if any(tree[pos][1].get("state") != node.get("state") or tree[pos][1].get("live") != node.get("live")
               for tree in trees):
            raise StateError(
                f"reshard: the states differ at {path}, so they cannot be merged: resharding "
                f"works when every stage between .shard() and the consumer keeps nothing of its own "
                f"at the checkpoint (no shuffle buffer, prefetch or parallel map in between)"
            )
    out = copy.deepcopy(dict(states[0]))
    new_tree = _nodes(out["root"])
    for k in shard_at:
        new_tree[k][1]["state"] = {"num_shards": None, "index": None}
    merge = _merged_files if file_split else _merged_source
    new_tree[source_at][1]["state"] = merge(source_nodes)
    return out


def _refuse_runners(tree: list[tuple[str, dict[str, Any]]]) -> None:
    """A process runner's state holds its workers' own states and the datapoints received
    but not yet yielded: what its rank consumed is not a position of the source."""
    for path, node in tree:
        if isinstance(node.get("state"), dict) and "workers" in node["state"] and "buffer" in node["state"]:
            raise StateError(
                f"reshard: {path} is a process runner: each of its workers holds its own position "
                f"and the runner datapoints received but not yet yielded, so its rank's state is no "
                f"position of the source and cannot be split among another number of ranks. For "
                f"elastic resume with worker processes, read in DataLoader workers "
                f"(to_torch(rank_flow) in torchdata's StatefulDataLoader; "
                f"dataflow.adapters.torch.reshard_loader); see docs/object_stores.rst"
            )


def _parts(trees: list[list[tuple[str, dict[str, Any]]]], shard_at: list[int]) -> list[int]:
    """The tree indices ordered by old rank (and worker, rank-major), checking that every
    part of the old job is there once."""
    levels = shard_at[::-1]  # the rank's ShardData first, then the worker's
    keys: dict[tuple[int, ...], int] = {}
    repeated: list[tuple[int, ...]] = []
    counts: list[set[Any]] = [set() for _ in levels]
    for t, tree in enumerate(trees):
        key = []
        for level, k in enumerate(levels):
            st = tree[k][1].get("state", {})
            if level and tree[k][1].get("live") and "position" in st:
                raise StateError(
                    f"reshard: {tree[k][0]} splits its rank among workers by position (every worker "
                    f"reads the rank's whole stream), so what one worker consumed is no position of "
                    f"the source; split by index or file (see dataflow.ShardData) to reshard"
                )
            counts[level].add(st.get("num_shards"))
            key.append(st.get("index"))
        if tuple(key) in keys:
            repeated.append(tuple(key))
        keys[tuple(key)] = t
    sizes = [next(iter(c)) if len(c) == 1 else None for c in counts]
    expected: list[tuple[int, ...]] = [(r,) for r in range(sizes[0])] if isinstance(sizes[0], int) else []
    if len(levels) == 2 and isinstance(sizes[1], int):
        expected = [(r, w) for (r,) in expected for w in range(sizes[1])]
    missing = [key for key in expected if key not in keys]
    if None in sizes or missing or repeated or len(keys) != len(expected):
        what = "rank" if len(levels) == 1 else "(rank, worker)"
        raise StateError(
            f"reshard: give the states of all ranks{'' if len(levels) == 1 else ' and workers'}, one "
            f"each: got num_shards {[sorted(c, key=str) for c in counts]} and {what} indices "
            f"{sorted(keys, key=str)}; missing {missing}, given twice {repeated}"
        )
    return [keys[key] for key in expected]


def _merged_files(nodes: list[dict[str, Any]]) -> dict[str, Any]:
    """The state of a file reader sharded by file (:class:`~dataflow.TFRecordData`), merged:
    the files (and parts of files) every old rank had left of the epoch, for the new ranks
    to split; with ``equal=True`` the datapoints the old ranks still had to yield."""
    states = [n["state"] for n in nodes]
    if len({n["live"] for n in nodes}) != 1:
        raise StateError(
            "reshard: some ranks were between epochs and others in one; save all at the same step"
        )
    for key in ("files", "seed", "epoch"):
        if any(st.get(key) != states[0].get(key) for st in states):
            raise StateError(
                f"reshard: the ranks' sources differ in {key!r}: save all ranks at the same step, same seed"
            )
    merged = {key: states[0][key] for key in ("files", "seed", "epoch") if key in states[0]}
    if not nodes[0]["live"]:
        return merged
    limits = [st.get("limit") for st in states]
    left = None
    if None not in limits:
        left = sum(int(lim) - int(st.get("yielded", 0)) for lim, st in zip(limits, states))
    work = [piece for st in states for piece in st.get("work", [])]
    merged.update(file=0, offset="0", record=0, read=0, yielded=0, work=work, limit=left, merged=True)
    return merged


def _merged_source(nodes: list[dict[str, Any]]) -> dict[str, Any]:
    states = [n["state"] for n in nodes]
    lives = {n["live"] for n in nodes}
    if len(lives) != 1:
        raise StateError(
            "reshard: some ranks were between epochs and others in one; save all at the same step"
        )
    common = ("items", "shuffle", "epochs", "rng", "epoch_rng", "reshard")
    for key in common:
        if any(st.get(key) != states[0].get(key) for st in states):
            raise StateError(
                f"reshard: the ranks' sources differ in {key!r}: save all ranks at the same step, same seed"
            )
    merged = {key: states[0].get(key) for key in common if key in states[0]}
    merged["shard"] = "any"
    if nodes[0]["live"]:
        spec = states[0]["shard"]
        consumed = [int(st["position"]) for st in states]
        merged["reshard"] = list(states[0].get("reshard", [])) + [[spec, consumed]]
        merged["position"] = 0
    return merged
