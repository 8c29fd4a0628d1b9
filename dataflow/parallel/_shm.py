"""Shared-memory rings that carry large array buffers from a worker to the consumer: the
worker writes with :class:`RingWriter`, the consumer creates the rings and reads with
:class:`RingReader`.

Each worker owns one ring: a file in ``/dev/shm`` created by the consumer, mapped by both,
and **unlinked by the worker as soon as it has mapped it** — from then on no name exists in
``/dev/shm``, and the memory is returned when the last mapping goes, whoever dies first. The
consumer unlinks it too on ``close()`` in case the worker never came.

Space is **reserved as it is needed** (``posix_fallocate``), never touched before: the
consumer reserves the release table and a small first part of the data area (a full
``/dev/shm``, or one smaller than ``shm_bytes``, is an error at creation, with one warning),
and the worker reserves more, in growing chunks, before it writes beyond what it has. So a
runner whose datapoints are small never pays for (nor holds) the whole ring, and starting
one costs no more than creating the files. No page that was not reserved is ever written or
read: a ``/dev/shm`` that fills up later makes the reservation fail, and that buffer (and
every later one beyond the reserved part) travels over ZMQ instead — slower, never a SIGBUS.

Layout: a release table of :data:`TABLE_SLOTS` bytes, then the data area. The worker copies
each large buffer into the data area (one memcpy), marks its slot busy and sends
``(ring, slot, offset, nbytes)`` instead of the bytes. The consumer rebuilds the array as a
view of the ring (no copy) with a finalizer on that view: when the consumer drops the last
array that views it, the slot is marked free and the worker may reuse its bytes. So **an
array the consumer still holds is never overwritten**. Allocation is first-fit over the free
gaps, so an array kept for long holds only its own bytes (and the reserved part stays as
small as what the consumer holds at once). If the ring has no room for 50 ms (the consumer
keeps many arrays alive), the worker sends that buffer over ZMQ instead, and keeps doing so
without waiting until room appears: slower, never stuck.
"""

from __future__ import annotations

import bisect
import mmap
import os
import time
import uuid
import weakref
from typing import Any

import numpy as np

from .._warn import warn

__all__ = ["TABLE_SLOTS", "Descriptor", "RingReader", "RingWriter", "unlink_all", "warn_no_shm"]

TABLE_SLOTS = 1024
_DATA_START = 4096
_ALIGN = 64
_WAIT_S = 0.05
_PAGE = 4096
#: data bytes the consumer reserves with the file (the worker reserves the rest as it goes)
INITIAL_RESERVE = 1 << 20
#: the worker reserves at least this much more each time (and at least as much as it has)
_GROW_MIN = 1 << 20
_warned: set[str] = set()

Descriptor = tuple[int, int, int, int]  # ring, slot, offset in the data area, nbytes


def _free_bytes() -> int | None:
    """Bytes free in ``/dev/shm`` (``None`` if unknown)."""
    try:
        st = os.statvfs("/dev/shm")
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def warn_no_shm(stage: str, why: str) -> None:
    """Warn once per stage that large arrays fall back to ZMQ, and how to fix it."""
    if stage in _warned:
        return
    _warned.add(stage)
    warn(
        f"{stage}: no shared memory for large arrays: {why}; they will travel over ZMQ instead "
        f"(slower). Lower shm_bytes=, enlarge /dev/shm (docker: --shm-size), or pass shm_bytes=0 "
        f"to silence this",
        RuntimeWarning,
    )


def unlink_all(paths: list[str]) -> None:
    for path in paths:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def _open_map(path: str) -> tuple[mmap.mmap, int]:
    """Map the whole file: the mapping and the open descriptor (the caller closes it)."""
    fd = os.open(path, os.O_RDWR)
    try:
        return mmap.mmap(fd, os.fstat(fd).st_size), fd
    except BaseException:
        os.close(fd)
        raise


