"""The resume check every checkpointable flow goes through.

``check_resume(build, epochs)`` runs ``build()`` uninterrupted for ``epochs`` epochs, then, for
each cut point, runs a second copy up to the cut, saves ``state_dict()``, passes the state
through the safe codec (so it must be plain data), loads it into a third, freshly built copy
and checks that what the third yields is exactly what the uninterrupted run yielded after the
cut — the rest of that epoch (the same epoch boundary), then the later epochs.

Cut points: after ``m`` datapoints of epoch ``j`` with the epoch still in progress (including
``m == len(epoch)``, before the loop has seen ``StopIteration``), and between epochs (after
``StopIteration``). The state is loaded before ``reset_state()`` for some cuts and after it for
others: both orders are promised. For every third cut (``resave_every``) the resumed copy is
saved again before it yields anything, and that second state is what a fourth copy resumes
from: a checkpoint taken right after resuming holds the same position.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from dataflow import DataFlow, codec, seeding

__all__ = ["canon", "check_resume", "cut_and_save", "run_epochs"]


def canon(x: Any) -> Any:
    """A comparable form of a datapoint (arrays by dtype, shape and bytes)."""
    if isinstance(x, np.ndarray):
        return ("nd", x.dtype.str, x.shape, x.tobytes())
    if isinstance(x, dict):
        return ("dict", tuple((repr(k), canon(v)) for k, v in x.items()))
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, tuple(canon(v) for v in x))
    if isinstance(x, np.generic):
        return ("np", x.dtype.str, x.item())
    return x


def run_epochs(df: DataFlow, epochs: int) -> list[list[Any]]:
    return [[canon(dp) for dp in df] for _ in range(epochs)]


def _build(build: Callable[[], DataFlow], seed: int | None) -> DataFlow:
    seeding.set_seed(seed)  # the same global seed for every copy: same RNG streams
    try:
        return build()
    finally:
        pass


def cut_and_save(
    df: DataFlow, epoch: int, taken: int, between: bool
) -> tuple[dict[str, Any], Iterator[Any] | None]:
    """Iterate ``df`` (already reset) through ``epoch`` full epochs and ``taken`` datapoints
    of the next; ``between``: stop after full epochs, once the loop ended. Returns the state
    and the live iterator (kept alive so the epoch counts as in progress)."""
    for _ in range(epoch):
        for _dp in df:
            pass
    if between:
        return df.state_dict(), None
    it = iter(df)
    for _ in range(taken):
        next(it)
    return df.state_dict(), it


def check_resume(
    build: Callable[[], DataFlow],
    epochs: int = 2,
    seed: int | None = 1234,
    max_cuts: int | None = None,
    round_trip: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    resave_every: int = 3,
) -> int:
    """Check resuming at every cut (or ``max_cuts`` spread over the run); returns how many.
    Every ``resave_every``-th cut (0: none) also checks a state saved right after loading."""
    ref_df = _build(build, seed)
    ref_df.reset_state()
    reference = run_epochs(ref_df, epochs)
    ref_df.close()
    cuts = [(j, m, False) for j, ep in enumerate(reference) for m in range(len(ep) + 1)]
    cuts += [(j, 0, True) for j in range(1, epochs)]
    if max_cuts is not None and len(cuts) > max_cuts:
        step = len(cuts) / max_cuts
        cuts = [cuts[int(k * step)] for k in range(max_cuts)] + [cuts[-1]]
    trip = round_trip or (lambda s: codec.loads(codec.dumps(s)))
    for n, (j, m, between) in enumerate(cuts):
        first = _build(build, seed)
        first.reset_state()
        state, it = cut_and_save(first, j, m, between)
        state = trip(state)
        second = _build(build, None if seed is None else seed + 1)  # other seeds: the state decides
        if n % 2:
            second.load_state_dict(state)
            second.reset_state()
        else:
            second.reset_state()
            second.load_state_dict(state)
        if between:
            expected = reference[j:]
        else:
            expected = [reference[j][m:]] + reference[j + 1 :]
        if resave_every and n % resave_every == resave_every - 1:
            # saved again before iterating (a job that checkpoints right after resuming): the
            # state must still describe the same position, not the freshly reset one
            again = trip(second.state_dict())
            second.close()
            second = _build(build, None if seed is None else seed + 2)
            second.reset_state()
            second.load_state_dict(again)
        got = run_epochs(second, len(expected))
        where = f"cut after {m} datapoints of epoch {j}" + (" (between epochs)" if between else "")
        assert got == expected, f"resume differs at {where}:\n got      {got}\n expected {expected}"
        del it
        first.close()
        second.close()
    return len(cuts)
