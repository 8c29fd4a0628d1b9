"""The layout of the LMDB databases :meth:`~dataflow.formats._lmdb_format.LMDBSerializer.save`
writes: one key per datapoint, ``b"%010d" % index`` (key order is write order), and the
metadata key ``b"__dataflow_format__"``; tensorpack's databases keep their key list under
``b"__keys__"``."""

from __future__ import annotations

__all__ = ["FORMAT_VERSION", "META_KEY", "TENSORPACK_KEYS", "data_key"]

FORMAT_VERSION = 1
META_KEY = b"__dataflow_format__"
TENSORPACK_KEYS = b"__keys__"
_META_KEYS = frozenset((META_KEY, TENSORPACK_KEYS))
_APPEND_LIMIT = 10**10  # keys b"%010d" sort in write order below this count (and before META_KEY)


def data_key(index: int) -> bytes:
    return b"%010d" % index
