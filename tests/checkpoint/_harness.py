"""The resume check every checkpointable flow goes through.

``check_resume(build, epochs)`` runs ``build()`` uninterrupted for ``epochs`` epochs, then runs
a second copy through the same epochs, saving ``state_dict()`` at each cut point on the way
(as a training job checkpoints every few steps; what that copy yields must still be the
uninterrupted stream, so saving disturbs nothing). Each state goes through the safe codec (so
it must be plain data) into a freshly built copy, which must yield exactly what the
uninterrupted run yielded after the cut — the rest of that epoch (the same epoch boundary),
then the later epochs.

Cut points: after ``m`` datapoints of epoch ``j`` with the epoch still in progress (including
``m == len(epoch)``, before the loop has seen ``StopIteration``), and between epochs (after
``StopIteration``). The state is loaded before ``reset_state()`` for some cuts and after it for
others: both orders are promised. For every third cut (``resave_every``) the resumed copy is
saved again before it yields anything, and that second state is what a fourth copy resumes
from: a checkpoint taken right after resuming holds the same position.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from dataflow import DataFlow, codec
from dataflow import _seeding as seeding

__all__ = [
    "Position",
    "advance",
    "canon",
    "check_chain",
    "check_resume",
    "cut_and_save",
    "positions",
    "reference_run",
    "run_epochs",
    "worker_reference",
]

#: ``(epoch, taken, live)``: ``taken`` datapoints of ``epoch`` consumed; ``live``: its iterator
#: is open (``taken`` may be the whole epoch, before ``StopIteration`` was seen); not live:
#: ``epoch`` epochs are over and the next iterator is not opened yet (``(0, 0, False)``: right
#: after ``reset_state()``).
Position = tuple[int, int, bool]


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
    # one saving copy for every cut, in stream order (between epochs j before j's first
    # datapoint): building and running a copy per cut would only repeat its earlier datapoints
    first = _build(build, seed)
    first.reset_state()
    saved: list[list[Any]] = [[] for _ in range(epochs)]  # what the saving copy yielded
    done, it = 0, None  # epochs the saving copy finished; its open iterator
    try:
        for n, (j, m, between) in enumerate(sorted(cuts, key=lambda c: (c[0], not c[2], c[1]))):
            while done < j:
                saved[done].extend(canon(dp) for dp in (it if it is not None else iter(first)))
                done, it = done + 1, None
            if not between:
                if it is None:
                    it = iter(first)
                while len(saved[j]) < m:
                    saved[j].append(canon(next(it)))
            state = trip(first.state_dict())
            _check_resumed(build, seed, state, n, resave_every, trip, j, m, between, reference)
        while done < epochs:
            saved[done].extend(canon(dp) for dp in (it if it is not None else iter(first)))
            done, it = done + 1, None
    finally:
        del it
        first.close()
    assert saved == reference, (
        f"the copy that saved {len(cuts)} states yielded another stream:\n got      {saved}\n"
        f" expected {reference}"
    )
    return len(cuts)


def _check_resumed(
    build: Callable[[], DataFlow], seed: int | None, state: dict[str, Any], n: int, resave_every: int,
    trip: Callable[[dict[str, Any]], dict[str, Any]], j: int, m: int, between: bool,
    reference: list[list[Any]],
) -> None:
    """A fresh copy loaded with the ``n``-th cut's ``state`` yields the rest of ``reference``."""
    second = _build(build, None if seed is None else seed + 1)  # other seeds: the state decides
    try:
        load_into(second, state, load_first=bool(n % 2))
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
    finally:
        second.close()
    where = f"cut after {m} datapoints of epoch {j}" + (" (between epochs)" if between else "")
    assert got == expected, f"resume differs at {where}:\n got      {got}\n expected {expected}"


def positions(lengths: Sequence[int]) -> list[Position]:
    """Every cut of a run whose epochs have these lengths, in stream order, and the end."""
    out: list[Position] = []
    for e, n in enumerate(lengths):
        out.append((e, 0, False))
        out += [(e, m, True) for m in range(n + 1)]
    return [*out, (len(lengths), 0, False)]


def reference_run(build: Callable[[], DataFlow], epochs: int, seed: int | None = 1234) -> list[list[Any]]:
    """The uninterrupted stream of ``epochs`` epochs (canonical datapoints)."""
    df = _build(build, seed)
    try:
        df.reset_state()
        return run_epochs(df, epochs)
    finally:
        df.close()


