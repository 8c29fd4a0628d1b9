"""tensorpack's decoder over an LMDB reader: :class:`LMDBDataDecoder` (public in
:mod:`dataflow.formats._lmdb_format`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from .._checks import check_callable
from ..base import DataFlow, ProxyDataFlow

__all__ = ["LMDBDataDecoder"]


class LMDBDataDecoder(ProxyDataFlow):
    """Map ``[key, value]`` pairs of an :class:`LMDBData` (or any flow yielding them) to
    ``decoder(key, value)``; a ``None`` result drops the entry (``len`` is then an upper
    bound). Order, epochs and reentrancy are the upstream's.

    Checkpoints through its upstream: each entry is decoded on its own, so the position
    after the last datapoint yielded is the upstream's position after that entry (or after
    the entries dropped behind it), and a resumed pipeline decodes the same entries.
    ``decoder`` must be a function of its arguments alone for that to hold."""

    stateless = True  # one entry in, at most one datapoint out, nothing kept between them

    def __init__(self, lmdb_data: DataFlow[Any], decoder: Callable[[bytes, bytes], Any]) -> None:
        super().__init__(lmdb_data)
        check_callable("LMDBDataDecoder", "decoder", decoder)
        self.decoder = decoder

    def __iter__(self) -> Iterator[Any]:
        # the upstream's epoch starts now, with this one (not at the first pull): a reader
        # that resumes this flow at the end of an epoch and never pulls from it still has
        # the upstream take its saved position in that epoch, not in the next
        return self._track(self._decoded(iter(self.ds)))

    def _decoded(self, entries: Iterator[Any]) -> Iterator[Any]:
        decoder = self.decoder
        for k, v in entries:
            dp = decoder(k, v)
            if dp is not None:
                yield dp
