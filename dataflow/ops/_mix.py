"""Weighted mixing of several flows: :class:`WeightedMixData` (``dataflow.mix``)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

import numpy as np

from .. import _seeding as seeding
from .._errors import StateError
from .._state import PENDING
from .._state_fields import field, int_field, position
from ..base import DataFlow, _check_upstream, close_iterator

__all__ = ["WeightedMixData", "mix"]

Stop = Literal["first", "all", "never"]
_STOPS = ("first", "all", "never")
#: positions drawn with one generator (a function of ``(seed, epoch, block)``)
_BLOCK = 1024


def _check_weights(stage: str, weights: Any, n: int) -> list[float]:
    if isinstance(weights, (str, bytes)) or not hasattr(weights, "__len__"):
        raise TypeError(f"{stage}: weights must be a sequence of {n} numbers, got {weights!r:.80}")
    try:
        out = [float(w) for w in weights]
    except (TypeError, ValueError):
        raise TypeError(f"{stage}: weights must be numbers, got {weights!r:.80}") from None
    if len(out) != n:
        raise ValueError(f"{stage}: got {len(out)} weights for {n} flows: {out!r:.80}")
    if not all(math.isfinite(w) and w >= 0 for w in out):
        raise ValueError(f"{stage}: weights must be finite and >= 0, got {out!r:.80}")
    if not any(w > 0 for w in out):
        raise ValueError(f"{stage}: at least one weight must be > 0, got {out!r:.80}")
    return out


class WeightedMixData(DataFlow[Any]):
    """Datapoints from several flows, each drawn from a flow chosen at random with ``weights``.

    **Draws.** The flow of position ``p`` of epoch ``e`` is read off one uniform number that is
    a function of ``(seed, e, p)`` only (the ``p``-th number of a PCG64 stream seeded with
    :class:`numpy.random.SeedSequence` ``(seed, e)``, reached by ``advance`` on resume), mapped
    through the weights in effect at that position. The stream is therefore reproducible for a
    given ``seed`` (else :func:`dataflow.set_seed`'s, else fresh entropy, kept by the
    checkpoint), and the share of each flow converges to ``weight / sum(weights)``. A weight
    of 0 never draws its flow. Weights need not sum to 1.

    **End of an epoch** (``stop``):

    - ``"first"``: the epoch ends when a drawn flow is exhausted (the other flows' epochs are
      abandoned; the next epoch starts every flow afresh);
    - ``"all"``: an exhausted flow is dropped and the rest are renormalized (the position that
      found it empty is drawn again among them); the epoch ends when every flow with a weight
      > 0 is exhausted, so each such flow gives its whole epoch;
    - ``"never"``: an exhausted flow starts its next epoch at once: an infinite stream, for
      step-based training. A flow whose fresh epoch is empty raises ``ValueError``.

    ``len`` is unknown.

    **State and changing weights.** The state holds each flow's own state (nested below this
    stage, as for every multi-upstream stage), this stage's epoch and position, which flows
    are exhausted, the weights in effect and how many datapoints each flow gave this epoch.
    Resuming continues bit-identically. To resume with *other* weights, either call
    :meth:`set_weights` after ``load_state_dict`` (before iterating), or rebuild the pipeline
    with the new weights and ``weights_from_state=False`` (the constructor's weights win over
    the saved ones; with the default ``True`` a loaded state restores the weights it was saved
    with). Either way every flow continues exactly where it was, nothing read twice and
    nothing skipped, and the new weights apply from the next datapoint on. :meth:`set_weights`
    during an epoch also applies from the next datapoint.

    ``repr`` shows the weights and, once datapoints were drawn, how many each flow gave in the
    current (or last) epoch; :meth:`describe` prints one line per flow.

    Example::

        df = dataflow.mix([web, code, books], [0.6, 0.25, 0.15], seed=0, stop="never")
    """

    def __init__(
        self,
        flows: Sequence[DataFlow[Any]],
        weights: Sequence[float],
        seed: int | None = None,
        stop: Stop = "first",
        *,
        weights_from_state: bool = True,
    ) -> None:
        stage = type(self).__name__
        if isinstance(flows, DataFlow) or not isinstance(flows, (list, tuple)) or not flows:
            raise ValueError(f"{stage}: flows must be a non-empty list of DataFlows, got {flows!r:.80}")
        for df in flows:
            _check_upstream(stage, df)
        if stop not in _STOPS:
            raise ValueError(f"{stage}: stop must be one of {_STOPS}, got {stop!r}")
        self.flows: list[DataFlow[Any]] = list(flows)
        self.weights = _check_weights(stage, weights, len(self.flows))
        self._seed = seeding.check_seed(stage, seed)
        self.stop: Stop = stop
        self.weights_from_state = bool(weights_from_state)
        self._base: seeding.ItemSeed | None = None
        self._epochs = 0
        self._pos = 0
        self._done = [False] * len(self.flows)  # exhausted this epoch ("all")
        self._started = [False] * len(self.flows)  # has an iterator in progress
        self._counts: list[int] = [0] * len(self.flows)  # up to the current block's start
        self._block_from = 0  # the current block's first position drawn by this run

    # -- weights ------------------------------------------------------------------------------
    def set_weights(self, weights: Sequence[float]) -> None:
        """Use ``weights`` from the next datapoint on (one per flow, finite, >= 0, not all 0).

        After ``load_state_dict`` (before iterating) the new weights replace the loaded ones;
        every flow goes on from its saved position."""
        self.weights = _check_weights(type(self).__name__, weights, len(self.flows))
        cur = self.__dict__.get("_block_it")
        if cur is not None:  # an epoch in progress: remap what it has not read yet
            at = position(cur, _BLOCK)
            if not self._redraw(at):  # "all": no flow left with a weight; the epoch ends
                end = len(self.flows)  # the index of the mixer's always-empty iterator
                self._choices[at:] = [end] * (_BLOCK - at)
                self._drawn[at:] = end
        pending = self.__dict__.get(PENDING)
        if pending is not None:  # a loaded state not applied yet: its weights are replaced
            state, live = pending
            self.__dict__[PENDING] = ({**state, "weights": list(self.weights)}, live)

    # -- iteration ----------------------------------------------------------------------------
    def reset_state(self) -> None:
        for df in self.flows:
            df.reset_state()
        if self._base is None:
            self._base = seeding.item_seed(self._seed)

    def close(self) -> None:
        for df in self.flows:
            df.close()

    def __iter__(self) -> Iterator[Any]:
        if self._base is None:
            self._base = seeding.item_seed(self._seed)
        resume = self.__dict__.pop("_resume", None)
        self.__dict__.pop("_block_it", None)  # an abandoned epoch's
        n = len(self.flows)
        if resume is None:
            self._epochs += 1
            self._pos = 0
            self._done = [False] * n
            self._counts = [0] * n
            self._started = [False] * n
        itrs: list[Iterator[Any] | None] = [
            None if self._done[k] else iter(df) for k, df in enumerate(self.flows)
        ]
        self._started = [it is not None for it in itrs]
        itrs.append(iter(()))  # drawn only to end the epoch (see set_weights)
        return self._mixed(itrs, self._base, self._epochs)

    def _stream(self, base: seeding.ItemSeed, epoch: int, block: int) -> np.random.Generator:
        """The epoch's uniform numbers, from position ``block * _BLOCK`` on (one 64-bit output
        of PCG64 per number, so seeking is ``advance``)."""
        entropy, key = base
        bits = np.random.PCG64(np.random.SeedSequence(entropy, spawn_key=(*key, epoch)))
        if block:
            bits.advance(block * _BLOCK)
        return np.random.Generator(bits)

    def _redraw(self, start: int) -> bool:
        """Map the block's numbers from ``start`` on through the weights in effect now (in
        place: the block's live iterator reads them next); ``False``: no flow can be drawn."""
        w = np.array([0.0 if d else x for x, d in zip(self.weights, self._done)])
        cdf = np.cumsum(w)
        if cdf[-1] <= 0:
            return False
        y = self._u[start:] * cdf[-1]
        if len(cdf) <= 16:  # a few comparisons beat a binary search per number
            idx = np.zeros(len(y), dtype=np.intp)
            for c in cdf[:-1]:
                idx += y >= c
        else:
            idx = np.searchsorted(cdf, y, side="right")
        self._drawn[start:] = idx
        self._choices[start:] = idx.tolist()
        return True

    def _position(self) -> int:
        if "_block_it" not in self.__dict__:
            return self._pos
        return self._block * _BLOCK + position(self._block_it, _BLOCK)

    def _after_end(self, k: int, itrs: list[Iterator[Any] | None], cur: Iterator[int], stop: str) -> Any:
        """Flow ``k`` ran out at the block's current position: per ``stop``, the datapoint that
        takes the position (with the block's choice there updated), or ``None``: the epoch ends."""
        at = position(cur, _BLOCK) - 1
        flows = self.flows
        while True:
            if stop == "first" or k == len(flows):
                cur.__setstate__(at)  # type: ignore[attr-defined]  # the position was not filled
                return None
            if stop == "never":
                itrs[k] = itr = iter(flows[k])
                try:
                    return next(itr)
                except StopIteration:
                    raise ValueError(
                        f"{type(self).__name__}: flow #{k} ({type(flows[k]).__name__}) gave an "
                        f"empty epoch; stop='never' needs every flow to give datapoints"
                    ) from None
            # "all": drop it; this position is drawn again among the rest
            itrs[k] = None
            self._started[k], self._done[k] = False, True
            if not self._redraw(at):
                cur.__setstate__(at)  # type: ignore[attr-defined]
                return None
            k = self._choices[at]
            try:
                return next(itrs[k])  # type: ignore[arg-type]
            except StopIteration:
                continue

    @property
    def counts(self) -> list[int]:
        """How many datapoints each flow gave in the current (or last) epoch."""
        cur = self.__dict__.get("_block_it")
        if cur is None:
            return list(self._counts)
        # from the block's first position this epoch run drew (a resumed block's earlier
        # draws are in the loaded counts already)
        drawn = np.bincount(self._drawn[self._block_from : position(cur, _BLOCK)], minlength=len(self.flows))
        return [int(a + b) for a, b in zip(self._counts, drawn)]

    def _mixed(self, itrs: list[Iterator[Any] | None], base: seeding.ItemSeed, epoch: int) -> Iterator[Any]:
        stop = self.stop
        cur: Iterator[int] | None = None
        try:
            block, i = divmod(self._pos, _BLOCK)
            numbers = self._stream(base, epoch, block)
            while True:
                self._u = numbers.random(_BLOCK)
                self._choices = choices = [0] * _BLOCK
                self._drawn = np.zeros(_BLOCK, dtype=np.intp)
                if not self._redraw(0):  # "all": every flow with a weight is exhausted
                    return
                cur = iter(choices)
                self._block, self._block_it, self._block_from = block, cur, i
                if i:
                    cur.__setstate__(i)  # type: ignore[attr-defined]
                for k in cur:
                    try:
                        dp = next(itrs[k])  # type: ignore[arg-type]
                    except StopIteration:
                        got = self._after_end(k, itrs, cur, stop)
                        if got is None:
                            return
                        dp = got
                    yield dp
                self._counts = self.counts  # the block is over: fold its draws in
                self._pos = (block + 1) * _BLOCK
                del self.__dict__["_block_it"]
                block, i = block + 1, 0
        finally:
            if cur is not None and self.__dict__.get("_block_it") is cur:  # not a later epoch's
                self._counts = self.counts
                self._pos = self._position()
                del self.__dict__["_block_it"]
            for it in itrs:
                if it is not None:
                    close_iterator(it)

    # -- state --------------------------------------------------------------------------------
    def _state_upstreams(self) -> Sequence[DataFlow[Any]]:
        return self.flows

    def _upstreams_live(self, live: bool) -> list[bool]:
        return [live and s for s in self._started]

    def _get_state(self, live: bool) -> dict[str, Any]:
        if self._base is None:
            self._base = seeding.item_seed(self._seed)
        base = self._base
        return {
            "base": [str(base[0]), list(base[1])],
            "epochs": self._epochs,
            "position": self._position() if live else 0,
            "done": [int(d) for d in self._done] if live else [0] * len(self.flows),
            "counts": list(self.counts),
            "weights": list(self.weights),
        }

    def _set_state(self, state: Mapping[str, Any], live: bool) -> None:
        stage = type(self).__name__
        n = len(self.flows)
        base = field(stage, state, "base", list)
        if len(base) != 2 or not str(base[0]).isdigit() or not isinstance(base[1], list):
            raise StateError(f"{stage}: state field 'base' is corrupted: {base!r:.80}")
        epochs = int_field(stage, state, "epochs")
        pos = int_field(stage, state, "position")
        done = field(stage, state, "done", list)
        counts = field(stage, state, "counts", list)
        weights = field(stage, state, "weights", list)
        for name, values in (("done", done), ("counts", counts), ("weights", weights)):
            if len(values) != n:
                raise StateError(f"{stage}: state field {name!r} has {len(values)} entries for {n} flows")
        if not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts + done):
            raise StateError(f"{stage}: state fields 'done'/'counts' are corrupted")
        try:
            saved_weights = _check_weights(stage, weights, n)
        except (TypeError, ValueError) as e:
            raise StateError(f"{stage}: state field 'weights' is corrupted: {e}") from None
        self._base = (int(base[0]), tuple(int(k) for k in base[1]))
        self._epochs = epochs
        self._counts = [int(c) for c in counts]
        if self.weights_from_state:
            self.weights = saved_weights
        if live:
            self._pos = pos
            self._done = [bool(d) for d in done]
            self._resume = True

    # -- display ------------------------------------------------------------------------------
    def _repr_args(self) -> dict[str, Any]:
        args: dict[str, Any] = {"weights": [round(w, 4) for w in self.weights]}
        if self._seed is not None:
            args["seed"] = self._seed
        args["stop"] = self.stop
        if any(self.counts):
            args["counts"] = list(self.counts)
        return args

    def describe(self) -> str:
        """One line per flow: its weight (and share of the total) and how many datapoints it
        gave in the current or last epoch (and their share)."""
        total_w = sum(self.weights)
        total_c = sum(self.counts)
        lines = [f"{type(self).__name__}(stop={self.stop!r}, epoch {self._epochs}, {total_c} datapoints)"]
        for k, (df, w, c) in enumerate(zip(self.flows, self.weights, self.counts)):
            share = f"{100 * c / total_c:5.1f}%" if total_c else "    -"
            lines.append(
                f"  #{k} {type(df).__name__:<20} weight {w:<8g} ({100 * w / total_w:5.1f}%)  "
                f"gave {c} ({share})" + ("  exhausted" if self._done[k] else "")
            )
        return "\n".join(lines)


def mix(
    flows: Sequence[DataFlow[Any]],
    weights: Sequence[float],
    seed: int | None = None,
    stop: Stop = "first",
    *,
    weights_from_state: bool = True,
) -> WeightedMixData:
    """Mix ``flows`` with ``weights``: :class:`WeightedMixData` (see it for the guarantees)."""
    return WeightedMixData(flows, weights, seed=seed, stop=stop, weights_from_state=weights_from_state)
