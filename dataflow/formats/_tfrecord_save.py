"""Writing one TFRecord file and its index, all or nothing (what
:meth:`dataflow.formats._tfrecord.TFRecordSerializer.save` does)."""

from __future__ import annotations

import os
from typing import Any

from .. import codec
from ..base import DataFlow
from ._atomic import _create_temp, _fsync, _fsync_dir, _remove, atomic_write, check_target
from ._common import PathType, fspath, iterate_for_save
from ._tfrecord_io import RecordWriter, index_path, write_index_file

__all__ = ["save_tfrecord"]


def save_tfrecord(
    df: DataFlow[Any], path: PathType, *, overwrite: bool, progress: bool, durable: bool
) -> None:
    """See :meth:`~dataflow.formats._tfrecord.TFRecordSerializer.save`: one epoch of ``df``, one
    record per datapoint (the safe codec), the file renamed into place once complete, then
    its index (a stale index of a replaced file is removed first)."""
    stage = "TFRecordSerializer.save"
    path = fspath(stage, "path", path)
    ipath = index_path(path)
    check_target(stage, ipath, overwrite=True)
    itmp = ""
    try:
        with atomic_write(stage, path, overwrite, durable) as tmp:
            fd = os.open(tmp, os.O_WRONLY)  # not O_TRUNC: see atomic_write
            try:
                writer = RecordWriter(fd)
                dumps_parts = codec.dumps_parts  # the arrays' memory goes to writev as it is
                for dp in iterate_for_save(stage, df, progress):
                    writer.write_parts(dumps_parts(dp))
                writer.flush()
            finally:
                os.close(fd)
            itmp = _create_temp(*os.path.split(os.path.abspath(ipath)))
            write_index_file(itmp, writer.offsets, writer.size)
            if durable:
                _fsync(itmp)
            _remove_index(ipath)  # never leave the old index beside the new file
        os.replace(itmp, ipath)
    except BaseException:
        if itmp:
            _remove(itmp)
        raise
    if durable:
        _fsync_dir(os.path.dirname(os.path.abspath(ipath)))


def _remove_index(ipath: str) -> None:
    try:
        os.remove(ipath)
    except FileNotFoundError:
        pass
