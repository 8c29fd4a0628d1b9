"""Ctrl-C held back while a resource is acquired.

A ``KeyboardInterrupt`` can be raised between any two bytecodes — for instance after
``zmq.Context()`` returned but before the result is stored where ``close()`` will find it, which
leaks the context's thread and file descriptors. And a SIGINT that interrupts a blocking call
in C can leave it half done: ``zmq.Context.term()`` interrupted by a signal marks the context
closed although libzmq never finished terminating it (its I/O thread and descriptors stay).
:func:`deferred_sigint` makes such short acquisitions and releases atomic: a SIGINT that
arrives inside is held (blocked for this thread, and recorded instead of raised) and raised
when the block ends.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["deferred_sigint"]


@contextmanager
def deferred_sigint() -> Iterator[None]:
    """Hold SIGINT for the duration of the block, then raise ``KeyboardInterrupt`` if one came.

    Only acts where Python raises ``KeyboardInterrupt`` at all: in the main thread, with
    Python's default SIGINT handler installed; elsewhere the block runs unchanged. Costs two
    ``signal.signal`` calls, so keep it around acquisitions, never per datapoint.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    held: list[Any] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    try:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})  # no EINTR in this thread
        try:
            yield
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    finally:
        signal.signal(signal.SIGINT, previous)
    if held:
        raise KeyboardInterrupt
