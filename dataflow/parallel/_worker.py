"""What runs in a worker process of a :class:`~dataflow.parallel._pool.ProcessPool`.

Every worker starts with :func:`worker_link`: it maps (and unlinks) its shared-memory ring,
dies with its parent, connects its DEALER socket named ``w<index>`` and says READY; the
returned :class:`WorkerLink` is its side of the conversation. Then it runs one of:

- :func:`map_worker` (process maps): serve tasks forever, mapping each chunk with
  :func:`~dataflow.parallel._map_base.apply_map`, batching full chunks in the ring for a
  map-and-batch;
- :func:`runner_worker` (process runners): reset its copy of the flow, iterate it forever
  and send its datapoints, small ones in groups, answering snapshot requests at message
  boundaries.

Neither raises: every exception goes back to the consumer as an ERROR message.
"""

from __future__ import annotations

import os
import pickle
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import zmq

from .. import _seeding as seeding
from ..base import DataFlow
from ..ops._stack import collate
from . import _messages as msg
from . import _slot_batch
from ._map_base import apply_map
from ._pool import Pickled, WorkerOptions, bootstrap_worker, identity
from ._shm import RingWriter

__all__ = ["WorkerLink", "map_worker", "runner_worker", "worker_link"]

class WorkerLink:
    """A worker's side: its index, its socket to the consumer and its shared-memory ring."""

    def __init__(self, index: int, sock: zmq.Socket[Any], ring: RingWriter | None) -> None:
        self.index, self.sock, self.ring = index, sock, ring
        self.pid = os.getpid()

    def send(self, kind: bytes, obj: Any, flags: int = 0) -> int:
        """Send to the consumer (large buffers through the ring); returns the payload size."""
        return msg.send(self.sock, kind, obj, worker=self.index, flags=flags, ring=self.ring)

    def send_error(self, exc: BaseException, where: str) -> None:
        msg.send(self.sock, msg.ERROR, msg.capture_error(exc, where), worker=self.index)

    def rebuild(self, obj: Any) -> Any:
        """``obj``, unpickled here if it came pickled (spawn/forkserver). If that fails, the
        consumer gets the error (the user's exception type, naming the object) and this
        worker idles until it is stopped."""
        if not isinstance(obj, Pickled):
            return obj
        try:
            return pickle.loads(obj.data)
        except BaseException as e:
            self.send_error(e, f"rebuilding the {obj.name} in worker {self.index} (pid {self.pid})")
            threading.Event().wait()  # exiting could drop the message; the consumer stops us
            raise

    def poll_control(self) -> Any | None:
        """A pending control request, without waiting (``None`` if there is none)."""
        if not int(self.sock.getsockopt(zmq.EVENTS)) & zmq.POLLIN:
            return None
        return msg.recv(self.sock)[2]


def worker_link(
    parent: tuple[int, bool],
    endpoint: str,
    ring_path: str | None,
    index: int,
    options: WorkerOptions,
    seed_key: tuple[int, ...],
    seed: int | None,
) -> WorkerLink:
    """What every worker does first: map (and unlink) its ring, die with its parent, connect,
    seed its RNGs as worker ``seed_key`` of ``seed`` (resolved in the parent, see
    :meth:`WorkerOptions.worker_seed`), say READY."""
    ring = RingWriter(ring_path, index) if ring_path else None  # first: it unlinks the file
    bootstrap_worker(parent)
    sock = zmq.Context().socket(zmq.DEALER)  # a fresh context, never the parent's
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.SNDHWM, options.hwm)
    sock.setsockopt(zmq.IDENTITY, identity(index))
    sock.connect(endpoint)
    seeding.enter_worker(seed_key, seed)
    link = WorkerLink(index, sock, ring)
    link.send(msg.READY, link.pid)
    return link


def map_worker(
    parent: tuple[int, bool],
    endpoint: str,
    ring_path: str | None,
    index: int,
    map_func: Callable[..., Any],
    options: WorkerOptions,
    seed: int | None,
    batch_size: int,
) -> None:
    """Serve tasks forever: map each chunk, batch full chunks when ``batch_size`` is set, and
    send ``(task_id, result, busy, t0, moved)``: the map's seconds, its start (for traces) and
    the CPU seconds per datapoint that receiving the previous task and sending its result took
    (CPU: a worker preempted while it sends is not charged for it). Never raises: every
    exception, a task that cannot be decoded included, goes back as an ERROR result."""
    link = worker_link(parent, endpoint, ring_path, index, options, (index,), seed)
    map_func = link.rebuild(map_func)
    where = f"map_func in worker {index} (pid {link.pid})"
    stage = options.stage
    clock, cpu = time.perf_counter, time.process_time  # process: libzmq's I/O thread counts
    moved = -1.0  # CPU seconds per datapoint spent receiving the last task and sending its result
    while True:
        task_id = None
        try:
            c0 = cpu()  # waiting for a task costs no CPU
            _, _, (task_id, chunk, rng_key) = msg.recv(link.sock)
            c1, t0 = cpu(), clock()
            out = apply_map(map_func, chunk, rng_key)
            busy = clock() - t0  # the consumer's chunk tuning sizes later tasks from it (t0: traces)
            c2 = cpu()
            if batch_size and len(out) == batch_size:
                _send_batch(link, stage, task_id, out, (busy, t0, moved))
            else:
                link.send(msg.DATA, (task_id, out, busy, t0, moved))
            moved = (c1 - c0 + cpu() - c2) / len(chunk)  # num_proc="auto" weighs the map against it
        except BaseException as e:
            link.send(msg.ERROR, (task_id, msg.capture_error(e, where)))


