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
    """One state for every rank of ``num_shards`` new ranks, from the states all old ranks
    saved at the same step (same number of datapoints each, as with ``equal=True`` and
    ranks that step together).

    Works for index-based sharding (``.shard()`` right after a random-access source) when
    the stages between the shard and the consumer keep no datapoints of their own at the
    checkpoint (batching, maps, filters do not; a shuffle buffer or a prefetch does): their
    states must be equal on all ranks, else :class:`~dataflow._errors.StateError` names the
    first stage where they differ. The rest of the interrupted epoch — every datapoint of
    its order that no old rank consumed — is split among the new ranks; later epochs are
    sharded as usual.
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
    shard_at = [k for k, (_, node) in enumerate(trees[0]) if node["stage"] == "ShardData"]
    if len(shard_at) != 1:
        raise StateError(f"reshard: the pipeline must have exactly one ShardData, found {len(shard_at)}")
    k = shard_at[0]
    by_rank = _ranks(trees, k)
    source_at = k + 1
    source_nodes = [trees[r][source_at][1] for r in by_rank]
    source_state = source_nodes[0].get("state", {})
    file_split = "work" in source_state or (not source_nodes[0].get("live") and "files" in source_state)
    if "items" not in source_state and not file_split:
        raise StateError(
            "reshard: the ShardData does not shard by index (it is not right after a random-access "
            "source), so its ranks read different positions of one stream: the number of shards "
            "cannot change mid-epoch. Put .shard() right after the source"
        )
    for pos, (path, node) in enumerate(trees[0]):
        if pos in (k, source_at):
            continue
        if any(tree[pos][1].get("state") != node.get("state") or tree[pos][1].get("live") != node.get("live")
               for tree in trees):
            raise StateError(
                f"reshard: the ranks' states differ at {path}, so they cannot be merged: resharding "
                f"works when every stage between .shard() and the consumer keeps nothing of its own "
                f"at the checkpoint (no shuffle buffer, prefetch or parallel map in between)"
            )
    out = copy.deepcopy(dict(states[0]))
    new_tree = _nodes(out["root"])
    new_tree[k][1]["state"] = {"num_shards": None, "index": None}
    merge = _merged_files if file_split else _merged_source
    new_tree[source_at][1]["state"] = merge(source_nodes)
    return out


def _ranks(trees: list[list[tuple[str, dict[str, Any]]]], k: int) -> list[int]:
    """The tree indices ordered by old rank, checking that ranks ``0..n-1`` are all there."""
    ranks: dict[int, int] = {}
    counts = set()
    for t, tree in enumerate(trees):
        st = tree[k][1].get("state", {})
        counts.add(st.get("num_shards"))
        ranks[st.get("index")] = t
    if counts != {len(trees)} or sorted(ranks, key=str) != list(range(len(trees))):
        raise StateError(
            f"reshard: give the states of all ranks, one each (got num_shards {sorted(counts, key=str)} "
            f"and shard indices {sorted(ranks, key=str)})"
        )
    return [ranks[r] for r in range(len(trees))]


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
