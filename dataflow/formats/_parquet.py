"""Parquet files read row group by row group with pyarrow: :class:`ParquetData`.

A Parquet file is a list of *row groups* (each a block of rows, stored column by column)
and a footer (the schema, and each row group's row count and byte ranges). The row group is
the unit of everything here: one is read at a time (never the whole file), shuffling orders
them, sharding splits them across ranks, and a resume position is (file, row group, row).
``len`` and the split come from the footers alone.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from itertools import repeat
from operator import length_hint
from typing import Any

import numpy as np

from .._errors import DataFlowNotReset, LengthUnknownError, StateError
from .._state_fields import int_field
from ..sources._order import ShardSpec
from ._arrow import numpy_column
from ._common import FormatError, require
from ._file_reader import FileReader, storage_args
from ._storage import PathSpec, redact

__all__ = ["ParquetData"]

_TAIL = 64 << 10  # bytes fetched from the end of a remote file to read its footer in one request
_MAGIC = b"PAR1"


def _pq(stage: str) -> Any:
    return require("pyarrow.parquet", "parquet", stage)


class ParquetData(FileReader[dict[str, Any]]):
    """Read Parquet files (a path, an fsspec URL, a list or a glob of them) row group by row
    group, with pyarrow (``pip install "dataflow-ml[parquet]"``).

    Each datapoint is one row as a dict ``{column: value}``: numbers as numpy scalars,
    fixed-size lists (and nested ones, and ``fixed_shape_tensor`` columns) as numpy arrays,
    variable-size lists of numbers as 1-D arrays, strings as ``str``, binaries as
    ``bytes``, nulls as ``None``, other types as pyarrow's Python values. With
    ``batch_rows=N``, each datapoint is a dict of columns of ``N`` rows (the last batch of an
    epoch may be shorter; batches span row groups): numpy arrays, zero-copy views of Arrow's
    memory (read-only) for numbers and tensors without nulls, object arrays of ``str`` or
    ``bytes`` for strings.

    ``columns`` projects (only those are read); ``filters`` (pyarrow's form: a list of
    ``(column, op, value)`` tuples, or a list of such lists meaning OR, or a
    ``pyarrow.compute.Expression``) keeps the rows it matches, evaluated by pyarrow on each
    row group as it is read (a list reads the columns it names too; an Expression reads every
    column). With filters the length is unknown.

    Order: files in the order given (a glob: sorted), row groups in file order, rows in
    file order. ``shuffle=True``: each epoch visits the row groups in a new order and the rows
    of each group in a new permutation, both drawn from ``seed`` (or
    :func:`dataflow.set_seed`) and the epoch number; the shuffle is as wide as a row group
    (write smaller groups for a finer one, see :class:`~dataflow.ParquetSerializer`).

    Sharded by row group by :class:`~dataflow.ShardData` right after it: ``equal=True``
    cuts the rows of all groups (in file order) into ``num_shards`` runs of
    ``len // num_shards`` rows (a group at a cut is read in part by two ranks); ``equal=False``
    gives rank ``r`` row groups ``r, r + num_shards, ...`` (with fewer groups than ranks some
    ranks get none). With ``filters``, ``equal=True`` shards by position instead (the rows per
    group are not known ahead). Each rank fetches only its own row groups.

    ``len`` is the rows in the footers (for the rank, when sharded; batches with
    ``batch_rows``), read without any data. Remote files: see :doc:`/object_stores` (the
    keyword arguments of :class:`~dataflow.formats._storage.ShardStorage`); a remote row group
    is fetched alone (one ranged request for its columns' bytes), ahead of the reader.

    State: the row groups left in the epoch and the next row in the current one (sharded:
    the list of pieces ``[file, row group, first row, end row, rows done, permutation stop]`` left, which
    :func:`dataflow.checkpoint.reshard` merges; else the piece number and row), the shuffle
    seed and the epoch: resuming reads no earlier row group. A damaged file raises
    :class:`~dataflow.FormatError` naming it and the row group.
    """

    #: a piece: [file, row group, first row, end row (-1: the group's end), rows done,
    #: permutation stop (-1: all)]
    _piece_fields = (0, 0, 0, -1, 0, -1)

    def __init__(
        self,
        path: PathSpec,
        columns: Sequence[str] | None = None,
        shuffle: bool = False,
        seed: int | None = None,
        batch_rows: int | None = None,
        filters: Any = None,
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
        if columns is not None and (
            isinstance(columns, (str, bytes)) or not all(isinstance(c, str) for c in columns)
        ):
            raise TypeError(f"{stage}: columns must be a list of column names or None, got {columns!r}")
        self.columns = None if columns is None else list(columns)
        self._shuffle = self._shuffle_work = bool(shuffle)
        if batch_rows is not None and (
            isinstance(batch_rows, bool) or not isinstance(batch_rows, int) or batch_rows < 1
        ):
            raise ValueError(f"{stage}: batch_rows must be an int >= 1 or None, got {batch_rows!r}")
        self.batch_rows = batch_rows
        if filters is not None and not isinstance(filters, list) and type(filters).__name__ != "Expression":
            raise TypeError(
                f"{stage}: filters must be a list of (column, op, value) tuples (or of lists of them), "
                f"a pyarrow.compute.Expression or None, got {type(filters).__name__}"
            )
        self.filters = filters
        self._meta: list[Any] | None = None  # each file's pyarrow FileMetaData
        self._live: tuple[list[int], Iterator[int], int] | None = None  # the piece being yielded

    # -- footers -----------------------------------------------------------------------------

    def reset_state(self) -> None:
        super().reset_state()
        stage = type(self).__name__
        pq = _pq(stage)
        self._expr = None
        if self.filters is not None:
            try:
                listed = isinstance(self.filters, list)
                self._expr = pq.filters_to_expression(self.filters) if listed else self.filters
            except (TypeError, ValueError) as e:
                raise ValueError(f"{stage}: filters {self.filters!r} are malformed: {e}") from e
        if not self._storage.remote:  # remote footers wait for len() or the first epoch
            self._metadata()

    def _metadata(self) -> list[Any]:
        """Every file's footer (read once per flow; remote ones fetched in parallel)."""
        if self._meta is not None:
            return self._meta
        stage, pq = type(self).__name__, _pq(type(self).__name__)
        if self._storage.remote:
            with ThreadPoolExecutor(min(32, len(self.paths))) as pool:
                meta = list(pool.map(self._remote_footer, range(len(self.paths))))
        else:
            meta = []
            for path in self.paths:
                if not os.path.isfile(path):
                    raise FileNotFoundError(f"{stage}: no such file: {path!r}")
                try:
                    meta.append(pq.read_metadata(path))
                except (OSError, ValueError, RuntimeError) as e:  # pyarrow's ArrowInvalid is a ValueError
                    raise FormatError(f"{stage}: {path} is not a readable Parquet file ({e})") from e
        for i, md in enumerate(meta):
            names = md.schema.to_arrow_schema().names
            for name in self.columns or []:
                if name not in names:
                    raise ValueError(
                        f"{stage}: column {name!r} is not in {redact(self.paths[i])} (its columns: {names})"
                    )
        self._meta = meta
        return meta

    def _remote_footer(self, i: int) -> Any:
        """The footer of remote file ``i``: its last 64 KiB in one request (a second one for
        a larger footer)."""
        stage, storage = type(self).__name__, self._storage
        pa, pq, url = require("pyarrow", "parquet", stage), _pq(stage), redact(self.paths[i])
        size = storage.size(i)
        if size < 12:
            raise FormatError(f"{stage}: {url} is not a Parquet file ({size} bytes)")
        tail = storage.fetch(i, max(0, size - _TAIL), size)
        length = int.from_bytes(tail[-8:-4], "little")
        if tail[-4:] != _MAGIC or length + 12 > size:
            raise FormatError(f"{stage}: {url} is not a Parquet file (no footer at its end)")
        if length + 8 > len(tail):
            tail = storage.fetch(i, size - length - 8, size)
        try:
            return pq.read_metadata(pa.BufferReader(tail[-(length + 8) :]))
        except (OSError, ValueError, RuntimeError) as e:
            raise FormatError(f"{stage}: {url} has an unreadable Parquet footer ({e})") from e

    def _group_rows(self) -> list[list[int]]:
        return [[md.row_group(k).num_rows for k in range(md.num_row_groups)] for md in self._metadata()]

    # -- the epoch's work --------------------------------------------------------------------

    def __len__(self) -> int:
        if self.filters is not None:
            raise LengthUnknownError(
                f"{type(self).__name__}: with filters= the number of rows is known only once read"
            )
        spec = self._file_shard
        if spec is not None and spec.equal and self._worker_shard is None:
            rows = sum(map(sum, self._group_rows())) // spec.num_shards
        else:
            rows = sum(p[3] - p[2] for p in self._rank_work())
        return rows if not self.batch_rows else -(-rows // self.batch_rows)

    def _set_shard(self, spec: ShardSpec) -> bool:
        """Called by :class:`~dataflow.ShardData` right after this reader: rank ``spec.index``
        reads its own row groups (see the class); ``False`` (sharded by position) with
        ``pad=True``, or with ``equal=True`` and filters."""
        if spec.pad or (spec.equal and self.filters is not None):
            return False
        self._file_shard = spec
        return True

    def _rank_work(self) -> list[list[int]]:
        """This rank's pieces of the epoch, in file order: ``[file, row group, first row, end
        row (-1: the group's end, after filters), rows done, permutation stop (-1: all)]``."""
        groups = self._group_rows()
        end = (lambda n: -1) if self.filters is not None else (lambda n: n)
        whole = [[i, k, 0, end(n), 0, -1] for i, rows in enumerate(groups) for k, n in enumerate(rows) if n]
        spec = self._file_shard
        if spec is None:
            return whole
        if not spec.equal:
            work = whole[spec.index :: spec.num_shards]
        else:  # fresh pieces: each rank's runs hold exactly total // num_shards rows
            total = sum(map(sum, groups))
            work = _split_equal(whole, spec.num_shards, total // spec.num_shards, self._shuffle)[spec.index]
        return self._worker_part(work)

    def _epoch_limit(self) -> int | None:
        spec = self._file_shard
        equal = spec is not None and spec.equal and self._worker_shard is None
        return sum(map(sum, self._group_rows())) // spec.num_shards if spec and equal else None

    def _resume(self, resume: dict[str, Any]) -> None:
        """The epoch's work from a loaded position: rebuilt from the seed and the epoch
        (unsharded), a rank's saved pieces, or this rank's part of what all ranks left (a
        state merged by :func:`dataflow.checkpoint.reshard`)."""
        stage = type(self).__name__
        self._yielded, self._limit, self._pos = resume["yielded"], resume["limit"], 0
        groups = self._group_rows()
        if "work" not in resume:
            self._work = self._shuffled(self._rank_work())
            self._pos = min(resume["piece"], len(self._work))
            if self._pos < len(self._work):
                self._work[self._pos][4] = resume["row"]
            return
        work, spec = resume["work"], self._file_shard
        for piece in work:
            if piece[1] >= len(groups[piece[0]]):
                raise StateError(
                    f"{stage}: the state names row group {piece[1]} of {redact(self.paths[piece[0]])}, "
                    f"which has {len(groups[piece[0]])}; the files changed since it was saved"
                )
        if not resume["merged"] or spec is None:
            self._work = work
            return
        self._yielded = 0
        if not spec.equal:
            self._work = self._worker_part(work[spec.index :: spec.num_shards])
            return
        for piece in work:  # in file order, what is left of a piece is a piece of its own
            if not self._shuffle and piece[4]:
                piece[2], piece[4] = piece[2] + piece[4], 0
        allowed = resume["limit"] if resume["limit"] is not None else sum(_size(p) - p[4] for p in work)
        target = allowed // spec.num_shards
        part = _split_equal(work, spec.num_shards, target, self._shuffle)[spec.index]
        # a worker's share of the rank's runs (which hold exactly its count) needs no limit
        self._work, self._limit = self._worker_part(part), target if self._worker_shard is None else None

    # -- reading -----------------------------------------------------------------------------

    def _chunks(self) -> Iterator[tuple[list[int], list[str], list[Any], int]]:
        """For each piece from ``self._pos`` on: the piece, the column names, its rows not yet
        done as columns (shuffled: permuted) and their count; ``self._pos`` moves past it
        when the next is asked for."""
        stage = type(self).__name__
        pa, pq = require("pyarrow", "parquet", stage), _pq(stage)
        meta, rows = self._metadata(), not self.batch_rows
        rest = self._work[self._pos :]
        read = self.columns
        if read is not None and isinstance(self.filters, list):
            named = {f[0] for group in self.filters for f in (group if isinstance(group, list) else [group])}
            read = read + sorted(n for n in named if isinstance(n, str) and n not in read)
        elif read is not None and self.filters is not None:
            read = None  # an Expression: every column
        remote = self._storage.remote
        sources: Any = (None for _ in rest)
        if remote:
            ranges = [_byte_range(meta[p[0]], p[1], read) for p in rest]
            starts, ends = [r[0] for r in ranges], [r[1] for r in ranges]
            sources = self._storage.iterate([p[0] for p in rest], starts, ends)
        handle: Any = None
        handle_of = -1
        with closing(sources):
            for piece, source in zip(rest, sources):
                i, k, first, end, done, pstop = piece
                if remote:
                    handle = pq.ParquetFile(source[1], metadata=meta[i])
                elif handle_of != i:
                    handle, handle_of = pq.ParquetFile(self.paths[i], metadata=meta[i]), i
                try:
                    table = handle.read_row_group(k, columns=read)
                    if self._expr is not None:
                        table = table.filter(self._expr)
                except (OSError, ValueError, RuntimeError, pa.ArrowException) as e:
                    raise FormatError(
                        f"{stage}: {redact(self.paths[i])}: row group {k} cannot be read ({e})"
                    ) from e
                if self.columns is not None and read != self.columns:
                    table = table.select(self.columns)
                last = table.num_rows if end < 0 else end
                if last > table.num_rows:
                    raise FormatError(
                        f"{stage}: {redact(self.paths[i])}: row group {k} has {table.num_rows} rows, but "
                        f"{last} were expected; the file changed since its footer was read"
                    )
                count = (pstop if pstop >= 0 else last - first) - done
                if count > 0:
                    if self._shuffle:
                        seed = [self._shard_seed or 0, self._epoch, i, k, first]
                        perm = (
                            np.random.default_rng(seed).permutation(last - first)[done : done + count] + first
                        )
                        table = table.take(pa.array(perm))
                    else:
                        table = table.slice(first + done, count)
                    columns = [numpy_column(_one_chunk(col), rows) for col in table.columns]
                    yield piece, table.column_names, columns, count
                self._pos += 1

    def _records(self) -> Iterator[dict[str, Any]]:
        if "_expr" not in self.__dict__:
            raise DataFlowNotReset(f"{type(self).__name__} was iterated before reset_state()")
        self._live = None
        return self._batches() if self.batch_rows else self._rows()

    def _rows(self) -> Iterator[dict[str, Any]]:
        limit = self._limit
        for piece, names, columns, count in self._chunks():
            if limit is not None:
                count = min(count, limit - self._yielded)
                if count <= 0:
                    return
            left = iter(range(count))  # its length_hint is the rows of the piece not yet handed out
            self._live = (piece, left, count)
            yield from map(dict, map(zip, repeat(names), zip(*columns, left)))
            self._live = None
            piece[4] += count
            self._yielded += count

    def _batches(self) -> Iterator[dict[str, Any]]:
        size, limit = self.batch_rows or 1, self._limit
        parts: list[list[Any]] = []
        names: list[str] = []
        have = 0
        for piece, names, columns, count in self._chunks():
            at = 0
            while at < count:
                room = size - have if limit is None else min(size - have, limit - self._yielded - have)
                if room <= 0:
                    break
                take = min(room, count - at)
                parts.append([c[at : at + take] for c in columns])
                at, have = at + take, have + take
                piece[4] += take
                if have == size:
                    self._yielded += have
                    yield _join(names, parts)
                    parts, have = [], 0
            if limit is not None and self._yielded + have >= limit:
                break
        if have:
            self._yielded += have
            yield _join(names, parts)

    # -- state -------------------------------------------------------------------------------

    def _position_state(self) -> dict[str, Any]:
        work, pos, yielded = self._work, self._pos, self._yielded
        current = {}
        if self._live is not None:
            piece, left, count = self._live
            handed = count - length_hint(left)
            current[id(piece)] = piece[4] + handed
            yielded += handed

        def done(p: list[int]) -> int:
            return current.get(id(p), p[4])

        while pos < len(work) and work[pos][3] >= 0 and done(work[pos]) >= _size(work[pos]):
            pos += 1  # a piece read to its end: resuming does not read it again
        if self._file_shard is None:
            return {"piece": pos, "row": done(work[pos]) if pos < len(work) else 0}
        # a rank's part: the pieces left, for reshard
        work_left = [[p[0], p[1], p[2], p[3], done(p), p[5]] for p in work[pos:]]
        return {"work": work_left, "limit": self._limit, "yielded": yielded}

    def _position_from(self, stage: str, state: Mapping[str, Any]) -> dict[str, Any] | None:
        if "work" in state:
            yielded = int_field(stage, state, "yielded", 0)
            return {"yielded": yielded, **self._pieces_left(stage, state)}
        if "piece" not in state:
            return None
        if self._file_shard is not None:
            raise StateError(f"{stage}: this state was saved unsharded, but this reader is sharded")
        piece, row = int_field(stage, state, "piece", 0), int_field(stage, state, "row", 0)
        return {"yielded": 0, "limit": None, "piece": piece, "row": row}


def _one_chunk(column: Any) -> Any:
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def _join(names: list[str], parts: list[list[Any]]) -> dict[str, Any]:
    if len(parts) == 1:
        return dict(zip(names, parts[0]))
    return {name: np.concatenate([p[c] for p in parts]) for c, name in enumerate(names)}


def _byte_range(meta: Any, k: int, read: Sequence[str] | None) -> tuple[int, int]:
    """The bytes of row group ``k`` that hold the columns ``read`` (all: ``None``)."""
    group = meta.row_group(k)
    lo, hi = None, 0
    for c in range(group.num_columns):
        chunk = group.column(c)
        if read is not None and chunk.path_in_schema.split(".", 1)[0] not in read:
            continue
        start = chunk.data_page_offset
        if chunk.has_dictionary_page and 0 < chunk.dictionary_page_offset < start:
            start = chunk.dictionary_page_offset
        lo = start if lo is None else min(lo, start)
        hi = max(hi, start + chunk.total_compressed_size)
    return (lo or 0), hi


def _size(piece: list[int]) -> int:
    """How many rows a piece with a known end yields in all (done ones included)."""
    return piece[5] if piece[5] >= 0 else piece[3] - piece[2]


def _split_equal(
    work: list[list[int]], num_shards: int, target: int, shuffled: bool
) -> list[list[list[int]]]:
    """``work`` (pieces with known ends) cut into ``num_shards`` runs of ``target`` rows
    each, in order. A piece that crosses a run's end is split there: by row range when it is
    untouched, by positions of its permutation when it is a begun piece of a shuffled epoch
    (both parts read the group); a begun piece in file order was made untouched before. The
    rows past the last run are dropped."""
    runs: list[list[list[int]]] = [[] for _ in range(num_shards)]
    rank, have = 0, 0
    for i, k, first, end, done, stop in work:
        while rank < num_shards and done < _size([i, k, first, end, done, stop]):
            need = target - have
            if need <= 0:
                rank, have = rank + 1, 0
                continue
            left = _size([i, k, first, end, done, stop]) - done
            if left <= need or (done and not shuffled):
                runs[rank].append([i, k, first, end, done, stop])
                have += left
                break
            if done:  # shuffled: split the piece's permutation
                runs[rank].append([i, k, first, end, done, done + need])
                done += need
            else:
                runs[rank].append([i, k, first, first + need, 0, -1])
                first = first + need
            rank, have = rank + 1, 0
    return runs
