"""A set of worker processes connected to one ZMQ socket that the consumer binds.

Every blocking receive is a poll loop that checks worker liveness (≈ every 0.1 s) and the
optional ``timeout``, so a dead worker or a stalled pipeline raises instead of hanging.
Resources (processes, socket, context) are released by :meth:`ProcessPool.close`, by garbage
collection, or at interpreter exit, whichever comes first (``weakref.finalize``).
"""

from __future__ import annotations

import os
import time
import weakref
from collections.abc import Callable, Sequence
from multiprocessing.process import BaseProcess
from typing import Any

import zmq

from .._checks import check_int
from . import _transport as tr
from ._process import check_picklable, check_workers, get_context, start_workers, stop_workers
from ._shm import RingReader, warn_no_shm

__all__ = ["DEFAULT_SHM_BYTES", "POLL_MS", "ProcessPool", "resolve_shm_bytes", "worker_socket"]

POLL_MS = 100
DEFAULT_SHM_BYTES = 256 * 2**20
MIN_AUTO_SHM_BYTES = 32 * 2**20


class ProcessPool:
    """Worker processes and the consumer's bound socket.

    Args:
        stage: the owning flow's name, for messages.
        socket_type: the consumer's ZMQ socket type (``zmq.PULL``, ``zmq.ROUTER``).
        target: module-level worker function ``target(parent, endpoint, *args)``.
        worker_args: one tuple of extra arguments per worker.
        start_method: ``fork``/``forkserver``/``spawn`` (``None``: fork on Linux).
        hwm: the receive high-water mark in messages.
        timeout: seconds without a message before ``TimeoutError`` (``None``: wait forever).
        picklable: objects that must pickle under spawn/forkserver, by name, for messages.
        shm_bytes: shared memory for large arrays, split into one ring per worker (``None``:
            automatic, see :func:`resolve_shm_bytes`; ``0``: everything over ZMQ).
        copy: give the consumer owned copies instead of views of shared memory.

    ``target`` is called as ``target(parent, endpoint, ring_path, *args)``; ``ring_path`` is
    ``None`` without shared memory.
    """

    def __init__(
        self,
        stage: str,
        socket_type: int,
        target: Callable[..., None],
        worker_args: Sequence[tuple[Any, ...]],
        start_method: str | None,
        hwm: int,
        timeout: float | None,
        picklable: dict[str, Any],
        shm_bytes: int | None = 0,
        copy: bool = False,
    ) -> None:
        self.stage = stage
        self.timeout = timeout
        self._next_check = 0.0
        self._header_parts = 4 if socket_type == zmq.ROUTER else 3  # + the peer identity
        context = get_context(stage, start_method)
        check_picklable(stage, context.get_start_method(), **picklable)
        self.endpoint = tr.new_endpoint(stage.lower())
        self.zctx = zmq.Context()
        self.sock = self.zctx.socket(socket_type)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.RCVHWM, hwm)
        self.sock.bind(self.endpoint)
        self._poller = zmq.Poller()  # one for the pool's life: Socket.poll() builds one per call
        self._poller.register(self.sock, zmq.POLLIN)
        self._flowing = False
        self.procs: list[BaseProcess] = []
        size = resolve_shm_bytes(stage, shm_bytes)
        self.rings = RingReader.create(stage, len(worker_args), size, copy) if size else None
        self._finalizer = weakref.finalize(self, _shutdown, self.procs, self.sock, self.zctx, self.rings)
        paths: list[str | None] = list(self.rings.paths) if self.rings else [None] * len(worker_args)
        try:
            self.procs.extend(
                start_workers(
                    stage, context, target, [(self.endpoint, p, *a) for p, a in zip(paths, worker_args)]
                )
            )
        except BaseException:
            self.close()
            raise

    @property
    def pids(self) -> list[int | None]:
        return [p.pid for p in self.procs]

    def recv_frames(self) -> list[Any]:
        """The next multipart message, checking liveness and ``timeout`` while waiting."""
        sock = self.sock
        now = time.monotonic()
        if now >= self._next_check:  # on a clock too: another busy worker must not hide a death
            self._next_check = now + POLL_MS / 1000
            check_workers(self.stage, self.procs)
        if self._flowing:  # messages were waiting last time: try without polling first
            try:
                return tr.recv_parts(sock, zmq.NOBLOCK, self._header_parts)
            except zmq.Again:
                self._flowing = False
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        while True:
            if self._poller.poll(POLL_MS):
                parts = tr.recv_parts(sock, 0, self._header_parts)
                self._flowing = bool(sock.getsockopt(zmq.EVENTS) & zmq.POLLIN)
                return parts
            check_workers(self.stage, self.procs)
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(
                    f"{self.stage}: no datapoint arrived from the workers for {self.timeout} s "
                    f"(timeout={self.timeout}); the workers are alive but produce nothing"
                )

    def decode(self, frames: list[zmq.Frame]) -> tuple[bytes, Any]:
        """``(kind, obj)`` of a message from a worker, resolving shared-memory buffers."""
        return tr.decode(frames, self.rings)

    def close(self) -> None:
        """Stop the workers and release the socket, context and shared memory. Idempotent."""
        self._finalizer()


def _shutdown(
    procs: list[BaseProcess], sock: zmq.Socket, zctx: zmq.Context, rings: RingReader | None
) -> None:
    stop_workers(procs)
    procs.clear()
    sock.close(linger=0)
    zctx.term()
    if rings is not None:
        rings.close()


def resolve_shm_bytes(stage: str, shm_bytes: int | None) -> int:
    """The shared memory a runner reserves: ``shm_bytes`` as given, or for ``None``
    :data:`DEFAULT_SHM_BYTES` capped to half of what ``/dev/shm`` has free (0, with one
    warning, when that is under :data:`MIN_AUTO_SHM_BYTES`)."""
    if shm_bytes is not None:
        return check_int(stage, "shm_bytes", shm_bytes, minimum=0)
    try:
        st = os.statvfs("/dev/shm")
        free = st.f_bavail * st.f_frsize
    except OSError:
        free = 0
    size = min(DEFAULT_SHM_BYTES, free // 2)
    if size >= MIN_AUTO_SHM_BYTES:
        return size
    warn_no_shm(stage, f"/dev/shm has only {free / 2**20:.0f} MiB free")
    return 0


def worker_socket(endpoint: str, socket_type: int, hwm: int, identity: bytes | None = None) -> zmq.Socket:
    """The worker side: a fresh context (never the parent's) and a connected socket."""
    sock = zmq.Context().socket(socket_type)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.SNDHWM, hwm)
    if identity is not None:
        sock.setsockopt(zmq.IDENTITY, identity)
    sock.connect(endpoint)
    return sock
