"""One ``.npz`` file holding a whole dataset, without pickle: :class:`NumpySerializer`.

Layout (every member a plain numeric array, so ``np.load(path, allow_pickle=False)`` reads
it): ``data``, a ``uint8`` array of the datapoints encoded with the safe codec, one after
the other; ``offsets``, an ``int64`` array of ``n + 1`` boundaries (datapoint ``i`` is
``data[offsets[i]:offsets[i + 1]]``); ``meta``, a ``uint8`` array holding the codec-encoded
dict ``{"format": "npz", "version": 1, "count": n, "writer": ...}``.
"""

from __future__ import annotations

import zipfile
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import codec
from .._errors import DataFlowNotReset
from ..base import DataFlow
from ..sources._indexed import IndexedSource
from ._atomic import atomic_write
from ._common import FormatError, PathType, check_meta, fspath, iterate_for_save, make_meta
from ._storage import ShardStorage, StorageReader, redact

__all__ = ["NumpySerializer"]

FORMAT_VERSION = 1
_MEMBERS = ("data", "meta", "offsets")


class _TensorpackFile(Exception):
    """Internal: the npz is tensorpack's (one pickled object array named ``buffer``)."""


def _read_tensorpack(stage: str, storage: ShardStorage, allow_pickle: bool) -> list[Any]:
    """The datapoints of an npz written by tensorpack's NumpySerializer (pickled objects)."""
    path = redact(storage.urls[0])
    if not allow_pickle:
        raise FormatError(
            f"{stage}: {path} was written by tensorpack's NumpySerializer: its datapoints are "
            f"pickled, which dataflow loads only with allow_pickle=True (unpickling runs code "
            f"named by the data: pass it only for files you trust), like numpy.load"
        )
    try:
        with storage.open(0) as f, np.load(f, allow_pickle=True) as npz:
            buffer = npz["buffer"]
    except Exception as e:
        what = f"{type(e).__name__}: {e}"
        raise FormatError(f"{stage}: {path}: tensorpack's buffer cannot be loaded ({what})") from e
    # tensorpack stored np.asarray(datapoints, dtype=object): equal-length lists became rows
    return [list(row) for row in buffer] if buffer.ndim >= 2 else list(buffer)


