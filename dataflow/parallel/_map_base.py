"""Bookkeeping shared by the parallel maps, independent of threads or processes.

The consumer (the thread iterating the map) reads the upstream itself and submits *tasks*
(a chunk of datapoints, tagged ``(epoch, seq)``) to workers, keeping at most
``buffer_size // chunk`` tasks in flight; workers send back results tagged the same way.

- **strict** (one pass per ``__iter__``): every upstream datapoint of the pass is mapped
  exactly once, results of an abandoned earlier pass are recognised by their epoch tag and
  discarded, and the iteration ends when the pass is done.
- **non-strict** (tensorpack's default): the upstream is repeated forever in the background
  and each ``__iter__`` yields ``len(ds)`` results; results in flight carry over to the next
  epoch, nothing is lost or duplicated.
- **ordered**: results are yielded in submission order (a reorder buffer holds early ones).

Subclasses provide the transport: ``_start``, ``_submit``, ``_receive``, ``_stop``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from itertools import islice
from typing import Any

from .._checks import check_int, check_timeout
from ..base import DataFlow, ProxyDataFlow, ReentrancyGuard
from ..errors import DataFlowNotReset
from . import _transport as tr

__all__ = ["ParallelMapBase"]

TaskId = tuple[int, int]


class ParallelMapBase(ProxyDataFlow):
    """Common logic of the parallel maps; see the module docstring for the semantics."""

    def __init__(
        self,
        ds: DataFlow,
        map_func: Callable[[Any], Any],
        buffer_size: int,
        strict: bool,
        ordered: bool,
        timeout: float | None,
        chunk: int = 1,
    ) -> None:
        super().__init__(ds)
        stage = type(self).__name__
        if not callable(map_func):
            raise TypeError(
                f"{stage}: map_func must be callable, got {type(map_func).__name__} ({map_func!r})"
            )
        self.map_func = map_func
        self.buffer_size = check_int(stage, "buffer_size", buffer_size)
        self.strict = bool(strict)
        self.ordered = bool(ordered)
        self.timeout = check_timeout(stage, timeout)
        self._chunk = chunk
        self._max_inflight = max(1, self.buffer_size // chunk)
        self._guard = ReentrancyGuard(stage)
        self._started = False
        self._interrupted = False
        self._epoch = 0
        self._inflight = 0
        self._clear_epoch_state()
        self._endless: Iterator[Any] | None = None

    # -- transport hooks ------------------------------------------------------------------
    def _start(self) -> None:
        raise NotImplementedError

    def _submit(self, task_id: TaskId, chunk: list[Any]) -> None:
        raise NotImplementedError

    def _receive(self) -> tuple[TaskId, bytes, Any]:
        """The next ``(task_id, kind, payload)``; raises on timeout or dead workers."""
        raise NotImplementedError

    def _stop(self) -> None:
        raise NotImplementedError

    def _worker_error(self, payload: dict[str, Any]) -> BaseException:
        raise NotImplementedError

    # -- results --------------------------------------------------------------------------
    def _outputs(self, kind: bytes, payload: Any) -> None:
        """Turn one task's result into outputs on ``self._ready`` (default: a list of results)."""
        self._ready.extend(payload)

    def _finish_pass(self) -> None:
        """Called when a strict pass has received every result (batching flushes here)."""

    # -- lifecycle ------------------------------------------------------------------------
    def reset_state(self) -> None:
        """Reset the upstream (it is read in this process) and start the workers."""
        if self._started:
            self._stop()
        self.ds.reset_state()
        self._inflight = 0
        self._endless = None
        self._clear_epoch_state()
        self._start()
        self._started = True

    def close(self) -> None:
        """Stop the workers and close the upstream. Idempotent."""
        if self._started:
            self._started = False
            self._stop()
        self.ds.close()

    def __len__(self) -> int:
        return len(self.ds)

    def _clear_epoch_state(self) -> None:
        self._seq = 0
        self._want = 0
        self._pending: dict[int, tuple[bytes, Any]] = {}
        self._ready: deque[Any] = deque()

    def __iter__(self) -> Iterator[Any]:
        if not self._started:
            raise DataFlowNotReset(
                f"{type(self).__name__} was iterated before reset_state() (or after close()); "
                f"call reset_state() once in the process that iterates"
            )
        with self._guard:
            if self._interrupted:  # a message may have been cut in half: start clean
                self.reset_workers()
            try:
                if self.strict:
                    yield from self._strict_pass()
                else:
                    yield from self._endless_epoch()
            except KeyboardInterrupt:
                self._interrupted = True
                raise

    def reset_workers(self) -> None:
        """Restart the workers without resetting the upstream (after an interrupt)."""
        self._stop()
        self._inflight = 0
        self._endless = None
        self._clear_epoch_state()
        self._start()
        self._interrupted = False

    def _fill(self, source: Iterator[Any], epoch: int) -> bool:
        """Submit tasks while there is room; False once ``source`` is exhausted. Results held in
        the reorder buffer count against the room, so ``buffer_size`` bounds memory."""
        while self._inflight + len(self._pending) < self._max_inflight:
            chunk = list(islice(source, self._chunk))
            if not chunk:
                return False
            self._submit((epoch, self._seq), chunk)
            self._seq += 1
            self._inflight += 1
        return True

    def _take_result(self, epoch: int) -> bool:
        """Receive one result into ``self._ready``; False if it was stale (older epoch)."""
        (ep, seq), kind, payload = self._receive()
        self._inflight -= 1
        if kind == tr.ERROR:
            raise self._worker_error(payload)
        if ep != epoch:
            return False
        if not self.ordered:
            self._outputs(kind, payload)
            return True
        self._pending[seq] = (kind, payload)
        while self._want in self._pending:
            self._outputs(*self._pending.pop(self._want))
            self._want += 1
        return True

    def _strict_pass(self) -> Iterator[Any]:
        self._epoch += 1
        epoch = self._epoch
        self._clear_epoch_state()
        source = iter(self.ds)
        more, received = True, 0
        ready = self._ready
        while True:
            if more:
                more = self._fill(source, epoch)
            if not more and received == self._seq:
                break
            if self._take_result(epoch):
                received += 1
            while ready:
                yield ready.popleft()
        self._finish_pass()
        while ready:
            yield ready.popleft()

    def _forever(self) -> Iterator[Any]:
        while True:
            produced = False
            for dp in self.ds:
                produced = True
                yield dp
            if not produced:
                raise ValueError(
                    f"{type(self).__name__}: the upstream {type(self.ds).__name__} produced an empty "
                    f"epoch; with strict=False it is repeated forever, which would hang"
                )

    def _endless_epoch(self) -> Iterator[Any]:
        try:
            size: int | None = len(self)
        except (TypeError, NotImplementedError):
            size = None
        if self._endless is None:
            self._endless = self._forever()
        produced, ready = 0, self._ready
        while size is None or produced < size:
            if ready:
                yield ready.popleft()
                produced += 1
                continue
            self._fill(self._endless, self._epoch)
            self._take_result(self._epoch)
