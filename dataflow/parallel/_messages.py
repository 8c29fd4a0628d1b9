"""The one owner of what the consumer and its workers say to each other: message kinds,
frames, error records.

A message is the ZMQ multipart ``[header, pickle, descriptors?, *buffers]`` (a ROUTER socket
puts the peer's identity in front). ``header`` is the kind (one byte, :data:`DATA`, ...) and
the sender's worker index (two bytes), so every receive says who sent what. ``pickle`` is the
object pickled with protocol 5; small C-contiguous numpy arrays are pickled in band by
:class:`_Pickler` as numpy itself would pickle them (their bytes, dtype and shape; the rebuilt
array is writable exactly when the sent one was), at about half numpy's own cost, which
dominates a group of small batches. Buffers of at least :data:`OOB_MIN_BYTES` (numpy arrays)
travel out of band, as separate frames or, with a shared-memory ring, as descriptors of the
ring (see :mod:`._shm`), so the receiver's arrays view them without a copy.

Pickle is safe here only because both ends are processes of one runner on one machine,
connected over an abstract-namespace IPC socket; nothing from the network is ever unpickled
(see :mod:`dataflow.codec` for that).

Errors travel as :class:`ErrorRecord`\\ s: the worker captures the exception (type, message,
formatted traceback, and the exception itself pickled when it round-trips), and the consumer
raises :func:`error_for`: **the user's own exception type**, with the worker's traceback
attached once, as its cause (:class:`RemoteTraceback`), and a note naming the stage and the
worker (Python 3.11+). What cannot be rebuilt is raised as
:class:`~dataflow._errors.WorkerError` with the same message.
"""

from __future__ import annotations

import io
import os
import pickle
import traceback
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np
import zmq

from .._errors import WorkerError
from ._shm import RingReader, RingWriter

__all__ = [
    "BATCH",
    "CONTROL",
    "DATA",
    "END",
    "ERROR",
    "GROUP",
    "OOB_MIN_BYTES",
    "READY",
    "STATE",
    "ErrorRecord",
    "RemoteTraceback",
    "capture_error",
    "decode",
    "error_for",
    "new_endpoint",
    "recv",
    "recv_parts",
    "send",
]

DATA = b"D"  #: one datapoint, or one task's results
GROUP = b"G"  #: a list of datapoints sent together
BATCH = b"B"  #: a batch assembled in the worker
ERROR = b"E"  #: an :class:`ErrorRecord`
END = b"X"  #: the sender has finished (end of a finite stream)
READY = b"R"  #: a worker is connected and waits for tasks
STATE = b"S"  #: a worker's answer to a CONTROL request: ``(token, state)``
CONTROL = b"C"  #: consumer to worker: ``(request, token)``, e.g. ``("snapshot", 3)``

OOB_MIN_BYTES = 16 * 1024
_ZERO_COPY_MIN_BYTES = 64 * 1024  # below this, zmq copying a frame is cheaper than tracking it


def new_endpoint(tag: str) -> str:
    """A fresh IPC endpoint in Linux's abstract namespace: no socket file is ever created,
    so nothing is left behind even if the process is killed."""
    return f"ipc://@dataflow-{tag}-{os.getpid()}-{uuid.uuid4().hex[:12]}"


def _small_array(buf: Any, dtype: np.dtype[Any], shape: tuple[int, ...]) -> np.ndarray[Any, Any]:
    """An array pickled by :class:`_Pickler`: what numpy's own protocol-5 rebuild gives (a
    C-ordered view of the unpickled buffer: writable when the sent array was), in one call
    instead of numpy's two."""
    arr: np.ndarray[Any, Any] = np.ndarray(shape, dtype, buf)
    return arr


