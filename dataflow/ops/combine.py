"""Combining several flows: :class:`ConcatData`, :class:`JoinData`, :class:`RandomChooseData`,
:class:`RandomMixData`.

Each takes a list of upstream flows and forwards ``reset_state`` and ``close`` to all of them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ..base import DataFlow, RNGDataFlow, _check_upstream
from ..errors import ComponentError

__all__ = ["ConcatData", "JoinData", "RandomChooseData", "RandomMixData"]


def _check_flows(stage: str, df_lists: Sequence[Any]) -> list[Any]:
    if isinstance(df_lists, DataFlow) or not isinstance(df_lists, (list, tuple)) or not df_lists:
        raise ValueError(f"{stage}: df_lists must be a non-empty list of DataFlows, got {df_lists!r}")
    for df in df_lists:
        _check_upstream(stage, df)
    return list(df_lists)


class _MultiUpstream(DataFlow):
    df_lists: list[Any]

    def reset_state(self) -> None:
        for df in self.df_lists:
            df.reset_state()

    def close(self) -> None:
        for df in self.df_lists:
            df.close()


class ConcatData(_MultiUpstream):
    """One epoch of each flow, one after the other. ``len`` is the sum of their lengths."""

    def __init__(self, df_lists: Sequence[DataFlow]) -> None:
        self.df_lists = _check_flows(type(self).__name__, df_lists)

    def __len__(self) -> int:
        return sum(len(df) for df in self.df_lists)

    def __iter__(self) -> Iterator[Any]:
        for df in self.df_lists:
            yield from df


class JoinData(_MultiUpstream):
    """Zip the flows: datapoint *i* joins the components of datapoint *i* of each flow.

    List/tuple datapoints are concatenated into one list; dict datapoints are merged (a key
    present in two flows raises :class:`~dataflow.errors.ComponentError`). The epoch ends
    when the shortest flow ends, and ``len`` is the shortest length — so flows of different
    lengths lose their tails; give flows of equal length to keep every datapoint.
    """

    def __init__(self, df_lists: Sequence[DataFlow]) -> None:
        self.df_lists = _check_flows(type(self).__name__, df_lists)

    def __len__(self) -> int:
        return min(len(df) for df in self.df_lists)

    def __iter__(self) -> Iterator[Any]:
        for dps in zip(*self.df_lists):
            if isinstance(dps[0], dict):
                yield _merge_dicts(dps)
            else:
                out: list[Any] = []
                for n, dp in enumerate(dps):
                    if not isinstance(dp, (list, tuple)):
                        raise ComponentError(
                            f"JoinData: flow #{n} produced a {type(dp).__name__}; all flows must "
                            f"produce list/tuple datapoints, or all dicts"
                        )
                    out.extend(dp)
                yield out


def _merge_dicts(dps: Sequence[Any]) -> dict[Any, Any]:
    merged: dict[Any, Any] = {}
    for n, dp in enumerate(dps):
        if not isinstance(dp, dict):
            raise ComponentError(f"JoinData: flow #{n} produced a {type(dp).__name__} among dicts")
        clash = merged.keys() & dp.keys()
        if clash:
            raise ComponentError(f"JoinData: flow #{n} repeats the keys {sorted(map(str, clash))}")
        merged.update(dp)
    return merged


class RandomChooseData(_MultiUpstream, RNGDataFlow):
    """Each datapoint comes from a flow drawn at random (uniformly, or with given probabilities).

    ``df_lists`` is a list of flows or of ``(flow, probability)`` pairs summing to 1. The
    epoch ends as soon as any flow is exhausted, so ``len`` is unknown.
    """

    def __init__(self, df_lists: Sequence[Any], seed: int | None = None) -> None:
        RNGDataFlow.__init__(self, seed)
        stage = type(self).__name__
        if not isinstance(df_lists, (list, tuple)) or not df_lists:
            _check_flows(stage, df_lists)  # raises the standard message
        if isinstance(df_lists[0], (list, tuple)):
            flows = [pair[0] for pair in df_lists]
            probs = np.array([float(pair[1]) for pair in df_lists])
            if (probs < 0).any() or not np.isclose(probs.sum(), 1.0):
                raise ValueError(f"{stage}: probabilities must be >= 0 and sum to 1, got {probs.tolist()}")
        else:
            flows = list(df_lists)
            probs = np.full(len(flows), 1.0 / len(flows))
        self.df_lists = _check_flows(stage, flows)
        self.probs = probs / probs.sum()

    def reset_state(self) -> None:
        _MultiUpstream.reset_state(self)
        RNGDataFlow.reset_state(self)

    def __iter__(self) -> Iterator[Any]:
        itrs = [iter(df) for df in self.df_lists]
        rng, probs, n = self.rng, self.probs, len(itrs)
        while True:
            for k in rng.choice(n, size=1024, p=probs).tolist():
                try:
                    yield next(itrs[k])
                except StopIteration:
                    return


class RandomMixData(_MultiUpstream, RNGDataFlow):
    """All datapoints of every flow, in a random interleaving that keeps each flow's order.

    Every flow must have an exact ``len``; the epoch has ``sum`` of them. A flow that ends
    before its ``len`` raises ``ValueError`` (tensorpack failed obscurely here).
    """

    def __init__(self, df_lists: Sequence[DataFlow], seed: int | None = None) -> None:
        RNGDataFlow.__init__(self, seed)
        self.df_lists = _check_flows(type(self).__name__, df_lists)
        for n, df in enumerate(self.df_lists):
            try:
                len(df)
            except (TypeError, NotImplementedError):
                raise ValueError(
                    f"RandomMixData: flow #{n} ({type(df).__name__}) has no len(); every flow "
                    f"must know its length to be mixed"
                ) from None

    def reset_state(self) -> None:
        _MultiUpstream.reset_state(self)
        RNGDataFlow.reset_state(self)

    def __len__(self) -> int:
        return sum(len(df) for df in self.df_lists)

    def __iter__(self) -> Iterator[Any]:
        sizes = [len(df) for df in self.df_lists]
        order = np.repeat(np.arange(len(sizes)), sizes)
        self.rng.shuffle(order)
        itrs = [iter(df) for df in self.df_lists]
        for k in order.tolist():
            try:
                yield next(itrs[k])
            except StopIteration:
                raise ValueError(
                    f"RandomMixData: flow #{k} ({type(self.df_lists[k]).__name__}) ended before "
                    f"the {sizes[k]} datapoints its len() promised"
                ) from None