class RingWriter:
    """The worker's side of one ring (single producer; first-fit allocation, space reserved
    as it is needed, at least :data:`_GROW_MIN` and at least doubling: see the module
    docstring). Not thread-safe."""

    def __init__(self, path: str, index: int) -> None:
        self.index = index
        self._mm, self._fd = _open_map(path)  # the descriptor reserves more space later
        unlink_all([path])  # from now on nothing is left in /dev/shm, whatever happens
        self._table = np.frombuffer(self._mm, np.uint8, TABLE_SLOTS)
        self._data = np.frombuffer(self._mm, np.uint8, offset=_DATA_START)
        self._cap = len(self._data)
        self.reserved_bytes = min(self._cap, INITIAL_RESERVE)  # what RingReader.create reserved
        self._live: list[tuple[int, int, int]] = []  # (start, end, slot), sorted by start
        self._next_slot = 0
        self._starved = False  # the last wait for room timed out: don't wait again until room
        self._base = self._data.ctypes.data
        self._reserved: dict[int, tuple[int, int]] = {}  # start -> (slot, nbytes), not yet sent

    def _reclaim(self) -> None:
        table = self._table
        self._live = [a for a in self._live if table[a[2]] != 0]

    def _free_slot(self) -> int | None:
        free = np.flatnonzero(self._table == 0)
        if not len(free):
            return None
        after = free[free >= self._next_slot]
        return int(after[0] if len(after) else free[0])

    def _place(self, n: int) -> int | None:
        """Start offset of the lowest free gap of ``n`` bytes (first-fit: while the consumer
        keeps up, the same few cache-warm slots are reused, where next-fit's writes would
        always land in memory gone cold)."""
        prev_end = 0
        for start, end, _ in self._live:
            if start - prev_end >= n:
                return prev_end
            prev_end = end
        return prev_end if self._cap - prev_end >= n else None

    def _try_place(self, size: int) -> tuple[int, int] | None:
        self._reclaim()
        slot = self._free_slot()
        if slot is None:
            return None
        start = self._place(size)
        return None if start is None else (start, slot)

    def _claim(self, n: int) -> tuple[int, int, int] | None:
        """Space for ``n`` bytes, marked busy: ``(start, slot, size)``, or ``None`` (too big,
        or no room within :data:`_WAIT_S`; after one such wait, no waiting until room)."""
        size = (n + _ALIGN - 1) & ~(_ALIGN - 1)
        if size > self._cap:
            return None
        placed = self._try_place(size)
        if placed is None and not self._starved:
            deadline = time.monotonic() + _WAIT_S
            while placed is None and time.monotonic() < deadline:
                time.sleep(0.0005)
                placed = self._try_place(size)
        self._starved = placed is None
        if placed is None:
            return None
        start, slot = placed
        if start + size > self.reserved_bytes and not self._reserve(start + size):
            return None
        self._table[slot] = 1
        bisect.insort(self._live, (start, start + size, slot))
        self._next_slot = (slot + 1) % TABLE_SLOTS
        return start, slot, size

    def write(self, buf: memoryview) -> Descriptor | None:
        """Copy ``buf`` into the ring; its descriptor, or ``None`` to send it another way.
        A buffer that is exactly a space handed out by :meth:`reserve` is not copied."""
        n = buf.nbytes
        if self._reserved:
            start = np.frombuffer(buf, np.uint8).ctypes.data - self._base
            reserved = self._reserved.get(start)
            if reserved is not None and reserved[1] == n:
                del self._reserved[start]
                return (self.index, reserved[0], start, n)
        claimed = self._claim(n)
        if claimed is None:
            return None
        start, slot, _ = claimed
        self._data[start : start + n] = np.frombuffer(buf, np.uint8)
        return (self.index, slot, start, n)

    def _reserve(self, end: int) -> bool:
        """Reserve the data area up to at least ``end``; ``False`` (and the ring capped at
        what it has) if ``/dev/shm`` cannot give it."""
        have = self.reserved_bytes
        want = max(end, have + _GROW_MIN, 2 * have)
        want = min(self._cap, (want + _PAGE - 1) & ~(_PAGE - 1))
        try:
            os.posix_fallocate(self._fd, _DATA_START + have, want - have)
        except OSError as e:
            self._cap = have  # never place a buffer beyond what is reserved again
            warn(
                f"worker {self.index}: cannot reserve more shared memory ({have / 2**20:.0f} MiB "
                f"reserved, {e.strerror}); larger arrays travel over ZMQ (slower). Enlarge "
                f"/dev/shm or lower shm_bytes=",
                RuntimeWarning,
            )
            return False
        self.reserved_bytes = want
        return True

    def reserve(self, n: int) -> np.ndarray | None:
        """``n`` bytes of the ring (a writable ``uint8`` array, 64-byte aligned) to build a
        buffer in place, or ``None`` where :meth:`write` would find no room either. Sending
        an array that is exactly this space (:meth:`write`) hands it to the consumer without
        a copy; :meth:`release_reserved` gives back what was not sent."""
        claimed = self._claim(n)
        if claimed is None:
            return None
        start, slot, _ = claimed
        self._reserved[start] = (slot, n)
        return self._data[start : start + n]

    def release_reserved(self) -> None:
        """Free every reserved space not handed over by :meth:`write` (a failed batch, or a
        buffer that was not sent as it was reserved). The caller must drop its views."""
        for slot, _ in self._reserved.values():
            self._table[slot] = 0
        self._reserved.clear()

    def close(self) -> None:
        del self._table, self._data
        self._mm.close()
        os.close(self._fd)


