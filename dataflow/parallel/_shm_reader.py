"""The consumer's side of the shared-memory rings (see :mod:`dataflow.parallel._shm`): arrays
rebuilt as views of a worker's ring, whose death frees their slot."""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from ._shm import _DATA_START, TABLE_SLOTS, Descriptor, create_rings, map_ring, unlink_all

__all__ = ["RingReader"]


class RingReader:
    """The consumer's side of every ring of one runner."""

    def __init__(self, paths: list[str], copy: bool = False) -> None:
        self.paths = paths
        self.copy = copy
        self._maps = [map_ring(p) for p in paths]
        self._tables = [np.frombuffer(m, np.uint8, TABLE_SLOTS) for m in self._maps]

    @classmethod
    def create(
        cls, stage: str, count: int, total_bytes: int, copy: bool = False, record: list[str] | None = None
    ) -> RingReader | None:
        """Create and map ``count`` rings (one per worker) sharing ``total_bytes``; ``None`` if
        shared memory is unavailable (see :func:`create_rings`, and its ``record``)."""
        paths = create_rings(stage, count, total_bytes, record)
        if paths is None:
            return None
        try:
            return cls(paths, copy)
        except BaseException:
            unlink_all(paths)
            raise

    @property
    def nbytes(self) -> int:
        """The size of all the rings."""
        return sum(len(m) for m in self._maps)

    def buffer(self, desc: Descriptor) -> Any:
        """A buffer for one descriptor: a view of the ring whose death frees the slot, or a
        private copy (``copy=True``), after which the slot is free at once."""
        ring, slot, start, n = desc
        table = self._tables[ring]
        region = np.frombuffer(self._maps[ring], np.uint8, n, _DATA_START + start)
        if self.copy:
            owned = region.copy()
            del region
            table[slot] = 0
            return owned
        # the finalizer holds the list, not the table: a finalizer that a Ctrl-C skipped
        # (it stays registered) must not keep the mapping alive after close()
        weakref.finalize(region, _release, self._tables, ring, slot)
        return region

    def close(self) -> None:
        """Unlink names a worker never took, drop the mappings (if no array still views
        them; otherwise they go with the last such array)."""
        unlink_all(self.paths)
        self._tables.clear()  # the finalizers of arrays still alive hold this very list
        for m in self._maps:
            try:
                m.close()
            except BufferError:  # arrays the user still holds view it; freed with them
                pass
        self._maps = []


def _release(tables: list[np.ndarray], ring: int, slot: int) -> None:
    """Mark ``slot`` of ``ring`` free (nothing once the reader is closed)."""
    if ring < len(tables):
        tables[ring][slot] = 0
