"""A worker process's side of a :class:`~dataflow.parallel._pool.ProcessPool`: its DEALER
socket named ``w<index>``, its shared-memory ring, and what every worker does first
(:func:`worker_link`)."""

from __future__ import annotations

import os
import pickle
import threading
from typing import Any

import zmq

from .. import _seeding as seeding
from . import _messages as msg
from ._options import WorkerOptions
from ._process import Pickled, bootstrap_worker
from ._shm import RingWriter

__all__ = ["WorkerLink", "identity", "worker_link"]


def identity(worker: int) -> bytes:
    """The ZMQ identity of worker ``worker`` on the consumer's ROUTER."""
    return b"w%d" % worker


class WorkerLink:
    """A worker's side: its index, its socket to the consumer and its shared-memory ring."""

    def __init__(self, index: int, sock: zmq.Socket[Any], ring: RingWriter | None) -> None:
        self.index, self.sock, self.ring = index, sock, ring
        self.pid = os.getpid()

    def send(self, kind: bytes, obj: Any, flags: int = 0) -> int:
        """Send to the consumer (large buffers through the ring); returns the payload size."""
        return msg.send(self.sock, kind, obj, worker=self.index, flags=flags, ring=self.ring)

    def send_error(self, exc: BaseException, where: str) -> None:
        msg.send(self.sock, msg.ERROR, msg.capture_error(exc, where), worker=self.index)

    def rebuild(self, obj: Any) -> Any:
        """``obj``, unpickled here if it came pickled (spawn/forkserver). If that fails, the
        consumer gets the error (the user's exception type, naming the object) and this
        worker idles until it is stopped."""
        if not isinstance(obj, Pickled):
            return obj
        try:
            return pickle.loads(obj.data)
        except BaseException as e:
            self.send_error(e, f"rebuilding the {obj.name} in worker {self.index} (pid {self.pid})")
            threading.Event().wait()  # exiting could drop the message; the consumer stops us
            raise

    def poll_control(self) -> Any | None:
        """A pending control request, without waiting (``None`` if there is none)."""
        if not int(self.sock.getsockopt(zmq.EVENTS)) & zmq.POLLIN:
            return None
        return msg.recv(self.sock)[2]


def worker_link(
    parent: tuple[int, bool],
    endpoint: str,
    ring_path: str | None,
    index: int,
    options: WorkerOptions,
    seed_key: tuple[int, ...],
    seed: int | None,
) -> WorkerLink:
    """What every worker does first: map (and unlink) its ring, die with its parent, connect,
    seed its RNGs as worker ``seed_key`` of ``seed`` (resolved in the parent, see
    :meth:`WorkerOptions.worker_seed`), say READY."""
    ring = RingWriter(ring_path, index) if ring_path else None  # first: it unlinks the file
    bootstrap_worker(parent)
    sock = zmq.Context().socket(zmq.DEALER)  # a fresh context, never the parent's
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.SNDHWM, options.hwm)
    sock.setsockopt(zmq.IDENTITY, identity(index))
    sock.connect(endpoint)
    seeding.enter_worker(seed_key, seed)
    link = WorkerLink(index, sock, ring)
    link.send(msg.READY, link.pid)
    return link
