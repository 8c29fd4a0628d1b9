"""A node-local cache of fetched shards: :class:`ShardCache`."""

from __future__ import annotations

import fcntl
import hashlib
import os
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from typing import IO, Any

from ._atomic import _create_temp

__all__ = ["ShardCache"]


class ShardCache:
    """Whole shards kept in ``directory``, at most ``limit`` bytes, least recently used first out.

    Guarantees:

    - **One download per shard per node.** Every process (and thread) that wants a shard
      takes an exclusive ``flock`` on ``<key>.lock`` before looking for it: the first one
      downloads it, the others wait on the lock and then read the file it left.
    - **Never a torn file.** A shard is written to a temporary name in ``directory`` and
      renamed into place once complete; a process killed mid-download leaves no shard.
    - **Within the budget.** After each download, and each time a reader starts on a shard
      (:meth:`used`), the least recently used files (the last use is kept as their
      ``mtime``) are removed until the cache holds at most ``limit`` bytes. A shard this
      process fetched ahead of its use (``pinned=True``) is not removed before it has been
      used: with read-ahead, a shard downloaded early is not the least recently used one,
      and removing it would download it again next epoch although it is read last. A file
      removed while another process reads it stays readable to that process (POSIX unlink),
      and its disk space is freed when that process closes it.

    A key is the URL and the object's size when known: an object replaced by one of another
    size is fetched again. The cache holds no credential (only hashes name its files).
    """

    def __init__(self, directory: str, limit: int | None) -> None:
        self.directory = os.path.abspath(os.path.expanduser(directory))
        self.limit = limit
        os.makedirs(self.directory, exist_ok=True)
        self._pinned: dict[str, int] = {}  # path -> fetches ahead not used yet (this process)
        self._lock = threading.Lock()
        self._last_use_ns = 0

    def __getstate__(self) -> dict[str, Any]:
        return {"directory": self.directory, "limit": self.limit}  # pins stay in their process

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["directory"], state["limit"])  # type: ignore[misc]

    def path_for(self, url: str, size: int | None) -> str:
        digest = hashlib.sha256(f"{url}\0{size}".encode()).hexdigest()[:40]
        return os.path.join(self.directory, f"{digest}.shard")

    def get(
        self, url: str, size: int | None, download: Callable[[], bytes], pinned: bool = False
    ) -> tuple[IO[bytes], bool]:
        """The shard, opened (so that evicting it later, in any process, does not take it
        from the caller), downloading it with ``download()`` if no process of this node
        has; and whether it was found in the cache. ``pinned``: fetched ahead of its use,
        kept from eviction by this process until :meth:`used` or :meth:`unpin`."""
        path = self.path_for(url, size)
        if pinned:
            with self._lock:
                self._pinned[path] = self._pinned.get(path, 0) + 1
        fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            with suppress(FileNotFoundError):  # not there, or evicted by another process
                f = open(path, "rb", buffering=1 << 20)  # noqa: SIM115 - the caller closes it
                self._touch(path)
                return f, True
            try:
                data = download()
            except BaseException:
                if pinned:
                    self.unpin(url, size)
                raise
            tmp = _create_temp(self.directory, os.path.basename(path))
            try:
                with open(tmp, "wb") as f:
                    f.write(data)
                os.replace(tmp, path)
                self._touch(path)
                f = open(path, "rb", buffering=1 << 20)  # noqa: SIM115 - the caller closes it
            except BaseException:
                with suppress(OSError):
                    os.unlink(tmp)
                if pinned:
                    self.unpin(url, size)
                raise
        finally:
            os.close(fd)  # releases the lock
        self._evict(keep=path)
        return f, False

    def unpin(self, url: str, size: int | None) -> None:
        """A shard fetched ahead with ``pinned=True`` will not be used (an epoch cut short)."""
        path = self.path_for(url, size)
        with self._lock:
            left = self._pinned.get(path, 0) - 1
            if left > 0:
                self._pinned[path] = left
            else:
                self._pinned.pop(path, None)

    def used(self, url: str, size: int | None) -> None:
        """A reader starts on the shard now: it becomes the most recently used (and, if it
        was fetched ahead, no longer pinned); the cache is cut back to ``limit``."""
        self.unpin(url, size)
        path = self.path_for(url, size)
        with suppress(FileNotFoundError):  # removed by another process: its reader has it open
            self._touch(path)
        self._evict(keep=path)

    def _touch(self, path: str) -> None:
        """Mark ``path`` used now, in nanoseconds and later than this process's last mark: the
        file system's own clock ticks every few milliseconds, and ties would evict in name
        order."""
        with self._lock:
            now = self._last_use_ns = max(time.time_ns(), self._last_use_ns + 1)
        os.utime(path, ns=(now, now))

    def _evict(self, keep: str) -> None:
        if self.limit is None:
            return
        with self._lock:
            pinned = set(self._pinned)
        entries = []
        with os.scandir(self.directory) as it:
            for entry in it:
                if entry.name.endswith(".shard"):
                    with suppress(FileNotFoundError):
                        st = entry.stat()
                        entries.append((st.st_mtime_ns, st.st_size, entry.path))
        total = sum(size for _, size, _ in entries)
        for _, size, path in sorted(entries):
            if total <= self.limit:
                break
            if path == keep or path in pinned:
                continue
            with suppress(FileNotFoundError):
                os.unlink(path)
                total -= size