class RingReader:
    """The consumer's side of every ring of one runner: it creates them and rebuilds arrays
    as views of a worker's ring, whose death frees their slot."""

    def __init__(self, paths: list[str], copy: bool = False) -> None:
        self.paths = paths
        self.copy = copy
        self._maps: list[mmap.mmap] = []
        for path in paths:
            mm, fd = _open_map(path)
            os.close(fd)
            self._maps.append(mm)
        self._tables = [np.frombuffer(m, np.uint8, TABLE_SLOTS) for m in self._maps]

    @classmethod
    def create(
        cls, stage: str, count: int, total_bytes: int, copy: bool = False, record: list[str] | None = None
    ) -> RingReader | None:
        """Create and map ``count`` rings (one per worker) sharing ``total_bytes``; ``None``
        (and one warning) if ``/dev/shm`` cannot hold them: everything then travels over ZMQ.

        Only the table and :data:`INITIAL_RESERVE` data bytes of each ring are reserved here
        (the worker reserves the rest as it writes, see :class:`RingWriter`); ``total_bytes``
        must still fit in the free space of ``/dev/shm``. The rings are mapped here, before
        any worker can unlink them. Each name is appended to ``record`` *before* its file is
        created, so an owner that unlinks everything in ``record`` leaves nothing behind even
        when a Ctrl-C lands here."""
        each = (total_bytes // count) & ~(_ALIGN - 1)
        if each <= _DATA_START + _ALIGN:
            return None
        free = _free_bytes()
        if free is not None and total_bytes > free:
            mib, free_mib = total_bytes / 2**20, free / 2**20
            warn_no_shm(stage, f"cannot reserve {mib:.0f} MiB in /dev/shm (only {free_mib:.0f} MiB free)")
            return None
        paths: list[str] = [] if record is None else record
        first = len(paths)
        try:
            for i in range(count):
                path = f"/dev/shm/dataflow-{os.getpid()}-{uuid.uuid4().hex[:12]}-{i}"
                paths.append(path)
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
                try:
                    os.ftruncate(fd, each)  # its size; no page exists until reserved
                    os.posix_fallocate(fd, 0, min(each, _DATA_START + INITIAL_RESERVE))
                finally:
                    os.close(fd)
        except OSError as e:
            unlink_all(paths[first:])
            warn_no_shm(stage, f"cannot reserve {total_bytes / 2**20:.0f} MiB in /dev/shm ({e.strerror})")
            return None
        try:
            return cls(paths[first:], copy)
        except BaseException:
            unlink_all(paths[first:])
            raise

    @property
    def nbytes(self) -> int:
        """The size of all the rings."""
        return sum(len(m) for m in self._maps)

    def buffer(self, desc: Descriptor) -> Any:
        """A buffer for one descriptor: a view of the ring whose death frees the slot, or a
        private copy (``copy=True``), after which the slot is free at once."""
        ring, slot, start, n = desc
        table = self._tables[ring]
        region = np.frombuffer(self._maps[ring], np.uint8, n, _DATA_START + start)
        if self.copy:
            owned = region.copy()
            del region
            table[slot] = 0
            return owned
        # the finalizer holds the list, not the table: a finalizer that a Ctrl-C skipped
        # (it stays registered) must not keep the mapping alive after close()
        weakref.finalize(region, _release, self._tables, ring, slot)
        return region

    def close(self) -> None:
        """Unlink names a worker never took, drop the mappings (if no array still views
        them; otherwise they go with the last such array)."""
        unlink_all(self.paths)
        self._tables.clear()  # the finalizers of arrays still alive hold this very list
        for m in self._maps:
            try:
                m.close()
            except BufferError:  # arrays the user still holds view it; freed with them
                pass
        self._maps = []


def _release(tables: list[np.ndarray], ring: int, slot: int) -> None:
    """Mark ``slot`` of ``ring`` free (nothing once the reader is closed)."""
    if ring < len(tables):
        tables[ring][slot] = 0