def _read(stage: str, storage: ShardStorage, members: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Load ``members`` of the npz of ``storage`` (never unpickling), validating the metadata."""
    path = redact(storage.urls[0])
    try:
        with storage.open(0) as f, np.load(f, allow_pickle=False) as npz:
            missing = [m for m in _MEMBERS if m not in npz.files]
            if missing and "buffer" in npz.files:
                raise _TensorpackFile(path)
            if missing:
                raise FormatError(
                    f"{stage}: {path} was not written by NumpySerializer (no {', '.join(missing)} array)"
                )
            out = {m: npz[m] for m in ("meta", *members)}
    except FileNotFoundError:
        raise FileNotFoundError(f"{stage}: no such file: {path!r}") from None
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error) as e:  # zlib: compressed
        if isinstance(e, FormatError):
            raise
        raise FormatError(f"{stage}: {path} is not a readable .npz file ({type(e).__name__}: {e})") from e
    try:
        meta = codec.loads(out["meta"].tobytes())
    except codec.CodecError as e:
        raise FormatError(f"{stage}: {path}: the metadata is malformed ({e})") from e
    count = check_meta(stage, path, meta, "npz", FORMAT_VERSION)
    if "offsets" in out:
        offsets = out["offsets"]
        size = out["data"].size if "data" in out else None
        ok = offsets.dtype == np.int64 and offsets.shape == (count + 1,) and offsets[0] == 0
        ok = ok and bool(np.all(np.diff(offsets) >= 0)) and (size is None or offsets[-1] == size)
        if not ok:
            raise FormatError(f"{stage}: {path}: the offsets array is inconsistent; the file is damaged")
    out["count"] = np.asarray(count)
    return out


class _NumpyData(StorageReader, IndexedSource[Any]):
    """The datapoints of an npz written by :meth:`NumpySerializer.save`: the whole file is
    read into memory by ``reset_state()`` and each datapoint decoded when yielded (arrays
    are fresh copies each epoch). ``len`` is exact. Reentrant. Checkpoints, resumes (without
    decoding what was consumed) and shards by index, like :class:`~dataflow.DataFromList`."""

    def __init__(
        self, storage: ShardStorage, shuffle: bool, seed: int | None, allow_pickle: bool = False
    ) -> None:
        super().__init__(seed)
        self._storage = storage
        self._path = redact(storage.urls[0])
        self._shuffle = bool(shuffle)
        self._allow_pickle = bool(allow_pickle)
        self._data: np.ndarray | None = None
        self._offsets: list[int] | None = None
        self._count: int | None = None
        self._tensorpack: list[Any] | None = None  # a tensorpack file's datapoints

    def reset_state(self) -> None:
        super().reset_state()
        stage = "NumpySerializer.load"
        try:
            out = _read(stage, self._storage, ("data", "offsets"))
        except _TensorpackFile:
            self._tensorpack = _read_tensorpack(stage, self._storage, self._allow_pickle)
            self._count = len(self._tensorpack)
            return
        data = out["data"]
        data.flags.writeable = False  # decoded arrays must copy, never alias the file buffer
        self._data, self._offsets = data, out["offsets"].tolist()
        self._count = int(out["count"])

    def _num_items(self) -> int:
        if self._count is None:
            stage = "NumpySerializer.load"
            try:
                self._count = int(_read(stage, self._storage, ("offsets",))["count"])
            except _TensorpackFile:
                self._count = len(_read_tensorpack(stage, self._storage, self._allow_pickle))
        return self._count

    def _getter(self) -> Callable[[int], Any]:
        if self._tensorpack is not None:
            return self._tensorpack.__getitem__
        data, offsets = self._data, self._offsets
        if data is None or offsets is None:
            raise DataFlowNotReset("NumpySerializer.load(...) was iterated before reset_state()")
        view, loads, path = data.data, codec.loads, self._path  # read-only: decoded arrays are copies

        def get(i: int) -> Any:
            try:
                return loads(view[offsets[i] : offsets[i + 1]])
            except codec.CodecError as e:
                msg = f"NumpySerializer: {path}: datapoint {i} cannot be decoded ({e})"
                raise codec.CodecError(msg) from e

        return get


class NumpySerializer:
    """Save a whole flow into one ``.npz`` file and load it back (tensorpack's API, but no
    pickle: files load with ``allow_pickle=False``). Holds the whole dataset in memory while
    saving and loading; for large data prefer :class:`~dataflow.formats.LMDBSerializer`.

    Example::

        NumpySerializer.save(df, "small.npz")
        df = NumpySerializer.load("small.npz", shuffle=True)
    """

    @staticmethod
    def save(
        df: DataFlow[Any],
        path: PathType,
        *,
        compressed: bool = False,
        overwrite: bool = False,
        progress: bool = True,
        durable: bool = False,
    ) -> None:
        """Write one epoch of ``df`` (after ``df.reset_state()``) to ``path`` (exactly that
        name: no ``.npz`` is appended), zip-compressed with ``compressed=True``. All or
        nothing; an existing file is replaced only with ``overwrite=True``.
        ``durable=True`` also flushes it to the disk before it appears, so it survives a
        power loss too (see :doc:`/formats`)."""
        stage = "NumpySerializer.save"
        path = fspath(stage, "path", path)
        with atomic_write(stage, path, overwrite, durable) as tmp:
            blobs = [codec.dumps(dp) for dp in iterate_for_save(stage, df, progress)]
            offsets = np.zeros(len(blobs) + 1, dtype=np.int64)
            np.cumsum([len(b) for b in blobs], out=offsets[1:])
            data = np.frombuffer(b"".join(blobs), dtype=np.uint8)
            del blobs
            meta = np.frombuffer(codec.dumps(make_meta("npz", FORMAT_VERSION, len(offsets) - 1)), np.uint8)
            with open(tmp, "r+b") as f:  # not "wb": see atomic_write
                (np.savez_compressed if compressed else np.savez)(f, data=data, offsets=offsets, meta=meta)

    @staticmethod
    def load(
        path: PathType,
        shuffle: bool = True,
        seed: int | None = None,
        *,
        allow_pickle: bool = False,
        **storage: Any,
    ) -> DataFlow[Any]:
        """A flow of the decoded datapoints of an npz written by :meth:`save`, in write order
        or in a new permutation each epoch. The file is read by ``reset_state()``; a file
        that is not ours, damaged, or of a newer format version raises
        :class:`~dataflow.FormatError`. An npz written by tensorpack's ``NumpySerializer``
        (a pickled object array) is read only with ``allow_pickle=True``, like
        :func:`numpy.load`; its datapoints come back as lists, as they went in. ``path`` may
        be a URL, read with the keyword arguments of remote files (see :doc:`/object_stores`)."""
        stage = "NumpySerializer.load"
        storage_ = ShardStorage.single(stage, fspath(stage, "path", path), "path", storage)
        return _NumpyData(storage_, shuffle, seed, allow_pickle)
