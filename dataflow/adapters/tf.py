"""TensorFlow 2 adapter: a DataFlow as a ``tf.data.Dataset``, TF queues, device staging.

``import dataflow.adapters.tf`` imports tensorflow (an optional extra: ``dataflow-ml[tf]``).
These are the modern counterparts of tensorpack's InputSources (see the migration table in
``docs/adapters.rst``).
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import Any

import numpy as np

from .._errors import WorkerError
from ..base import DataFlow, close_iterator
from ..ops._batch import epoch_stacked_by
from ..ops._stack import StackComponent
from ._require import require
from ._tf_groups import flat_signature, generator_dataset, grouped_dataset

tf = require("tensorflow", "tf", "dataflow.adapters.tf")

__all__ = [
    "BatchQueueInput",
    "DummyConstantInput",
    "QueueInput",
    "StagingIterator",
    "ZMQInput",
    "dataflow_to_dataset",
    "infer_signature",
    "stage_to_device",
]


def _reset_once(df: DataFlow[Any]) -> None:
    """``reset_state()`` once per process (tf.data may call the generator many times)."""
    if getattr(df, "_dataflow_tf_reset_pid", None) != os.getpid():
        df.reset_state()
        df._dataflow_tf_reset_pid = os.getpid()  # type: ignore[attr-defined]


def _spec(stage: str, key: Any, values: Sequence[Any]) -> Any:
    arrays = [np.asarray(v) for v in values]
    kinds = {a.dtype.kind for a in arrays}
    if kinds <= {"U", "S", "O"} and all(isinstance(v, (str, bytes)) for v in values):
        return tf.TensorSpec(shape=(), dtype=tf.string)
    if len({a.ndim for a in arrays}) != 1 or "O" in kinds:
        raise TypeError(
            f"{stage}: component {key!r} has no fixed rank or is not numeric "
            f"(shapes {sorted({a.shape for a in arrays})}); pass output_signature explicitly"
        )
    shape = [d if len({a.shape[i] for a in arrays}) == 1 else None for i, d in enumerate(arrays[0].shape)]
    dtype = np.result_type(*arrays)
    if dtype.kind in "US":
        return tf.TensorSpec(shape=shape, dtype=tf.string)
    return tf.TensorSpec(shape=shape, dtype=tf.as_dtype(dtype))


def infer_signature(df: DataFlow[Any], num_samples: int = 8) -> Any:
    """The ``output_signature`` of ``df``, from its first ``num_samples`` datapoints.

    Dimensions that differ among them become ``None``; dtypes follow numpy (Python ints give
    int64, floats float64; str/bytes give ``tf.string``). List datapoints give a tuple of
    specs, dicts a dict. ``df`` is reset if it was not yet in this process, and one epoch is
    started and abandoned: for a one-shot source, pass ``output_signature`` yourself.
    """
    _reset_once(df)
    it = iter(df)
    try:
        samples = list(islice(it, num_samples))
    finally:
        close_iterator(it)
    if not samples:
        raise ValueError(f"infer_signature: {type(df).__name__} produced no datapoint")
    first = samples[0]
    if isinstance(first, dict):
        return {k: _spec("infer_signature", k, [s[k] for s in samples]) for k in first}
    if isinstance(first, (list, tuple)):
        return tuple(_spec("infer_signature", i, [s[i] for s in samples]) for i in range(len(first)))
    raise TypeError(f"infer_signature: a datapoint must be a list/tuple or dict, got {type(first).__name__}")


def dataflow_to_dataset(df: DataFlow[Any], output_signature: Any = None) -> Any:
    """``df`` as a ``tf.data.Dataset`` (through ``from_generator``).

    One iteration of the dataset is one epoch of ``df``: a finite flow gives a finite
    dataset (use ``.repeat()`` on either side for more), an endless flow an endless one.
    ``df`` is reset once in this process. List datapoints become tuples of tensors, dicts
    dicts. Without ``output_signature`` it is inferred (:func:`infer_signature`).

    With a flat tuple or dict of ``tf.TensorSpec`` (always the case when inferred),
    consecutive datapoints cross into tf.data in groups (up to 16, or 16 MiB, or what the
    flow gives in 20 ms) and are split again there: the elements, their order, dtypes and
    shapes are the same, but the flow is read up to a group ahead. An exception in the flow
    ends the iteration, after every datapoint read before it, with a ``tf.errors.OpError``
    naming the original type and message. When ``df`` is a :class:`~dataflow.BatchData`
    (``.batch(n)``), its large components are stacked straight into the memory handed to
    TensorFlow: the batch's bytes are written once.

    Each iteration sets glibc's malloc thresholds back to where its adaptive rule takes them
    (``from_generator``'s kernel fixes them at 128 KiB for the whole process, which makes
    every larger allocation fault its pages anew; see ``dataflow.adapters._malloc``).
    ``DATAFLOW_MALLOPT=0`` in the environment leaves them as TensorFlow set them.
    """
    signature = infer_signature(df) if output_signature is None else output_signature

    def epoch(stack: StackComponent | None = None) -> Iterator[Any]:
        _reset_once(df)
        return iter(df) if stack is None else epoch_stacked_by(df, stack)

    if flat_signature(signature) is not None:
        return grouped_dataset(epoch, signature)

    def generator() -> Iterator[Any]:
        it = epoch()
        try:
            for dp in it:
                yield tuple(dp) if isinstance(dp, list) else dp
        finally:
            close_iterator(it)

    return generator_dataset(generator, signature)


def ZMQInput(addr: str, output_signature: Any, **kwargs: Any) -> Any:  # noqa: N802 (tensorpack name)
    """A ``tf.data.Dataset`` of datapoints received on ``addr`` from
    :func:`~dataflow.send_dataflow_zmq` (``kwargs`` go to :class:`~dataflow.RemoteDataZMQ`).
    The signature must be given: peeking at a network stream would consume it."""
    from ..parallel._remote import RemoteDataZMQ

    def generator() -> Iterator[Any]:
        receiver = RemoteDataZMQ(addr, **kwargs)  # one per dataset iteration, closed after it
        receiver.reset_state()
        try:
            for dp in receiver:
                yield tuple(dp) if isinstance(dp, list) else dp
        finally:
            receiver.close()

    return generator_dataset(generator, output_signature)


def DummyConstantInput(shapes: Sequence[Sequence[int]], dtypes: Any = "float32") -> Any:  # noqa: N802
    """An endless dataset of constant zeros of the given shapes: to measure a model without
    any input cost (tensorpack's ``DummyConstantInput``)."""
    dts = list(dtypes) if isinstance(dtypes, (list, tuple)) else [dtypes] * len(shapes)
    if len(dts) != len(shapes):
        raise ValueError(f"DummyConstantInput: {len(shapes)} shapes but {len(dts)} dtypes")
    tf_dtypes = [d if isinstance(d, tf.dtypes.DType) else tf.as_dtype(np.dtype(d)) for d in dts]
    tensors = tuple(tf.zeros(s, dtype=d) for s, d in zip(shapes, tf_dtypes))
    return tf.data.Dataset.from_tensors(tensors).repeat()


def stage_to_device(dataset: Any, device: str = "/gpu:0", buffer_size: int = 1) -> Any:
    """``dataset`` with ``buffer_size`` elements prefetched onto ``device`` (``prefetch_to_device``;
    must be the last transformation). Works on ``"/cpu:0"`` too."""
    return dataset.apply(tf.data.experimental.prefetch_to_device(device, buffer_size))


class StagingIterator:
    """Iterate a plain iterable of datapoints with each one already copied onto ``device``,
    ``depth`` ahead (tensorpack's ``StagingInput`` for code that does not use tf.data)."""

    def __init__(self, iterable: Iterable[Any], device: str = "/gpu:0", depth: int = 2) -> None:
        if not isinstance(depth, int) or depth < 1:
            raise ValueError(f"StagingIterator: depth must be an int >= 1, got {depth!r}")
        self.iterable, self.device, self.depth = iterable, device, depth

    def _stage(self, dp: Any) -> Any:
        with tf.device(self.device):
            return tf.nest.map_structure(lambda x: tf.identity(tf.convert_to_tensor(x)), dp)

    def __iter__(self) -> Iterator[Any]:
        pending: deque[Any] = deque()
        for dp in self.iterable:
            pending.append(self._stage(dp))
            if len(pending) > self.depth:
                yield pending.popleft()
        while pending:
            yield pending.popleft()


class QueueInput:
    """Feed a ``tf.queue.FIFOQueue`` of ``capacity`` from ``df`` in a background thread.

    The thread resets ``df`` and iterates it forever (epoch after epoch, as tensorpack's
    ``QueueInput``), enqueueing each datapoint; :meth:`dequeue` gives a tuple of tensors.
    An exception in the flow closes the queue and is raised by the next :meth:`dequeue` as
    :class:`~dataflow._errors.WorkerError`. :meth:`close` cancels pending enqueues and joins.
    Use it as a context manager.
    """

    def __init__(self, df: DataFlow[Any], capacity: int = 50, output_signature: Any = None) -> None:
        if not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"{type(self).__name__}: capacity must be an int >= 1, got {capacity!r}")
        signature = infer_signature(df) if output_signature is None else output_signature
        self._specs = tuple(signature.values()) if isinstance(signature, dict) else tuple(signature)
        self._keys = list(signature) if isinstance(signature, dict) else None
        self.df = df
        self.queue = tf.queue.FIFOQueue(capacity, [s.dtype for s in self._specs], shapes=self._queue_shapes())
        self._error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._feed, name="dataflow-tf-queue", daemon=True)
        self._thread.start()

    def _queue_shapes(self) -> Any:
        if any(not s.shape.is_fully_defined() for s in self._specs):
            return None
        return [s.shape for s in self._specs]

    def _feed(self) -> None:
        try:
            _reset_once(self.df)
            while not self._stop.is_set():
                produced = False
                for dp in self.df:
                    produced = True
                    values = [dp[k] for k in self._keys] if self._keys else list(dp)
                    self.queue.enqueue(
                        [tf.convert_to_tensor(v, s.dtype) for v, s in zip(values, self._specs)]
                    )
                    if self._stop.is_set():
                        return
                if not produced:
                    raise ValueError(
                        f"{type(self).__name__}: the flow {type(self.df).__name__} produced an empty epoch"
                    )
        except tf.errors.CancelledError:
            return  # closed while enqueueing
        except BaseException as e:
            if not self._stop.is_set():
                self._error = e
                self.queue.close(cancel_pending_enqueues=True)

    def _dequeue_op(self) -> Any:
        return self.queue.dequeue()

    def dequeue(self) -> Any:
        """The next datapoint as tensors (a tuple, or a dict for dict datapoints)."""
        try:
            tensors = self._dequeue_op()
        except (tf.errors.OutOfRangeError, tf.errors.CancelledError):
            if self._error is None:
                raise
            raise WorkerError(
                f"{type(self).__name__}: the flow raised {type(self._error).__name__}: {self._error}",
                type_name=type(self._error).__qualname__,
            ) from self._error
        tensors = list(tensors) if isinstance(tensors, (list, tuple)) else [tensors]
        return dict(zip(self._keys, tensors)) if self._keys else tuple(tensors)

    def size(self) -> int:
        return int(self.queue.size())

    def close(self) -> None:
        """Cancel pending enqueues, stop and join the feeding thread. Idempotent."""
        self._stop.set()
        self.queue.close(cancel_pending_enqueues=True)
        self._thread.join(timeout=5)

    def __enter__(self) -> QueueInput:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class BatchQueueInput(QueueInput):
    """:class:`QueueInput` whose :meth:`dequeue` takes ``batch_size`` datapoints at once
    (``dequeue_many``); every component must have a fully defined shape."""

    def __init__(
        self, df: DataFlow[Any], batch_size: int, capacity: int = 50, output_signature: Any = None
    ) -> None:
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"BatchQueueInput: batch_size must be an int >= 1, got {batch_size!r}")
        self.batch_size = batch_size
        super().__init__(df, capacity, output_signature)
        if self._queue_shapes() is None:
            self.close()
            raise ValueError(
                "BatchQueueInput: dequeue_many needs fully defined shapes; pass output_signature"
            )

    def _dequeue_op(self) -> Any:
        return self.queue.dequeue_many(self.batch_size)
