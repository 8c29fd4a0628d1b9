"""Worker processes and the consumer's ROUTER socket: :class:`ProcessPool`, its options
(:class:`WorkerOptions`) and the life of each worker process (start methods, death signal,
liveness, stop).

Guarantees:

- **No hang.** Every blocking receive is a poll loop that checks worker liveness (~ every
  0.1 s) and the optional ``timeout``, so a dead worker or a stalled pipeline raises instead.
- **Workers never die silently.** :func:`check_workers` turns an exited worker into
  :class:`~dataflow._errors.WorkerDied` naming its pid and exit code (and the signal).
- **Workers die with their parent.** On Linux each worker asks the kernel for SIGKILL when
  its parent dies (``PR_SET_PDEATHSIG`` through ctypes; only when the pool was started from
  the main thread, since the signal follows the creating *thread*), and a watchdog thread in
  the worker exits it within ~0.5 s once its parent process is gone.
- **Close leaves nothing.** Processes, socket, context and shared memory are released by
  :meth:`ProcessPool.close`, by garbage collection, or at interpreter exit, whichever comes
  first (``weakref.finalize``); each release runs even if another fails, and ``close()`` holds
  a Ctrl-C until it is done.
- Workers ignore SIGINT: a Ctrl-C reaches the consumer, which shuts them down.

Workers connect a DEALER socket named ``w<index>`` (:func:`identity`, see
:func:`~._worker.worker_link`), so the consumer can address each one (tasks, control
requests) and every message says which worker sent it.

With ``lazy=True`` only worker 0 is started at construction; the others are started by the
consumer once the first datapoint has reached it, or once it has waited
:data:`LAZY_START_S` for one, whichever comes first (and at once when their pids are asked
for or a message is sent to them). Forking a large process takes tens of milliseconds per
worker, during which the consumer can receive nothing: the first batch waits only for the
worker that makes it.
"""

from __future__ import annotations

import _thread
import ast
import ctypes
import multiprocessing as mp
import os
import pickle
import signal
import sys
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.context import BaseContext
from multiprocessing.process import BaseProcess
from typing import Any

import zmq

from .. import _seeding as seeding
from .._checks import check_int, check_timeout
from .._errors import WorkerDied
from . import _messages as msg
from ._interrupts import blocked_signals, deferred_sigint
from ._shm import RingReader, unlink_all, warn_no_shm

__all__ = [
    "DEFAULT_SHM_BYTES",
    "POLL_MS",
    "START_METHODS",
    "Pickled",
    "ProcessPool",
    "WorkerOptions",
    "bootstrap_worker",
    "check_workers",
    "identity",
    "resolve_shm_bytes",
    "stop_workers",
]

POLL_MS = 100
#: with ``lazy=True``, the longest the consumer waits for worker 0's first datapoint before
#: starting the other workers anyway
LAZY_START_S = 0.1
DEFAULT_SHM_BYTES = 256 * 2**20
MIN_AUTO_SHM_BYTES = 32 * 2**20
START_METHODS = ("fork", "forkserver", "spawn")
_PR_SET_PDEATHSIG = 1
_WATCHDOG_PERIOD = 0.5
#: how long a SIGKILLed worker may take to be reaped: it cannot refuse, but on a busy
#: machine its exit can wait seconds for a CPU, and until it is reaped its Process object
#: cannot be closed (it would keep two pipe descriptors open in the consumer)
KILLED_EXIT_S = 30.0


def identity(worker: int) -> bytes:
    """The ZMQ identity of worker ``worker`` on the consumer's ROUTER."""
    return b"w%d" % worker


