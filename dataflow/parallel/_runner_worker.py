"""The worker side of the process runners: a worker resets its copy of the flow, iterates
it forever and sends its datapoints to the consumer, small ones in groups (see
:mod:`dataflow.parallel._runners`)."""

from __future__ import annotations

import pickle
import threading
from collections.abc import Mapping
from time import perf_counter
from typing import Any

from ..base import DataFlow
from . import _messages as msg
from ._options import WorkerOptions
from ._worker_link import WorkerLink, worker_link

__all__ = ["runner_worker"]

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
                now = perf_counter()
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
                last_flush = perf_counter()
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
