"""A node-local cache of fetched shards: :class:`ShardCache`."""

from __future__ import annotations

import fcntl
import hashlib
import os
from collections.abc import Callable
from contextlib import suppress
from typing import IO

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
    - **Within the budget.** After each download the oldest files (by the last use, kept as
      their ``mtime``) are removed until the cache holds at most ``limit`` bytes; the file
      just fetched is never removed, and a file removed while another process reads it stays
      readable to that process (POSIX unlink).

    A key is the URL and the object's size when known: an object replaced by one of another
    size is fetched again. The cache holds no credential (only hashes name its files).
    """

    def __init__(self, directory: str, limit: int | None) -> None:
        self.directory = os.path.abspath(os.path.expanduser(directory))
        self.limit = limit
        os.makedirs(self.directory, exist_ok=True)

    def path_for(self, url: str, size: int | None) -> str:
        digest = hashlib.sha256(f"{url}\0{size}".encode()).hexdigest()[:40]
        return os.path.join(self.directory, f"{digest}.shard")

    def get(self, url: str, size: int | None, download: Callable[[], bytes]) -> tuple[IO[bytes], bool]:
        """The shard, opened (so that evicting it later, in any process, does not take it
        from the caller), downloading it with ``download()`` if no process of this node
        has; and whether it was found in the cache."""
        path = self.path_for(url, size)
        fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            with suppress(FileNotFoundError):  # not there, or evicted by another process
                f = open(path, "rb", buffering=1 << 20)  # noqa: SIM115 - the caller closes it
                os.utime(path)
                return f, True
            data = download()
            tmp = _create_temp(self.directory, os.path.basename(path))
            try:
                with open(tmp, "wb") as f:
                    f.write(data)
                os.replace(tmp, path)
                f = open(path, "rb", buffering=1 << 20)  # noqa: SIM115 - the caller closes it
            except BaseException:
                with suppress(OSError):
                    os.unlink(tmp)
                raise
        finally:
            os.close(fd)  # releases the lock
        self._evict(keep=path)
        return f, False

    def _evict(self, keep: str) -> None:
        if self.limit is None:
            return
        entries = []
        with os.scandir(self.directory) as it:
            for entry in it:
                if entry.name.endswith(".shard"):
                    with suppress(FileNotFoundError):
                        st = entry.stat()
                        entries.append((st.st_mtime, st.st_size, entry.path))
        total = sum(size for _, size, _ in entries)
        for _, size, path in sorted(entries):
            if total <= self.limit:
                break
            if path == keep:
                continue
            with suppress(FileNotFoundError):
                os.unlink(path)
                total -= size
