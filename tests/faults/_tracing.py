"""A ``KeyboardInterrupt`` raised exactly where a signal could land, by a trace function.

CPython raises a pending ``KeyboardInterrupt`` between bytecodes: at a function's entry, after
a call, at a backward jump. The storm tests (``_storm.py``) hit such spots by chance; these
helpers hit them on purpose. They trace only this thread (signals reach the main thread) and
restore the tracer that was set before (a coverage tool's, say).
"""

from __future__ import annotations

import contextlib
import linecache
import os
import signal
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

import dataflow

__all__ = ["events_of", "interrupt_at", "interrupt_at_event", "ours"]

PACKAGE = os.path.dirname(os.path.abspath(dataflow.__file__)) + os.sep


def ours(code: types.CodeType) -> bool:
    """Whether ``code`` is the library's (not the tests', not numpy's)."""
    return code.co_filename.startswith(PACKAGE)


@contextlib.contextmanager
def _tracing(tracer: Callable[..., Any]) -> Iterator[None]:
    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        yield
    finally:
        sys.settrace(previous)


def _with_exit(frame: types.FrameType, last_line: dict[int, int]) -> bool:
    """Whether this line event is a ``with`` statement's exit (its line reached again from its
    body). No signal can land there: nothing between the body's end and the call of
    ``__exit__`` checks for one, so a lock's ``with`` always releases it."""
    line, before = frame.f_lineno, last_line.get(id(frame), 0)
    last_line[id(frame)] = line
    if before <= line:
        return False
    return linecache.getline(frame.f_code.co_filename, line).lstrip().startswith(("with ", "async with "))


def _library_events(on_event: Callable[[int, types.FrameType], None]) -> Callable[..., Any]:
    """A trace function calling ``on_event(n, frame)`` at the n-th call or line event of the
    library's code where a signal could land (not a ``with`` statement's exit)."""
    count = 0
    last_line: dict[int, int] = {}

    def tracer(frame: types.FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if not ours(frame.f_code):
            return None
        if event == "call" or (event == "line" and not _with_exit(frame, last_line)):
            count += 1
            on_event(count, frame)
        return tracer

    return tracer


def events_of(fn: Callable[[], Any]) -> tuple[int, list[int], Any]:
    """``(n, firsts, fn())``: how many call and line events of the library's code ``fn()``
    runs in this thread, and the (1-based) event at which each distinct spot (file, line)
    was first reached."""
    seen: set[tuple[str, int]] = set()
    firsts: list[int] = []
    count = [0]

    def note(n: int, frame: types.FrameType) -> None:
        count[0] = n
        spot = (frame.f_code.co_filename, frame.f_lineno)
        if spot not in seen:
            seen.add(spot)
            firsts.append(n)

    with _tracing(_library_events(note)):
        result = fn()
    return count[0], firsts, result


@contextlib.contextmanager
def interrupt_at_event(k: int, where: list[str]) -> Iterator[None]:
    """Raise ``KeyboardInterrupt`` at the ``k``-th (1-based) call or line event of the
    library's code in this thread, inside the block; append ``file:function:line`` to
    ``where`` when it does. As a real SIGINT would be, it is held while the library holds
    SIGINT back (``deferred_sigint``: another handler installed) and raised at the first
    event after."""

    def interrupt(n: int, frame: types.FrameType) -> None:
        if n >= k and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            sys.settrace(None)
            code = frame.f_code
            where.append(f"{code.co_filename[len(PACKAGE):]}:{code.co_name}:{frame.f_lineno}")
            raise KeyboardInterrupt

    with _tracing(_library_events(interrupt)):
        yield


@contextlib.contextmanager
def interrupt_at(code: types.CodeType, event: str) -> Iterator[None]:
    """Raise ``KeyboardInterrupt`` at the next ``event`` ("call": before the first bytecode;
    "return": after the last) of a frame running ``code`` in this thread, inside the block."""

    def local(frame: types.FrameType, ev: str, arg: Any) -> Any:
        if ev == event and frame.f_code is code:
            sys.settrace(None)
            raise KeyboardInterrupt
        return local

    def tracer(frame: types.FrameType, ev: str, arg: Any) -> Any:
        if frame.f_code is not code:
            return None
        return local(frame, ev, arg) if ev == event else local

    with _tracing(tracer):
        yield