def advance(df: DataFlow, at: Position, to: Position, got: list[list[Any]]) -> Iterator[Any] | None:
    """Consume ``df``, which is at ``at``, up to ``to``, appending to ``got[epoch]``. Returns the
    open iterator when ``to`` is inside an epoch (keep it alive while saving)."""
    e, m, live = at
    while True:
        if not live and to == (e, 0, False):
            return None
        it = iter(df)  # a resumed flow's first iterator continues its epoch
        if to[2] and to[0] == e:
            for _ in range(to[1] - m):
                got[e].append(canon(next(it)))
            return it
        got[e].extend(canon(dp) for dp in it)
        e, m, live = e + 1, 0, False


def check_chain(
    build: Callable[[], DataFlow],
    cuts: Sequence[int],
    epochs: int = 2,
    seed: int | None = 1234,
    reference: list[list[Any]] | None = None,
    worker_of: Callable[[Any], Any] | None = None,
) -> None:
    """Run ``build()`` preempted at each of ``cuts`` (indices into :func:`positions` of the
    uninterrupted run, taken in order; repeats allowed), each time saving the state, passing
    it through the codec and resuming a freshly built copy (loaded before ``reset_state()``
    at odd steps, after it at even ones, with another global seed each time); check that all
    the copies yielded together equal the uninterrupted ``reference`` (computed when not given).
    With ``worker_of`` (the worker that produced a canonical datapoint), check per worker."""
    if reference is None:
        reference = reference_run(build, epochs, seed)
    lengths = [len(ep) for ep in reference[:epochs]]
    where = positions(lengths)
    cut_at = [where[c] for c in sorted(cuts)]
    got: list[list[Any]] = [[] for _ in range(epochs)]
    at: Position = (0, 0, False)
    chain = " -> ".join(f"{e}:{m}{'' if live else ' (between epochs)'}" for e, m, live in cut_at)
    df = _build(build, seed)
    df.reset_state()
    try:
        for k, to in enumerate(cut_at):
            it = advance(df, at, to, got)
            state = codec.loads(codec.dumps(df.state_dict()))
            del it
            df.close()
            df = _build(build, None if seed is None else seed + 1 + k)
            load_into(df, state, load_first=bool(k % 2))
            at = to
        advance(df, at, where[-1], got)
    except Exception as err:
        err.add_note(f"check_chain: preempted at epoch:taken {chain}; the failing copy started at {at}")
        raise
    finally:
        df.close()
    if worker_of is None:
        assert got == reference[:epochs], (
            f"preempted at epoch:taken {chain}, the resumed stream differs:\n got      {got}\n"
            f" expected {reference[:epochs]}"
        )
        return
    sizes = [len(ep) for ep in got]
    assert sizes == lengths, f"preempted at epoch:taken {chain}: epochs of {sizes} datapoints, not {lengths}"
    per_got = _per_worker([dp for ep in got for dp in ep], worker_of)
    per_ref = _per_worker([dp for ep in reference for dp in ep], worker_of)
    for worker, stream in per_got.items():
        ref = per_ref.get(worker, [])
        assert len(stream) <= len(ref), f"worker {worker}: reference too short ({len(ref)} < {len(stream)})"
        assert stream == ref[: len(stream)], (
            f"preempted at {chain}, worker {worker}'s stream differs:\n got      {stream}\n"
            f" expected {ref[: len(stream)]}"
        )


def load_into(df: DataFlow, state: Any, load_first: bool) -> None:
    """Load ``state`` into a fresh ``df`` before ``reset_state()`` (``load_first``) or after:
    both orders are promised, so the harness alternates them."""
    if load_first:
        df.load_state_dict(state)
        df.reset_state()
    else:
        df.reset_state()
        df.load_state_dict(state)


def worker_reference(
    build: Callable[[], DataFlow], epochs: int, worker_of: Callable[[Any], Any], workers: int,
    seed: int | None = 1234,
) -> list[list[Any]]:
    """An uninterrupted run of at least ``epochs`` epochs, long enough that each of the
    ``workers`` streams holds as many datapoints as ``epochs`` epochs (so that any interleaving
    of a resumed chain stays inside it)."""
    df = _build(build, seed)
    df.reset_state()
    try:
        out = run_epochs(df, epochs)
        need = sum(len(ep) for ep in out)
        deadline = time.monotonic() + 120  # a worker forked late on a busy machine still shows
        while time.monotonic() < deadline:
            per = _per_worker([dp for ep in out for dp in ep], worker_of)
            if len(per) == workers and min(len(v) for v in per.values()) >= need:
                break
            out += run_epochs(df, 1)
        return out
    finally:
        df.close()


def _per_worker(items: list[Any], worker_of: Callable[[Any], Any]) -> dict[Any, list[Any]]:
    out: dict[Any, list[Any]] = {}
    for dp in items:
        out.setdefault(worker_of(dp), []).append(dp)
    return out
