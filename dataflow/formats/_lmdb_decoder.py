"""tensorpack's decoder over an LMDB reader: :class:`LMDBDataDecoder` (public in
:mod:`dataflow.formats.lmdb_format`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from .._checks import check_callable
from ..base import DataFlow, ProxyDataFlow

__all__ = ["LMDBDataDecoder"]


class LMDBDataDecoder(ProxyDataFlow):
    """Map ``[key, value]`` pairs of an :class:`LMDBData` (or any flow yielding them) to
    ``decoder(key, value)``; a ``None`` result drops the entry (``len`` is then an upper
    bound). Order, epochs and reentrancy are the upstream's."""

    def __init__(self, lmdb_data: DataFlow[Any], decoder: Callable[[bytes, bytes], Any]) -> None:
        super().__init__(lmdb_data)
        check_callable("LMDBDataDecoder", "decoder", decoder)
        self.decoder = decoder

    def __iter__(self) -> Iterator[Any]:
        decoder = self.decoder
        for k, v in self.ds:
            dp = decoder(k, v)
            if dp is not None:
                yield dp
