"""LMDB databases: :class:`LMDBData`, :class:`LMDBDataDecoder` and :class:`LMDBSerializer`.

Needs the optional package ``lmdb`` (``pip install "dataflow-ml[lmdb]"``); it is imported
only when a class of this module is used.

Layout written by :meth:`LMDBSerializer.save`: see :mod:`dataflow.formats._lmdb_layout`; each
value is the datapoint encoded with the safe codec, and the metadata key holds the
codec-encoded dict ``{"format": "lmdb", "version": 1, "count": n, "writer": ...}``.

The readers live in their own modules (:mod:`._lmdb_data`, :mod:`._lmdb_decoder`, and
:mod:`._lmdb_decoded` for what :meth:`LMDBSerializer.load` returns); this module is their
public home and holds the serializer, which writes the database.
"""

from __future__ import annotations

import os
from typing import Any

from .. import codec
from .._checks import check_int
from ..base import DataFlow
from ._atomic import atomic_write
from ._common import PathType, fspath, iterate_for_save, make_meta
from ._lmdb_data import LMDBData
from ._lmdb_decoded import SerializedLMDB
from ._lmdb_decoder import LMDBDataDecoder
from ._lmdb_env import BatchWriter, import_lmdb
from ._lmdb_layout import _APPEND_LIMIT, FORMAT_VERSION, META_KEY, data_key

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
        stage = "LMDBSerializer.save"
        lmdb = import_lmdb(stage)
        path = fspath(stage, "path", path)
        write_frequency = check_int(stage, "write_frequency", write_frequency)
        map_size = check_int(stage, "map_size", map_size, minimum=4096)
        target = os.path.join(path, "data.mdb") if os.path.isdir(path) else path
        with atomic_write(stage, target, overwrite, durable) as tmp:
            # writemap: LMDB writes values straight into the mapped file (no dirty copy in
            # malloc'd pages written out at commit: ~3x less CPU for large values). The file
            # is then as large as the map (sparse) until it is cut to its pages below.
            env = lmdb.open(
                tmp, subdir=False, map_size=map_size, lock=False, meminit=False,
                sync=False, metasync=False, max_dbs=0, writemap=True, map_async=True,
            )  # fmt: skip
            try:
                writer = BatchWriter(lmdb, env, write_frequency)
                count = 0
                dumps_parts = codec.dumps_parts
                for dp in iterate_for_save(stage, df, progress):
                    writer.put(data_key(count), dumps_parts(dp))
                    count += 1
                    if count == _APPEND_LIMIT:  # longer keys no longer sort in write order
                        writer.flush()
                        writer.append = False
                writer.put(META_KEY, [codec.dumps(make_meta("lmdb", FORMAT_VERSION, count))])
                writer.flush()  # META_KEY sorts after every data key
                if durable:
                    env.sync(True)
                used = (env.info()["last_pgno"] + 1) * env.stat()["psize"]
            finally:
                env.close()
            os.truncate(tmp, used)  # every page LMDB uses lies below its last page number

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
