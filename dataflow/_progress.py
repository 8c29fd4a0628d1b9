"""Progress bars, the same everywhere: one unit (:data:`UNIT`, a datapoint), on ``stderr``,
``progress=False`` to hide one, and tqdm's ``TQDM_DISABLE`` to hide them all.

Every long operation (saving a format, the speed test and the profiler, sending to a remote
pipeline) draws its bar with :func:`progress_bar`. tqdm reads ``TQDM_DISABLE`` only for
arguments not passed explicitly, so it is honoured here, where ``disable`` is decided.
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["UNIT", "check_progress", "progress_bar", "progress_enabled"]

#: The unit every bar and throughput line counts in: datapoints ("dp", "dp/s").
UNIT = "dp"

_TRUE = ("1", "true", "yes", "on")


def check_progress(stage: str, progress: object) -> bool:
    """``progress`` as a bool, else a ``TypeError`` naming the stage."""
    if not isinstance(progress, bool):
        raise TypeError(
            f"{stage}: progress must be True or False, got {type(progress).__name__} ({progress!r})"
        )
    return progress


def progress_enabled(progress: bool) -> bool:
    """Whether a bar asked for with ``progress`` is drawn: not when ``TQDM_DISABLE`` is set
    to a true value (``1``, ``true``, ``yes``, ``on``)."""
    return progress and os.environ.get("TQDM_DISABLE", "").strip().lower() not in _TRUE


def progress_bar(
    stage: str, progress: bool, *, total: int | None = None, desc: str | None = None, **kwargs: Any
) -> Any:
    """A tqdm bar counting :data:`UNIT` on ``stderr`` (a no-op bar when disabled)."""
    from tqdm import tqdm

    kwargs.setdefault("file", sys.stderr)
    kwargs.setdefault("dynamic_ncols", True)
    return tqdm(
        total=total,
        desc=desc,
        unit=UNIT,
        disable=not progress_enabled(check_progress(stage, progress)),
        **kwargs,
    )
