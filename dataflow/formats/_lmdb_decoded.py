"""What :meth:`LMDBSerializer.load <dataflow.formats.LMDBSerializer.load>` returns: an
:class:`~dataflow.formats.LMDBData` over our databases (or tensorpack's) that yields decoded
datapoints."""

from __future__ import annotations

from collections.abc import Iterator
from operator import itemgetter
from typing import Any

from .. import codec
from ._common import FormatError, PathType
from ._lmdb_data import LMDBData
from ._lmdb_layout import META_KEY, TENSORPACK_KEYS, data_key

__all__ = ["SerializedLMDB"]


class SerializedLMDB(LMDBData):
    """The databases :meth:`LMDBSerializer.save` writes (or tensorpack's LMDBSerializer
    wrote), yielding decoded datapoints."""

    _stage = "LMDBSerializer.load"

    def __init__(self, path: PathType, shuffle: bool, seed: int | None, allow_pickle: bool) -> None:
        super().__init__(path, shuffle=shuffle, seed=seed)
        self._allow_pickle = bool(allow_pickle)
        self._tensorpack = False

    def _check_kind(self, tensorpack: bool) -> None:
        self._tensorpack = self._count is None and tensorpack
        if self._count is None and not tensorpack:
            raise FormatError(
                f"{self._stage}: {self._path} was written neither by LMDBSerializer (no "
                f"{META_KEY!r} entry) nor by tensorpack's (no {TENSORPACK_KEYS!r}); read its raw "
                f"entries with LMDBData"
            )

    def _entry(self, key: Any, value: Any) -> Any:
        if self._tensorpack:  # its own keys, msgpack or pickle: see tensorpack_decode
            from ._tensorpack_decode import loads_tensorpack

            where = f"{self._stage}: {self._path}, key {bytes(key)!r}"
            return loads_tensorpack(value, allow_pickle=self._allow_pickle, where=where)
        try:
            return codec.loads(value)  # copies out of the read-only map view
        except codec.CodecError as e:
            raise self._undecodable(key, e) from e

    _buffers = True  # values are decoded (copied) before the next entry is read

    def _in_key_order(self, env: Any, positions: Iterator[int], start: int) -> Iterator[Any]:
        """Decoded values in key order from position ``start``: our keys ``b"%010d" % i`` sort
        before the metadata key, and the metadata's count equals the number of other entries
        (checked by ``reset_state()``), so the cursor starts at the position's key and
        yields values only, one per position, decoded by C-level iterators (no Python frame
        per entry)."""
        if self._tensorpack:
            yield from super()._in_key_order(env, positions, start)
            return
        loads, CodecError = codec.loads, codec.CodecError
        with env.begin(buffers=True) as txn:
            cur = txn.cursor()
            try:
                if not cur.set_range(data_key(start)):  # walks the tree: a damaged page raises here too
                    return
                values = map(itemgetter(1), zip(positions, cur.iternext(keys=False, values=True)))
                yield from map(loads, values)
            except CodecError as e:
                raise self._undecodable(bytes(cur.key()), e) from e
            except self._lmdb_error as e:
                raise self._damaged(e) from e

    def _undecodable(self, key: bytes, e: Exception) -> Exception:
        return codec.CodecError(
            f"LMDBSerializer: {self._path}: the value of key {bytes(key)!r} cannot be decoded ({e})"
        )
