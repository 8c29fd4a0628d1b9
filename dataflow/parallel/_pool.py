"""Worker processes connected to one ROUTER socket that the consumer binds.

Every blocking receive is a poll loop that checks worker liveness (~ every 0.1 s) and the
optional ``timeout``, so a dead worker or a stalled pipeline raises instead of hanging.
Resources (processes, socket, context, shared memory) are released by
:meth:`ProcessPool.close`, by garbage collection, or at interpreter exit, whichever comes
first (``weakref.finalize``); each release runs even if another fails, and ``close()`` holds a
Ctrl-C until it is done.

Workers connect a DEALER socket named ``w<index>`` (see :func:`~._worker_link.worker_link`), so the
consumer can address each one (tasks, control requests) and every message says which worker
sent it.

With ``lazy=True`` (the process runners), only worker 0 is started at construction; the
others are started by the consumer once the first datapoint has reached it, or once it has
waited :data:`LAZY_START_S` for one, whichever comes first (and at once when their pids are
asked for or a message is sent to them). Forking a large process takes tens of milliseconds
per worker, during which the consumer can receive nothing: the first batch no longer waits
for every worker to be forked, only for the one that makes it.
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
from . import _messages as msg
from ._interrupts import blocked_signals, deferred_sigint
from ._options import WorkerOptions
from ._process import (
    check_picklable,
    check_workers,
    get_context,
    start_workers,
    stop_workers,
)
from ._shm import unlink_all, warn_no_shm
from ._shm_reader import RingReader
from ._worker_link import identity

__all__ = ["DEFAULT_SHM_BYTES", "POLL_MS", "ProcessPool", "resolve_shm_bytes"]

POLL_MS = 100
#: with ``lazy=True``, the longest the consumer waits for worker 0's first datapoint before
#: starting the other workers anyway
LAZY_START_S = 0.1
DEFAULT_SHM_BYTES = 256 * 2**20
MIN_AUTO_SHM_BYTES = 32 * 2**20


class ProcessPool:
    """Worker processes and the consumer's bound ROUTER socket.

    ``target(parent, endpoint, ring_path, *args)`` runs in each worker (one argument tuple in
    ``worker_args`` per worker; ``ring_path`` is ``None`` without shared memory) and starts
    with :func:`~._worker_link.worker_link`. ``picklable`` names objects that must pickle under spawn.
    ``lazy``: start worker 0 now and the others later (see the module docstring); with
    ``start_on_data=False`` the first datapoint does not start them: the owner calls
    :meth:`start_pending` when it needs them (the :data:`LAZY_START_S` bound still holds).
    """

    def __init__(
        self,
        options: WorkerOptions,
        target: Callable[..., None],
        worker_args: Sequence[tuple[Any, ...]],
        picklable: dict[str, Any],
        lazy: bool = False,
        start_on_data: bool = True,
    ) -> None:
        self.stage = stage = options.stage
        self.options = options
        self.timeout = options.timeout
        self._next_check = 0.0
        self._flowing = False
        self._pending: list[tuple[Any, ...]] = []  # argument tuples of workers not started yet
        self._pending_until = 0.0  # lazy: start them by then at the latest
        self._got_data = False
        self._start_on_data = start_on_data
        self.procs: list[BaseProcess] = []
        self.rings: RingReader | None = None
        context = get_context(stage, options.start_method)
        self.start_method = context.get_start_method()
        pickled = check_picklable(stage, self.start_method, **picklable)
        if pickled:  # the workers unpickle these themselves, and report a failure as an error
            ids = {id(obj): pickled[name] for name, obj in picklable.items()}
            worker_args = [tuple(ids.get(id(a), a) for a in args) for args in worker_args]
        self.endpoint = msg.new_endpoint(stage.lower())
        # Registered before anything is created, filled in as things are: whatever a Ctrl-C
        # interrupts here, close() (or garbage collection) releases what exists.
        owned: dict[str, Any] = {"shm_paths": []}
        self._finalizer = weakref.finalize(self, _shutdown, self.procs, owned)
        try:
            with deferred_sigint():
                self.zctx = owned["zctx"] = zmq.Context()
                self.sock = owned["sock"] = self.zctx.socket(zmq.ROUTER)
            self.sock.setsockopt(zmq.LINGER, 0)
            self.sock.setsockopt(zmq.RCVHWM, options.hwm)
            self.sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
            self.sock.bind(self.endpoint)
            self._poller = zmq.Poller()  # one for the pool's life: Socket.poll() builds one per call
            self._poller.register(self.sock, zmq.POLLIN)
            size = resolve_shm_bytes(stage, options.shm_bytes)
            if size:
                with deferred_sigint():  # the mappings, once made, must be owned
                    self.rings = owned["rings"] = RingReader.create(
                        stage, len(worker_args), size, options.copy, owned["shm_paths"]
                    )
            paths: list[str | None] = list(self.rings.paths) if self.rings else [None] * len(worker_args)
            per_worker = [(self.endpoint, p, *a) for p, a in zip(paths, worker_args)]
            self._context, self._target = context, target
            if lazy:
                per_worker, self._pending = per_worker[:1], per_worker[1:]
            start_workers(stage, context, target, per_worker, self.procs)
            self._pending_until = time.monotonic() + LAZY_START_S
        except BaseException:
            self.close()
            raise

    @property
    def pids(self) -> list[int | None]:
        """The pids of all workers (those not started yet are started first)."""
        self.start_pending()
        return [p.pid for p in self.procs]

    def start_pending(self) -> None:
        """Start the workers that ``lazy=True`` left for later (nothing if none)."""
        pending, self._pending = self._pending, []
        if pending:
            start_workers(self.stage, self._context, self._target, pending, self.procs)

    def check(self) -> None:
        """Raise :class:`~dataflow._errors.WorkerDied` if a worker has exited."""
        check_workers(self.stage, self.procs, self.start_method)

    def recv(self, deadline: float | None = None, sizes: list[int] | None = None) -> tuple[int, bytes, Any]:
        """The next message as ``(worker, kind, payload)``, checking liveness and ``timeout``
        (or ``deadline``, a ``time.monotonic()`` instant) while waiting; with ``sizes``, its
        payload size in bytes is appended to it (see :func:`~._messages.decode`)."""
        message = msg.decode(self._recv_frames(deadline)[1:], self.rings, sizes)
        if self._pending and self._start_on_data and message[1] != msg.READY:
            self._got_data = True  # the first datapoint is out: start the others next time
        return message

    @property
    def ring_bytes(self) -> int:
        """The shared memory of all the workers' rings (0 without)."""
        return self.rings.nbytes if self.rings is not None else 0

    def _recv_frames(self, deadline: float | None) -> list[Any]:
        sock = self.sock
        if self._pending and (self._got_data or time.monotonic() >= self._pending_until):
            self.start_pending()
        now = time.monotonic()
        if now >= self._next_check:  # on a clock too: another busy worker must not hide a death
            self._next_check = now + POLL_MS / 1000
            self.check()
        if self._flowing:  # messages were waiting last time: try without polling first
            try:
                return msg.recv_parts(sock, zmq.NOBLOCK, 4)
            except zmq.Again:
                self._flowing = False
        if deadline is None and self.timeout is not None:
            deadline = time.monotonic() + self.timeout
        while True:
            wait = POLL_MS
            if self._pending:  # nothing to receive yet: start the others when it is time
                left = self._pending_until - time.monotonic()
                if left <= 0:
                    self.start_pending()
                else:
                    wait = min(wait, max(1, int(left * 1000)))
            if self._poller.poll(wait):
                parts = msg.recv_parts(sock, 0, 4)
                self._flowing = bool(int(sock.getsockopt(zmq.EVENTS)) & zmq.POLLIN)
                return parts
            self.check()
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(
                    f"{self.stage}: no message arrived from the workers for {self.timeout} s "
                    f"(timeout={self.timeout}); the workers are alive but produce nothing"
                )

    def send(self, worker: int, kind: bytes, obj: Any) -> None:
        """Send ``obj`` to worker ``worker`` (raises ``zmq.ZMQError`` if it is not connected)."""
        if worker >= len(self.procs):
            self.start_pending()
        msg.send(self.sock, kind, obj, prefix=(identity(worker),))

    def close(self) -> None:
        """Stop the workers and release the socket, context and shared memory. Idempotent.
        Holds a Ctrl-C until all is released (about a second at most), then raises it."""
        with deferred_sigint():
            self._finalizer()


def _shutdown(procs: list[BaseProcess], owned: dict[str, Any]) -> None:
    """Release everything; each release runs even if an earlier one fails (the first
    exception goes on)."""
    try:
        stop_workers(procs)
        procs.clear()
    finally:
        try:
            if owned.get("sock") is not None:
                owned["sock"].close(linger=0)
        finally:
            try:
                if owned.get("zctx") is not None:
                    with blocked_signals():  # a signal inside libzmq's term leaves it half done
                        owned["zctx"].destroy(linger=0)  # closes any socket left open, then terms
            finally:
                if owned.get("rings") is not None:
                    owned["rings"].close()
                unlink_all(owned["shm_paths"])


def resolve_shm_bytes(stage: str, shm_bytes: int | None) -> int:
    """The shared memory a pool reserves: ``shm_bytes`` as given, or for ``None``
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
