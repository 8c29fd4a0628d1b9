"""The state fields that the multi-file readers share (TFRecord, WebDataset): the shuffle's
seed and epoch, and the position in an epoch's files, checked as they are loaded."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .._errors import StateError
from .._state_fields import int_field, offset_field

__all__ = ["file_position", "shuffle_seed"]


def shuffle_seed(stage: str, state: Mapping[str, Any]) -> tuple[int, int]:
    """``(seed, epoch)`` of a reader that shuffles its files from a seed and the epoch."""
    seed = state.get("seed")
    if not isinstance(seed, str) or not seed.isdigit():
        raise StateError(f"{stage}: state field 'seed' must be a decimal string, got {seed!r}")
    return int(seed), int_field(stage, state, "epoch", 0)


def file_position(
    stage: str,
    state: Mapping[str, Any],
    files: int,
    sharded: bool,
    work_field: Callable[[str, Mapping[str, Any], int], list[list[int]]],
) -> dict[str, Any]:
    """Where a live epoch of a multi-file reader resumes: the file (its position in the
    epoch), the byte offset, what was read of it and yielded in all; for a rank sharded by
    file, the pieces it had left (``work``, checked by the reader's ``work_field``), its
    limit, and whether :func:`dataflow.checkpoint.reshard` merged them (which needs a reader
    sharded again: ``sharded``)."""
    resume: dict[str, Any] = {
        "file": int_field(stage, state, "file", 0, files),
        "offset": offset_field(stage, state),
        "read": int_field(stage, state, "read", 0),
        "yielded": int_field(stage, state, "yielded", 0) if "yielded" in state else 0,
        "limit": None,
    }
    if "work" not in state:
        return resume
    resume["work"] = work_field(stage, state, files)
    limit = state.get("limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise StateError(f"{stage}: state field 'limit' must be an int >= 0 or None, got {limit!r}")
    resume["limit"] = limit
    resume["merged"] = state.get("merged") is True
    if resume["merged"] and not sharded:
        raise StateError(
            f"{stage}: this state was merged from several ranks by dataflow.checkpoint.reshard; "
            f"load it into a pipeline that calls .shard() right after this reader"
        )
    return resume
