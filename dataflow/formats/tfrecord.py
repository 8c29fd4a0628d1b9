"""TFRecord files without TensorFlow: :class:`TFRecordData` and :class:`TFRecordSerializer`.

A TFRecord file is a sequence of records, each framed as ``uint64 length``, ``uint32 masked
CRC-32C of the length``, ``data``, ``uint32 masked CRC-32C of the data`` (little-endian).
Both CRCs are checked on read; a mismatch, a truncated file or a record count that disagrees
with the header raises :class:`~dataflow.formats.FormatError` naming the file, the record
index and its byte offset.

Files written by :meth:`TFRecordSerializer.save` start with one *header record* (magic
``DFTFREC\\0``, the record count, and the format metadata: version, writer); every other
record is one datapoint encoded with the safe codec (:func:`dataflow.codec.dumps`).
TensorFlow reads these files too (``tf.data.TFRecordDataset(path).skip(1)``).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from .. import codec
from .._state_fields import check_file_count, int_field, offset_field
from ..base import DataFlow
from ..errors import LengthUnknownError
from ._atomic import atomic_write
from ._common import FormatError, PathType, check_meta, fspath, iterate_for_save, make_meta
from ._crc32c import masked_crc32c

__all__ = ["TFRecordData", "TFRecordSerializer"]

FORMAT_VERSION = 1
HEADER_MAGIC = b"DFTFREC\x00"
_LEN = struct.Struct("<QI")
_CRC = struct.Struct("<I")
_COUNT = struct.Struct("<Q")


def frame(data: bytes) -> bytes:
    """One TFRecord record holding ``data``."""
    length = _COUNT.pack(len(data))
    return b"".join((length, _CRC.pack(masked_crc32c(length)), data, _CRC.pack(masked_crc32c(data))))


def _header_payload(count: int) -> bytes:
    meta = make_meta("tfrecord", FORMAT_VERSION, count)
    del meta["count"]  # stored as a fixed-size field, patched when the file is complete
    return HEADER_MAGIC + _COUNT.pack(count) + codec.dumps(meta)


def _parse_header(stage: str, path: str, payload: bytes) -> int:
    try:
        meta = codec.loads(payload[16:])
    except codec.CodecError as e:
        raise FormatError(f"{stage}: {path}: the header record is malformed ({e})") from e
    if isinstance(meta, dict):
        meta["count"] = _COUNT.unpack_from(payload, 8)[0]
    return check_meta(stage, path, meta, "tfrecord", FORMAT_VERSION)


def read_records(
    stage: str, path: str, verify_crc: bool = True, offset: int = 0, index: int = 0
) -> Iterator[tuple[int, int, bytes]]:
    """``(index, byte offset, data)`` of every record of the TFRecord file ``path``, from the
    record ``index`` that starts at byte ``offset`` (a record boundary) on."""
    unpack_len, unpack_crc = _LEN.unpack, _CRC.unpack
    with open(path, "rb", buffering=1 << 20) as f:
        if offset:
            f.seek(offset)
        while True:
            head = f.read(12)
            if not head:
                return
            where = f"{path}: record {index} at byte offset {offset}"
            if len(head) < 12:
                raise FormatError(f"{stage}: {where}: the file is truncated (a partial record header)")
            length, length_crc = unpack_len(head)
            if masked_crc32c(head[:8]) != length_crc:
                raise FormatError(f"{stage}: {where}: corrupt record length (CRC mismatch)")
            data = f.read(length)
            tail = f.read(4)
            if len(data) < length or len(tail) < 4:
                raise FormatError(
                    f"{stage}: {where}: the file is truncated (the record needs {length + 16} "
                    f"bytes, the file ends after {len(head) + len(data) + len(tail)})"
                )
            if verify_crc and masked_crc32c(data) != unpack_crc(tail)[0]:
                raise FormatError(f"{stage}: {where}: corrupt record data (CRC mismatch)")
            yield index, offset, data
            index += 1
            offset += length + 16


class TFRecordData(DataFlow):
    """Read one TFRecord file, or several in order: any TFRecord file, or our own.

    With ``decode=True`` each record is decoded with the safe codec (files written by
    :meth:`TFRecordSerializer.save`); with ``decode=False`` each datapoint is the raw record
    ``bytes`` (e.g. a serialized ``tf.train.Example``). The header record of our files is
    never yielded. Order is file order (TFRecord has no random access; shuffle with
    :class:`~dataflow.LocallyShuffleData`). Every record's CRCs are checked unless
    ``verify_crc=False`` (then only the length CRC); a corrupt or truncated file raises
    :class:`~dataflow.formats.FormatError` naming the file, record and byte offset; an
    undecodable record raises :class:`~dataflow.codec.CodecError` naming them too.

    ``len`` is the count in the headers of our files, or ``size`` if given (for foreign
    files, the caller's claim; for ours it must match). Files are opened by each epoch and
    closed when it ends or its iterator is closed, so the flow is reentrant and fork-safe.

    Its state is the file in progress, the byte offset and index of the next record in it
    (and how many records of that file were read, to check the header's count): resuming
    seeks there and reads nothing again, in any TFRecord file.
    """

    def __init__(
        self,
        path: PathType | Sequence[PathType],
        decode: bool = True,
        size: int | None = None,
        verify_crc: bool = True,
    ) -> None:
        stage = type(self).__name__
        paths = [path] if isinstance(path, (str, os.PathLike)) else path
        if not isinstance(paths, (list, tuple)) or not paths:
            raise TypeError(f"{stage}: path must be a path or a non-empty list of paths, got {path!r}")
        self.paths = [fspath(stage, "path", p) for p in paths]
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
            raise ValueError(f"{stage}: size must be an int >= 0 or None, got {size!r}")
        self.decode = bool(decode)
        self._size = size
        self.verify_crc = bool(verify_crc)
        self._counts: list[int | None] | None = None

    def _read_counts(self) -> list[int | None]:
        """The record count of each file from its header, ``None`` for foreign files."""
        stage = type(self).__name__
        counts: list[int | None] = []
        for path in self.paths:
            if not os.path.isfile(path):
                raise FileNotFoundError(f"{stage}: no such file: {path!r}")
            first = next(read_records(stage, path, self.verify_crc), None)
            if first is None:
                counts.append(0)
            else:
                ours = first[2][:8] == HEADER_MAGIC
                counts.append(_parse_header(stage, path, first[2]) if ours else None)
        known = [c for c in counts if c is not None]
        if self._size is not None and len(known) == len(counts) and sum(known) != self._size:
            raise ValueError(
                f"{stage}: size={self._size} but the file headers say {sum(known)} records; "
                f"leave size=None to use the headers"
            )
        return counts

    def reset_state(self) -> None:
        self._counts = self._read_counts()

    def __len__(self) -> int:
        if self._size is not None:
            return self._size
        if self._counts is None:
            self._counts = self._read_counts()
        counts = self._counts
        if any(c is None for c in counts):
            raise LengthUnknownError(
                f"{type(self).__name__}: the length of a TFRecord file not written by "
                f"TFRecordSerializer is unknown; pass size= if you know it"
            )
        return sum(c for c in counts if c is not None)

    def __iter__(self) -> Iterator[Any]:
        resume = self.__dict__.pop("_resume", None)
        where = self._where = list(resume) if resume is not None else [0, 0, 0, 0]
        return self._track(self._records(where))

    def _records(self, where: list[int]) -> Iterator[Any]:
        """Every file from ``where = [file, byte offset, record index, records read]`` on;
        ``where`` is kept at the next record to read (the state's position)."""
        while where[0] < len(self.paths):
            yield from self._read_file(self.paths[where[0]], where)
            where[:] = [where[0] + 1, 0, 0, 0]

    def _read_file(self, path: str, where: list[int]) -> Iterator[Any]:
        stage, decode, loads = type(self).__name__, self.decode, codec.loads
        _, start, first, n = where
        expected = self._counts[where[0]] if first and self._counts is not None else None
        for index, offset, data in read_records(stage, path, self.verify_crc, start, first):
            if index == 0 and data[:8] == HEADER_MAGIC:
                expected = _parse_header(stage, path, data)
                where[1:3] = offset + len(data) + 16, 1
                continue
            n += 1
            where[1:] = offset + len(data) + 16, index + 1, n
            if not decode:
                yield data
                continue
            try:
                dp = loads(data)
            except codec.CodecError as e:
                raise codec.CodecError(
                    f"{stage}: {path}: record {index} at byte offset {offset} cannot be decoded "
                    f"({e}); for records not written by TFRecordSerializer use decode=False"
                ) from e
            yield dp
        if expected is not None and n != expected:
            raise FormatError(
                f"{stage}: {path}: the header says {expected} records but the file has {n}; "
                f"the file is truncated or damaged"
            )

    def _get_state(self, live: bool) -> dict[str, Any]:
        state: dict[str, Any] = {"files": len(self.paths)}
        where = self.__dict__.get("_where")
        if live and where is not None:
            state.update(file=where[0], offset=str(where[1]), record=where[2], read=where[3])
        return state

    def _set_state(self, state: Mapping[str, Any], live: bool) -> None:
        stage = type(self).__name__
        check_file_count(stage, state, len(self.paths))
        self.__dict__.pop("_resume", None)
        if not live or "file" not in state:
            return
        offset = offset_field(stage, state)
        where = (
            int_field(stage, state, "file", 0, len(self.paths)),
            offset,
            int_field(stage, state, "record", 0),
            int_field(stage, state, "read", 0),
        )
        self._resume = where


class TFRecordSerializer:
    """Save a flow to one TFRecord file and load it back (tensorpack's API, without TensorFlow).

    Example::

        TFRecordSerializer.save(df, "train.tfrecord")
        df = TFRecordSerializer.load("train.tfrecord")   # len is known from the header
    """

    @staticmethod
    def save(df: DataFlow, path: PathType, *, overwrite: bool = False, progress: bool = True) -> None:
        """Write every datapoint of one epoch of ``df`` (after ``df.reset_state()``) to
        ``path``, each encoded with the safe codec. All or nothing: the file appears at
        ``path`` only once complete (see :mod:`dataflow.formats`). An existing file is
        replaced only with ``overwrite=True``."""
        stage = "TFRecordSerializer.save"
        path = fspath(stage, "path", path)
        with atomic_write(stage, path, overwrite) as tmp, open(tmp, "wb", buffering=1 << 20) as f:
            f.write(frame(_header_payload(0)))
            count = 0
            for dp in iterate_for_save(stage, df, progress):
                data = codec.dumps(dp)
                length = _COUNT.pack(len(data))
                f.write(length + _CRC.pack(masked_crc32c(length)))
                f.write(data)
                f.write(_CRC.pack(masked_crc32c(data)))
                count += 1
            f.seek(0)
            f.write(frame(_header_payload(count)))  # same size: only the count differs

    @staticmethod
    def load(path: PathType, size: int | None = None) -> TFRecordData:
        """A :class:`TFRecordData` of the decoded datapoints, in file order. ``size`` is
        optional (the header knows the count); if given it must match it."""
        return TFRecordData(path, decode=True, size=size)
