"""Combining several flows: :class:`ConcatData`, :class:`JoinData`, :class:`RandomChooseData`,
:class:`RandomMixData`.

Each takes a list of upstream flows and forwards ``reset_state``, ``close`` and the state
protocol to all of them. Each creates its upstream iterators when its own epoch begins.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from .._errors import ComponentError, StateError
from .._state_fields import field, int_field, plain_rng_state, position
from ..base import DataFlow, RNGDataFlow, _check_upstream

__all__ = ["ConcatData", "JoinData", "RandomChooseData", "RandomMixData"]


def _check_flows(stage: str, df_lists: Sequence[Any]) -> list[Any]:
    if isinstance(df_lists, DataFlow) or not isinstance(df_lists, (list, tuple)) or not df_lists:
        raise ValueError(f"{stage}: df_lists must be a non-empty list of DataFlows, got {df_lists!r}")
    for df in df_lists:
        _check_upstream(stage, df)
    return list(df_lists)


class _MultiUpstream(DataFlow[Any]):
    df_lists: list[Any]

    def reset_state(self) -> None:
        for df in self.df_lists:
            df.reset_state()
        super().reset_state()  # RNGDataFlow's, for the random ones

    def close(self) -> None:
        for df in self.df_lists:
            df.close()

    def _state_upstreams(self) -> Sequence[DataFlow[Any]]:
        return self.df_lists


class ConcatData(_MultiUpstream):
    """One epoch of each flow, one after the other. ``len`` is the sum of their lengths.
    State: which flow is being read."""

    def __init__(self, df_lists: Sequence[DataFlow[Any]]) -> None:
        self.df_lists = _check_flows(type(self).__name__, df_lists)
        self._k = 0

    def __len__(self) -> int:
        return sum(len(df) for df in self.df_lists)

    def __iter__(self) -> Iterator[Any]:
        self._k = self.__dict__.pop("_resume", 0)
        return self._concat(self._k, iter(self.df_lists[self._k]))

    def _concat(self, k: int, itr: Iterator[Any]) -> Iterator[Any]:
        while True:
            yield from itr
            k += 1
            if k == len(self.df_lists):
                return
            self._k = k
            itr = iter(self.df_lists[k])

    def _upstreams_live(self, live: bool) -> list[bool]:
        return [live and j == self._k for j in range(len(self.df_lists))]

    def _get_state(self, live: bool) -> dict[str, Any]:
        return {"flow": self._k if live else 0}

    def _set_state(self, state: Mapping[str, Any], live: bool) -> None:
        k = int_field(type(self).__name__, state, "flow", 0, len(self.df_lists) - 1)
        if live:
            self._resume = k


class JoinData(_MultiUpstream):
    """Zip the flows: datapoint *i* joins the components of datapoint *i* of each flow.

    List/tuple datapoints are concatenated into one list; dict datapoints are merged (a key
    present in two flows raises :class:`~dataflow._errors.ComponentError`). The epoch ends
    when the shortest flow ends, and ``len`` is the shortest length — so flows of different
    lengths lose their tails; give flows of equal length to keep every datapoint. It keeps
    nothing between datapoints: its state is its upstreams'.
    """

    stateless = True

    def __init__(self, df_lists: Sequence[DataFlow[Any]]) -> None:
        self.df_lists = _check_flows(type(self).__name__, df_lists)

    def __len__(self) -> int:
        return min(len(df) for df in self.df_lists)

    def __iter__(self) -> Iterator[Any]:
        return self._joined(zip(*self.df_lists))

    def _joined(self, zipped: Iterator[tuple[Any, ...]]) -> Iterator[Any]:
        for dps in zipped:
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


class RandomChooseData(_MultiUpstream, RNGDataFlow[Any]):
    """Each datapoint comes from a flow drawn at random (uniformly, or with given probabilities).

    ``df_lists`` is a list of flows or of ``(flow, probability)`` pairs summing to 1. The
    epoch ends as soon as any flow is exhausted, so ``len`` is unknown. State: the RNG and the
    choices drawn but not yet used.
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

    def __iter__(self) -> Iterator[Any]:
        rng = self.rng
        left = self.__dict__.pop("_resume", None)
        self._chunk: list[int] = left if left is not None else []
        self._chunk_it = iter(self._chunk)
        return self._choose(rng, [iter(df) for df in self.df_lists])

    def _choose(self, rng: np.random.Generator, itrs: list[Iterator[Any]]) -> Iterator[Any]:
        probs, n = self.probs, len(itrs)
        while True:
            for k in self._chunk_it:
                try:
                    dp = next(itrs[k])
                except StopIteration:
                    return
                yield dp
            self._chunk = rng.choice(n, size=1024, p=probs).tolist()
            self._chunk_it = iter(self._chunk)

    def _get_state(self, live: bool) -> dict[str, Any]:
        state: dict[str, Any] = {"rng": self._save_rng()}
        if live and "_chunk_it" in self.__dict__:
            state["choices"] = self._chunk[position(self._chunk_it, len(self._chunk)) :]
        return state

    def _set_state(self, state: Mapping[str, Any], live: bool) -> None:
        stage = type(self).__name__
        if live and "choices" in state:
            choices = field(stage, state, "choices", list)
            if not all(isinstance(k, int) and 0 <= k < len(self.df_lists) for k in choices):
                raise StateError(f"{stage}: state field 'choices' is corrupted")
            self._resume = list(choices)
        self._load_rng(field(stage, state, "rng", (dict, type(None))))


