"""Buffered shuffling: :class:`LocallyShuffleData` (the ``shuffle(buffer_size)`` counterpart)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from .._checks import check_int
from .._errors import StateError
from .._state_fields import decode_items, encode_items, field, int_field, position
from ..base import DataFlow, ProxyDataFlow, RNGDataFlow

__all__ = ["LocallyShuffleData"]

_DRAW_CHUNK = 4096


class LocallyShuffleData(ProxyDataFlow, RNGDataFlow[Any]):
    """Shuffle through a buffer of ``buffer_size`` datapoints, one upstream epoch at a time.

    The buffer is filled from the upstream; then each new datapoint replaces a uniformly
    random one of the buffer, which is produced. When the upstream epoch ends, the rest of
    the buffer is shuffled and produced. So **one epoch of this flow is a permutation of one
    epoch of the upstream** (each datapoint produced ``num_reuse`` times), passes never mix,
    and ``len == len(ds) * num_reuse`` exactly.

    This differs from tensorpack, whose LocallyShuffleData repeated its upstream forever and
    mixed epochs; write ``.repeat()`` before or after for that. ``shuffle_interval`` is
    accepted for compatibility and has no effect (every draw is random here).

    The randomness comes from ``self.rng`` (``seed=`` or :func:`dataflow.set_seed` make it
    reproducible). Reentrant when the upstream is. Its checkpoint state holds the buffer's
    datapoints (codec-encoded: the cost of a state grows with ``buffer_size``), the random
    indices drawn but not yet used, and the RNG.
    """

    def __init__(
        self,
        ds: DataFlow[Any],
        buffer_size: int,
        num_reuse: int = 1,
        shuffle_interval: int | None = None,
        seed: int | None = None,
    ) -> None:
        ProxyDataFlow.__init__(self, ds)
        RNGDataFlow.__init__(self, seed)
        stage = type(self).__name__
        self.num_reuse = check_int(stage, "num_reuse", num_reuse)
        self.buffer_size = check_int(stage, "buffer_size", buffer_size, minimum=2)
        if self.buffer_size <= self.num_reuse:
            raise ValueError(
                f"{stage}: buffer_size {self.buffer_size} must be larger than num_reuse "
                f"{self.num_reuse}, or the copies of one datapoint fill the buffer and nothing "
                f"is shuffled; use a buffer of at least several batches"
            )
        self.shuffle_interval = shuffle_interval

    def reset_state(self) -> None:
        ProxyDataFlow.reset_state(self)
        RNGDataFlow.reset_state(self)

    def __len__(self) -> int:
        return len(self.ds) * self.num_reuse

    def __iter__(self) -> Iterator[Any]:
        rng = self.rng
        st = self.__dict__.pop("_resume", None) or _Epoch()
        self._st = st
        return self._shuffled(iter(self.ds), st, rng)

    def _shuffled(self, itr: Iterator[Any], st: _Epoch, rng: np.random.Generator) -> Iterator[Any]:
        if st.drain is None:
            cap, buf = self.buffer_size, st.buf
            picks = _random_indices(rng, cap, st)
            if self.num_reuse == 1:
                if len(buf) < cap:  # a resumed epoch may have filled it already
                    for dp in itr:  # filling
                        buf.append(dp)
                        if len(buf) == cap:
                            break
                for dp in itr:  # streaming: each new datapoint replaces the one produced
                    i = next(picks)
                    out = buf[i]
                    buf[i] = dp
                    yield out
            else:
                yield from self._with_copies(itr, st, picks)
            rng.shuffle(buf)
            st.drain = iter(buf)
        yield from st.drain

    def _with_copies(self, itr: Iterator[Any], st: _Epoch, picks: Iterator[int]) -> Iterator[Any]:
        cap, buf, reuse = self.buffer_size, st.buf, self.num_reuse
        pending = st.pending
        while True:
            if pending is None:
                dp = next(itr, _END)
                if dp is _END:
                    st.pending = None
                    return
                pending = st.pending = (dp, iter(range(reuse)))
            dp, copies = pending
            for _ in copies:
                if len(buf) < cap:
                    buf.append(dp)
                    continue
                i = next(picks)
                out = buf[i]
                buf[i] = dp
                yield out
            pending = None

    def _get_state(self, live: bool) -> dict[str, Any]:
        state: dict[str, Any] = {"rng": self._save_rng()}
        st: _Epoch | None = self.__dict__.get("_st")
        if not live or st is None:
            return state
        stage = type(self).__name__
        if st.drain is not None:
            pos = position(st.drain, len(st.buf))
            state["draining"] = encode_items(stage, st.buf[pos:], "buffered datapoints")
            return state
        state["buffer"] = encode_items(stage, st.buf, "buffered datapoints")
        picks: list[int] = []
        if st.chunk is not None and st.chunk_it is not None:
            picks = st.chunk[position(st.chunk_it, len(st.chunk)) :]
        state["picks"] = picks
        if st.pending is not None:
            dp, copies = st.pending
            left = copies.__length_hint__()  # type: ignore[attr-defined]
            if left:
                state["pending"] = encode_items(stage, [dp], "datapoint being copied")
                state["copies"] = left
        return state

    def _set_state(self, state: Mapping[str, Any], live: bool) -> None:
        stage = type(self).__name__
        rng = field(stage, state, "rng", (dict, type(None)))
        if live and "draining" in state:
            st = _Epoch()
            st.buf = decode_items(stage, state, "draining")
            st.drain = iter(st.buf)
            self._resume = st
        elif live and "buffer" in state:
            st = _Epoch()
            st.buf = decode_items(stage, state, "buffer")
            picks = field(stage, state, "picks", list)
            cap = self.buffer_size
            if len(st.buf) > cap or not all(type(i) is int and 0 <= i < cap for i in picks):
                raise StateError(f"{stage}: the saved buffer does not fit buffer_size={self.buffer_size}")
            st.chunk = list(picks)
            st.chunk_it = iter(st.chunk)
            if "pending" in state:
                copies = int_field(stage, state, "copies", 1, self.num_reuse)
                st.pending = (decode_items(stage, state, "pending")[0], iter(range(copies)))
            self._resume = st
        self._load_rng(rng)


class _Epoch:
    """What one epoch of :class:`LocallyShuffleData` holds (read by ``_get_state``)."""

    __slots__ = ("buf", "chunk", "chunk_it", "drain", "pending")

    def __init__(self) -> None:
        self.buf: list[Any] = []
        self.chunk: list[int] | None = None  # random indices drawn in one go
        self.chunk_it: Iterator[int] | None = None  # the next of them
        self.drain: Iterator[Any] | None = None  # the final shuffled buffer, once the upstream ended
        self.pending: tuple[Any, Iterator[int]] | None = None  # a datapoint and its copies left


_END = object()


def _random_indices(rng: np.random.Generator, high: int, st: _Epoch) -> Iterator[int]:
    """Uniform ints in ``[0, high)``, drawn in chunks (one Generator call per 4096); what is left
    of a chunk stays in ``st`` for the checkpoint (a resumed epoch starts with it)."""
    if st.chunk_it is not None:
        yield from st.chunk_it
    while True:
        st.chunk = rng.integers(0, high, _DRAW_CHUNK).tolist()
        st.chunk_it = iter(st.chunk)
        yield from st.chunk_it
