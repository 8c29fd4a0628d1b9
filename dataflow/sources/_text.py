"""Lines of text files: :class:`TextLineData`."""

from __future__ import annotations

import codecs
import copy
import io
import os
from collections.abc import Iterator, Mapping
from contextlib import closing
from typing import Any

from .._state_fields import check_file_count, field, int_field, offset_field, plain_rng_state
from ..base import DataFlow, RNGDataFlow
from ..formats._storage import PathSpec, ShardStorage
from ._order import ShardSpec

__all__ = ["TextLineData"]

_BYTE_POSITION = (1 << 64) - 1  # the part of a text file's tell() cookie that is a byte offset


class TextLineData(RNGDataFlow[Any]):
    """Yield ``[line]`` (a ``str``) for each line of each file (``tf.data.TextLineDataset``).

    Files are read in the given order, or in a new order each epoch with ``shuffle=True``;
    lines in file order. Trailing newlines (``\\n``, ``\\r\\n``, ``\\r``) are removed unless
    ``strip_newline=False`` (then each is given as ``\\n``). ``reset_state()`` is required and
    raises :class:`FileNotFoundError` for missing files. Each epoch opens its own files and
    closes them when it ends or its iterator is closed. ``len`` is unknown. Reentrant.
    Its state is the file order's RNG, the file in progress and the position in it (the text
    file's ``tell()``): resuming seeks there, reading nothing again.

    ``paths`` may also be fsspec URLs or globs, read with the keyword arguments of remote
    files (``storage_options=``, ``prefetch_shards=``, ``cache_dir=``, ...; see
    :doc:`/object_stores`); a resumed remote file is fetched from the resume position on.
    """

    def __init__(
        self,
        paths: PathSpec,
        strip_newline: bool = True,
        encoding: str = "utf-8",
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
        super().__init__(seed)
        if isinstance(paths, (list, tuple)) and not paths:
            raise ValueError("TextLineData: paths is empty; give at least one file")
        if isinstance(paths, bytes) or (
            isinstance(paths, (list, tuple)) and any(isinstance(p, bytes) for p in paths)
        ):
            paths = [os.fsdecode(p) for p in ([paths] if isinstance(paths, bytes) else paths)]
        try:
            codecs.lookup(encoding)
        except (LookupError, TypeError):
            raise ValueError(f"TextLineData: unknown encoding {encoding!r}") from None
        self._storage = ShardStorage(
            "TextLineData",
            paths,
            storage_options=storage_options,
            prefetch_shards=prefetch_shards,
            cache_dir=cache_dir,
            cache_limit=cache_limit,
            retries=retries,
            timeout=timeout,
            name="paths",
        )
        self.paths = self._storage.urls
        self._rank_files = list(range(len(self.paths)))
        self.strip_newline = strip_newline
        self.encoding = encoding
        self._shuffle = shuffle

    def reset_state(self) -> None:
        super().reset_state()
        missing = [p for p in self.paths if not self._storage.remote and not os.path.isfile(p)]
        if missing:
            raise FileNotFoundError(f"TextLineData: no such file: {', '.join(map(repr, missing))}")

    def __iter__(self) -> Iterator[list[str]]:
        rng = self.rng  # raises before reset_state
        resume = self.__dict__.pop("_resume", None) or (0, 0)
        self._epoch_rng = rng.bit_generator.state  # a resumed epoch's start: just loaded
        files = self._rank_files
        perm = rng.permutation(len(files)).tolist()
        order = [files[k] for k in perm] if self._shuffle else files
        # file index, the open file, and where the file at that index starts being read
        self._where: list[Any] = [resume[0], None, resume[1]]
        return self._lines(order, *resume)

    def _lines(self, order: list[int], first: int, offset: int) -> Iterator[list[str]]:
        where, strip = self._where, self.strip_newline
        rest = order[first:]
        files = self._storage.iterate(rest, [offset & _BYTE_POSITION] + [0] * (len(rest) - 1))
        with closing(files):
            for k, (_, raw) in enumerate(files, first):
                where[0], where[2] = k, offset if k == first else 0
                with io.TextIOWrapper(raw, encoding=self.encoding) as f:
                    where[1] = f
                    if k == first and offset:
                        f.seek(offset)
                    readline = f.readline  # not ``for line in f``: that disables f.tell()
                    while True:
                        line = readline()
                        if not line:
                            break
                        yield [line[:-1] if strip and line[-1:] == "\n" else line]
                where[1] = None
        where[0] = len(order)

    def _set_shard(self, spec: ShardSpec) -> bool:
        """Called by :class:`~dataflow.ShardData` right after this source: with
        ``equal=False`` and at least as many files as ranks, rank ``spec.index`` reads every
        ``num_shards``-th file (and fetches only those); otherwise ``False``: line counts are
        unknown, so equal counts need sharding by position."""
        if spec.equal or spec.pad or len(self.paths) < spec.num_shards:
            return False
        self._rank_files = list(range(spec.index, len(self.paths), spec.num_shards))
        self._sharded = True
        return True

    _sharded = False  # this rank's files were chosen by _set_shard
    _worker_split = False  # and split among the rank's workers by _split_shard

    def _split_shard(self, spec: ShardSpec) -> DataFlow[Any] | None:
        """A copy of this reader that reads part ``spec`` (``equal=False``) of this rank's
        files: the workers of a rank (see :class:`~dataflow.ShardData`). ``None`` (sharded by
        position) when this reader is not sharded by file, is split already, ``spec`` asks
        for equal counts, or the rank has fewer files than workers. This reader is unchanged."""
        if not self._sharded or self._worker_split or spec.equal or spec.pad:
            return None
        if len(self._rank_files) < spec.num_shards:
            return None
        part = copy.copy(self)
        part._rank_files = spec.split(self._rank_files)
        part._worker_split = True
        for epoch_attr in ("_resume", "_where", "_epoch_ref"):  # no epoch of this reader's goes on in it
            part.__dict__.pop(epoch_attr, None)
        return part

    def io_stats(self) -> dict[str, int]:
        """``requests``, ``bytes`` (received), ``retries`` and ``cache_hits`` of this process's
        reads of remote files (all zero for local files)."""
        return self._storage.io_stats()

    def _get_state(self, live: bool) -> dict[str, Any]:
        state: dict[str, Any] = {"files": len(self.paths), "rng": self._save_rng()}
        where = self.__dict__.get("_where")
        if live and where is not None:
            f = where[1]
            state["file"] = where[0]
            state["offset"] = str(f.tell() if f is not None and not f.closed else where[2])
            state["epoch_rng"] = plain_rng_state(self._epoch_rng)
        return state

    def _set_state(self, state: Mapping[str, Any], live: bool) -> None:
        stage = type(self).__name__
        check_file_count(stage, state, len(self.paths))
        if not live or "file" not in state:
            self._load_rng(field(stage, state, "rng", (dict, type(None))))
            return
        offset = offset_field(stage, state)
        self._resume = (int_field(stage, state, "file", 0, len(self.paths)), offset)
        self._load_rng(field(stage, state, "epoch_rng", dict))
