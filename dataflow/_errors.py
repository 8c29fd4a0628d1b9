"""The exception tree of ``dataflow``.

::

    Exception
    └── DataFlowError                      base of everything raised by this package
        ├── DataFlowNotReset (RuntimeError) iterated before ``reset_state()``
        ├── DataFlowReentrantError (RuntimeError)
        │                                   a non-reentrant flow iterated twice at once
        ├── LengthUnknownError (TypeError, NotImplementedError)
        │                                   ``len()`` of a flow whose size is unknown
        ├── ComponentError (ValueError)     a datapoint has the wrong structure for a stage
        ├── CodecError (ValueError)         data the safe codec cannot encode, or bytes it
        │                                   cannot decode
        ├── FormatError (ValueError)        a stored file that is damaged, truncated, of
        │                                   another format or of a newer format version
        ├── StateError (ValueError)         a saved state that does not fit this pipeline,
        │                                   is corrupted, or was written by a newer version
        ├── StateUnsupportedError (TypeError)
        │                                   a flow that cannot save or restore its position
        └── WorkerError                     an exception raised inside a worker
            └── WorkerDied                  a worker vanished (signal, ``os._exit``, crash)

    BaseException
    └── DataFlowTerminated                  a flow can produce no more data (tensorpack name)

Plain ``ValueError``/``TypeError`` are raised for bad *arguments* at construction time
(``batch_size=0``), always naming the stage and the value.

``LengthUnknownError`` derives from ``TypeError`` so that ``list(df)`` and
``operator.length_hint`` treat a flow without a length like any object without
one, and from ``NotImplementedError`` so that tensorpack-era code that catches
that keeps working.
"""

from __future__ import annotations

__all__ = [
    "CodecError",
    "ComponentError",
    "DataFlowError",
    "DataFlowNotReset",
    "DataFlowReentrantError",
    "DataFlowTerminated",
    "FormatError",
    "LengthUnknownError",
    "StateError",
    "StateUnsupportedError",
    "WorkerDied",
    "WorkerError",
]


class DataFlowError(Exception):
    """Base class of the errors raised by ``dataflow``."""


class DataFlowNotReset(DataFlowError, RuntimeError):
    """A flow that needs ``reset_state()`` was iterated before it was called."""


class DataFlowReentrantError(DataFlowError, RuntimeError):
    """A non-reentrant flow was iterated by a second iterator while one was active."""


class LengthUnknownError(DataFlowError, TypeError, NotImplementedError):
    """``len()`` was asked of a flow that cannot know its size (a generator, an infinite flow)."""


class ComponentError(DataFlowError, ValueError):
    """A datapoint does not have the structure a stage needs (wrong type, missing index or key)."""


class CodecError(DataFlowError, ValueError):
    """Data that the safe codec cannot encode, or bytes it cannot decode."""


class FormatError(DataFlowError, ValueError):
    """A stored file that cannot be read as complete and correct: corrupt or truncated data,
    a CRC mismatch, a file of another format, or one written by a newer format version.
    The message names the file and, where it applies, the record, key or byte offset."""


class StateError(DataFlowError, ValueError):
    """A state given to ``load_state_dict`` does not fit the pipeline (another shape, another
    source length), is corrupted, or was written by a newer version of ``dataflow``. The
    message names the first stage that differs and what it expected."""


class StateUnsupportedError(DataFlowError, TypeError):
    """A flow cannot save or restore its position: a generator or queue source (unless
    fast-forward was asked for), a remote stream, or a user subclass that did not opt in.
    The message names the stage and what to do."""


class WorkerError(DataFlowError):
    """An exception raised inside a worker thread or process, re-raised in the consumer.

    Attributes:
        type_name: the qualified name of the original exception type.
        worker_traceback: the traceback formatted inside the worker.
    """

    def __init__(self, message: str, type_name: str = "", worker_traceback: str = "") -> None:
        super().__init__(message)
        self.type_name = type_name
        self.worker_traceback = worker_traceback


class WorkerDied(WorkerError):
    """A worker process vanished without reporting an error (signal, ``os._exit``, crash).

    Attributes:
        pid: the process id of the worker.
        exitcode: its exit code (negative: killed by that signal number), or ``None``.
    """

    def __init__(self, message: str, pid: int | None = None, exitcode: int | None = None) -> None:
        super().__init__(message)
        self.pid = pid
        self.exitcode = exitcode


class DataFlowTerminated(BaseException):
    """A flow can produce no more data (kept from tensorpack; derives from BaseException there too).

    Raised by flows fed from outside (e.g. a queue) when their producer announces the end.
    """
