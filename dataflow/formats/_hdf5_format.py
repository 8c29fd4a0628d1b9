"""HDF5 files, one dataset per component: :class:`HDF5Data` and :class:`HDF5Serializer`.

Needs the optional package ``h5py`` (``pip install "dataflow-ml[hdf5]"``), imported only
when a class of this module is used. HDF5 stores *columns*: component ``j`` of every
datapoint goes to the dataset ``data_paths[j]``, so each component must be a number, a
numpy array of one fixed shape and a numeric/bool dtype, a ``str`` or ``bytes``. Files we
write carry the root attributes ``dataflow_format = "hdf5"``,
``dataflow_format_version = 1``, ``dataflow_count`` and ``dataflow_writer``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._errors import DataFlowNotReset
from ..base import DataFlow
from ..sources._indexed import IndexedSource
from ._atomic import atomic_write
from ._common import FormatError, PathType, check_meta, fspath, iterate_for_save, make_meta, require
from ._storage import ShardStorage, StorageReader

__all__ = ["HDF5Data", "HDF5Serializer"]

FORMAT_VERSION = 1
_CHUNK = 1024  # datapoints buffered per write


def _check_paths(stage: str, data_paths: object) -> list[str]:
    if isinstance(data_paths, str) or not isinstance(data_paths, (list, tuple)) or not data_paths:
        raise TypeError(
            f"{stage}: data_paths must be a non-empty list of HDF5 dataset paths, got {data_paths!r}"
        )
    if not all(isinstance(p, str) and p for p in data_paths) or len(set(data_paths)) != len(data_paths):
        raise ValueError(f"{stage}: data_paths must be distinct non-empty strings, got {data_paths!r}")
    return list(data_paths)


class _Column:
    """One dataset being written: its kind (array, str, bytes), dtype and row shape."""

    def __init__(self, h5py: Any, hf: Any, path: str, first: Any) -> None:
        self.path, self.stage = path, "HDF5Serializer.save"
        if isinstance(first, str):
            self.kind, dtype, self.shape = "str", h5py.string_dtype("utf-8"), ()
        elif isinstance(first, (bytes, bytearray)):
            self.kind, dtype, self.shape = "bytes", h5py.vlen_dtype(np.uint8), ()
        else:
            arr = np.asarray(first)
            if arr.dtype.kind not in "biufc":
                raise TypeError(
                    f"{self.stage}: component {path!r} has dtype {arr.dtype} ({type(first).__name__}), "
                    f"which HDF5 columns cannot hold; use numbers, numeric arrays, str or bytes"
                )
            self.kind, dtype, self.shape = "array", arr.dtype, arr.shape
        self.dtype = np.dtype(dtype)  # object for str and bytes rows
        self.ds = hf.create_dataset(path, shape=(0, *self.shape), maxshape=(None, *self.shape), dtype=dtype)
        self.ds.attrs["dataflow_kind"] = self.kind
        self.rows = np.empty((_CHUNK, *self.shape), self.dtype)  # a copy of each value, at once
        self.filled = 0

    def add(self, value: Any, index: int) -> None:
        """Check ``value`` (datapoint ``index``) and copy it into the pending rows (so a flow
        that reuses its arrays or bytearrays cannot change rows not yet written)."""
        if self.kind != "array":
            want = str if self.kind == "str" else (bytes, bytearray)
            if not isinstance(value, want) or (isinstance(value, str) and "\x00" in value):
                raise TypeError(
                    f"{self.stage}: datapoint {index} component {self.path!r}: expected {self.kind} "
                    f"like the first datapoint (without NUL characters), got {type(value).__name__}"
                )
            row = value if isinstance(value, str) else np.frombuffer(bytes(value), np.uint8)
        else:
            row = np.asarray(value)
            if row.shape != self.shape or not np.can_cast(row.dtype, self.dtype, "safe"):
                raise ValueError(
                    f"{self.stage}: datapoint {index} component {self.path!r}: got shape {row.shape} "
                    f"dtype {row.dtype}, but the column has shape {self.shape} dtype {self.dtype} "
                    f"(from the first datapoint); HDF5 needs one shape per column and no lossy casts"
                )
        self.rows[self.filled] = row
        self.filled += 1

    def flush(self, start: int) -> None:
        """Append the pending rows to the dataset, from row ``start``."""
        n, self.filled = self.filled, 0
        if n == 0:
            return
        self.ds.resize(start + n, axis=0)
        if self.kind == "bytes":  # h5py broadcasts equal-length vlen rows wrongly on __setitem__
            self.ds.write_direct(self.rows, np.s_[0:n], np.s_[start : start + n])
        else:
            self.ds[start : start + n] = self.rows[:n]


def _read_column(ds: Any) -> Any:
    kind = ds.attrs.get("dataflow_kind", "array")
    if kind == "str":
        return ds.asstr()[...].tolist()
    if kind == "bytes":
        return [bytes(v) for v in ds[...]]
    return ds[...]


class HDF5Data(StorageReader, IndexedSource[Any]):
    """Zip the datasets ``data_paths`` of an HDF5 file: datapoint ``i`` is
    ``[file[p][i] for p in data_paths]`` (any HDF5 file; ours also restore ``str``/``bytes``).

    ``reset_state()`` reads the datasets into memory and closes the file (as tensorpack did,
    but never in ``__init__``); each epoch yields every row once, in order or in a new
    permutation drawn from ``self.rng`` with ``shuffle=True``. Array components are fresh
    copies. ``len`` is exact. Reentrant. Datasets of different lengths, missing paths, or a
    file of a newer format version raise errors naming the file. Checkpoints, resumes and
    shards by row index, like :class:`~dataflow.DataFromList`.
    """

    def __init__(
        self,
        filename: PathType,
        data_paths: Sequence[str],
        shuffle: bool = True,
        seed: int | None = None,
        **storage: Any,
    ) -> None:
        super().__init__(seed)
        stage = type(self).__name__
        require("h5py", "hdf5", stage)
        self._storage = ShardStorage.single(stage, fspath(stage, "filename", filename), "filename", storage)
        self.filename = self._storage.urls[0]
        self.data_paths = _check_paths(stage, data_paths)
        self._shuffle = bool(shuffle)
        self._cols: list[Any] | None = None
        self._size: int | None = None

    def _load(self, columns: bool) -> None:
        stage = type(self).__name__
        h5py = require("h5py", "hdf5", stage)
        if not self._storage.remote and not os.path.isfile(self.filename):
            raise FileNotFoundError(f"{stage}: no such file: {self.filename!r}")
        try:
            with self._storage.open(0) as f, h5py.File(f, "r") as hf:
                self._load_open(hf, columns)
        except (FormatError, _NoDataset):
            raise
        except (OSError, RuntimeError, ValueError, TypeError, KeyError) as e:  # h5py's, for damaged files
            raise FormatError(
                f"{stage}: {self.filename} is not a readable HDF5 file (damaged, truncated or of "
                f"another format): {e}"
            ) from e

    def _load_open(self, hf: Any, columns: bool) -> None:
        stage = type(self).__name__
        if "dataflow_format_version" in hf.attrs:
            meta = {k: _plain(hf.attrs.get(f"dataflow_{k}")) for k in ("format", "count", "writer")}
            meta["version"] = _plain(hf.attrs["dataflow_format_version"])
            count = check_meta(stage, self.filename, meta, "hdf5", FORMAT_VERSION)
        else:
            count = None
        missing = [p for p in self.data_paths if p not in hf]
        if missing:
            raise _NoDataset(
                f"{stage}: {self.filename} has no dataset {missing[0]!r}; data_paths={self.data_paths}"
            )
        lens = {p: hf[p].shape[0] if hf[p].shape else -1 for p in self.data_paths}
        if len(set(lens.values())) != 1 or -1 in lens.values():
            raise FormatError(f"{stage}: {self.filename}: the datasets must have the same length, got {lens}")
        self._size = next(iter(lens.values()))
        if count is not None and count != self._size:
            raise FormatError(
                f"{stage}: {self.filename}: the file says {count} datapoints but its datasets "
                f"have {self._size}; it is damaged"
            )
        if columns:
            self._cols = [_read_column(hf[p]) for p in self.data_paths]

    def reset_state(self) -> None:
        super().reset_state()
        self._load(columns=True)

    def _num_items(self) -> int:
        if self._size is None:
            self._load(columns=False)
        return int(self._size or 0)

    def _getter(self) -> Callable[[int], list[Any]]:
        cols = self._cols
        if cols is None:
            raise DataFlowNotReset(f"{type(self).__name__} was iterated before reset_state()")
        deep = [isinstance(c, np.ndarray) and c.ndim > 1 for c in cols]
        return lambda i: [c[i].copy() if d else c[i] for c, d in zip(cols, deep)]


class _NoDataset(KeyError):
    """A data path the (readable) file does not have: the user's mistake, not damage."""


