"""Weighted mixing of several flows: :class:`WeightedMixData` (``dataflow.mix``)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

import numpy as np

from .. import _seeding as seeding
from .._errors import StateError
from .._state import PENDING
from .._state_fields import field, int_field
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
    a function of ``(seed, e, p)`` only (numbers are generated 1024 positions at a time from
    :class:`numpy.random.SeedSequence` ``(seed, e, p // 1024)``), mapped through the weights in
    effect at that position. The stream is therefore reproducible for a given ``seed`` (else
    :func:`dataflow.set_seed`'s, else fresh entropy, kept by the checkpoint), and the share of
    each flow converges to ``weight / sum(weights)``. A weight of 0 never draws its flow.
    Weights need not sum to 1.

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
        self.counts: list[int] = [0] * len(self.flows)
        self._version = 0  # bumped when the weights in effect change

    # -- weights ------------------------------------------------------------------------------
    def set_weights(self, weights: Sequence[float]) -> None:
        """Use ``weights`` from the next datapoint on (one per flow, finite, >= 0, not all 0).

        After ``load_state_dict`` (before iterating) the new weights replace the loaded ones;
        every flow goes on from its saved position."""
        self.weights = _check_weights(type(self).__name__, weights, len(self.flows))
        self._version += 1
        pending = self.__dict__.get(PENDING)
        if pending is not None:  # a loaded state not applied yet: its weights are replaced
            state, live = pending
            self.__dict__[PENDING] = ({**state, "weights": list(self.weights)}, live)

    def _cdf(self) -> np.ndarray:
        w = np.array([0.0 if d else x for x, d in zip(self.weights, self._done)])
        return np.cumsum(w)

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
        n = len(self.flows)
        if resume is None:
            self._epochs += 1
            self._pos = 0
            self._done = [False] * n
            self.counts = [0] * n
            self._started = [False] * n
        itrs: list[Iterator[Any] | None] = [
            None if self._done[k] else iter(df) for k, df in enumerate(self.flows)
        ]
        self._started = [it is not None for it in itrs]
        return self._mixed(itrs, self._base, self._epochs)

    def _uniforms(self, base: seeding.ItemSeed, epoch: int, block: int) -> np.ndarray:
        entropy, key = base
        seq = np.random.SeedSequence(entropy, spawn_key=(*key, epoch, block))
        return np.random.Generator(np.random.PCG64(seq)).random(_BLOCK)

    def _mixed(self, itrs: list[Iterator[Any] | None], base: seeding.ItemSeed, epoch: int) -> Iterator[Any]:
        stop, counts = self.stop, self.counts
        try:
            while True:
                block, i = divmod(self._pos, _BLOCK)
                u = self._uniforms(base, epoch, block)
                version = -1
                choices: list[int] = []
                while i < _BLOCK:
                    if version != self._version:
                        version = self._version
                        cdf = self._cdf()
                        if cdf[-1] <= 0:  # "all": every flow with a weight is exhausted
                            return
                        choices = np.searchsorted(cdf, u * cdf[-1], side="right").tolist()
                    k = choices[i]
                    itr = itrs[k]
                    try:
                        dp = next(itr)  # type: ignore[arg-type]
                    except StopIteration:
                        if stop == "first":
                            return
                        if stop == "all":
                            itrs[k] = None
                            self._started[k] = False
                            self._done[k] = True
                            self._version += 1
                            continue  # this position is drawn again among the rest
                        itrs[k] = itr = iter(self.flows[k])
                        try:
                            dp = next(itr)
                        except StopIteration:
                            raise ValueError(
                                f"{type(self).__name__}: flow #{k} ({type(self.flows[k]).__name__}) "
                                f"gave an empty epoch; stop='never' needs every flow to give datapoints"
                            ) from None
                    i += 1
                    self._pos += 1
                    counts[k] += 1
                    yield dp
        finally:
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
            "position": self._pos if live else 0,
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
        self.counts = [int(c) for c in counts]
        if self.weights_from_state:
            self.weights = saved_weights
        self._version += 1
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