class _Pickler(pickle.Pickler):
    """Protocol-5 pickler that reduces small C-contiguous plain numpy arrays itself, to the
    same in-band buffer, dtype and shape as numpy's ``__reduce_ex__(5)`` but without its
    per-array overhead (half the cost of pickling a batch of small arrays). Everything else,
    larger arrays (out of band) included, is pickled as ``pickle.dumps`` would."""

    def reducer_override(self, obj: Any) -> Any:
        if (
            type(obj) is np.ndarray
            and obj.nbytes < OOB_MIN_BYTES
            and obj.flags.c_contiguous
            and obj.dtype.itemsize
            and not obj.dtype.hasobject
        ):
            return _small_array, (pickle.PickleBuffer(obj), obj.dtype, obj.shape)  # type: ignore[arg-type]
        return NotImplemented


def _frames(kind: bytes, worker: int, obj: Any, ring: RingWriter | None) -> tuple[list[Any], int]:
    header = kind + worker.to_bytes(2, "big")
    buffers: list[pickle.PickleBuffer] = []

    def keep_large(buf: pickle.PickleBuffer) -> bool:
        if buf.raw().nbytes < OOB_MIN_BYTES:
            return True  # in band
        buffers.append(buf)
        return False

    out = io.BytesIO()
    _Pickler(out, protocol=5, buffer_callback=keep_large).dump(obj)
    body = out.getvalue()
    if not buffers:
        return [header, body], len(body)
    size = len(body) + sum(buf.raw().nbytes for buf in buffers)
    if ring is None:
        return [header, body, b"", *buffers], size
    descriptors = [ring.write(buf.raw()) for buf in buffers]
    frames = [buf for buf, d in zip(buffers, descriptors) if d is None]
    return [header, body, pickle.dumps(descriptors, protocol=5), *frames], size


def send(
    sock: zmq.Socket[Any],
    kind: bytes,
    obj: Any,
    *,
    worker: int = 0,
    flags: int = 0,
    prefix: tuple[bytes, ...] = (),
    ring: RingWriter | None = None,
) -> int:
    """Send ``obj`` as one message of ``kind`` from ``worker``, after routing frames
    ``prefix`` (a ROUTER's peer identity); returns the payload size in bytes, shared-memory
    buffers included. Raises ``zmq.Again`` with ``zmq.NOBLOCK`` when it would block."""
    frames, size = _frames(kind, worker, obj, ring)
    big = any(memoryview(f).nbytes >= _ZERO_COPY_MIN_BYTES for f in frames[3:])
    sock.send_multipart([*prefix, *frames], flags=flags, copy=not big)
    return size


def recv_parts(sock: zmq.Socket[Any], flags: int = 0, header_parts: int = 3) -> list[Any]:
    """One multipart message: the first ``header_parts`` parts as ``bytes``, the rest (large
    out-of-band buffers) as zero-copy ``zmq.Frame`` objects.

    Small parts are copied on purpose: pyzmq checks for signals when a ``Frame`` is freed,
    inside its destructor, where a ``KeyboardInterrupt`` is lost; receiving the parts of
    every message as frames lost about one Ctrl-C in ten.
    """
    parts: list[Any] = [sock.recv(flags)]
    while sock.getsockopt(zmq.RCVMORE):
        parts.append(sock.recv(copy=len(parts) < header_parts))
    return parts


def _bytes(part: Any) -> bytes:
    return part if isinstance(part, bytes) else part.bytes


def _buffer(part: Any) -> Any:
    return part if isinstance(part, bytes) else part.buffer


