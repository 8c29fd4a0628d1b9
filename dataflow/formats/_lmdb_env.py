"""The LMDB environment plumbing behind :mod:`dataflow.formats._lmdb_format`: the lazy import,
read-only environments shared within a process, and transactions that survive a full map."""

from __future__ import annotations

import contextlib
import logging
import os
import struct
import threading
from collections.abc import Sequence
from typing import Any

from ._common import FormatError, require

__all__ = ["BatchWriter", "SharedEnv", "commit", "ensure_room", "import_lmdb"]

_logger = logging.getLogger("dataflow")


def import_lmdb(stage: str) -> Any:
    return require("lmdb", "lmdb", stage)


_LMDB_MAGIC = 0xBEEFC0DE
# Offsets in a meta page (LMDB's MDB_page header, then MDB_meta), 64-bit builds:
_MAGIC_AT, _PSIZE_AT, _LAST_PAGE_AT = 16, 40, 136  # mm_magic, mm_dbs[FREE].md_pad, mm_last_pg


def check_lmdb_file(stage: str, path: str) -> None:
    """Refuse a file LMDB would crash on: not an LMDB file, or one shorter than its newest
    meta page says (a truncated or half-copied file: LMDB maps it and the process dies with
    SIGBUS reading past its end). Raises :class:`FormatError` naming the file."""
    data_file = os.path.join(path, "data.mdb") if os.path.isdir(path) else path
    try:
        size = os.path.getsize(data_file)
        with open(data_file, "rb") as f:
            head = f.read(160)
            metas = [head]
            if len(head) >= 160:
                psize = struct.unpack_from("<I", head, _PSIZE_AT)[0]
                if 160 <= psize <= 1 << 16:
                    f.seek(psize)
                    metas.append(f.read(160))
    except FileNotFoundError:
        raise FileNotFoundError(f"{stage}: no such LMDB file or directory: {path!r}") from None
    except OSError as e:
        raise FormatError(f"{stage}: {data_file}: cannot be read ({e})") from e
    valid = [m for m in metas if len(m) >= 160 and struct.unpack_from("<I", m, _MAGIC_AT)[0] == _LMDB_MAGIC]
    if not valid:
        raise FormatError(f"{stage}: {data_file} is not an LMDB database (no LMDB meta page)")
    psize = struct.unpack_from("<I", valid[0], _PSIZE_AT)[0]
    needed = max((struct.unpack_from("<Q", m, _LAST_PAGE_AT)[0] + 1) * psize for m in valid)
    if size < needed:
        raise FormatError(
            f"{stage}: {data_file} is truncated: its LMDB meta pages need {needed} bytes but the file "
            f"has {size} (an interrupted copy or download?)"
        )


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
            lmdb = import_lmdb(stage)
            check_lmdb_file(stage, path)
            try:
                env = lmdb.open(
                    path, subdir=os.path.isdir(path), readonly=True, lock=False,
                    readahead=readahead, meminit=False, max_readers=1024,
                )  # fmt: skip
            except lmdb.Error as e:
                raise FormatError(f"{stage}: {path}: not a readable LMDB database ({e})") from e
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


def ensure_room(env: Any, pending: int) -> None:
    """Grow the map (between transactions) so that ``pending`` more value bytes surely fit:
    a transaction that fills the map is aborted and written again, which costs a second
    pass over its data."""
    info = env.info()
    used = (info["last_pgno"] + 1) * env.stat()["psize"]
    need = used + 2 * pending + (64 << 20)  # values, their page headers and the tree: ample
    if need > info["map_size"]:
        size = max(2 * info["map_size"], need)
        _logger.info("LMDBSerializer: growing the map to %.3g GB", size / 1e9)
        env.set_mapsize(size)


def commit(lmdb: Any, env: Any, items: Sequence[tuple[bytes, Any]], append: bool = False) -> None:
    """Write ``items`` in one transaction (``append``: their keys are sorted and after every
    key written so far, which LMDB writes fastest); when the map is full anyway, double it
    and write them all again (an aborted transaction keeps nothing, so nothing is lost)."""
    while True:
        txn = env.begin(write=True)
        try:
            with txn.cursor() as cur:
                _, added = cur.putmulti(items, append=append)
            if added != len(items):
                raise RuntimeError(
                    f"LMDBSerializer: wrote {added} of {len(items)} entries (keys out of order?)"
                )
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


class BatchWriter:
    """Writes ``(key, parts)`` entries in transactions of at most ``max_entries`` entries
    and about ``arena`` bytes: each value's parts (from :func:`dataflow.codec.dumps_parts`)
    are copied once into a reused buffer (no new allocation per value, no join), which LMDB
    copies into the map. The buffer is kept until its transaction commits, so a transaction
    that fills the map can be written again; keys must come in sorted order (``append``)."""

    def __init__(self, lmdb: Any, env: Any, max_entries: int, arena: int = 64 << 20, append: bool = True):
        self.lmdb, self.env, self.max_entries, self.append = lmdb, env, max_entries, append
        self.size = arena
        self.buf: memoryview | None = None  # allocated on first use, grown for a huge value
        self.pos = 0
        self.batch: list[tuple[bytes, memoryview]] = []

    def put(self, key: bytes, parts: list[Any]) -> None:
        sizes = [memoryview(p).nbytes for p in parts]
        n = sum(sizes)
        buf = self.buf
        if buf is None or self.pos + n > len(buf):
            self.flush()
            if buf is None or n > len(buf):
                self.size = max(self.size, n)
                buf = self.buf = memoryview(bytearray(self.size))
        start = pos = self.pos
        for part, m in zip(parts, sizes):
            buf[pos : pos + m] = part
            pos += m
        self.pos = pos
        self.batch.append((key, buf[start:pos]))
        if len(self.batch) >= self.max_entries:
            self.flush()

    def flush(self) -> None:
        if self.batch:
            ensure_room(self.env, self.pos)
            commit(self.lmdb, self.env, self.batch, append=self.append)
        self.batch, self.pos = [], 0
