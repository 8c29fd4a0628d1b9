"""Workers started late by worker 0 instead of the consumer: :class:`LateWorkers`.

A worker forked by the consumer after the first batch inherits whatever the consumer holds
at that moment (an epoch's order of two million indices, a model being trained): pages that
no other process shares. The consumer then writes to them (reference counts) and frees them,
so the late worker's copies become its own private memory, for its whole life. Worker 0 was
forked before any of that existed, and stays that copy of the consumer: a worker it forks
shares the consumer's pages of that time, as worker 0 does, and costs the consumer no fork.

The consumer asks worker 0 (a CONTROL message ``("fork", (index, ring_path))``, see
:meth:`LateWorkers.request`); worker 0 forks (:func:`fork_late_worker`) and reports the new
pid, then its exit code once it has reaped it, on a pipe from worker 0 to the consumer. So
the consumer knows each late worker's pid and exit code as it knows those of the workers it
forked itself: :class:`LateWorker` has the parts of ``multiprocessing.Process`` the pool uses.

A late worker dies with worker 0 (``PR_SET_PDEATHSIG``, and its watchdog), which dies with
the consumer. The consumer stops late workers before worker 0, so that worker 0 reaps them.
"""

from __future__ import annotations

import _thread
import ctypes
import os
import signal
import struct
import sys
import time
from collections.abc import Callable
from typing import Any

__all__ = ["FORK", "LateWorker", "LateWorkers", "fork_late_worker"]

#: the CONTROL request worker 0 answers by forking a worker
FORK = "fork"
_RECORD = struct.Struct("=iii")  # (what, worker index, pid or exit code)
_STARTED, _EXITED = 0, 1
_PR_SET_PDEATHSIG = 1
_UNKNOWN_EXIT = -int(signal.SIGKILL)  # worker 0 died before it could report (it takes them along)


class LateWorker:
    """A worker that worker 0 forked: the parts of ``multiprocessing.Process`` the pool uses
    (``pid``, ``exitcode``, ``terminate``, ``kill``, ``join``, ``close``)."""

    def __init__(self, owner: LateWorkers, index: int) -> None:
        self.owner, self.index = owner, index
        self.pid: int | None = None  # until worker 0 reports the fork
        self.asked = False  # worker 0 was sent the request
        self._exitcode: int | None = None
        self.daemon = True

    @property
    def exitcode(self) -> int | None:
        """``None`` while it runs (or is not forked yet), else its exit code (``-signal``)."""
        if self._exitcode is None:
            self.owner.drain()
        return self._exitcode

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def _signal(self, sig: int) -> None:
        if self.pid is not None and self.exitcode is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:  # pragma: no cover - reaped in between
                pass

    def join(self, timeout: float | None = None) -> None:
        """Wait until worker 0 has reaped it (or worker 0 is gone), at most ``timeout`` s
        (not at all if it was not forked: it never will be once the pool stops)."""
        if self.pid is None:
            return
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.exitcode is None and self.owner.first_alive():
            if deadline is not None and time.monotonic() >= deadline:
                return
            time.sleep(0.005)
        if self._exitcode is None and not self.owner.first_alive():
            self._exitcode = _UNKNOWN_EXIT  # it died with worker 0

    def close(self) -> None:
        """Nothing to release: worker 0 reaped it."""


class LateWorkers:
    """The consumer's side: the pipe worker 0 reports on, and the late workers' handles.

    ``first_exitcode`` tells whether worker 0 still runs (``None``) or has exited."""

    def __init__(self, first_exitcode: Callable[[], int | None]) -> None:
        self._first_exitcode = first_exitcode
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        self.workers: dict[int, LateWorker] = {}
        self._buffer = b""

    def request(self, index: int) -> LateWorker:
        """A handle for worker ``index``, which worker 0 is (or will be) asked to fork."""
        self.workers[index] = handle = LateWorker(self, index)
        return handle

    def first_alive(self) -> bool:
        return self._first_exitcode() is None

    def close_write_end(self) -> None:
        """Once worker 0 is forked, only it (and the workers it forks) may write."""
        fd, self.write_fd = self.write_fd, -1  # forgotten first: a Ctrl-C must not close it twice
        if fd >= 0:
            os.close(fd)

    def close(self) -> None:
        self.close_write_end()
        fd, self.read_fd = self.read_fd, -1
        if fd >= 0:
            os.close(fd)

    def drain(self) -> None:
        """Read what worker 0 reported (pids of the forked, exit codes of the reaped)."""
        if self.read_fd < 0:
            return
        while True:
            try:
                chunk = os.read(self.read_fd, 4096)
            except BlockingIOError:
                break
            if not chunk:
                break
            self._buffer += chunk
        size = _RECORD.size
        while len(self._buffer) >= size:
            what, index, value = _RECORD.unpack(self._buffer[:size])
            self._buffer = self._buffer[size:]
            handle = self.workers.get(index)
            if handle is None:  # pragma: no cover - not one of ours
                continue
            if what == _STARTED:
                handle.pid = value
            else:
                handle._exitcode = value

    def wait_pids(self, deadline: float) -> None:
        """Wait until worker 0 has reported the pid of every late worker asked for (or it has
        died, or ``deadline``, a ``time.monotonic()`` instant, has passed)."""
        while any(h.pid is None and h.asked for h in self.workers.values()):
            self.drain()
            if not self.first_alive() or time.monotonic() >= deadline:
                return
            time.sleep(0.002)


def fork_late_worker(parent: tuple[Any, ...], request: Any, run: Callable[[str | None, int], None]) -> None:
    """In worker 0: answer a :data:`FORK` request ``("fork", (index, ring_path))`` by forking
    a process that calls ``run(ring_path, index)`` (a worker's whole life), and report its
    pid, then its exit code once reaped, on the pipe in ``parent`` (see
    :func:`~._pool.bootstrap_worker`)."""
    what, (index, ring_path) = request
    if what != FORK or len(parent) < 3:
        raise ValueError(f"worker 0 got an unknown control request {request!r:.80}")
    report_fd = int(parent[2])
    me = os.getpid()
    pid = os.fork()
    if pid == 0:  # the late worker: never returns into worker 0's frames
        code = 1
        try:
            _die_with(me)
            run(ring_path, int(index))
            code = 0
        finally:
            os._exit(code)
    os.write(report_fd, _RECORD.pack(_STARTED, int(index), pid))

    def reap() -> None:
        _, status = os.waitpid(pid, 0)
        os.write(report_fd, _RECORD.pack(_EXITED, int(index), os.waitstatus_to_exitcode(status)))

    _thread.start_new_thread(reap, ())


def _die_with(parent_pid: int) -> None:
    """In a late worker, first thing: SIGKILL when worker 0 dies (and exit if it already has)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # pragma: no cover - exotic libc
            pass
    if os.getppid() != parent_pid:
        os._exit(1)
