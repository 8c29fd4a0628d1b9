"""What :meth:`LMDBSerializer.load <dataflow.formats.LMDBSerializer.load>` returns: an
:class:`~dataflow.formats.LMDBData` over our databases that yields decoded datapoints."""

from __future__ import annotations

from collections.abc import Iterator
from operator import itemgetter
from typing import Any

from .. import codec
from ._common import FormatError
from .lmdb_format import META_KEY, LMDBData, data_key

__all__ = ["SerializedLMDB"]


class SerializedLMDB(LMDBData):
    """The databases :meth:`LMDBSerializer.save` writes, yielding decoded datapoints."""

    _stage = "LMDBSerializer.load"

    def _check_kind(self, tensorpack: bool) -> None:
        stage = self._stage
        if self._count is not None:
            return
        if tensorpack:
            raise FormatError(
                f"{stage}: {self._path} was written by tensorpack's LMDBSerializer; its values "
                f"are msgpack/pickle, which dataflow never decodes (unpickling can run code). "
                f"If you trust the file, read it with LMDBDataDecoder(LMDBData(path), "
                f"lambda k, v: tensorpack.utils.serialize.loads(v)) and re-save it with "
                f"LMDBSerializer.save"
            )
        raise FormatError(
            f"{stage}: {self._path} was not written by LMDBSerializer (no {META_KEY!r} entry); "
            f"read its raw entries with LMDBData"
        )

    _buffers = True  # values are decoded (copied) before the next entry is read

    def _in_key_order(self, env: Any, positions: Iterator[int], start: int) -> Iterator[Any]:
        """Decoded values in key order from position ``start``: our keys ``b"%010d" % i`` sort
        before the metadata key, and the metadata's count equals the number of other entries
        (checked by ``reset_state()``), so the cursor starts at the position's key and
        yields values only, one per position, decoded by C-level iterators (no Python frame
        per entry)."""
        loads, CodecError = codec.loads, codec.CodecError
        with env.begin(buffers=True) as txn:
            cur = txn.cursor()
            if not cur.set_range(data_key(start)):
                return
            values = map(itemgetter(1), zip(positions, cur.iternext(keys=False, values=True)))
            try:
                yield from map(loads, values)
            except CodecError as e:
                raise self._undecodable(bytes(cur.key()), e) from e
            except self._lmdb_error as e:
                raise self._damaged(e) from e

    def _by_index(self, env: Any, indices: Iterator[int]) -> Iterator[Any]:
        keys = self._key_list()
        loads, CodecError = codec.loads, codec.CodecError
        with env.begin(buffers=True) as txn:
            get = txn.get
            k = b""
            try:
                for i in indices:
                    k = keys[i]
                    v = get(k)
                    if v is None:
                        raise FormatError(
                            f"{self._stage}: {self._path}: the database lists key {k!r} but "
                            f"holds no value for it; the file is damaged"
                        )
                    yield loads(v)  # copies out of the read-only map view
            except CodecError as e:
                raise self._undecodable(k, e) from e
            except self._lmdb_error as e:
                raise self._damaged(e) from e

    def _undecodable(self, key: bytes, e: Exception) -> Exception:
        return codec.CodecError(
            f"LMDBSerializer: {self._path}: the value of key {bytes(key)!r} cannot be decoded ({e})"
        )
