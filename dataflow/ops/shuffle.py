"""Buffered shuffling: :class:`LocallyShuffleData` (the ``shuffle(buffer_size)`` counterpart)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from .._checks import check_int
from ..base import DataFlow, ProxyDataFlow, RNGDataFlow

__all__ = ["LocallyShuffleData"]

_DRAW_CHUNK = 4096


class LocallyShuffleData(ProxyDataFlow, RNGDataFlow):
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
    reproducible). Reentrant when the upstream is.
    """

    def __init__(
        self,
        ds: DataFlow,
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
        cap, reuse = self.buffer_size, self.num_reuse
        buf: list[Any] = []
        picks = _random_indices(rng, cap)
        for dp in self.ds:
            for _ in range(reuse):
                if len(buf) < cap:
                    buf.append(dp)
                    continue
                i = next(picks)
                yield buf[i]
                buf[i] = dp
        rng.shuffle(buf)  # type: ignore[arg-type]
        yield from buf


def _random_indices(rng: np.random.Generator, high: int) -> Iterator[int]:
    """Uniform ints in ``[0, high)``, drawn in chunks (one Generator call per 4096)."""
    while True:
        yield from rng.integers(0, high, _DRAW_CHUNK).tolist()
