"""Module-level faulty pieces for the parallel fault tests (module level, so that spawned and
forkserver workers can import them): functions and flows that break in a worker's start,
in unpickling, or in what they produce."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

from dataflow.base import DataFlow


def _raise_on_rebuild(what: str) -> None:
    raise RuntimeError(f"{what} cannot be rebuilt in a worker")


def _sleep_then(seconds: float, obj: Any) -> Any:
    time.sleep(seconds)
    return obj


class BreaksOnUnpickle:
    """A map function that pickles, but raises ``RuntimeError`` when a worker unpickles it."""

    def __call__(self, dp: list[Any]) -> list[Any]:
        return dp

    def __reduce__(self) -> tuple[Any, ...]:
        return (_raise_on_rebuild, ("BreaksOnUnpickle",))


def _sleep_then_raise(seconds: float, what: str) -> None:
    time.sleep(seconds)
    _raise_on_rebuild(what)


class SlowlyBreaksOnUnpickle(BreaksOnUnpickle):
    """Like :class:`BreaksOnUnpickle`, after 0.5 s: every worker says READY before any
    error arrives."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (_sleep_then_raise, (0.5, "SlowlyBreaksOnUnpickle"))


class FlowBreaksOnUnpickle(DataFlow):
    """A flow that pickles, but raises ``RuntimeError`` when a worker unpickles it."""

    def __len__(self) -> int:
        return 3

    def __iter__(self) -> Iterator[list[int]]:
        yield from ([i] for i in range(3))

    def __reduce__(self) -> tuple[Any, ...]:
        return (_raise_on_rebuild, ("FlowBreaksOnUnpickle",))


class Identity:
    """A picklable identity map function."""

    def __call__(self, dp: list[Any]) -> list[Any]:
        return dp


def slow_to_rebuild(seconds: float) -> Any:
    """An identity map function whose unpickling in a worker takes ``seconds``."""

    class _Slow(Identity):
        def __reduce__(self) -> tuple[Any, ...]:
            return (_sleep_then, (seconds, Identity()))

    return _Slow()


class SlowToStart(DataFlow):
    """``[0] .. [9]``, whose ``reset_state()`` (run in the worker) takes ``seconds``."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __len__(self) -> int:
        return 10

    def reset_state(self) -> None:
        time.sleep(self.seconds)

    def __iter__(self) -> Iterator[list[int]]:
        yield from ([i] for i in range(10))


class YieldsALock(DataFlow):
    """``[0]``, then ``[lock]``: a datapoint that cannot cross processes."""

    def __len__(self) -> int:
        return 5

    def __iter__(self) -> Iterator[list[Any]]:
        yield [0]
        yield [threading.Lock()]


def lock_result(dp: list[Any]) -> list[Any]:
    """A map function whose result (a lock) cannot cross processes."""
    return [threading.Lock()]
