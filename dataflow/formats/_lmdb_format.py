"""LMDB databases: :class:`LMDBData`, :class:`LMDBDataDecoder` and :class:`LMDBSerializer`.

Needs the optional package ``lmdb`` (``pip install "dataflow-ml[lmdb]"``); it is imported
only when a class of this module is used.

Layout written by :meth:`LMDBSerializer.save`: one key per datapoint, ``b"%010d" % index``
(so key order is write order), whose value is the datapoint encoded with the safe codec,
plus the metadata key ``b"__dataflow_format__"`` holding the codec-encoded dict
``{"format": "lmdb", "version": 1, "count": n, "writer": "dataflow-ml x.y.z"}``.

The readers live in their own modules (:mod:`._lmdb_data`, :mod:`._lmdb_decoder`, and
:mod:`._lmdb_decoded` for what :meth:`LMDBSerializer.load` returns); this module is their
public home and holds the serializer.
"""

from __future__ import annotations

from typing import Any

from ..base import DataFlow
from ._common import PathType
from ._lmdb_data import LMDBData
from ._lmdb_decoded import SerializedLMDB
from ._lmdb_decoder import LMDBDataDecoder
from ._lmdb_save import save_lmdb

__all__ = ["LMDBData", "LMDBDataDecoder", "LMDBSerializer"]


class LMDBSerializer:
    """Save a flow to an LMDB database and load it back (tensorpack's API).

    Example::

        LMDBSerializer.save(df, "train.lmdb")
        df = LMDBSerializer.load("train.lmdb", shuffle=True)
    """

    @staticmethod
    def save(
        df: DataFlow[Any],
        path: PathType,
        write_frequency: int = 5000,
        *,
        map_size: int = 1 << 30,
        overwrite: bool = False,
        progress: bool = True,
        durable: bool = False,
    ) -> None:
        """Write one epoch of ``df`` (after ``df.reset_state()``) to ``path``: a file, or
        ``data.mdb`` inside ``path`` if it is an existing directory. ``write_frequency``
        datapoints (or about 64 MiB of encoded values, whichever comes first, so memory stays
        bounded for large datapoints) are committed per transaction. The map starts at
        ``map_size`` bytes and grows ahead of the data (and doubles if it is full anyway),
        keeping every record. All or nothing: the database
        appears at its path only once complete; an existing one is replaced only with
        ``overwrite=True``.
        ``durable=True`` also flushes it to the disk before it appears, so it survives a
        power loss too (see :doc:`/formats`)."""
        save_lmdb(
            df, path, write_frequency, map_size=map_size, overwrite=overwrite, progress=progress,
            durable=durable,
        )  # fmt: skip

    @staticmethod
    def load(
        path: PathType, shuffle: bool = True, seed: int | None = None, *, allow_pickle: bool = False
    ) -> LMDBData:
        """A flow of the decoded datapoints of a database written by :meth:`save`, in write
        order or shuffled each epoch; a value that does not decode raises
        :class:`~dataflow.CodecError` naming its key.

        Databases written by tensorpack's ``LMDBSerializer`` are read too: values in its
        msgpack encoding always (decoded safely), values it pickled (its default) only with
        ``allow_pickle=True``, like :func:`numpy.load` (see
        :mod:`dataflow.formats._tensorpack_decode`). Other databases are refused with
        :class:`~dataflow.FormatError` (read those with :class:`LMDBData`)."""
        return SerializedLMDB(path, shuffle=shuffle, seed=seed, allow_pickle=allow_pickle)
