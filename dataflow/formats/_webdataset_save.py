"""Writing WebDataset tar shards, each all or nothing (what
:meth:`dataflow.formats._webdataset.WebDatasetSerializer.save` does)."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import IO, Any

from .._checks import check_int
from ..base import DataFlow
from ._atomic import atomic_write
from ._common import FormatError, PathType, fspath, iterate_for_save
from ._tar import BLOCK, member_header, record_padding
from ._webdataset_codecs import encode_value

__all__ = ["save_webdataset"]

STAGE = "WebDatasetSerializer.save"


class _Shard:
    """One shard being written: a temporary file renamed to its path when closed cleanly."""

    def __init__(self, path: str, overwrite: bool, durable: bool) -> None:
        self.path = path
        self._atomic: AbstractContextManager[str] = atomic_write(STAGE, path, overwrite, durable)
        tmp = self._atomic.__enter__()
        try:
            self.file: IO[bytes] = open(tmp, "r+b", buffering=1 << 20)  # noqa: SIM115 - closed in close(); not truncated: see atomic_write
        except BaseException:
            self._atomic.__exit__(*sys.exc_info())
            raise
        self.count = 0
        self.size = 0

    def write(self, parts: list[bytes]) -> None:
        write = self.file.write
        for part in parts:
            write(part)
            self.size += len(part)
        self.count += 1

    def close(self, error: BaseException | None = None) -> None:
        """Finish the shard (end-of-archive blocks, then the rename), or after ``error``
        remove its temporary file."""
        if error is not None:
            with contextlib.suppress(Exception):
                self.file.close()
            self._atomic.__exit__(type(error), error, error.__traceback__)
            return
        try:
            self.file.write(record_padding(self.size))
            self.file.close()
        except BaseException as e:
            self._atomic.__exit__(type(e), e, e.__traceback__)
            raise
        self._atomic.__exit__(None, None, None)


def _members(index: int, dp: Any, previous: str | None, mtime: int) -> tuple[str, list[bytes]]:
    """The key of datapoint ``index`` and the bytes of its members (headers, data, padding)."""
    if not isinstance(dp, Mapping):
        raise FormatError(
            f"{STAGE}: datapoint {index} is a {type(dp).__name__}; a WebDataset sample is a dict "
            f"{{'__key__': key, extension: value, ...}}"
        )
    key = dp.get("__key__", f"{index:09d}")
    if not isinstance(key, str) or not key or "." in key.rsplit("/", 1)[-1] or key.endswith("/"):
        raise FormatError(
            f"{STAGE}: datapoint {index}: __key__ must be a non-empty str without a dot in its last "
            f"path component (readers split member names at the first dot), got {key!r}"
        )
    if key == previous:
        raise FormatError(
            f"{STAGE}: datapoint {index} has the same __key__ {key!r} as the one before it; readers "
            f"would merge them into one sample"
        )
    parts: list[bytes] = []
    for ext in sorted(k for k in dp if not (isinstance(k, str) and k.startswith("__"))):
        if not isinstance(ext, str) or not ext or "/" in ext or ext != ext.lower():
            raise FormatError(
                f"{STAGE}: datapoint {index} (key {key!r}): extension {ext!r} must be a non-empty "
                f"lowercase str without '/' (readers lowercase extensions)"
            )
        try:
            data = encode_value(ext, dp[ext])
        except Exception as e:
            raise FormatError(
                f"{STAGE}: datapoint {index} (key {key!r}): its .{ext} value cannot be encoded "
                f"({type(e).__name__}: {e})"
            ) from e
        try:
            header = member_header(f"{key}.{ext}", len(data), mtime)
        except ValueError as e:
            raise FormatError(f"{STAGE}: datapoint {index} (key {key!r}): .{ext}: {e}") from e
        parts += (header, data, bytes(-len(data) % BLOCK))
    if not parts:
        raise FormatError(f"{STAGE}: datapoint {index} (key {key!r}) has no member to write")
    return key, parts


def save_webdataset(
    df: DataFlow[Any],
    pattern: PathType,
    maxcount: int = 100000,
    maxsize: int = 3_000_000_000,
    *,
    start_shard: int = 0,
    overwrite: bool = False,
    progress: bool = True,
    durable: bool = False,
) -> list[str]:
    """Write every datapoint of one epoch of ``df`` (after ``df.reset_state()``): each a
    dict ``{"__key__": key, ext: value, ...}`` becomes one member ``<key>.<ext>`` per
    extension, in sorted order of the extensions (as ``webdataset.TarWriter`` writes
    them). Keys starting with ``__`` are not written; without ``__key__`` the sample's
    index in the flow (``"%09d"``) is its key. A key must not contain a dot after its
    last ``/`` (readers would split it there), and two consecutive samples must not share
    a key.

    Values are encoded by extension, the inverse of :class:`WebDatasetData`'s decoders:
    ``bytes`` as they are, ``str`` as UTF-8, ``int`` for ``.cls``/``.idx``/``.id``...,
    arrays for ``.npy``, a dict of arrays for ``.npz``, JSON values for ``.json``, RGB
    ``uint8`` arrays for image extensions (OpenCV; ``.jpg`` is lossy). A value that cannot
    be encoded raises :class:`~dataflow.FormatError` naming the sample and extension.

    Shard ``k`` goes to ``pattern % (start_shard + k)``; a new shard starts when the
    current one holds ``maxcount`` samples or ``maxsize`` bytes (a sample is never split:
    a shard may pass ``maxsize`` by its last sample). Each shard is written all or
    nothing (a temporary file renamed once complete): an interrupted save leaves the
    shards it completed and no partial one. Existing shards are replaced only with
    ``overwrite=True``; ``durable=True`` flushes each to the disk before it appears.
    Returns the paths written (one empty shard for an empty flow)."""
    pattern = fspath(STAGE, "pattern", pattern)
    maxcount = check_int(STAGE, "maxcount", maxcount)
    if isinstance(maxsize, bool) or not isinstance(maxsize, (int, float)) or maxsize <= 0:
        raise ValueError(f"{STAGE}: maxsize must be a number of bytes > 0, got {maxsize!r}")
    start_shard = check_int(STAGE, "start_shard", start_shard, minimum=0)
    try:
        names = (pattern % start_shard, pattern % (start_shard + 1))
    except (TypeError, ValueError):
        names = ("", "")
    if names[0] == names[1]:
        raise ValueError(
            f"{STAGE}: pattern must hold one integer format such as %06d for the shard number, "
            f"got {pattern!r}"
        )
    mtime = int(time.time())
    written: list[str] = []
    shard: _Shard | None = None
    previous: str | None = None
    try:
        for index, dp in enumerate(iterate_for_save(STAGE, df, progress)):
            key, parts = _members(index, dp, previous, mtime)
            previous = key
            if shard is not None and (shard.count >= maxcount or shard.size >= maxsize):
                full, shard = shard, None
                full.close()
                written.append(full.path)
            if shard is None:
                shard = _Shard(os.fspath(pattern % (start_shard + len(written))), overwrite, durable)
            shard.write(parts)
        if shard is None:  # an empty flow: one empty shard, as webdataset's ShardWriter leaves
            shard = _Shard(os.fspath(pattern % start_shard), overwrite, durable)
        last, shard = shard, None
        last.close()
        written.append(last.path)
    except BaseException as e:
        if shard is not None:
            shard.close(e)
        raise
    return written