def decode(
    frames: list[Any], reader: RingReader | None = None, sizes: list[int] | None = None
) -> tuple[int, bytes, Any]:
    """``(worker, kind, obj)`` from the parts of one message (routing parts removed);
    ``reader`` resolves shared-memory descriptors. With ``sizes``, the message's payload
    size in bytes (shared-memory buffers included) is appended to it."""
    header = _bytes(frames[0])
    kind, worker = header[:1], int.from_bytes(header[1:3], "big")
    if len(frames) == 2:
        if sizes is not None:
            sizes.append(len(frames[1]))
        return worker, kind, pickle.loads(_buffer(frames[1]))
    frame_buffers = [_buffer(f) for f in frames[3:]]
    described = _bytes(frames[2])
    if not described:
        if sizes is not None:
            sizes.append(sum(len(f) for f in frames[1:]))
        return worker, kind, pickle.loads(_buffer(frames[1]), buffers=frame_buffers)
    if reader is None:
        raise RuntimeError("a shared-memory message reached a consumer without rings")
    rest = iter(frame_buffers)
    descriptors = pickle.loads(described)
    if sizes is not None:
        sizes.append(len(frames[1]) + sum(len(f) for f in frames[3:]) + sum(d[3] for d in descriptors if d))
    buffers = [next(rest) if d is None else reader.buffer(d) for d in descriptors]
    return worker, kind, pickle.loads(_buffer(frames[1]), buffers=buffers)


def recv(sock: zmq.Socket[Any], flags: int = 0) -> tuple[int, bytes, Any]:
    """Receive one message without shared memory: ``(worker, kind, obj)``."""
    return decode(recv_parts(sock, flags))


# -- errors ---------------------------------------------------------------------------------


class RemoteTraceback(Exception):
    """The traceback of an exception raised in a worker, attached as the ``__cause__`` of the
    exception re-raised in the consumer (its text is the worker's formatted traceback)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return self.text


@dataclass
class ErrorRecord:
    """An exception raised in a worker, in a form that crosses processes."""

    where: str  #: e.g. ``"map_func in worker 1 (pid 4242)"``
    type_name: str  #: the qualified name of the exception type
    message: str
    traceback: str  #: formatted in the worker
    pickled: bytes | None = None  #: the exception, when it survives a pickle round trip
    original: BaseException | None = None  #: the exception itself, within one process

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["original"] = None  # never pickled: another process gets ``pickled``
        return state


def capture_error(exc: BaseException, where: str, *, same_process: bool = False) -> ErrorRecord:
    """The record of ``exc`` raised at ``where`` (in a worker, before it is sent)."""
    pickled: bytes | None = None
    if not same_process and isinstance(exc, Exception):
        try:
            pickled = pickle.dumps(exc, protocol=5)
            pickle.loads(pickled)
        except Exception:
            pickled = None
    return ErrorRecord(
        where=where,
        type_name=f"{type(exc).__module__}.{type(exc).__qualname__}",
        message=str(exc),
        traceback="".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
        pickled=pickled,
        original=exc if same_process else None,
    )


_NOT_REBUILT = (StopIteration, StopAsyncIteration, GeneratorExit)


def error_for(stage: str, record: ErrorRecord) -> BaseException:
    """The exception the consumer raises for ``record``: the user's own type where possible
    (never a ``BaseException`` that is not an ``Exception`` — ``SystemExit`` in a worker must
    not exit the consumer — and never ``StopIteration``, which would end an epoch silently)."""
    headline = f"{stage}: {record.where} raised {record.type_name}: {record.message}"
    exc: BaseException | None = record.original
    if exc is None and record.pickled is not None:
        try:
            exc = pickle.loads(record.pickled)
        except Exception:
            exc = None
    if exc is not None and (not isinstance(exc, Exception) or isinstance(exc, _NOT_REBUILT)):
        exc = None
    if exc is None:
        err = WorkerError(headline, type_name=record.type_name, worker_traceback=record.traceback)
        err.__cause__ = RemoteTraceback(f'\n"""\n{record.traceback.rstrip()}\n"""')
        return err
    if record.original is None:  # rebuilt from another process: its traceback is the cause
        exc.__cause__ = RemoteTraceback(f'{stage}: {record.where}\n"""\n{record.traceback.rstrip()}\n"""')
    add_note = getattr(exc, "add_note", None)
    if add_note is not None:  # Python 3.11+
        add_note(f"{stage}: raised in {record.where}")
    return exc
