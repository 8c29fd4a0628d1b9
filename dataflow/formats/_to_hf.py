"""A flow written into a Hugging Face ``datasets.Dataset``: :func:`to_hf`."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from ._common import check_flow, iterate_for_save, require

__all__ = ["to_hf"]


def to_hf(
    df: Any,
    features: Any = None,
    *,
    cache_dir: str | None = None,
    keep_in_memory: bool = False,
    progress: bool = False,
) -> Any:
    """A ``datasets.Dataset`` holding one epoch of ``df`` (``pip install "dataflow-ml[hf]"``).

    Calls ``df.reset_state()``, then writes its datapoints in order through
    ``datasets.Dataset.from_generator``: ``datasets`` encodes them into Arrow batch by batch
    and returns a dataset memory-mapped from an Arrow file in ``cache_dir`` (``datasets``'
    cache by default; ``keep_in_memory=True`` keeps it in memory instead), so the flow is
    never held whole in memory. Each call writes a new file (a fresh fingerprint: a cached
    result of an earlier call is never reused for a changed flow). The flow is not closed.

    A dict datapoint is a row (its keys, ``str``, are the columns); a list or tuple gives
    columns ``"0"``, ``"1"``, ... . ``features`` (a ``datasets.Features``) fixes the column
    types; by default ``datasets`` infers them from the datapoints. A datapoint of another
    kind raises :class:`TypeError` naming its index; an error raised by the flow reaches the
    caller as itself (not wrapped); values ``datasets`` cannot encode raise its own error.
    ``progress=True`` adds dataflow's progress bar to ``datasets``' own.
    """
    stage = "to_hf"
    check_flow(stage, df)
    hf = require("datasets", "hf", stage)

    failed: list[Exception] = []

    def rows() -> Iterator[dict[str, Any]]:
        try:
            for i, dp in enumerate(iterate_for_save(stage, df, progress)):
                yield _row(stage, i, dp)
        except Exception as e:
            failed.append(e)
            raise

    try:
        return hf.Dataset.from_generator(
            rows,
            features=features,
            cache_dir=cache_dir,
            keep_in_memory=keep_in_memory,
            fingerprint=uuid.uuid4().hex,
        )
    except Exception:
        if failed:  # the flow's own error (or a bad datapoint), not datasets' wrapper of it
            raise failed[0] from None
        raise


def _row(stage: str, index: int, dp: Any) -> dict[str, Any]:
    if isinstance(dp, Mapping):
        if not all(isinstance(k, str) for k in dp):
            bad = next(k for k in dp if not isinstance(k, str))
            raise TypeError(f"{stage}: datapoint {index} has the key {bad!r}; column names must be str")
        return dict(dp)
    if isinstance(dp, (list, tuple)):
        return {str(k): v for k, v in enumerate(dp)}
    raise TypeError(
        f"{stage}: datapoint {index} is a {type(dp).__name__}; a row must be a dict (columns by "
        f"name) or a list/tuple (columns '0', '1', ...)"
    )
