"""TFRecord framing: reading records, writing them fast, and the index file beside a file.

A record is ``uint64 length``, ``uint32 masked CRC-32C of the length``, ``data``, ``uint32
masked CRC-32C of the data`` (little-endian). The index file ``<file>.index`` (written by
:class:`RecordWriter` users, or by :func:`write_index` for any TFRecord file) is one
safe-codec dict: ``{"format": "tfrecord-index", "version": 1, "count": n, "writer": ...,
"data_bytes": size of the TFRecord file, "offsets": uint64[n], "crc32c": CRC-32C of the
offsets' bytes}`` where ``offsets[i]`` is the byte offset of record ``i``. TensorFlow never
sees it: the TFRecord file holds only records.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterator
from typing import IO, Any

import numpy as np

from .. import codec
from ._atomic import atomic_write
from ._common import FormatError, check_meta, make_meta
from ._crc32c import crc32c, crc32c_parts, mask, masked_crc32c

__all__ = [
    "HEADER_MAGIC",
    "INDEX_SUFFIX",
    "RecordWriter",
    "frame",
    "index_path",
    "read_index",
    "read_record_at",
    "parse_index",
    "read_records",
    "read_records_from",
    "write_index",
]

INDEX_SUFFIX = ".index"
HEADER_MAGIC = b"DFTFREC\x00"  # the header record that files of the earlier layout start with
INDEX_FORMAT, INDEX_VERSION = "tfrecord-index", 1
_LEN = struct.Struct("<QI")
_CRC = struct.Struct("<I")
_COUNT = struct.Struct("<Q")
_SMALL = 1 << 16  # records below this size are gathered and written in ~1 MiB chunks
_CHUNK = 1 << 20
_IOV_MAX = 512


def frame(data: bytes) -> bytes:
    """One TFRecord record holding ``data``."""
    length = _COUNT.pack(len(data))
    return b"".join((length, _CRC.pack(masked_crc32c(length)), data, _CRC.pack(masked_crc32c(data))))


def index_path(path: str) -> str:
    return path + INDEX_SUFFIX


def read_records(
    stage: str, path: str, verify_crc: bool = True, offset: int = 0, index: int = 0
) -> Iterator[tuple[int, int, bytes]]:
    """``(index, byte offset, data)`` of every record of the TFRecord file ``path``, from the
    record ``index`` that starts at byte ``offset`` (a record boundary) on."""
    with open(path, "rb", buffering=1 << 20) as f:
        if offset:
            f.seek(offset)
        yield from read_records_from(stage, path, f, verify_crc, offset, index)


def read_records_from(
    stage: str, path: str, f: IO[bytes], verify_crc: bool = True, offset: int = 0, index: int = 0
) -> Iterator[tuple[int, int, bytes]]:
    """:func:`read_records` from the open file ``f``, positioned at byte ``offset`` of
    ``path`` (which names the file in errors)."""
    unpack_len, unpack_crc = _LEN.unpack, _CRC.unpack
    read = f.read
    while True:
        head = read(12)
        if not head:
            return
        if len(head) < 12:
            raise _damaged(stage, path, index, offset, "the file is truncated (a partial record header)")
        length, length_crc = unpack_len(head)
        if masked_crc32c(head[:8]) != length_crc:
            raise _damaged(stage, path, index, offset, "corrupt record length (CRC mismatch)")
        data = read(length)
        tail = read(4)
        if len(data) < length or len(tail) < 4:
            got = len(head) + len(data) + len(tail)
            what = f"the file is truncated (the record needs {length + 16} bytes, the file ends after {got})"
            raise _damaged(stage, path, index, offset, what)
        if verify_crc and masked_crc32c(data) != unpack_crc(tail)[0]:
            raise _damaged(stage, path, index, offset, "corrupt record data (CRC mismatch)")
        yield index, offset, data
        index += 1
        offset += length + 16


def read_record_at(stage: str, path: str, fd: int, index: int, offset: int, verify_crc: bool = True) -> bytes:
    """The data of record ``index`` at byte ``offset`` of the open file ``fd`` (two
    ``pread`` calls; the file position is not used, so readers may share ``fd``)."""
    head = os.pread(fd, 12, offset)
    if len(head) < 12:
        raise _damaged(stage, path, index, offset, "the file is truncated (a partial record header)")
    length, length_crc = _LEN.unpack(head)
    if masked_crc32c(head[:8]) != length_crc:
        why = "a damaged file, or an index file that does not belong to it"
        raise _damaged(stage, path, index, offset, f"corrupt record length (CRC mismatch; {why})")
    rec = os.pread(fd, length + 4, offset + 12)
    if len(rec) < length + 4:
        raise _damaged(stage, path, index, offset, "the file is truncated")
    data = rec[:length]
    if verify_crc and masked_crc32c(data) != _CRC.unpack_from(rec, length)[0]:
        raise _damaged(stage, path, index, offset, "corrupt record data (CRC mismatch)")
    return data


def decode_record(
    stage: str, path: str, index: int, offset: int, data: bytes, decode: Callable[[bytes], Any]
) -> Any:
    """``decode(data)`` for record ``index`` of ``path`` (at byte ``offset``); a record that
    does not decode raises :class:`~dataflow.CodecError` naming the file, record and offset."""
    try:
        return decode(data)
    except codec.CodecError as e:
        raise codec.CodecError(
            f"{stage}: {path}: record {index} at byte offset {offset} cannot be decoded "
            f"({e}); for records not written by TFRecordSerializer use decode=False"
        ) from e


def _damaged(stage: str, path: str, index: int, offset: int, what: str) -> FormatError:
    return FormatError(f"{stage}: {path}: record {index} at byte offset {offset}: {what}")


class RecordWriter:
    """Appends records to the file open for writing as ``fd`` (unbuffered), with as few
    system calls and copies as TFRecord allows: a large record is its own write (``writev``
    of the 12-byte header, the data's parts as they are and the 4-byte CRC, computed over
    the parts: the only copy is the kernel's), and small records are gathered in a buffer
    written about every MiB. ``offsets`` lists each record's byte offset, ``size`` is the
    file's size."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.offsets: list[int] = []
        self.size = 0
        self._pending = bytearray()

    def write(self, data: bytes) -> None:
        """Append one record holding ``data``."""
        self.write_parts([data])

    def write_parts(self, parts: list[Any]) -> None:
        """Append one record holding the concatenation of ``parts`` (contiguous buffers,
        e.g. :func:`dataflow.codec.dumps_parts`), without joining them first."""
        n = sum(memoryview(p).nbytes for p in parts)
        length = _COUNT.pack(n)
        head = length + _CRC.pack(masked_crc32c(length))
        one = parts[0] if len(parts) == 1 and isinstance(parts[0], bytes) else None
        tail = _CRC.pack(mask(crc32c(one) if one is not None else crc32c_parts(parts)))
        self.offsets.append(self.size)
        self.size += n + 16
        pending = self._pending
        if n < _SMALL:
            pending += head
            for p in parts:
                pending += p
            pending += tail
            if len(pending) >= _CHUNK:
                self._write_all([pending])
                pending.clear()
        else:
            self._write_all([pending, head, *parts, tail] if pending else [head, *parts, tail])
            pending.clear()

    def flush(self) -> None:
        if self._pending:
            self._write_all([self._pending])
            self._pending.clear()

    def _write_all(self, buffers: list[Any]) -> None:
        """``writev`` until every byte is written (a write may stop short)."""
        views = [memoryview(b) for b in buffers]
        while views:
            done = os.writev(self.fd, views[:_IOV_MAX])
            if done <= 0:
                raise OSError(f"TFRecord writer: writev wrote nothing ({done}) to a regular file")
            while views and done >= views[0].nbytes:
                done -= views[0].nbytes
                views.pop(0)
            if done:
                views[0] = views[0][done:]


# -- the index file ------------------------------------------------------------------------


def write_index_file(path: str, offsets: list[int] | np.ndarray, data_bytes: int) -> None:
    """Write the index of a TFRecord file of ``data_bytes`` bytes to ``path`` (as is: the
    caller makes it atomic)."""
    meta = make_meta(INDEX_FORMAT, INDEX_VERSION, len(offsets))
    array = np.asarray(offsets, dtype=np.uint64)
    meta.update(data_bytes=int(data_bytes), offsets=array, crc32c=crc32c(array.tobytes()))
    with open(path, "wb") as f:
        f.write(codec.dumps(meta))


def read_index(stage: str, path: str) -> np.ndarray | None:
    """The record offsets of the TFRecord file ``path`` from its index file, or ``None`` if
    it has none. Raises :class:`FormatError` naming the files when the index is damaged or
    does not match the file (another size: truncated, or rewritten without its index)."""
    ipath = index_path(path)
    try:
        with open(ipath, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise FormatError(f"{stage}: {ipath}: the index file cannot be read ({e})") from e
    return parse_index(stage, path, raw, os.path.getsize(path))


def parse_index(stage: str, path: str, raw: bytes, size: int | None) -> np.ndarray:
    """The record offsets in ``raw``, the index file of the TFRecord file ``path`` of
    ``size`` bytes (``None``: not known, not checked); damage raises :class:`FormatError`."""
    ipath = index_path(path)
    try:
        meta = codec.loads(raw)
    except codec.CodecError as e:
        raise FormatError(f"{stage}: {ipath}: the index file is damaged ({e})") from e
    count = check_meta(stage, ipath, meta, INDEX_FORMAT, INDEX_VERSION)
    offsets, data_bytes = meta.get("offsets"), meta.get("data_bytes")
    if not isinstance(offsets, np.ndarray) or offsets.dtype != np.uint64 or offsets.shape != (count,):
        raise FormatError(f"{stage}: {ipath}: the index file is damaged (no offsets for {count} records)")
    if meta.get("crc32c") != crc32c(offsets.tobytes()):
        raise FormatError(f"{stage}: {ipath}: the index file is damaged (its offsets fail their CRC)")
    if not isinstance(data_bytes, int) or (count and int(offsets[-1]) + 16 > data_bytes):
        raise FormatError(f"{stage}: {ipath}: the index file is damaged (data size {data_bytes!r})")
    if size is not None and size != data_bytes:
        what = "truncated" if size < data_bytes else "longer than its index says"
        raise FormatError(
            f"{stage}: {path} has {size} bytes but its index file {ipath} says {data_bytes}: the file "
            f"is {what}, or was rewritten without its index (remove the index, or rebuild it with "
            f"dataflow.TFRecordSerializer.write_index)"
        )
    return offsets


def write_index(path: str, verify_crc: bool = True) -> int:
    """Scan the TFRecord file ``path`` (any, e.g. written by TensorFlow) once and write its
    index file ``<path>.index``, which gives :class:`~dataflow.formats.TFRecordData` its
    length without a scan and random access (``shuffle=True``, sharding by index). Returns
    the number of records. Raises :class:`FormatError` if the file is damaged."""
    stage = "write_index"
    offsets = [
        offset
        for index, offset, data in read_records(stage, path, verify_crc)
        if index or data[:8] != HEADER_MAGIC  # the header of an older file of ours is no record
    ]
    ipath = index_path(path)
    with atomic_write(stage, ipath, overwrite=True) as tmp:
        write_index_file(tmp, offsets, os.path.getsize(path))
    return len(offsets)