class RandomMixData(_MultiUpstream, RNGDataFlow[Any]):
    """All datapoints of every flow, in a random interleaving that keeps each flow's order.

    Every flow must have an exact ``len``; the epoch has ``sum`` of them. A flow that ends
    before its ``len`` raises ``ValueError`` (tensorpack failed obscurely here). State: the
    position in the epoch's interleaving (drawn again from the RNG's state at its start).
    """

    def __init__(self, df_lists: Sequence[DataFlow[Any]], seed: int | None = None) -> None:
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

    def __len__(self) -> int:
        return sum(len(df) for df in self.df_lists)

    def __iter__(self) -> Iterator[Any]:
        rng = self.rng
        start = self.__dict__.pop("_resume", None)
        self._epoch_rng = rng.bit_generator.state  # a resumed epoch's start: just loaded
        sizes = [len(df) for df in self.df_lists]
        order = np.repeat(np.arange(len(sizes)), sizes)
        rng.shuffle(order)
        self._order = cur = iter(order.tolist())
        if start:
            cur.__setstate__(start)
        return self._mixed(cur, sizes, [iter(df) for df in self.df_lists])

    def _mixed(self, order: Iterator[int], sizes: list[int], itrs: list[Iterator[Any]]) -> Iterator[Any]:
        for k in order:
            try:
                yield next(itrs[k])
            except StopIteration:
                raise ValueError(
                    f"RandomMixData: flow #{k} ({type(self.df_lists[k]).__name__}) ended before "
                    f"the {sizes[k]} datapoints its len() promised"
                ) from None

    def _get_state(self, live: bool) -> dict[str, Any]:
        state: dict[str, Any] = {"rng": self._save_rng()}
        if live and "_order" in self.__dict__:
            state["position"] = position(self._order, sum(len(df) for df in self.df_lists))
            state["epoch_rng"] = plain_rng_state(self._epoch_rng)
        return state

    def _set_state(self, state: Mapping[str, Any], live: bool) -> None:
        stage = type(self).__name__
        if live and "position" in state:
            self._resume = int_field(stage, state, "position")
            self._load_rng(field(stage, state, "epoch_rng", dict))
        else:
            self._load_rng(field(stage, state, "rng", (dict, type(None))))