@dataclass(frozen=True)
class WorkerOptions:
    """Checked settings of one parallel flow's workers.

    Attributes:
        stage: the flow's name, for messages.
        start_method: ``fork``/``forkserver``/``spawn``, or ``None`` (fork on Linux).
        seed: base seed of the workers' RNGs (worker *i* gets child *i*); ``None``:
            :func:`dataflow.set_seed`'s, else fresh entropy.
        timeout: seconds without a message before ``TimeoutError``; ``None``: no limit.
        shm_bytes: shared memory for large arrays (``None``: automatic, ``0``: off).
        copy: give the consumer owned arrays instead of views of shared memory.
        hwm: ZMQ high-water mark, in messages.
    """

    stage: str
    start_method: str | None = None
    seed: int | None = None
    timeout: float | None = None
    shm_bytes: int | None = None
    copy: bool = False
    hwm: int = 50

    def __post_init__(self) -> None:
        stage = self.stage
        if self.start_method is not None:
            get_context(stage, self.start_method)
        object.__setattr__(self, "seed", seeding.check_seed(stage, self.seed))
        object.__setattr__(self, "timeout", check_timeout(stage, self.timeout))
        if self.shm_bytes is not None:
            object.__setattr__(self, "shm_bytes", check_int(stage, "shm_bytes", self.shm_bytes, minimum=0))
        object.__setattr__(self, "copy", bool(self.copy))
        object.__setattr__(self, "hwm", check_int(stage, "hwm", self.hwm, minimum=0))

    def worker_seed(self) -> int | None:
        """The seed the workers get: resolved here because spawn/forkserver workers do not
        inherit :func:`dataflow.set_seed`'s module state."""
        return seeding.resolve_seed(self.seed)


