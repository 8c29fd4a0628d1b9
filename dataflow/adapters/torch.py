"""PyTorch adapter: a DataFlow as an ``IterableDataset``, and batches staged onto a device.

``import dataflow.adapters.torch`` imports torch (an optional extra: ``dataflow-ml[torch]``).

- :func:`to_torch` wraps a flow in an ``IterableDataset`` for ``DataLoader`` or a plain loop;
  numpy arrays become tensors that share their memory (``torch.from_numpy``: no copy). It has
  ``state_dict``/``load_state_dict``, so torchdata's ``StatefulDataLoader`` checkpoints it
  (one state per worker), and so does a plain loop with ``num_workers=0``;
  :func:`reshard_loader` turns the loader states of all ranks into one for another number
  of ranks (and workers).
- :class:`DevicePrefetcher` copies batches to a device ahead of use: pinned host memory,
  ``non_blocking`` copies on a side CUDA stream, ``record_stream`` so the caching allocator
  does not reuse memory too early, and the consumer's stream waits on an event (not the
  host). On a CPU device it only converts, so the same code runs without a GPU.
"""

from __future__ import annotations

import os
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import _seeding as seeding
from .._state import SaveOptions, save_pipeline
from ..base import DataFlow
from ..ops._shard import ShardData
from ._loader_epochs import LoaderEpochs
from ._loader_reshard import reshard_loader
from ._require import require

torch = require("torch", "torch", "dataflow.adapters.torch")
if TYPE_CHECKING:
    from torch.utils.data import IterableDataset
else:
    IterableDataset = torch.utils.data.IterableDataset

__all__ = ["DataFlowDataset", "DevicePrefetcher", "reshard_loader", "to_tensors", "to_torch"]


def to_tensors(obj: Any) -> Any:
    """Numpy arrays (and numpy scalars) in ``obj`` as tensors, recursively through lists,
    tuples and dicts; arrays share memory with their tensors. Other values are unchanged."""
    return _map_leaves(obj, _to_tensor)