def _plain(value: Any) -> Any:
    """HDF5 attributes come back as numpy scalars/bytes: make them plain Python values."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value.item() if isinstance(value, np.generic) else value


class HDF5Serializer:
    """Save a flow to an HDF5 file, one dataset per component, and load it back
    (tensorpack's API). Rows are written in chunks, so the whole dataset need not fit in
    memory while saving.

    Example::

        HDF5Serializer.save(df, "train.h5", ["image", "label"])
        df = HDF5Serializer.load("train.h5", ["image", "label"], shuffle=True)
    """

    @staticmethod
    def save(
        df: DataFlow[Any],
        path: PathType,
        data_paths: Sequence[str],
        *,
        overwrite: bool = False,
        progress: bool = True,
        durable: bool = False,
    ) -> None:
        """Write one epoch of ``df`` (after ``df.reset_state()``), whose datapoints are
        lists/tuples with one component per entry of ``data_paths``. All or nothing; an
        existing file is replaced only with ``overwrite=True``.
        ``durable=True`` also flushes it to the disk before it appears, so it survives a
        power loss too (see :doc:`/formats`)."""
        stage = "HDF5Serializer.save"
        h5py = require("h5py", "hdf5", stage)
        path = fspath(stage, "path", path)
        paths = _check_paths(stage, data_paths)
        # "x", on a name no file has: h5py's "w" truncates, which makes ext4 flush the whole
        # file to the disk when it is closed (see atomic_write)
        with atomic_write(stage, path, overwrite, durable, create=False) as tmp, h5py.File(tmp, "x") as hf:
            columns: list[_Column] = []
            count = written = 0
            for dp in iterate_for_save(stage, df, progress):
                if not isinstance(dp, (list, tuple)) or len(dp) != len(paths):
                    raise ValueError(
                        f"{stage}: datapoint {count} must be a list/tuple of {len(paths)} components "
                        f"(one per data path {paths}), got {type(dp).__name__} of length "
                        f"{len(dp) if hasattr(dp, '__len__') else '?'}"
                    )
                if not columns:
                    columns = [_Column(h5py, hf, p, c) for p, c in zip(paths, dp)]
                for col, c in zip(columns, dp):
                    col.add(c, count)
                count += 1
                if count - written == _CHUNK:
                    for col in columns:
                        col.flush(written)
                    written = count
            for col in columns:
                col.flush(written)
            if not columns:  # an empty flow: empty datasets
                for p in paths:
                    hf.create_dataset(p, shape=(0,), maxshape=(None,), dtype=np.float64)
            meta = make_meta("hdf5", FORMAT_VERSION, count)
            hf.attrs["dataflow_format"] = meta["format"]
            hf.attrs["dataflow_format_version"] = meta["version"]
            hf.attrs["dataflow_count"] = count
            hf.attrs["dataflow_writer"] = meta["writer"]

    @staticmethod
    def load(
        path: PathType,
        data_paths: Sequence[str],
        shuffle: bool = True,
        seed: int | None = None,
        **storage: Any,
    ) -> HDF5Data:
        """An :class:`HDF5Data` over ``data_paths`` of ``path`` (a local path or a URL, with
        the keyword arguments of remote files: see :doc:`/object_stores`)."""
        return HDF5Data(path, data_paths, shuffle=shuffle, seed=seed, **storage)