def _send_batch(link: WorkerLink, stage: str, task_id: Any, out: list[Any], times: tuple[Any, ...]) -> None:
    """Collate ``out`` (large components straight into ``link``'s ring) and send
    ``(task_id, batch, *times)`` as one BATCH message (see :func:`map_worker`)."""
    ring = link.ring
    if ring is None:
        link.send(msg.BATCH, (task_id, collate(stage, out), *times))
        return
    try:
        # looked up on the module: benchmarks/mp_large_batch.py swaps it to measure what it saves
        link.send(msg.BATCH, (task_id, collate(stage, out, stack=_slot_batch.ring_stacker(ring)), *times))
    finally:
        ring.release_reserved()  # what was not sent (an error, or no room to send it in)


_GROUP_MAX = 256
_GROUP_UNTIL_BYTES = 64 * 1024  # per datapoint
_GROUP_WINDOW_S = 0.001  # a datapoint waits at most this long for others to share its message


def runner_worker(
    parent: tuple[int, bool],
    endpoint: str,
    ring_path: str | None,
    ds: DataFlow[Any],
    index: int,
    options: WorkerOptions,
    seed: int | None,
    state: Mapping[str, Any] | None,
) -> None:
    """A worker's whole life: reset its copy of ``ds`` (at ``state`` if given) and send it
    forever, answering control requests at message boundaries. Never raises: an exception is
    sent to the consumer, then the worker idles until it is stopped."""
    link = worker_link(parent, endpoint, ring_path, index, options, (index,), seed)
    ds = link.rebuild(ds)
    pending: list[Any] = []
    where = f"the flow {type(ds).__name__} in worker {index} (pid {link.pid})"
    try:
        ds.reset_state()
        if state is not None:
            ds.load_state_dict(state)
        produced = state is not None  # a resumed epoch may have nothing left
        group_max, last_flush = _GROUP_MAX, 0.0
        while True:
            for dp in ds:
                produced = True
                pending.append(dp)
                now = time.perf_counter()
                if len(pending) >= group_max or now - last_flush >= _GROUP_WINDOW_S:
                    # grouping only pays while messages are small (their fixed cost dominates)
                    big = _flush(link, pending) >= _GROUP_UNTIL_BYTES * len(pending)
                    group_max = 1 if big else _GROUP_MAX
                    pending.clear()
                    last_flush = now
                    _answer_control(link, ds)
            if not produced:
                raise ValueError(f"the flow {type(ds).__name__} produced an empty epoch")
            if pending:  # the end of an epoch may be followed by a slow start of the next
                _flush(link, pending)
                pending.clear()
                last_flush = time.perf_counter()
            _answer_control(link, ds)
            produced = False
    except BaseException as e:
        if pending and not isinstance(e, _UnsendableDatapoint):
            try:  # what the flow made before failing still reaches the consumer, in order
                _flush(link, pending)
            except Exception:
                pass
        link.send_error(e, where)
        threading.Event().wait()  # exiting could drop the message; the consumer stops us


class _UnsendableDatapoint(TypeError):
    """A datapoint of a process runner that cannot be pickled to the consumer."""


def _flush(link: WorkerLink, pending: list[Any]) -> int:
    """Send the pending datapoints as one message; returns its size in bytes. A datapoint
    that cannot be pickled raises a ``TypeError`` naming its type."""
    try:
        if len(pending) == 1:
            return link.send(msg.DATA, pending[0])
        return link.send(msg.GROUP, pending)
    except (pickle.PicklingError, TypeError, AttributeError) as e:
        bad = next((dp for dp in pending if not _picklable(dp)), None)
        raise _UnsendableDatapoint(
            f"the flow yielded a datapoint that cannot be sent to the consumer process: "
            f"{type(bad).__name__ if bad is not None else 'an object'} ({e}). Datapoints of a "
            f"process runner must be picklable (numbers, arrays, str, lists/dicts of those)"
        ) from e


def _picklable(obj: Any) -> bool:
    try:
        pickle.dumps(obj, protocol=5)
    except Exception:
        return False
    return True


def _answer_control(link: WorkerLink, ds: DataFlow[Any]) -> None:
    """Answer a pending snapshot request with this flow's state (or the reason it has none)."""
    request = link.poll_control()
    while request is not None:
        what, token = request
        if what == "snapshot":
            try:
                answer: Any = ds.state_dict()
            except Exception as e:
                answer = msg.capture_error(e, f"{type(ds).__name__}.state_dict() in worker {link.index}")
            link.send(msg.STATE, (token, answer))
        request = link.poll_control()
