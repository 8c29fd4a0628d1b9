"""Any LMDB database, entry by entry: :class:`LMDBData` (public in :mod:`dataflow.formats._lmdb_format`).

Needs the optional package ``lmdb`` (``pip install "dataflow-ml[lmdb]"``); it is imported
only when the class is used.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

from .. import codec
from .._errors import DataFlowNotReset
from ..sources._indexed import IndexedSource, Order, cursor
from ._common import FormatError, PathType, check_meta, fspath
from ._lmdb_env import SharedEnv, import_lmdb
from ._lmdb_layout import _META_KEYS, FORMAT_VERSION, META_KEY, TENSORPACK_KEYS, data_key
from ._storage import is_remote, redact

__all__ = ["LMDBData"]


class LMDBData(IndexedSource[Any]):
    """Read any LMDB database and yield ``[key, value]`` (both ``bytes``) per entry.

    ``lmdb_path`` is a directory holding ``data.mdb`` or an LMDB file. With
    ``shuffle=False`` the entries come in key order (write order for our files); with
    ``shuffle=True`` in a new permutation of the keys each epoch, drawn from ``self.rng``
    (``seed=`` makes it reproducible). The keys to shuffle are ``keys`` if given (a list of
    ``bytes``/``str``, or a format string such as ``"{:08d}"`` formatted with
    ``0..len-1``), else derived from our metadata, else found by scanning the database
    once per ``reset_state()``. Metadata entries (ours and tensorpack's ``__keys__``) are
    never yielded. ``len`` is exact (the number of keys to shuffle when ``keys`` is given).

    Fork safety: the environment is opened read-only without a lock file by
    ``reset_state()`` (never in ``__init__``) in the process that iterates; ``len()``
    before it opens the database briefly. Flows reading one database in one process share
    its environment. Reentrant: each epoch has its own read transaction.

    Checkpoints and shards by position, like :class:`~dataflow.DataFromList`: the state is the
    epoch, the position in it and the RNG at the epoch's start. Resuming reads nothing that
    was consumed: in key order it seeks the cursor to the position's key (``b"%010d" % i``
    in our files; in other databases the key list is scanned once, keys only), shuffled it
    draws the epoch's permutation again and reads on from the position by key.
    """

    _stage = "LMDBData"
    _buffers = False

    def __init__(
        self,
        lmdb_path: PathType,
        shuffle: bool = True,
        keys: Sequence[bytes | str] | str | None = None,
        seed: int | None = None,
    ) -> None:
        super().__init__(seed)
        stage = self._stage
        import_lmdb(stage)
        self._path = fspath(stage, "lmdb_path", lmdb_path)
        if is_remote(self._path):
            raise ValueError(
                f"{stage}: LMDB maps its file into memory, so it needs a local path, got the URL "
                f"{redact(self._path)!r}; copy the database to a local disk first (e.g. "
                f"fsspec.filesystem(...).get(url, local_dir, recursive=True)), or store the data "
                f"as TFRecord or Parquet files, which are read from URLs"
            )
        if keys is not None and not isinstance(keys, (str, list, tuple)):
            raise TypeError(f"{stage}: keys must be a list of keys, a format string or None, got {keys!r}")
        self._shuffle = bool(shuffle)
        self._keys_arg = keys
        self._env: SharedEnv | None = None
        self._keys: list[bytes] | None = None
        self._size: int | None = None
        self._count: int | None = None  # from our metadata; None for other databases

    # -- opening ------------------------------------------------------------------------

    def _open_env(self) -> SharedEnv:
        if not os.path.exists(self._path):
            raise FileNotFoundError(f"{self._stage}: no such LMDB file or directory: {self._path!r}")
        return SharedEnv.acquire(self._stage, self._path, readahead=not self._shuffle)

    def _inspect(self, env: Any) -> None:
        """Read the size and metadata (``self._size``, ``self._count``)."""
        with env.begin() as txn:
            entries = txn.stat()["entries"]
            raw_meta, tp_keys = txn.get(META_KEY), txn.get(TENSORPACK_KEYS)
        self._size = entries - (raw_meta is not None) - (tp_keys is not None)
        self._count = None
        if raw_meta is not None:
            stage = self._stage
            try:
                meta = codec.loads(raw_meta)
            except codec.CodecError as e:
                raise FormatError(f"{stage}: {self._path}: the metadata is malformed ({e})") from e
            self._count = check_meta(stage, self._path, meta, "lmdb", FORMAT_VERSION)
            if self._count != self._size:
                raise FormatError(
                    f"{stage}: {self._path}: the metadata says {self._count} records but the "
                    f"database holds {self._size}; it is damaged"
                )
        self._check_kind(tp_keys is not None)

    def _check_kind(self, tensorpack: bool) -> None:
        """Hook: :meth:`LMDBSerializer.load` refuses databases it did not write."""

    def _find_keys(self, env: Any) -> list[bytes]:
        keys = self._keys_arg
        if isinstance(keys, str):
            return [keys.format(i).encode() for i in range(self._size or 0)]
        if keys is not None:
            return [k.encode() if isinstance(k, str) else bytes(k) for k in keys]
        if self._count is not None:
            return [data_key(i) for i in range(self._count)]
        with env.begin() as txn:
            return [k for k in txn.cursor().iternext(keys=True, values=False) if k not in _META_KEYS]

    def reset_state(self) -> None:
        super().reset_state()
        self.close()
        env = self._open_env()
        try:
            try:
                self._inspect(env)
                self._keys = self._find_keys(env) if self._shuffle else None
            except self._lmdb_error as e:
                raise self._damaged(e) from e
        except BaseException:
            env.close()
            raise
        self._env = env

    def close(self) -> None:
        env, self._env = self._env, None
        if env is not None:
            env.close()

    def _num_items(self) -> int:
        """The number of entries an unsharded epoch visits."""
        if self._shuffle and isinstance(self._keys_arg, (list, tuple)):
            return len(self._keys_arg)
        if self._size is None:
            env = self._open_env()
            try:
                self._inspect(env)
            finally:
                env.close()
        return int(self._size or 0)

    # -- reading ------------------------------------------------------------------------

    def _key_list(self) -> list[bytes]:
        """Every key an epoch visits, in key order (found once per ``reset_state()``)."""
        if self._keys is None:
            env = self._env
            if env is None:
                raise DataFlowNotReset(f"{self._stage} was iterated before reset_state()")
            self._keys = self._find_keys(env)
        return self._keys

    def _open(self, order: Order, start: int) -> tuple[Iterator[Any], Iterator[int], Iterator[Any]]:
        env = self._env
        if env is None:
            raise DataFlowNotReset(f"{self._stage} was iterated before reset_state()")
        cur, probe, positions = cursor(order, start)  # the probe ends with the epoch
        whole = range(self._num_items())
        if not self._shuffle and isinstance(order, range) and order == whole:  # read in key order
            items = self._in_key_order(env, positions, start)
        else:
            items = self._by_index(env, positions)
        return items, cur, probe

    def _in_key_order(self, env: Any, positions: Iterator[int], start: int) -> Iterator[Any]:
        """Entries in key order from position ``start``, one per position drawn from
        ``positions`` (so the position is always the number of entries yielded)."""
        with env.begin(buffers=self._buffers) as txn:
            cur = txn.cursor()
            if start and self._count is None and start >= len(self._key_list()):
                return
            try:
                if start:  # the cursor walks the tree: a damaged page raises here too
                    key = data_key(start) if self._count is not None else self._key_list()[start]
                    if not cur.set_range(key):
                        return
                elif not cur.first():
                    return
                entries = (kv for kv in cur.iternext() if kv[0] not in _META_KEYS)
                for _, (k, v) in zip(positions, entries):
                    yield self._entry(k, v)
            except self._lmdb_error as e:
                raise self._damaged(e) from e

    def _entry(self, key: Any, value: Any) -> Any:
        """What the flow yields for one entry: here ``[key, value]``."""
        return [key, value]

    def _by_index(self, env: Any, indices: Iterator[int]) -> Iterator[Any]:
        keys = self._key_list()
        with env.begin(buffers=self._buffers) as txn:
            get = txn.get
            try:
                for i in indices:
                    k = keys[i]
                    v = get(k)
                    if v is None:
                        if self._keys_arg is None:  # the key came from the database itself
                            raise FormatError(
                                f"{self._stage}: {self._path}: the database lists key {k!r} but "
                                f"holds no value for it; the file is damaged"
                            )
                        raise KeyError(f"{self._stage}: {self._path}: no value for key {k!r}")
                    yield self._entry(k, v)
            except self._lmdb_error as e:
                raise self._damaged(e) from e

    @property
    def _lmdb_error(self) -> type[Exception]:
        return import_lmdb(self._stage).Error  # type: ignore[no-any-return]

    def _damaged(self, e: Exception) -> FormatError:
        """LMDB's own error for a damaged page (``CorruptedError``, ``PageNotFoundError``...)."""
        return FormatError(f"{self._stage}: {self._path}: the database is damaged ({type(e).__name__}: {e})")
