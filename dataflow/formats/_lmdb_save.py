"""Writing an LMDB database, all or nothing (what
:meth:`dataflow.formats._lmdb_format.LMDBSerializer.save` does; the layout is described
in :mod:`dataflow.formats._lmdb_format`)."""

from __future__ import annotations

import os
from typing import Any

from .. import codec
from .._checks import check_int
from ..base import DataFlow
from ._atomic import atomic_write
from ._common import PathType, fspath, iterate_for_save, make_meta
from ._lmdb_env import BatchWriter, import_lmdb
from ._lmdb_layout import _APPEND_LIMIT, FORMAT_VERSION, META_KEY, data_key

__all__ = ["save_lmdb"]


def save_lmdb(
    df: DataFlow[Any],
    path: PathType,
    write_frequency: int,
    *,
    map_size: int,
    overwrite: bool,
    progress: bool,
    durable: bool,
) -> None:
    """See :meth:`~dataflow.formats._lmdb_format.LMDBSerializer.save`: one epoch of ``df``,
    ``write_frequency`` datapoints (or ~64 MiB) per transaction, the map grown ahead of the
    data, the database renamed into place once complete and cut to the pages it uses."""
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