def _to_tensor(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in "iufcb":
            return obj
        if not obj.flags.writeable or obj.dtype.byteorder == ">" or any(st < 0 for st in obj.strides):
            # torch refuses read-only, byte-swapped and negatively strided arrays: copy them
            obj = np.array(obj, dtype=obj.dtype.newbyteorder("="), order="C", copy=True)
        return torch.from_numpy(obj)
    if isinstance(obj, np.generic) and obj.dtype.kind in "iufcb":
        return torch.as_tensor(obj)
    return obj


def _map_leaves(obj: Any, fn: Callable[[Any], Any]) -> Any:
    """``obj`` with ``fn`` applied to every leaf under its lists, tuples and dicts."""
    if isinstance(obj, list):
        return [_map_leaves(x, fn) for x in obj]
    if isinstance(obj, tuple):
        return tuple(_map_leaves(x, fn) for x in obj)
    if isinstance(obj, dict):
        return {k: _map_leaves(v, fn) for k, v in obj.items()}
    return fn(obj)


def _map_tensors(obj: Any, fn: Callable[[Any], Any]) -> Any:
    return _map_leaves(obj, lambda x: fn(x) if isinstance(x, torch.Tensor) else x)


class DataFlowDataset(IterableDataset[Any]):
    """An ``IterableDataset`` over a DataFlow (build it with :func:`to_torch`).

    The flow is reset once in each process that iterates it (the main process, or each
    DataLoader worker). Each ``iter()`` is one epoch of the flow.

    **DataLoader workers:** every worker holds a copy of the flow. With ``shard=True``
    (default) worker *i* of *n* runs ``df.shard(n, i, equal=False)``, so each datapoint comes
    once per epoch. Each worker reads only its part when ``df`` is a random-access source
    (by index), a multi-file reader (by file), or a rank's ``.shard()`` of those, directly or
    under plain ``.map()`` stages (the rank's indices/files are split among its workers; see
    :class:`~dataflow.ShardData`); else by position (every worker still *runs* the whole flow
    and keeps its part). Sharding by position is right for cheap flows with expensive
    ``map``s done by DataLoader's collate, and wasteful otherwise: prefer dataflow's own
    parallelism (``.parallel_map(...)``) with ``DataLoader(ds, batch_size=None,
    num_workers=0)``, or ``shard=False`` if the flow itself draws random samples (then
    workers must differ: they are seeded apart by torch).

    **Ranks:** with ``shard=True`` the workers' RNGs are keyed on the loader's iteration
    number (``iter(loader)`` calls; one for persistent workers, whose flow counts its own
    epochs), not on torch's seed, so the workers of every data-parallel rank draw the same
    order of a seeded flow whatever each rank seeds torch with, and a rank's ``.shard()``
    inside ``df`` splits one order.

    **Checkpoints:** ``state_dict()`` is the flow's state in this process (see
    :meth:`dataflow.DataFlow.state_dict`); torchdata's ``StatefulDataLoader`` calls it in each
    worker and restores each worker's with ``load_state_dict()`` before iterating, so a
    resumed loader yields exactly what the interrupted one would have. Resume with the same
    ``num_workers`` — or, to resume on another number of ranks or workers, merge the loader
    states of all ranks with :func:`reshard_loader`. With worker processes,
    ``persistent_workers=True`` makes the epochs *after* the resumed one exact too
    (non-persistent workers key their next epochs on the resumed loader's iteration count,
    which starts again at zero). As torchdata
    expects, the state continues the last iterator this dataset gave out: a state taken
    after an epoch's last datapoint resumes with the rest of that epoch, which is empty.
    """

    def __init__(self, df: DataFlow[Any], convert: bool = True, shard: bool = True) -> None:
        super().__init__()
        self.df = df
        self.convert = convert
        self.shard = shard
        self._reset_pid: int | None = None
        self._flow: DataFlow[Any] | None = None  # what this process iterates (df, or its shard)
        self._pending: Mapping[str, Any] | None = None
        self._shard_seed = int(np.random.SeedSequence().generate_state(1)[0])  # drawn once, here
        self._iterations = LoaderEpochs()

    def __len__(self) -> int:
        return len(self.df)

    def _prepare(self) -> DataFlow[Any]:
        """Reset the flow once per process (sharded in a DataLoader worker) and load a
        pending state."""
        info = torch.utils.data.get_worker_info()
        if self._reset_pid != os.getpid():
            flow = self.df
            if info is not None:
                base = seeding.get_seed()
                if self.shard:  # every worker of every rank's loader draws one order
                    # the loader's iteration (workers are recreated per epoch unless persistent,
                    # so epochs reshuffle), counted alike on every rank (see LoaderEpochs)
                    iteration = self._iterations.next_ticket() // info.num_workers
                    seeding.enter_worker((iteration,), seed=self._shard_seed if base is None else base)
                    # one worker too: a worker's state has the same shape at any num_workers
                    with warnings.catch_warnings():  # the class docstring explains the cost
                        warnings.simplefilter("ignore")
                        flow = ShardData(flow, info.num_workers, info.id, equal=False)
                else:  # independent streams: seed workers apart, by DataLoader's per-iteration seed
                    seeding.enter_worker(((info.seed - info.id) % 2**32, info.id), seed=base)
            flow.reset_state()
            self._flow = flow
            self._reset_pid = os.getpid()
        flow = self._flow if self._flow is not None else self.df
        if self._pending is not None:
            flow.load_state_dict(self._pending)
            self._pending = None
        return flow

    def __iter__(self) -> Iterator[Any]:
        it = iter(self._prepare())
        if not self.convert:
            return it
        return map(to_tensors, it)

    def state_dict(self) -> dict[str, Any]:
        """The state of the flow this process iterates (a fresh epoch before the first)."""
        if self._pending is not None:
            return dict(self._pending)
        if self._flow is None or self._reset_pid != os.getpid():
            return self.df.state_dict()
        return save_pipeline(self._flow, SaveOptions(root_live=True))  # continue the last iterator

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from ``state`` at the next ``iter()`` in this process."""
        self._pending = state


def to_torch(df: DataFlow[Any], convert: bool = True, shard: bool = True) -> DataFlowDataset:
    """``df`` as a ``torch.utils.data.IterableDataset`` (see :class:`DataFlowDataset`).

    Typical use, with batching and parallelism done by dataflow::

        loader = DataLoader(to_torch(df.batch(64)), batch_size=None, num_workers=0)
    """
    return DataFlowDataset(df, convert=convert, shard=shard)


class DevicePrefetcher:
    """Iterate ``iterable`` with each batch already on ``device``, ``depth`` batches ahead.

    Batches may hold numpy arrays or tensors (nested in lists/tuples/dicts). On CUDA:
    tensors are pinned (unless ``pin_memory=False``), copied with ``non_blocking=True`` on a
    side stream, and the consumer's current stream waits on an event recorded after the
    copy, so the copy of batch *k+1* overlaps the compute on batch *k* and no host sync
    happens. ``record_stream`` marks each tensor as used by the consumer stream. On other
    devices it converts and moves synchronously. Ordering and epochs are the iterable's.
    """

    def __init__(
        self, iterable: Iterable[Any], device: Any = "cuda", depth: int = 2, pin_memory: bool | None = None
    ):
        if not isinstance(depth, int) or isinstance(depth, bool) or depth < 1:
            raise ValueError(f"DevicePrefetcher: depth must be an int >= 1, got {depth!r}")
        self.iterable = iterable
        self.device = torch.device(device)
        self.depth = depth
        self.pin_memory = self.device.type == "cuda" if pin_memory is None else bool(pin_memory)

    def __len__(self) -> int:
        return len(self.iterable)  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[Any]:
        if self.device.type == "cuda":
            yield from self._iter_cuda()
            return
        for batch in self.iterable:
            yield _map_tensors(to_tensors(batch), lambda t: t.to(self.device))

    def _iter_cuda(self) -> Iterator[Any]:
        device = self.device
        side = torch.cuda.Stream(device=device)
        # a batch's event is recorded again only after the consumer's stream waited on it
        events = [torch.cuda.Event() for _ in range(self.depth + 1)]
        pending: deque[tuple[Any, Any]] = deque()
        source = iter(self.iterable)
        staged = 0
        # torch.cuda.set_stream also makes the stream's device current: with the side stream on
        # the current device (the usual case) a pair of set_stream calls switches and restores
        # for a fraction of torch.cuda.stream()'s cost; otherwise the context manager does both
        same_device = torch.cuda.current_device() == side.device.index

        def stage(consumer: Any) -> bool:
            nonlocal staged
            batch = next(source, _END)
            if batch is _END:
                return False
            host = to_tensors(batch)
            if self.pin_memory:
                host = _map_tensors(host, lambda t: t if t.is_pinned() else t.pin_memory())
            ready = events[staged % len(events)]
            staged += 1
            if same_device:
                torch.cuda.set_stream(side)
                try:
                    moved = _map_tensors(host, lambda t: t.to(device, non_blocking=True))
                    ready.record(side)
                finally:
                    torch.cuda.set_stream(consumer)
            else:
                with torch.cuda.stream(side):
                    moved = _map_tensors(host, lambda t: t.to(device, non_blocking=True))
                    ready.record(side)
            pending.append((moved, ready))
            return True

        consumer = torch.cuda.current_stream(device)
        for _ in range(self.depth):
            if not stage(consumer):
                break
        while pending:
            moved, ready = pending.popleft()
            consumer = torch.cuda.current_stream(device)
            consumer.wait_event(ready)
            _map_tensors(moved, lambda t: t.record_stream(consumer))  # noqa: B023 (called at once)
            stage(consumer)
            yield moved


_END = object()
