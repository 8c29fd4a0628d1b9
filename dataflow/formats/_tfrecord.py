"""TFRecord files without TensorFlow: :class:`TFRecordData` and :class:`TFRecordSerializer`.

The framing, its CRCs and the index file beside each file are :mod:`dataflow.formats._tfrecord_io`'s.
Files written by :meth:`TFRecordSerializer.save` hold only datapoint records, each encoded
with the safe codec (:func:`dataflow.codec.dumps`), so ``tf.data.TFRecordDataset(path)``
reads them as they are; their index gives ``len`` without a scan, a check that the file is
complete, and random access (``shuffle=True``: ``TFRecordData`` then builds its random-access
subclass :class:`ShuffledTFRecordData`, below). Files of the earlier layout, which started
with a header record (magic ``DFTFREC\\0`` and the count), are still read.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from itertools import accumulate
from typing import IO, Any

import numpy as np

from .. import codec
from .._errors import DataFlowNotReset, LengthUnknownError
from ..base import DataFlow
from ..sources._indexed import IndexedSource, Order, cursor
from ..sources._order import ShardSpec
from ._atomic import _create_temp, _fsync, _fsync_dir, _remove, atomic_write, check_target
from ._common import FormatError, PathType, check_meta, fspath, iterate_for_save
from ._file_reader import FileReader, storage_args
from ._storage import PathSpec, is_remote, redact
from ._tfrecord_io import (
    HEADER_MAGIC,
    INDEX_SUFFIX,
    RecordWriter,
    decode_record,
    frame,
    index_path,
    parse_index,
    read_index,
    read_record_at,
    read_records,
    read_records_from,
    write_index,
    write_index_file,
)

__all__ = ["HEADER_MAGIC", "TFRecordData", "TFRecordSerializer", "frame", "read_records", "write_index"]

LEGACY_VERSION = 1  # files that start with a header record (HEADER_MAGIC)
_COUNT = struct.Struct("<Q")
_DECODE = {True: "codec", False: "raw", "codec": "codec", "raw": "raw", "example": "example"}


def _parse_header(stage: str, path: str, payload: bytes) -> int:
    """The record count in the header record of a file of the earlier layout."""
    try:
        meta = codec.loads(payload[16:])
    except codec.CodecError as e:
        raise FormatError(f"{stage}: {path}: the header record is malformed ({e})") from e
    if isinstance(meta, dict):
        meta["count"] = _COUNT.unpack_from(payload, 8)[0]
    return check_meta(stage, path, meta, "tfrecord", LEGACY_VERSION)


def _decoder(stage: str, decode: str) -> Callable[[bytes], Any] | None:
    if decode == "codec":
        return codec.loads
    if decode == "example":
        from ._tf_example import example_class, parse_example

        example_class()  # imports protobuf now: a missing extra fails before the first epoch
        return parse_example
    return None


class TFRecordData(FileReader[Any]):
    """Read one TFRecord file, or several in order: any TFRecord file, or our own.

    ``decode`` says what a datapoint is: ``True`` (or ``"codec"``) decodes each record with
    the safe codec (files written by :meth:`TFRecordSerializer.save`); ``False`` (or
    ``"raw"``) yields the raw record ``bytes``; ``"example"`` parses each record as a
    ``tf.train.Example`` (written by TensorFlow, or :func:`~dataflow.formats._tf_example.
    encode_example`) into a dict of 1-D numpy arrays, without TensorFlow (needs
    ``protobuf``: ``pip install "dataflow-ml[tfrecord]"``; see
    :func:`~dataflow.formats._tf_example.parse_example`).

    Order is file order, or with ``shuffle=True`` a new permutation of the records of all
    files each epoch (drawn from ``self.rng``; ``seed=`` makes it reproducible): that needs
    every file's index (``<file>.index``, written by ``save`` or
    :meth:`TFRecordSerializer.write_index`) and reads each record at its offset.
    Every record's CRCs are checked unless ``verify_crc=False`` (then only the length CRC);
    a corrupt or truncated file raises :class:`~dataflow.formats.FormatError` naming the file,
    record and byte offset; an undecodable record raises :class:`~dataflow.codec.CodecError`
    naming them too.

    ``len`` is the count in the files' indexes (or the headers of older files of ours), or
    ``size`` if given (for files without an index, the caller's claim; otherwise it must
    match). Files are opened by each epoch and closed when it ends or its iterator is
    closed, so the flow is reentrant and fork-safe.

    In file order its state is the file in progress, the byte offset and index of the next
    record in it (and how many records of that file were read, to check the count):
    resuming seeks there and reads nothing again, in any TFRecord file. Shuffled, it is a
    random-access source like :class:`~dataflow.formats.LMDBData` (epoch, position, RNG; sharded
    by index under :class:`~dataflow.ShardData`).
    """

    #: a piece: [file, first record, end record (-1: the file's end), records done, byte
    #: offset, positions of its permutation a shuffled piece yields (-1: all)]
    _piece_fields = (0, 0, -1, 0, None, -1)

    _random_access = False

    def __new__(cls, *args: Any, **kwargs: Any) -> TFRecordData:
        shuffle = kwargs.get("shuffle", len(args) > 4 and args[4])
        path = kwargs.get("path", args[0] if args else None)
        if cls is TFRecordData and shuffle and not is_remote(path):
            cls = ShuffledTFRecordData
        return super().__new__(cls)

    def __init__(
        self,
        path: PathSpec,
        decode: bool | str = True,
        size: int | None = None,
        verify_crc: bool = True,
        shuffle: bool = False,
        seed: int | None = None,
        *,
        storage_options: Mapping[str, Any] | None = None,
        prefetch_shards: int | str = "auto",
        cache_dir: str | os.PathLike[str] | None = None,
        cache_limit: int | None = None,
        retries: int = 5,
        timeout: float | None = 60.0,
    ) -> None:
        super().__init__(path, seed, storage_args(locals()))
        stage = type(self).__name__
        self._shard_shuffle = bool(shuffle) and self._storage.remote and not self._random_access
        self._shuffle_work = self._shard_shuffle
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
            raise ValueError(f"{stage}: size must be an int >= 0 or None, got {size!r}")
        if not isinstance(decode, (bool, str)) or decode not in _DECODE:
            raise ValueError(
                f"{stage}: decode must be True, False, 'codec', 'raw' or 'example', got {decode!r}"
            )
        if shuffle and not self._random_access and not self._storage.remote:
            raise TypeError(
                f"{stage}: shuffle=True needs TFRecordData itself (a subclass reads in file order)"
            )
        self.decode = _DECODE[decode]
        self._size = size
        self.verify_crc = bool(verify_crc)
        self._counts: list[int | None] | None = None
        self._offsets_of: list[np.ndarray | None] = [None] * len(self.paths)  # from the index files

    def _read_counts(self) -> list[int | None]:
        """The record count of each file from its index (or the header of a local older file
        of ours), ``None`` for files without either; remote indexes are fetched in parallel,
        once per flow."""
        stage, storage = type(self).__name__, self._storage

        def count(i: int) -> int | None:
            path = self.paths[i]
            if storage.remote:
                raw = storage.fetch_sibling(i, INDEX_SUFFIX)
                if raw is None:
                    storage.size(i)  # no index: is the file itself there? (FileNotFoundError if not)
                offsets = None if raw is None else parse_index(stage, redact(path), raw, storage.sizes[i])
            elif not os.path.isfile(path):
                raise FileNotFoundError(f"{stage}: no such file: {path!r}")
            else:
                offsets = read_index(stage, path)
            self._offsets_of[i] = offsets
            if offsets is not None or storage.remote:
                return None if offsets is None else len(offsets)
            with open(path, "rb") as f:
                first = next(read_records_from(stage, path, f, self.verify_crc), None)
            if first is None:
                return 0
            return _parse_header(stage, path, first[2]) if first[2][:8] == HEADER_MAGIC else None

        if storage.remote:
            with ThreadPoolExecutor(min(32, len(self.paths))) as pool:
                counts = list(pool.map(count, range(len(self.paths))))
        else:
            counts = [count(i) for i in range(len(self.paths))]
        known = [c for c in counts if c is not None]
        if self._size is not None and len(known) == len(counts) and sum(known) != self._size:
            raise ValueError(
                f"{stage}: size={self._size} but the files' indexes say {sum(known)} records; "
                f"leave size=None to use them"
            )
        return counts

    def reset_state(self) -> None:
        super().reset_state()
        self._decode_fn = _decoder(type(self).__name__, self.decode)
        if not self._storage.remote:  # remote counts wait for len(): no request before the first file
            self._counts = self._read_counts()

    def __len__(self) -> int:
        spec = self._file_shard
        if self._size is not None and spec is None:
            return self._size
        counts = self._counts = self._counts if self._counts is not None else self._read_counts()
        if any(c is None for c in counts):
            raise LengthUnknownError(
                f"{type(self).__name__}: the length of a TFRecord file without an index file is "
                f"unknown; pass size= if you know it, or write its index once with "
                f"dataflow.TFRecordSerializer.write_index(path)"
            )
        if spec is None:
            return sum(c for c in counts if c is not None)
        if self._worker_shard is not None:
            work = self._rank_work()
            return sum((_piece_size(p) if p[2] >= 0 else (counts[p[0]] or 0) - p[1]) - p[3] for p in work)
        if spec.equal:
            return sum(counts[i] or 0 for i in range(len(counts))) // spec.num_shards
        return sum(counts[i] or 0 for i in range(spec.index, len(counts), spec.num_shards))

    def _set_shard(self, spec: ShardSpec) -> bool:
        """Called by :class:`~dataflow.ShardData` right after this reader: rank
        ``spec.index`` reads its own files (not every file's records) when there are at
        least as many files as ranks and no padding is asked for; otherwise ``False``
        (sharded by position)."""
        if len(self.paths) < spec.num_shards or spec.pad:
            return False
        self._file_shard = spec
        return True

    def _known_counts(self) -> list[int]:
        if self._counts is None:
            self._counts = self._read_counts()
        if any(c is None for c in self._counts):
            missing = self.paths[self._counts.index(None)]
            raise ValueError(
                f"{type(self).__name__}: .shard(equal=True) gives every rank as many records, which "
                f"needs each file's record count, but {redact(missing)} has no index file; write the "
                f"indexes once with dataflow.TFRecordSerializer.write_index(path), or shard with "
                f"equal=False"
            )
        return [c or 0 for c in self._counts]

    def _rank_work(self) -> list[list[int]]:
        """This rank's part of every epoch, as pieces ``[file, first record, end record (-1:
        the file's end), records done, byte offset]``. Unsharded: every file. ``equal=False``:
        every ``num_shards``-th file. ``equal=True``: the records of all files in file order
        cut into ``num_shards`` runs of ``total // num_shards`` (a file at a boundary is read
        in part by two ranks, each fetching only its own bytes)."""
        spec = self._file_shard
        n = len(self.paths)
        worker = self._worker_shard
        if spec is None or not spec.equal:
            files = range(n) if spec is None else range(spec.index, n, spec.num_shards)
            return self._worker_part([[i, 0, -1, 0, 0, -1] for i in files])
        counts = self._known_counts()
        whole = [[i, 0, counts[i], 0, 0, -1] for i in range(n)]
        target = sum(counts) // spec.num_shards
        work = _split_equal(whole, spec, target, self._offsets_of, self._shard_shuffle)[spec.index]
        return work if worker is None else self._worker_part(_trimmed(work, target, self._shard_shuffle))

    def _resume(self, resume: dict[str, Any]) -> None:
        """The epoch's work from a loaded position: this reader's own (the same pieces, or a
        sharded rank's saved list of what it has left), or its part of what all ranks left
        (a state merged by :func:`dataflow.checkpoint.reshard`)."""
        self._yielded, self._limit, self._pos = resume["yielded"], resume["limit"], 0
        if "work" not in resume:  # unsharded: the pieces are the epoch's, from the seed
            self._work = self._shuffled(self._rank_work())
            self._pos = resume["file"]
            if self._pos < len(self._work):
                piece = self._work[self._pos]
                piece[4], piece[3] = resume["offset"], resume["read"]
            return
        work, spec = resume["work"], self._file_shard
        if not resume["merged"] or spec is None:
            self._work = work
            return
        self._yielded = 0
        if not spec.equal:
            self._work = self._worker_part(work[spec.index :: spec.num_shards])
            return
        counts = self._known_counts()
        for piece in work:  # in file order, what is left of a piece is a piece of its own
            if piece[2] < 0:
                piece[2] = counts[piece[0]]
            if not self._shard_shuffle and piece[3]:
                piece[1], piece[3] = piece[1] + piece[3], 0
        left = sum(_piece_size(p) - p[3] for p in work)
        allowed = resume["limit"] if resume["limit"] is not None else left
        target = allowed // spec.num_shards
        part = _split_equal(work, spec, target, self._offsets_of, self._shard_shuffle)[spec.index]
        if self._worker_shard is None:
            self._work, self._limit = part, target
        else:  # the rank's pieces cut to exactly its count, dealt among its workers
            self._work, self._limit = self._worker_part(_trimmed(part, target, self._shard_shuffle)), None

    def _records(self) -> Iterator[Any]:
        """The records of the epoch's pieces from ``self._pos`` on; each piece is kept at
        its next record (the state's position)."""
        work, limit = self._work, self._limit
        if limit is not None and self._yielded >= limit:
            return
        rest = work[self._pos :]
        starts, ends = [], []
        for i, first, end, _, offset, _ in rest:
            offsets = self._offsets_of[i]
            # a shuffled piece starts at its first record's offset; an empty file has none
            if self._shard_shuffle and offsets is not None and first < len(offsets):
                offset = int(offsets[first])
            starts.append(offset)
            ends.append(int(offsets[end]) if offsets is not None and 0 <= end < len(offsets) else None)
        files = self._storage.iterate([piece[0] for piece in rest], starts, ends)
        read = self._read_shuffled if self._shard_shuffle else self._read_file
        with closing(files):
            for _, f in files:
                for dp in read(work[self._pos], f):
                    self._yielded += 1
                    yield dp
                    if limit is not None and self._yielded >= limit:
                        return
                self._pos += 1

    def _read_shuffled(self, piece: list[int], f: IO[bytes]) -> Iterator[Any]:
        """The records of a piece of a remote file in a permutation drawn from the seed, the
        epoch, the file and the piece's first record, from ``piece[3]`` records on."""
        i, first, end = piece[:3]
        stage, name = type(self).__name__, redact(self.paths[i])
        decode = self.__dict__.get("_decode_fn") or _decoder(stage, self.decode)
        records: list[tuple[int, int, bytes]] = []
        for index, offset, data in read_records_from(stage, name, f, self.verify_crc, f.tell(), first):
            if offset == 0 and data[:8] == HEADER_MAGIC:
                continue
            if 0 <= end <= first + len(records):
                break
            records.append((index, offset, data))
        perm = np.random.default_rng([self._shard_seed or 0, self._epoch, i, first]).permutation(len(records))
        for k in range(piece[3], piece[5] if piece[5] >= 0 else len(records)):
            index, offset, data = records[perm[k]]
            piece[3] = k + 1
            yield data if decode is None else decode_record(stage, name, index, offset, data, decode)

    def _read_file(self, piece: list[int], f: IO[bytes]) -> Iterator[Any]:
        """The records of a piece of a file in file order, from ``piece[3]`` records on."""
        i, first, end, done, start, _ = piece
        stage, path = type(self).__name__, redact(self.paths[i])
        decode = self.__dict__.get("_decode_fn") or _decoder(stage, self.decode)
        offsets = self._offsets_of[i]
        whole = first == 0 and (end < 0 or (offsets is not None and end == len(offsets)))
        expected = self._counts[i] if self._counts is not None and whole else None
        source = "its index says"
        for index, offset, data in read_records_from(stage, path, f, self.verify_crc, start, first + done):
            if offset == 0 and data[:8] == HEADER_MAGIC:  # the header of an older file of ours
                expected, source = _parse_header(stage, path, data), "the header says"
                piece[4] = offset + len(data) + 16
                continue
            if 0 <= end <= first + piece[3]:
                return  # the piece is done (the rest of the file is another rank's)
            piece[3], piece[4] = piece[3] + 1, offset + len(data) + 16
            yield data if decode is None else decode_record(stage, path, index, offset, data, decode)
        if expected is not None and piece[3] != expected:
            raise FormatError(
                f"{stage}: {path}: {source} {expected} records but the file has {piece[3]}; "
                f"the file is truncated or damaged"
            )

    def _position_state(self) -> dict[str, Any]:
        work, pos = self._work, self._pos
        size = self._storage.sizes
        while pos < len(work) and (
            (not self._shard_shuffle and work[pos][4] == size[work[pos][0]])
            or (work[pos][2] >= 0 and work[pos][3] >= _piece_size(work[pos]))
        ):
            pos += 1  # a piece read to its end: resuming does not fetch it again
        piece = work[pos] if pos < len(work) else [0, 0, -1, 0, 0, -1]
        state = dict(file=pos, offset=str(piece[4]), record=piece[1] + piece[3], read=piece[3])
        state["yielded"] = self._yielded
        if self._file_shard is not None:  # a rank's part: the pieces left, for reshard
            state["work"] = [[p[0], p[1], p[2], p[3], str(p[4]), p[5]] for p in work[pos:]]
            state["limit"] = self._limit
        return state

    def _position_from(self, stage: str, state: Mapping[str, Any]) -> dict[str, Any] | None:
        return self._file_position(stage, state) if "file" in state else None


def _piece_size(piece: list[int]) -> int:
    """How many records a piece with a known end yields in all (done ones included)."""
    return piece[5] if piece[5] >= 0 else piece[2] - piece[1]


def _trimmed(work: list[list[int]], target: int, shuffled: bool) -> list[list[int]]:
    """The fresh pieces ``work`` (known ends) cut to exactly ``target`` records in all: the
    piece that crosses it ends there (by record range in file order, by permutation
    positions when shuffled), later ones are dropped. What a rank with ``equal=True`` reads,
    made exact so that its workers can split it by piece."""
    out: list[list[int]] = []
    have = 0
    for piece in work:
        if have >= target:
            break
        piece = list(piece)
        size = _piece_size(piece) - piece[3]
        if size > target - have:
            if shuffled:
                piece[5] = piece[3] + target - have
            else:
                piece[2] = piece[1] + piece[3] + target - have
            size = target - have
        out.append(piece)
        have += size
    return out


def _split_equal(
    work: list[list[int]],
    spec: ShardSpec,
    target: int,
    offsets_of: Sequence[np.ndarray | None],
    shuffled: bool,
) -> list[list[list[int]]]:
    """``work`` (pieces with known ends) cut into ``spec.num_shards`` runs of ``target``
    records each, in order. A piece that crosses a run's end is split there: by record
    range when it is untouched and its file's record offsets are known (each part fetches
    only its bytes); a begun piece of a shuffled epoch by positions in its permutation (both
    parts fetch the piece); otherwise the run takes it whole, ends longer, and the rank
    stops at ``target``. The records past the last run are dropped."""
    runs: list[list[list[int]]] = [[] for _ in range(spec.num_shards)]
    rank, have = 0, 0
    for piece in work:
        i, first, end, done, offset, stop = piece
        while rank < spec.num_shards and done < _piece_size([i, first, end, done, offset, stop]):
            need = target - have
            if need <= 0:
                rank, have = rank + 1, 0
                continue
            size = _piece_size([i, first, end, done, offset, stop])
            offsets = offsets_of[i]
            if size - done <= need or (not shuffled and (done or offsets is None)):
                runs[rank].append([i, first, end, done, offset, stop])
                have += size - done
                break
            if done or offsets is None:  # shuffled: split the piece's permutation
                runs[rank].append([i, first, end, done, offset, done + need])
                done += need
            else:
                cut = first + need
                runs[rank].append([i, first, cut, 0, offset, -1])
                first, offset = cut, int(offsets[cut])
            rank, have = rank + 1, 0
    return runs


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
        self._read_counts()  # each file's offsets, from its index
        for path, found in zip(self.paths, self._offsets_of):
            if found is None:
                raise FormatError(
                    f"{type(self).__name__}: shuffle=True reads records by their offsets, but {path} has "
                    f"no index file {index_path(path)}; write it once with "
                    f"dataflow.TFRecordSerializer.write_index({path!r}), or read in file order"
                )
        offsets = [found.tolist() for found in self._offsets_of if found is not None]
        self._starts = list(accumulate((len(o) for o in offsets), initial=0))
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

    def _open(self, order: Order, start: int) -> tuple[Iterator[Any], Iterator[int], Iterator[Any]]:
        if self._offsets is None or "_decode_fn" not in self.__dict__:
            raise DataFlowNotReset(f"{type(self).__name__} was iterated before reset_state()")
        cur, probe, positions = cursor(order, start)
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


class TFRecordSerializer:
    """Save a flow to one TFRecord file and load it back (tensorpack's API, without TensorFlow).

    Example::

        TFRecordSerializer.save(df, "train.tfrecord")      # + train.tfrecord.index
        df = TFRecordSerializer.load("train.tfrecord")     # len is known from the index

    ``TFRecordSerializer.write_index(path)`` indexes a TFRecord file written by others, and
    ``TFRecordSerializer.frame(record_bytes)`` frames one record as TFRecord files hold it.
    """

    write_index = staticmethod(write_index)
    frame = staticmethod(frame)

    @staticmethod
    def save(
        df: DataFlow[Any],
        path: PathType,
        *,
        overwrite: bool = False,
        progress: bool = True,
        durable: bool = False,
    ) -> None:
        """Write every datapoint of one epoch of ``df`` (after ``df.reset_state()``) to
        ``path``, one record each, encoded with the safe codec, and its index to
        ``path + ".index"``. All or nothing: the file appears at ``path`` only once complete
        (see :mod:`dataflow.formats`); its index is renamed into place right after it (a
        stale index of a replaced file is removed first, so a file never sits beside an
        index that is not its own). An existing file is replaced only with ``overwrite=True``.
        ``durable=True`` also flushes it to the disk before it appears, so it survives a
        power loss too (see :doc:`/formats`)."""
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
                with contextlib.suppress(FileNotFoundError):
                    os.remove(ipath)  # never leave the old index beside the new file
            os.replace(itmp, ipath)
        except BaseException:
            if itmp:
                _remove(itmp)
            raise
        if durable:
            _fsync_dir(os.path.dirname(os.path.abspath(ipath)))

    @staticmethod
    def load(
        path: PathSpec,
        size: int | None = None,
        shuffle: bool = False,
        seed: int | None = None,
        **storage: Any,
    ) -> TFRecordData:
        """A :class:`TFRecordData` of the decoded datapoints, in file order (or shuffled:
        random access through the index). ``size`` is optional (the index knows the
        count); if given it must match it. ``path`` and the keyword arguments of remote
        files (``storage_options=``, ``prefetch_shards=``, ...) are :class:`TFRecordData`'s."""
        return TFRecordData(path, decode=True, size=size, shuffle=shuffle, seed=seed, **storage)
