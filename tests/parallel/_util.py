"""Module-level flows, map functions and probes for the tests of ``dataflow.parallel``.

Everything a worker runs lives here, at module level, so that it pickles by reference and
the ``spawn``/``forkserver`` start methods can import it in the child.
"""

from __future__ import annotations

import ctypes
import faulthandler
import os
import random
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from dataflow.base import DataFlow, RNGDataFlow

# --- map functions -------------------------------------------------------------------------


def double(dp: list[Any]) -> list[Any]:
    return [dp[0] * 2]


def drop_multiples_of_3(dp: list[Any]) -> list[Any] | None:
    """Doubles, and drops (``None``) every datapoint whose value is a multiple of 3."""
    return None if dp[0] % 3 == 0 else [dp[0] * 2]


def to_pair(dp: list[Any]) -> list[Any]:
    """``[i] -> [i, float32 array of 3 filled with i]``."""
    return [dp[0], np.full(3, dp[0], dtype=np.float32)]


def to_pair_drop_some(dp: list[Any]) -> list[Any] | None:
    """As :func:`to_pair`, dropping values 1, 2 and 9 (so chunks of 4 are incomplete)."""
    return None if dp[0] in (1, 2, 9) else to_pair(dp)


def with_pid(dp: list[Any]) -> list[Any]:
    return [dp[0], os.getpid()]


def with_pid_slowly(dp: list[Any]) -> list[Any]:
    """:func:`with_pid` after 5 ms: slower than a map's start-up budget per worker."""
    time.sleep(0.005)
    return with_pid(dp)


def global_random_map(dp: list[Any]) -> list[Any]:
    """``[i, pid, np.random.random(), random.random()]``: uses the process-global RNGs."""
    return [dp[0], os.getpid(), float(np.random.random()), random.random()]


class AfterAllStarted:
    """``func``, once ``n`` worker processes have called it (each waits for the others on its
    first datapoint, up to 30 s, through files in ``path``), then 5 ms per datapoint: every
    worker of a map maps a fair share even of a short epoch, however slowly its start method
    starts the others (a map gives worker 0 the first tasks while the others start)."""

    def __init__(self, path: str, n: int, func: Callable[[Any], Any]) -> None:
        self.path, self.n, self.func = path, n, func
        self._waited = False

    def __call__(self, dp: Any) -> Any:
        if not self._waited:
            self._waited = True
            open(os.path.join(self.path, str(os.getpid())), "w").close()
            deadline = time.monotonic() + 30
            while len(os.listdir(self.path)) < self.n and time.monotonic() < deadline:
                time.sleep(0.005)
        time.sleep(0.005)
        return self.func(dp)


class MyError(ValueError):
    """A picklable user exception."""


class UnpicklableError(Exception):
    """An exception that cannot be pickled (it holds a lock)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.lock = threading.Lock()


class BadInitError(Exception):
    """Pickles, but cannot be unpickled (``__init__`` needs two arguments)."""

    def __init__(self, a: str, b: str) -> None:
        super().__init__(f"{a}-{b}")


def fail_on_3(dp: list[Any]) -> list[Any]:
    if dp[0] == 3:
        raise MyError("bad value 3")
    return dp


def fail_unpicklable(dp: list[Any]) -> list[Any]:
    if dp[0] == 3:
        raise UnpicklableError("cannot pickle me")
    return dp


def fail_bad_init(dp: list[Any]) -> list[Any]:
    if dp[0] == 3:
        raise BadInitError("x", "y")
    return dp


def exit_on_3(dp: list[Any]) -> list[Any]:
    if dp[0] == 3:
        os._exit(3)
    return dp


def sigkill_on_3(dp: list[Any]) -> list[Any]:
    if dp[0] == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    return dp


def sleep_3s(dp: list[Any]) -> list[Any]:
    time.sleep(3)
    return dp


_stalled = False


def stall_first_zero(dp: list[Any]) -> list[Any]:
    """Sleeps 1.5 s the first time this worker (process or process of threads) sees 0."""
    global _stalled
    if dp[0] == 0 and not _stalled:
        _stalled = True
        time.sleep(1.5)
    return dp


def reset_stall() -> None:
    global _stalled
    _stalled = False


class ClaimOnce:
    """Picklable callable that ``os._exit(5)``s in the first process to claim ``path``
    (atomically, with ``O_EXCL``) when it sees the value 5; other calls map as identity."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self, dp: list[Any]) -> list[Any]:
        if dp[0] == 5 and _claim(self.path):
            os._exit(5)
        return dp


def _claim(path: str) -> bool:
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def leaves(obj: Any) -> Iterator[np.ndarray]:
    """The arrays of a nested structure, in a fixed order."""
    if isinstance(obj, np.ndarray):
        yield obj
    elif isinstance(obj, dict):
        for k in sorted(obj):
            yield from leaves(obj[k])
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from leaves(v)


# --- flows ---------------------------------------------------------------------------------