class ProcessPool:
    """Worker processes and the consumer's bound ROUTER socket.

    ``target(parent, endpoint, ring_path, *args)`` runs in each worker (one argument tuple in
    ``worker_args`` per worker; ``ring_path`` is ``None`` without shared memory) and starts
    with :func:`~._worker.worker_link`. ``picklable`` names objects that must pickle under spawn.
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


def get_context(stage: str, start_method: str | None) -> BaseContext:
    """The multiprocessing context for ``start_method`` (``None``: fork where available)."""
    if start_method is None:
        start_method = "fork" if "fork" in mp.get_all_start_methods() else mp.get_start_method()
    if start_method not in START_METHODS or start_method not in mp.get_all_start_methods():
        raise ValueError(
            f"{stage}: start_method must be one of {list(mp.get_all_start_methods())}, got {start_method!r}"
        )
    return mp.get_context(start_method)


class Pickled:
    """An object sent to spawn/forkserver workers already pickled (by
    :func:`check_picklable`), so that the worker unpickles it itself, where a failure is
    reported to the consumer as an error naming the object (see
    :meth:`~._worker.WorkerLink.rebuild`), not a worker dead of exit code 1."""

    __slots__ = ("data", "name")

    def __init__(self, name: str, data: bytes) -> None:
        self.name, self.data = name, data


def check_picklable(stage: str, start_method: str, **objects: Any) -> dict[str, Pickled]:
    """Under spawn/forkserver the workers' arguments are pickled: fail early and clearly.
    Returns each object pickled (nothing under fork)."""
    if start_method == "fork":
        return {}
    pickled = {}
    for name, obj in objects.items():
        try:
            pickled[name] = Pickled(name, pickle.dumps(obj))
        except Exception as e:
            raise TypeError(
                f"{stage}: with start_method={start_method!r} the {name} is sent to the workers "
                f"by pickling, but {obj!r} cannot be pickled ({type(e).__name__}: {e}). Define "
                f"functions at module level (not lambdas or closures), or use start_method='fork'"
            ) from e
    return pickled


def start_workers(
    stage: str,
    context: BaseContext,
    target: Callable[..., None],
    args_per_worker: Sequence[tuple[Any, ...]],
    into: list[BaseProcess] | None = None,
) -> list[BaseProcess]:
    """Start one daemon process per argument tuple; each calls ``target(*args)``.

    ``target`` must call :func:`bootstrap_worker` first. Refuses to run inside a worker
    process of another runner (daemon processes cannot have children). Each process is
    appended to ``into`` (the owner's list) *before* it starts, so whatever interrupts the
    start, the owner's cleanup finds every process that may be running.
    """
    if mp.current_process().daemon:
        raise RuntimeError(
            f"{stage}: cannot start worker processes inside a worker process of another "
            f"process runner. Use threads inside (MultiThreadMapData / MultiThreadRunner), "
            f"or move this stage out of the outer runner"
        )
    parent = (os.getpid(), threading.current_thread() is threading.main_thread())
    procs: list[BaseProcess] = [] if into is None else into
    first = len(procs)
    try:
        for args in args_per_worker:
            proc = context.Process(target=target, args=(parent, *args), daemon=True)  # type: ignore[attr-defined]
            procs.append(proc)
            with deferred_sigint():  # a fork must not happen without the owner knowing its pid
                proc.start()
    except BaseException:
        stop_workers(procs[first:])
        raise
    return procs[first:]


def _started(proc: BaseProcess) -> bool:
    try:
        return proc.pid is not None
    except ValueError:  # closed: it was started and released
        return False


def bootstrap_worker(parent: tuple[int, bool]) -> None:
    """First call in every worker: ignore SIGINT, die with the parent."""
    parent_pid, use_pdeathsig = parent
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if use_pdeathsig and sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # pragma: no cover - exotic libc
            pass
    ppid = os.getppid()
    if not _alive(parent_pid) or (ppid != parent_pid and not _alive(ppid)):
        os._exit(1)  # the parent died before we could watch it

    def watchdog() -> None:
        while True:
            time.sleep(_WATCHDOG_PERIOD)
            if os.getppid() != ppid or not _alive(parent_pid):
                os._exit(1)

    # not threading.Thread: its start() waits until the new thread runs, a scheduler time
    # slice on a busy machine, before this worker may say READY
    _thread.start_new_thread(watchdog, ())


def _alive(pid: int) -> bool:
    """True while ``pid`` runs and is not a zombie (a killed parent is one until reaped)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except FileNotFoundError:
        return False
    except OSError:  # pragma: no cover - no procfs: fall back to a signal-0 probe
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


def check_workers(stage: str, procs: Sequence[BaseProcess], start_method: str = "fork") -> None:
    """Raise :class:`WorkerDied` if any worker has exited (they only exit when told to)."""
    for i, proc in enumerate(procs):
        code = proc.exitcode
        if code is not None:
            how = f"killed by signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
            hint = "A crash in native code, os._exit() or the OOM killer are the usual causes"
            script = _unguarded_main() if start_method != "fork" and code == 1 else None
            if script is not None:
                hint = (
                    f"The script {script} starts its pipeline at import time, without an "
                    f'`if __name__ == "__main__":` guard: under start_method={start_method!r} every '
                    f"worker imports the script again and fails there. Put the code that iterates "
                    f"the pipeline under that guard (or use start_method='fork')"
                )
            raise WorkerDied(
                f"{stage}: worker {i} (pid {proc.pid}) died unexpectedly ({how}). {hint}",
                pid=proc.pid,
                exitcode=code,
            )


def _unguarded_main() -> str | None:
    """The path of the ``__main__`` script if it has no ``if __name__ == "__main__":`` block."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if not path or not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None
    for node in tree.body:
        test = ast.unparse(node.test) if isinstance(node, ast.If) else ""
        if "__name__" in test and "__main__" in test:
            return None
    return str(path)


def stop_workers(procs: Sequence[BaseProcess], timeout: float = 1.0) -> None:
    """Terminate, join (up to ``timeout`` s), kill if needed, and release every process
    (its pipes included: each is reaped, then closed).

    Interrupt-safe: if a join is interrupted (Ctrl-C), every process still running is
    killed before the exception goes on, so no worker outlives a ``close()``. The kill and
    release hold Ctrl-C back: multiprocessing forgets a process's pipes *before* it closes
    them, so an interrupt in between would leak them for good."""
    procs = [p for p in procs if _started(p)]  # a start interrupted before fork left nothing
    try:
        for proc in procs:
            if proc.exitcode is None:
                try:
                    proc.terminate()
                except Exception:  # pragma: no cover - already gone
                    pass
        deadline = time.monotonic() + timeout
        for proc in procs:
            proc.join(max(0.0, deadline - time.monotonic()))
    finally:
        with deferred_sigint():
            for proc in procs:
                try:
                    if proc.exitcode is None:
                        proc.kill()
                        proc.join(KILLED_EXIT_S)
                    proc.close()
                except ValueError:  # closed already, or still running after SIGKILL
                    pass
