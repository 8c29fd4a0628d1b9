"""The LMDB environment plumbing behind :mod:`dataflow.formats.lmdb_format`: the lazy import,
read-only environments shared within a process, and transactions that survive a full map."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from typing import Any

from ._common import require

__all__ = ["SharedEnv", "commit", "import_lmdb"]

_logger = logging.getLogger("dataflow")


def import_lmdb(stage: str) -> Any:
    return require("lmdb", "lmdb", stage)


class SharedEnv:
    """A read-only environment shared by every flow of this process that reads one database
    (LMDB refuses to open a database twice in one process). A forked child closes the
    environments it inherited (harmless without a lock file: it only unmaps its own copy)
    and opens its own."""

    _lock = threading.Lock()
    _open: dict[tuple[int, str], SharedEnv] = {}

    def __init__(self, key: tuple[int, str], env: Any) -> None:
        self.key, self.env, self.users = key, env, 1

    @classmethod
    def acquire(cls, stage: str, path: str, readahead: bool) -> SharedEnv:
        pid = os.getpid()
        key = (pid, os.path.realpath(path))
        with cls._lock:
            for inherited in [k for k in cls._open if k[0] != pid]:
                with contextlib.suppress(Exception):
                    cls._open.pop(inherited).env.close()
            shared = cls._open.get(key)
            if shared is not None:
                shared.users += 1
                return shared
            env = import_lmdb(stage).open(
                path, subdir=os.path.isdir(path), readonly=True, lock=False,
                readahead=readahead, meminit=False, max_readers=1024,
            )  # fmt: skip
            shared = cls._open[key] = cls(key, env)
            return shared

    def begin(self, **kwargs: Any) -> Any:
        return self.env.begin(**kwargs)

    def close(self) -> None:
        if self.key[0] != os.getpid():
            return  # inherited through fork: the parent's to close, never the child's
        with self._lock:
            self.users -= 1
            if self.users == 0 and self._open.get(self.key) is self:
                del self._open[self.key]
                self.env.close()


def commit(lmdb: Any, env: Any, items: list[tuple[bytes, bytes]]) -> None:
    """Write ``items`` in one transaction; when the map is full, double it and write them
    all again (an aborted transaction keeps nothing, so nothing is lost)."""
    while True:
        txn = env.begin(write=True)
        try:
            for k, v in items:
                txn.put(k, v)
            txn.commit()
            return
        except lmdb.MapFullError:
            txn.abort()
            size = env.info()["map_size"] * 2
            _logger.info("LMDBSerializer: the map is full; growing it to %.3g GB", size / 1e9)
            env.set_mapsize(size)
        except BaseException:
            txn.abort()
            raise