class Range(DataFlow):
    """``[0], [1], ..., [n-1]`` every epoch; picklable; exact ``len``."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[list[int]]:
        for i in range(self.n):
            yield [i]


class Counting(DataFlow):
    """``[0], [1], [2], ...`` forever (no length)."""

    def __iter__(self) -> Iterator[list[int]]:
        i = 0
        while True:
            yield [i]
            i += 1


class PidRng(RNGDataFlow):
    """``[pid, value from self.rng]`` forever: shows which worker drew which random stream."""

    def __iter__(self) -> Iterator[list[Any]]:
        while True:
            yield [os.getpid(), float(self.rng.random())]


class RaisingFlow(DataFlow):
    """Yields ``[0], [1]`` then raises :class:`MyError` in ``raising_flow_iter``."""

    def __len__(self) -> int:
        return 10

    def __iter__(self) -> Iterator[list[int]]:
        return raising_flow_iter()


def raising_flow_iter() -> Iterator[list[int]]:
    yield [0]
    yield [1]
    raise MyError("flow broke at 2")


def _segfault() -> None:
    """Crash this process with SIGSEGV, quietly: the faulthandler pytest enables (inherited
    by forked workers, writing to the terminal past pytest's capture) would print a dump of
    this deliberate crash in the middle of a green run."""
    faulthandler.disable()
    ctypes.string_at(0)


class SegfaultFlow(DataFlow):
    """Crashes the process with a segmentation fault on its first datapoint."""

    def __len__(self) -> int:
        return 10

    def __iter__(self) -> Iterator[list[int]]:
        _segfault()
        yield [0]


class ExitFlow(DataFlow):
    """``os._exit(4)`` on the first datapoint."""

    def __len__(self) -> int:
        return 10

    def __iter__(self) -> Iterator[list[int]]:
        os._exit(4)
        yield [0]


class OneWorkerCrashes(DataFlow):
    """The first worker to claim ``path`` produces a little and then segfaults after
    0.3 s; the others produce ``[i]`` forever. Shows whether a death is noticed while
    another worker keeps the consumer busy."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __iter__(self) -> Iterator[list[int]]:
        if _claim(self.path):
            yield [-1]
            time.sleep(0.3)
            _segfault()
        i = 0
        while True:
            yield [i]
            i += 1


class SleepyFlow(DataFlow):
    """One datapoint, then sleeps 3 s before each next one."""

    def __len__(self) -> int:
        return 10

    def __iter__(self) -> Iterator[list[int]]:
        yield [0]
        for i in range(1, 10):
            time.sleep(3)
            yield [i]


class LockFlow(Range):
    """A flow holding a lock: cannot be pickled."""

    def __init__(self, n: int) -> None:
        super().__init__(n)
        self.lock = threading.Lock()


class GeneratorFlow(Range):
    """A flow holding a generator: cannot be pickled."""

    def __init__(self, n: int) -> None:
        super().__init__(n)
        self.gen = (i for i in range(n))


class ThreadMapInside(DataFlow):
    """A strict, ordered :class:`MultiThreadMapData` of :func:`double` over ``Range(n)``,
    built in ``reset_state`` (so in the worker)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.inner: DataFlow | None = None

    def __len__(self) -> int:
        return self.n

    def reset_state(self) -> None:
        from dataflow.parallel._threads import MultiThreadMapData

        self.inner = MultiThreadMapData(Range(self.n), 2, double, strict=True, ordered=True)
        self.inner.reset_state()

    def __iter__(self) -> Iterator[Any]:
        assert self.inner is not None
        return iter(self.inner)

    def close(self) -> None:
        if self.inner is not None:
            self.inner.close()


def make_range_5() -> DataFlow:
    return Range(5)


def make_raising() -> DataFlow:
    return RaisingFlow()


def make_sleepy() -> DataFlow:
    return SleepyFlow()


# --- factories -----------------------------------------------------------------------------


def make_map(kind: str, ds: DataFlow, func: Callable[[Any], Any], **kwargs: Any) -> DataFlow:
    """A parallel map of 2 workers: ``kind`` is ``"proc"`` or ``"thread"``."""
    from dataflow.parallel._maps import MultiProcessMapDataZMQ
    from dataflow.parallel._threads import MultiThreadMapData

    if kind == "proc":
        return MultiProcessMapDataZMQ(ds, 2, func, **kwargs)
    return MultiThreadMapData(ds, 2, func, **kwargs)


def check_user_error(err: BaseException, exc_type: type, message: str, frame: str, stage: str) -> None:
    """The promise for an exception raised in a worker: the consumer gets the user's own type
    and message, the worker's traceback (with ``frame``) shown once, and on Python 3.11+ a
    note naming the stage and the worker; never the message repeated over and over."""
    import sys
    import traceback

    assert type(err) is exc_type, f"got {type(err).__name__}, expected the user's {exc_type.__name__}"
    assert str(err) == message
    text = "".join(traceback.format_exception(type(err), err, err.__traceback__))
    assert frame in text, "the worker's traceback is shown"
    shown = f"{exc_type.__name__}: {message}"
    assert 1 <= text.count(shown) <= 2, f"the message is repeated:\n{text}"
    if sys.version_info >= (3, 11):
        notes = getattr(err, "__notes__", [])
        assert any(stage in n and ("worker" in n or "thread" in n) for n in notes), notes


class SlowToStart(DataFlow):
    """A flow whose ``reset_state()`` takes ``seconds`` (in the worker): a slow start."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def reset_state(self) -> None:
        time.sleep(self.seconds)

    def __iter__(self) -> Iterator[list[int]]:
        yield from ([i] for i in range(10))
