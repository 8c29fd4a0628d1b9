"""Worker process lifecycle: start methods, death signal, liveness, close.

Guarantees:

- **Workers die with their parent.** On Linux each worker asks the kernel for SIGKILL when
  its parent dies (``PR_SET_PDEATHSIG`` through ctypes; only when the runner was started
  from the main thread, since the signal follows the creating *thread*), and a watchdog
  thread in the worker exits it within ~0.5 s once its parent process is gone.
- **Workers never die silently.** :func:`check_workers` turns an exited worker into
  :class:`~dataflow._errors.WorkerDied` naming its pid and exit code (and the signal).
- **Close leaves nothing.** :func:`stop_workers` terminates, joins, kills and releases.
- Workers ignore SIGINT: a Ctrl-C reaches the consumer, which shuts them down.
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
from collections.abc import Callable, Sequence
from multiprocessing.context import BaseContext
from multiprocessing.process import BaseProcess
from typing import Any

from .._errors import WorkerDied
from ._interrupts import deferred_sigint

__all__ = [
    "START_METHODS",
    "Pickled",
    "bootstrap_worker",
    "check_workers",
    "get_context",
    "start_workers",
    "stop_workers",
]

START_METHODS = ("fork", "forkserver", "spawn")
_PR_SET_PDEATHSIG = 1
_WATCHDOG_PERIOD = 0.5


def get_context(stage: str, start_method: str | None) -> BaseContext:
    """The multiprocessing context for ``start_method`` (``None``: fork where available)."""
    if start_method is None:
        start_method = "fork" if "fork" in mp.get_all_start_methods() else mp.get_start_method()
    if start_method not in START_METHODS or start_method not in mp.get_all_start_methods():
        raise ValueError(
            f"{stage}: start_method must be one of {list(mp.get_all_start_methods())}, got {start_method!r}"
        )
    return mp.get_context(start_method)


def check_start_method(stage: str, start_method: str | None) -> str | None:
    """Validate ``start_method=`` at construction (``None`` is the platform default)."""
    if start_method is not None:
        get_context(stage, start_method)
    return start_method


class Pickled:
    """An object sent to spawn/forkserver workers already pickled (by
    :func:`check_picklable`), so that the worker unpickles it itself, where a failure is
    reported to the consumer as an error naming the object (see
    :meth:`~._worker_link.WorkerLink.rebuild`), not a worker dead of exit code 1."""

    __slots__ = ("data", "name")

    def __init__(self, name: str, data: bytes) -> None:
        self.name, self.data = name, data

    def __getstate__(self) -> tuple[str, bytes]:
        return self.name, self.data

    def __setstate__(self, state: tuple[str, bytes]) -> None:
        self.name, self.data = state


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


#: how long a SIGKILLed worker may take to be reaped: it cannot refuse, but on a busy
#: machine its exit can wait seconds for a CPU, and until it is reaped its Process object
#: cannot be closed (it would keep two pipe descriptors open in the consumer)
KILLED_EXIT_S = 30.0


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
