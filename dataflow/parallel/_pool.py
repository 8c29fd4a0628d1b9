"""A set of worker processes connected to one ZMQ socket that the consumer binds.

Every blocking receive is a poll loop that checks worker liveness (≈ every 0.1 s) and the
optional ``timeout``, so a dead worker or a stalled pipeline raises instead of hanging.
Resources (processes, socket, context) are released by :meth:`ProcessPool.close`, by garbage
collection, or at interpreter exit, whichever comes first (``weakref.finalize``).
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Sequence
from multiprocessing.process import BaseProcess
from typing import Any

import zmq

from . import _transport as tr
from ._process import check_picklable, check_workers, get_context, start_workers, stop_workers

__all__ = ["POLL_MS", "ProcessPool", "worker_socket"]

POLL_MS = 100


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
    ) -> None:
        self.stage = stage
        self.timeout = timeout
        context = get_context(stage, start_method)
        check_picklable(stage, context.get_start_method(), **picklable)
        self.endpoint = tr.new_endpoint(stage.lower())
        self.zctx = zmq.Context()
        self.sock = self.zctx.socket(socket_type)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.RCVHWM, hwm)
        self.sock.bind(self.endpoint)
        self.procs: list[BaseProcess] = []
        self._finalizer = weakref.finalize(self, _shutdown, self.procs, self.sock, self.zctx)
        try:
            self.procs.extend(
                start_workers(stage, context, target, [(self.endpoint, *args) for args in worker_args])
            )
        except BaseException:
            self.close()
            raise

    @property
    def pids(self) -> list[int | None]:
        return [p.pid for p in self.procs]

    def recv_frames(self) -> list[zmq.Frame]:
        """The next multipart message, checking liveness and ``timeout`` while waiting."""
        sock = self.sock
        try:
            return sock.recv_multipart(zmq.NOBLOCK, copy=False)
        except zmq.Again:
            pass
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        while True:
            if sock.poll(POLL_MS, zmq.POLLIN):
                return sock.recv_multipart(copy=False)
            check_workers(self.stage, self.procs)
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(
                    f"{self.stage}: no datapoint arrived from the workers for {self.timeout} s "
                    f"(timeout={self.timeout}); the workers are alive but produce nothing"
                )

    def close(self) -> None:
        """Stop the workers and release the socket and context. Idempotent."""
        self._finalizer()


def _shutdown(procs: list[BaseProcess], sock: zmq.Socket, zctx: zmq.Context) -> None:
    stop_workers(procs)
    procs.clear()
    sock.close(linger=0)
    zctx.term()


def worker_socket(endpoint: str, socket_type: int, hwm: int, identity: bytes | None = None) -> zmq.Socket:
    """The worker side: a fresh context (never the parent's) and a connected socket."""
    sock = zmq.Context().socket(socket_type)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.SNDHWM, hwm)
    if identity is not None:
        sock.setsockopt(zmq.IDENTITY, identity)
    sock.connect(endpoint)
    return sock
