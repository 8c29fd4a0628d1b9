"""WebDataset tar shards without the ``webdataset`` package: :class:`WebDatasetData` and
:class:`WebDatasetSerializer`.

A WebDataset is a list of tar files (*shards*); the members of one sample are consecutive in
a shard and share a *key*: the member's path up to the first dot of its file name
(``train/0001.seg.png`` is member ``seg.png`` of sample ``train/0001``). Members named
``__...__`` (metadata), members that are not regular files and names without a dot are
skipped, as the ``webdataset`` package skips them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Generator, Iterator, Mapping
from contextlib import closing
from typing import IO, Any, Union

from .._errors import LengthUnknownError
from .._warn import warn
from ..sources._order import ShardSpec
from ._common import FormatError
from ._file_reader import FileReader, storage_args
from ._storage import PathSpec, redact
from ._tar import TarError, read_members
from ._webdataset_codecs import DECODERS, last_extension
from ._webdataset_save import save_webdataset

__all__ = ["WebDatasetData", "WebDatasetSerializer"]

Decode = Union[bool, Mapping[str, Callable[[bytes], Any]], Callable[[str, str, bytes], Any]]  # noqa: UP007
HANDLERS = ("raise", "warn_and_continue", "ignore_and_continue")
_META = re.compile(r"__[^/]*__($|/)")
_KEY = re.compile(r"^((?:.*/|)[^.]+)[.]([^/]*)$")  # webdataset's base_plus_ext


def split_name(name: str) -> tuple[str, str] | None:
    """``(key, extension)`` of a member name (the extension lowercased), or ``None`` for a
    member that belongs to no sample (metadata, or a name without a dot)."""
    if ("/" not in name and name.startswith("__") and name.endswith("__")) or _META.match(name):
        return None
    m = _KEY.match(name)
    return None if m is None else (m.group(1), m.group(2).lower())


class WebDatasetData(FileReader[dict[str, Any]]):
    """Read WebDataset tar shards: one dict per sample, ``{"__key__": key, "__url__": shard,
    ext: value, ...}``, extensions lowercased, in the order of the shard's members.

    ``urls`` is a path, a URL (``s3://``, ``gs://``, ``https://``, ``hf://``...), a glob or a
    list of them; the keyword arguments of remote files (``storage_options=``,
    ``prefetch_shards=``, ``cache_dir=``...) are those of :doc:`/object_stores`: remote shards
    are fetched whole, ahead of the reader, in background threads. Shards are read as streams
    (never extracted to disk), with a tar parser of our own. ``__url__`` is the shard's path or
    URL without credentials or query string.

    ``decode``: ``True`` turns members into values by extension (``.npy``/``.npz`` arrays
    without pickle, ``.json``, ``.txt``/``.text`` to ``str``, ``.cls``/``.cls2``/``.index``/
    ``.idx``/``.id`` to ``int``, images ``.jpg``/``.png``/``.ppm``/``.bmp``/``.webp``... to
    RGB ``uint8`` arrays through OpenCV, from ``pip install "dataflow-ml[image]"``, imported
    only when an image is decoded; the last part of a multi-part extension decides:
    ``seg.png`` is an image), and leaves other extensions as ``bytes``; ``False`` leaves every
    member as ``bytes``; a dict ``{ext: fn(bytes)}`` decodes the extensions it names (the
    whole extension first, then its last part) and leaves the rest as ``bytes`` (start from
    ``{**WebDatasetData.DECODERS, ...}`` to keep the defaults); a function
    ``fn(key, ext, bytes)`` decodes every member.

    Order: shards in the order given (globs sorted), or with ``shuffle=True`` in a new
    permutation each epoch drawn from ``seed`` (or :func:`dataflow.set_seed`) and the epoch
    number; the samples of a shard always in their tar order (add ``.shuffle(buffer_size)`` to
    mix samples across shards). ``len()`` counts the samples of local shards by reading their
    headers once (the data is skipped); for remote shards it raises
    :class:`~dataflow.LengthUnknownError`.

    Sharding (:class:`~dataflow.ShardData` right after this reader, with at least as many
    shards as ranks): rank ``r`` reads and fetches only shards ``r, r + num_shards, ...``
    (then shuffled among themselves). With ``equal=True`` (``.shard()``'s default) every
    rank stops at the smallest rank's sample count, which needs the counts: for local shards
    they come from the header scan above; remote shards are then sharded by position instead
    (every rank reads every shard and keeps its part), since a tar shard has no index to
    count its samples without fetching it; use ``equal=False`` with remote shards.

    Errors: a damaged or truncated shard raises :class:`~dataflow.FormatError` naming the
    shard (without credentials), the member and its byte offset; a member that does not
    decode, or two members of one sample with the same extension, raise it naming the shard
    and the sample. With ``handler="warn_and_continue"`` (a warning each) or
    ``"ignore_and_continue"``, the reader goes on instead: with the next sample after a bad
    sample, with the next shard after a damaged or unreadable one (the sample it was in is
    dropped); :meth:`io_stats` counts the ``skipped_samples`` and ``skipped_shards``.

    State: the position in the epoch's shard order, the byte offset in that shard of the next
    sample's first member and the samples done; resuming fetches that shard from that offset
    and no earlier shard again. Sharded, the state lists the shards (and parts) the rank has
    left, so :func:`dataflow.checkpoint.reshard` can split them among a new number of ranks.
    """

    #: a piece: [shard, samples done, byte offset of the next sample (-1: the shard is done)]
    _piece_fields = (0, 0, None)

    DECODERS = DECODERS

    def __init__(
        self,
        urls: PathSpec,
        decode: Decode = True,
        handler: str = "raise",
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
        super().__init__(urls, seed, storage_args(locals()), name="urls")
        stage = type(self).__name__
        if handler not in HANDLERS:
            names = ", ".join(map(repr, HANDLERS))
            raise ValueError(f"{stage}: handler must be one of {names}, got {handler!r}")
        ok_map = isinstance(decode, Mapping) and all(
            isinstance(k, str) and callable(v) for k, v in decode.items()
        )
        if not (isinstance(decode, bool) or ok_map or (callable(decode) and not isinstance(decode, Mapping))):
            raise TypeError(
                f"{stage}: decode must be True, False, a dict {{extension: function(bytes)}} or a "
                f"function(key, extension, bytes), got {decode!r:.80}"
            )
        self.decode = dict(decode) if isinstance(decode, Mapping) else decode
        self.handler = handler
        self._shuffle_work = bool(shuffle)
        self._counts: list[int] | None = None
        self._skips = {"skipped_samples": 0, "skipped_shards": 0}
        self._shown = [redact(u) for u in self.paths]

    # -- set-up, length, sharding --------------------------------------------------------------

    def io_stats(self) -> dict[str, int]:
        """``requests``, ``bytes`` (received), ``retries`` and ``cache_hits`` of this process's
        reads of remote shards (zero for local ones), and the ``skipped_samples`` and
        ``skipped_shards`` of a ``*_and_continue`` handler, in this process."""
        return {**self._storage.io_stats(), **self._skips}

    def _known_counts(self) -> list[int]:
        """Each shard's sample count, from a scan of its headers (local shards, once)."""
        if self._counts is None:
            if self._storage.remote:
                raise LengthUnknownError(
                    f"{type(self).__name__}: the number of samples of remote tar shards is unknown "
                    f"without fetching them (a tar shard has no index)"
                )
            self._counts = [self._count(i) for i in range(len(self.paths))]
        return self._counts

    def _count(self, i: int) -> int:
        stage, count, key = type(self).__name__, 0, None
        try:
            f = self._storage.open_local(self.paths[i])
        except OSError:
            if self.handler == "raise":
                raise
            return 0  # the epoch will skip it
        with f:
            members = read_members(f.read, 0, lambda n: f.seek(n, 1))
            try:
                for _, name, _ in members:
                    parts = split_name(name)
                    if parts is not None and parts[0] != key:
                        count, key = count + 1, parts[0]
            except FormatError as e:
                if self.handler == "raise":
                    raise FormatError(f"{stage}: {self._shown[i]}: {e}") from e
                count -= key is not None  # the sample the damage cut is dropped
        return count

    def __len__(self) -> int:
        spec = self._file_shard
        counts = self._known_counts()
        if spec is None:
            return sum(counts)
        if spec.equal:
            return self._equal_limit([[i, 0, 0] for i in range(len(self.paths))], spec)
        return sum(counts[p[0]] for p in self._rank_work())

    def _set_shard(self, spec: ShardSpec) -> bool:
        """Called by :class:`~dataflow.ShardData` right after this reader: rank
        ``spec.index`` reads its own shards when there are at least as many shards as ranks,
        no padding is asked for, and (with ``equal=True``) the shards are local; otherwise
        ``False`` (sharded by position)."""
        if len(self.paths) < spec.num_shards or spec.pad or (spec.equal and self._storage.remote):
            return False
        self._file_shard = spec
        return True

    def _splits_rank(self, rank: ShardSpec) -> bool:
        """An ``equal=True`` rank stops at its count inside some shard: its workers split by
        position."""
        return not rank.equal

    def _equal_limit(self, work: list[list[int]], spec: ShardSpec) -> int:
        """The samples every rank yields with ``equal=True``: the smallest rank's count when
        ``work`` (pieces ``[shard, samples done, offset]``) is dealt out round robin."""
        counts = self._known_counts()
        n = spec.num_shards
        return min(sum(counts[p[0]] - p[1] for p in work[r::n]) for r in range(n))

    # -- an epoch ------------------------------------------------------------------------------

    def _rank_work(self) -> list[list[int]]:
        """This rank's shards as pieces ``[shard, samples done, byte offset of the next
        sample]`` (offset ``-1``: the shard is done)."""
        spec, n = self._file_shard, len(self.paths)
        shards = range(n) if spec is None else range(spec.index, n, spec.num_shards)
        return self._worker_part([[i, 0, 0] for i in shards])

    def _resume(self, resume: dict[str, Any]) -> None:
        """The epoch's work from a loaded position: this reader's own, or its part of what
        all ranks left (a state merged by :func:`dataflow.checkpoint.reshard`)."""
        self._yielded, self._limit, self._pos = resume["yielded"], resume["limit"], 0
        if "work" not in resume:
            self._work = self._shuffled(self._rank_work())
            self._pos = resume["file"]
            if self._pos < len(self._work):
                self._work[self._pos][1:] = [resume["read"], resume["offset"]]
            return
        work, spec = resume["work"], self._file_shard
        if not resume["merged"] or spec is None:
            self._work = work
            return
        self._yielded = 0
        self._work = self._worker_part(work[spec.index :: spec.num_shards])
        if spec.equal:  # (an equal=True rank's workers split by position: _worker_part kept all)
            limit = self._equal_limit(work, spec)
            left = resume["limit"]
            self._limit = limit if left is None else min(limit, left // spec.num_shards)

    def _records(self) -> Iterator[dict[str, Any]]:
        while self._pos < len(self._work):
            restart = yield from self._read_files()
            if not restart:
                return

    def _read_files(self) -> Generator[dict[str, Any], None, bool]:
        """The samples of the pieces from ``self._pos`` on; returns ``True`` when a shard
        could not be fetched and was skipped (the caller starts again after it)."""
        work, limit = self._work, self._limit
        if limit is not None and self._yielded >= limit:
            return False
        rest = work[self._pos :]
        files = self._storage.iterate([p[0] for p in rest], [max(p[2], 0) for p in rest])
        decode = self._decoder()
        with closing(files):
            while True:
                try:
                    item = next(files, None)
                except (OSError, FormatError) as e:
                    self._skip(e, shard=True)
                    work[self._pos][2] = -1
                    self._pos += 1
                    return True
                if item is None:
                    return False
                for sample in self._read_shard(work[self._pos], item[1], decode):
                    self._yielded += 1
                    yield sample
                    if limit is not None and self._yielded >= limit:
                        return False
                self._pos += 1

    def _decoder(self) -> Callable[[str, str, bytes], Any] | None:
        decode = self.decode
        if decode is False:
            return None
        if decode is True or isinstance(decode, dict):
            table: Mapping[str, Callable[[bytes], Any]] = DECODERS if decode is True else decode

            def by_extension(key: str, ext: str, data: bytes) -> Any:
                fn = table.get(ext) or table.get(last_extension(ext))
                return data if fn is None else fn(data)

            return by_extension
        return decode

    def _skip(self, error: Exception, shard: bool) -> None:
        """Go on after ``error`` (a ``*_and_continue`` handler), or raise it."""
        if self.handler == "raise":
            raise error
        self._skips["skipped_shards" if shard else "skipped_samples"] += 1
        if self.handler == "warn_and_continue":
            what = "the rest of the shard" if shard else "the sample"
            warn(f"{error}; skipping {what} (handler='warn_and_continue')", UserWarning)

    def _read_shard(
        self, piece: list[int], f: IO[bytes], decode: Callable[[str, str, bytes], Any] | None
    ) -> Iterator[dict[str, Any]]:
        """The samples of one shard from byte ``piece[2]`` on; ``piece`` is kept at the next
        sample (its offset ``-1`` once the shard is done)."""
        stage, url = type(self).__name__, self._shown[piece[0]]
        members = read_members(f.read, piece[2])
        sample: dict[str, Any] | None = None
        bad: FormatError | None = None
        while True:
            try:
                member = next(members, None)
            except TarError as e:
                piece[2] = -1
                cut = split_name(e.member) if e.member is not None else None
                if sample is not None and cut is not None and cut[0] != sample["__key__"]:
                    piece[1] += 1  # the damage is in the next sample: this one is whole
                    done = self._finish(sample, bad, url, decode)
                    if done is not None:
                        yield done
                    sample = None
                if self.handler != "raise" and (sample is not None or cut is not None):
                    self._skips["skipped_samples"] += 1  # the sample the damage cut
                self._skip(FormatError(f"{stage}: {url}: {e}"), shard=True)
                return
            if member is None:
                break
            offset, name, data = member
            parts = split_name(name)
            if parts is None:
                continue
            key, ext = parts
            if sample is not None and key != sample["__key__"]:
                piece[1], piece[2] = piece[1] + 1, offset
                done = self._finish(sample, bad, url, decode)
                if done is not None:
                    yield done
                sample, bad = None, None
            if sample is None:
                sample = {"__key__": key, "__url__": url}
            if ext in sample and bad is None:
                bad = FormatError(
                    f"{stage}: {url}: member {name!r} at byte offset {offset}: sample {key!r} has a "
                    f"second .{ext} member"
                )
            sample[ext] = data
        piece[2] = -1
        if sample is not None:
            piece[1] += 1
            done = self._finish(sample, bad, url, decode)
            if done is not None:
                yield done

    def _finish(
        self,
        sample: dict[str, Any],
        bad: FormatError | None,
        url: str,
        decode: Callable[[str, str, bytes], Any] | None,
    ) -> dict[str, Any] | None:
        """``sample`` decoded, or ``None`` when it is skipped (a ``*_and_continue`` handler)."""
        if bad is not None:
            self._skip(bad, shard=False)
            return None
        if decode is None:
            return sample
        key = sample["__key__"]
        for ext, data in sample.items():
            if ext[:2] == "__":
                continue
            try:
                sample[ext] = decode(key, ext, data)
            except Exception as e:
                error = FormatError(
                    f"{type(self).__name__}: {url}: sample {key!r}: its .{ext} member does not decode "
                    f"({type(e).__name__}: {e})"
                )
                error.__cause__ = e
                self._skip(error, shard=False)
                return None
        return sample

    # -- state ---------------------------------------------------------------------------------

    def _position_state(self) -> dict[str, Any]:
        work, pos = self._work, self._pos
        while pos < len(work) and work[pos][2] < 0:
            pos += 1  # a shard read to its end: resuming does not fetch it again
        piece = work[pos] if pos < len(work) else [0, 0, 0]
        state: dict[str, Any] = {"file": pos, "offset": str(piece[2]), "read": piece[1]}
        state["yielded"] = self._yielded
        if self._file_shard is not None:  # a rank's part: the pieces left, for reshard
            state["work"] = [[p[0], p[1], str(p[2])] for p in work[pos:]]
            state["limit"] = self._limit
        return state

    def _position_from(self, stage: str, state: Mapping[str, Any]) -> dict[str, Any] | None:
        return self._file_position(stage, state) if "file" in state else None


class WebDatasetSerializer:
    """Write a flow as WebDataset tar shards, and read them back.

    Example::

        WebDatasetSerializer.save(df, "out/shard-%06d.tar", maxcount=10000)
        df = WebDatasetSerializer.load("out/shard-*.tar", shuffle=True, seed=0)

    The shards are plain tar files that ``webdataset.WebDataset``, ``tar`` and
    :class:`WebDatasetData` read.
    """

    save = staticmethod(save_webdataset)

    @staticmethod
    def load(
        urls: PathSpec,
        decode: Decode = True,
        handler: str = "raise",
        shuffle: bool = False,
        seed: int | None = None,
        **storage: Any,
    ) -> WebDatasetData:
        """:class:`WebDatasetData` over ``urls`` (a glob such as ``"out/shard-*.tar"``)."""
        return WebDatasetData(urls, decode, handler, shuffle, seed, **storage)
