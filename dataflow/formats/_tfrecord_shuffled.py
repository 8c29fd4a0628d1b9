"""``TFRecordData(..., shuffle=True)``: TFRecord files read by index through their index files."""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterator, Sequence
from itertools import accumulate, chain
from typing import Any

from ..errors import DataFlowNotReset
from ..sources._indexed import IndexedSource, cursor
from ._common import FormatError
from ._tfrecord_io import decode_record, index_path, read_index, read_record_at
from .tfrecord import TFRecordData, _decoder

__all__ = ["ShuffledTFRecordData"]


class ShuffledTFRecordData(IndexedSource[Any], TFRecordData):
    """What ``TFRecordData(paths, shuffle=True)`` builds: a random-access source over the
    records of all files (a new permutation each epoch, sharded by index), each record read
    at the offset its file's index gives (``pread``; both CRCs checked). Checkpoints like
    every random-access source: epoch, position, the RNG at the epoch's start."""

    _random_access = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """:class:`TFRecordData`'s arguments (its ``__new__`` builds this class for them)."""
        TFRecordData.__init__(self, *args, **kwargs)
        IndexedSource.__init__(self, kwargs.get("seed", args[5] if len(args) > 5 else None))
        self._shuffle = True
        self._offsets: list[list[int]] | None = None
        self._starts: list[int] = [0]

    def _load_offsets(self) -> list[list[int]]:
        stage = type(self).__name__
        offsets = []
        for path in self.paths:
            if not os.path.isfile(path):
                raise FileNotFoundError(f"{stage}: no such file: {path!r}")
            found = read_index(stage, path)
            if found is None:
                raise FormatError(
                    f"{stage}: shuffle=True reads records by their offsets, but {path} has no index "
                    f"file {index_path(path)}; write it once with "
                    f"dataflow.formats.tfrecord.write_index({path!r}), or read in file order"
                )
            offsets.append(found.tolist())
        self._starts = list(accumulate((len(o) for o in offsets), initial=0))
        total = self._starts[-1]
        if self._size is not None and self._size != total:
            raise ValueError(f"{stage}: size={self._size} but the files' indexes say {total} records")
        self._offsets = offsets
        return offsets

    def reset_state(self) -> None:
        IndexedSource.reset_state(self)
        self._decode_fn = _decoder(type(self).__name__, self.decode)
        self._load_offsets()

    def _num_items(self) -> int:
        if self._offsets is None:
            self._load_offsets()
        return self._starts[-1]

    def _open(self, order: Sequence[int], start: int) -> tuple[Iterator[Any], Iterator[int], Iterator[Any]]:
        if self._offsets is None or "_decode_fn" not in self.__dict__:
            raise DataFlowNotReset(f"{type(self).__name__} was iterated before reset_state()")
        cur, probe = cursor(order, start)
        positions = cur if probe is cur else chain(cur, probe)
        return self._read(positions), cur, probe

    def _read(self, indices: Iterator[int]) -> Iterator[Any]:
        """One record per index drawn (so the position is the number of records yielded)."""
        stage, verify, decode = type(self).__name__, self.verify_crc, self._decode_fn
        paths, offsets, starts = self.paths, self._offsets or [], self._starts
        fds: list[int] = []
        try:
            for path in paths:
                fds.append(os.open(path, os.O_RDONLY))
            for i in indices:
                f = bisect.bisect_right(starts, i) - 1 if len(paths) > 1 else 0
                j = i - starts[f]
                offset = offsets[f][j]
                data = read_record_at(stage, paths[f], fds[f], j, offset, verify)
                yield data if decode is None else decode_record(stage, paths[f], j, offset, data, decode)
        finally:
            for fd in fds:
                os.close(fd)
