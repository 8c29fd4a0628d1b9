"""Message framing over ZMQ between the processes of one runner.

A message is a multipart ZMQ message ``[kind, pickle, *buffers]``: ``kind`` is one byte
(:data:`DATA`, :data:`GROUP`, :data:`ERROR`, ...), ``pickle`` is the object pickled with
protocol 5, and buffers of at least :data:`OOB_MIN_BYTES` (numpy arrays) travel as separate
frames, out of band, so they are neither copied into the pickle nor out of it: the receiver's
arrays view the received frames (writable, owned by the array). Smaller buffers stay in band,
where they cost less than an extra frame.

Pickle is safe here only because both ends are processes of one runner on one machine,
connected over an abstract-namespace IPC socket; nothing from the network is ever
unpickled (see :mod:`dataflow.codec` for that).
"""

from __future__ import annotations

import os
import pickle
import traceback
import uuid
from typing import Any

import zmq

from ..errors import WorkerError
from ._shm import RingReader, RingWriter

__all__ = [
    "BATCH",
    "DATA",
    "END",
    "ERROR",
    "GROUP",
    "OOB_MIN_BYTES",
    "READY",
    "decode",
    "encode",
    "error_payload",
    "new_endpoint",
    "recv",
    "recv_parts",
    "send",
    "worker_error",
]

DATA = b"D"  #: one datapoint (or one map result)
GROUP = b"G"  #: a list of datapoints sent together
ERROR = b"E"  #: an exception raised in the worker, see :func:`error_payload`
END = b"X"  #: the sender has finished (end of a finite stream)
READY = b"R"  #: a worker is connected and waits for tasks
BATCH = b"B"  #: a batch assembled in the worker

OOB_MIN_BYTES = 16 * 1024
_ZERO_COPY_MIN_BYTES = 64 * 1024  # below this, zmq copying a frame is cheaper than tracking it


def new_endpoint(tag: str) -> str:
    """A fresh IPC endpoint in Linux's abstract namespace: no socket file is ever created,
    so nothing is left behind even if the process is killed."""
    return f"ipc://@dataflow-{tag}-{os.getpid()}-{uuid.uuid4().hex[:12]}"


def encode(kind: bytes, obj: Any, ring: RingWriter | None = None) -> tuple[list[Any], int]:
    """The frames of one message and its payload size in bytes.

    Frames are ``[kind, pickle]``, or with out-of-band buffers
    ``[kind, pickle, descriptors, *buffer frames]``. With a ``ring``, large buffers are copied
    into shared memory and only their descriptors travel (``None`` marks one sent as a frame).
    """
    buffers: list[pickle.PickleBuffer] = []

    def keep_large(buf: pickle.PickleBuffer) -> bool:
        if buf.raw().nbytes < OOB_MIN_BYTES:
            return True  # in band
        buffers.append(buf)
        return False

    body = pickle.dumps(obj, protocol=5, buffer_callback=keep_large)
    if not buffers:
        return [kind, body], len(body)
    size = len(body) + sum(buf.raw().nbytes for buf in buffers)
    if ring is None:
        return [kind, body, b"", *buffers], size
    descriptors = [ring.write(buf.raw()) for buf in buffers]
    frames = [buf for buf, d in zip(buffers, descriptors) if d is None]
    return [kind, body, pickle.dumps(descriptors, protocol=5), *frames], size


def send(
    sock: zmq.Socket,
    kind: bytes,
    obj: Any,
    flags: int = 0,
    prefix: tuple[bytes, ...] = (),
    ring: RingWriter | None = None,
) -> int:
    """Send ``obj`` as one message of ``kind``, after routing frames ``prefix`` (a ROUTER's
    peer identity); returns the payload size in bytes, shared-memory buffers included.
    Raises ``zmq.Again`` with ``zmq.NOBLOCK`` when it would block."""
    frames, size = encode(kind, obj, ring)
    big = any(memoryview(f).nbytes >= _ZERO_COPY_MIN_BYTES for f in frames[3:])
    sock.send_multipart([*prefix, *frames], flags=flags, copy=not big)
    return size


def recv_parts(sock: zmq.Socket, flags: int = 0, header_parts: int = 3) -> list[Any]:
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


def decode(frames: list[Any], reader: RingReader | None = None) -> tuple[bytes, Any]:
    """``(kind, obj)`` from the parts of one message (``bytes`` or ``zmq.Frame``; routing
    parts already removed); ``reader`` resolves shared-memory descriptors."""
    kind = _bytes(frames[0])
    if len(frames) == 2:
        return kind, pickle.loads(_buffer(frames[1]))
    frame_buffers = [_buffer(f) for f in frames[3:]]
    described = _bytes(frames[2])
    if not described:
        return kind, pickle.loads(_buffer(frames[1]), buffers=frame_buffers)
    if reader is None:
        raise RuntimeError("a shared-memory message reached a consumer without rings")
    rest = iter(frame_buffers)
    buffers = [next(rest) if d is None else reader.buffer(d) for d in pickle.loads(described)]
    return kind, pickle.loads(_buffer(frames[1]), buffers=buffers)


def recv(sock: zmq.Socket, flags: int = 0) -> tuple[bytes, Any]:
    """Receive one message: ``(kind, obj)`` (raises ``zmq.Again`` with ``zmq.NOBLOCK``)."""
    return decode(recv_parts(sock, flags))


def error_payload(exc: BaseException, where: str, pickle_exception: bool = True) -> dict[str, Any]:
    """What a worker sends for an exception: type name, message, formatted traceback, and
    the exception itself pickled when possible (for chaining in the consumer)."""
    pickled: bytes | None = None
    if pickle_exception:
        try:
            pickled = pickle.dumps(exc, protocol=5)
            pickle.loads(pickled)
        except Exception:
            pickled = None
    return {
        "type_name": f"{type(exc).__module__}.{type(exc).__qualname__}",
        "message": str(exc),
        "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
        "where": where,
        "exception": pickled,
    }


def worker_error(stage: str, payload: dict[str, Any]) -> WorkerError:
    """The consumer-side error for an :func:`error_payload`, chained to the original
    exception when it could be pickled."""
    tb = payload["traceback"].rstrip()
    err = WorkerError(
        f"{stage}: {payload['where']} raised {payload['type_name']}: {payload['message']}\n\n"
        f"Worker traceback:\n{tb}",
        type_name=payload["type_name"],
        worker_traceback=payload["traceback"],
    )
    if payload.get("exception") is not None:
        try:
            err.__cause__ = pickle.loads(payload["exception"])
        except Exception:
            pass
    return err
