"""Ray Data interop: :func:`from_ray` reads a ``ray.data.Dataset`` as a DataFlow, and
:func:`to_ray` turns a DataFlow into a ``ray.data.Dataset``. Both stream: nothing is
materialised as a whole, and neither imports Ray before it is used.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from .._checks import check_int
from ..base import DataFlow
from ..sources._iterables import DataFromGenerator
from ._connect import connected_ray

__all__ = ["DataFromRay", "from_ray", "to_ray"]


class DataFromRay(DataFromGenerator[Any]):
    """The rows (dicts of column values) of a ``ray.data.Dataset``, streamed with
    ``iter_rows()``; or, with ``batch_size``, its batches (dicts of arrays) with
    ``iter_batches``. Each epoch executes the dataset's plan again, streaming (Ray Data's
    own backpressure bounds memory). ``len`` is ``size`` if given, else unknown (counting
    would execute the whole plan). Checkpoints count rows and need
    ``state_dict(allow_fast_forward=True)`` mid-epoch, like any generator source.
    """

    _hint = "build a DataFromRay over the dataset, which re-reads it every epoch"

    def __init__(
        self,
        dataset: Any,
        *,
        batch_size: int | None = None,
        batch_format: str = "numpy",
        size: int | None = None,
    ) -> None:
        stage = type(self).__name__
        if not hasattr(dataset, "iter_rows") or not hasattr(dataset, "iter_batches"):
            raise TypeError(f"{stage}: expected a ray.data.Dataset, got {type(dataset).__name__}")
        self.dataset = dataset
        self.batch_size = None if batch_size is None else check_int(stage, "batch_size", batch_size)
        self.batch_format = batch_format
        super().__init__(self._epoch_rows, size=size)

    def _epoch_rows(self) -> Iterator[Any]:
        connected_ray(type(self).__name__)
        if self.batch_size is None:
            return iter(self.dataset.iter_rows())
        return iter(self.dataset.iter_batches(batch_size=self.batch_size, batch_format=self.batch_format))


def from_ray(dataset: Any, *, batch_size: int | None = None, size: int | None = None) -> DataFlow[Any]:
    """A DataFlow over a ``ray.data.Dataset`` (see :class:`DataFromRay`): rows as dicts, or
    batches of ``batch_size`` rows as dicts of numpy arrays."""
    return DataFromRay(dataset, batch_size=batch_size, size=size)


class _ShardRows:
    """The rows of one shard of a flow, made in a Ray Data task (a generator: streamed)."""

    def __init__(self, flow: DataFlow[Any], num_shards: int, columns: Sequence[str] | None) -> None:
        self.flow, self.num_shards, self.columns = flow, num_shards, columns

    def __call__(self, row: dict[str, Any]) -> Iterator[dict[str, Any]]:
        flow = self.flow if self.num_shards == 1 else self.flow.shard(self.num_shards, int(row["id"]))
        flow.reset_state()
        try:
            for dp in flow:
                yield _as_row(dp, self.columns)
        finally:
            flow.close()


def _as_row(dp: Any, columns: Sequence[str] | None) -> dict[str, Any]:
    if isinstance(dp, dict):
        return {str(k): v for k, v in dp.items()}
    if not isinstance(dp, (list, tuple)):
        raise TypeError(f"to_ray: a datapoint must be a list, tuple or dict, got {type(dp).__name__}")
    names = columns if columns is not None else [str(i) for i in range(len(dp))]
    if len(names) != len(dp):
        raise ValueError(f"to_ray: the datapoint has {len(dp)} components but columns={list(names)!r}")
    return dict(zip(names, dp))


def to_ray(flow: DataFlow[Any], *, num_shards: int = 1, columns: Sequence[str] | None = None) -> Any:
    """A lazy ``ray.data.Dataset`` of the rows of ``flow`` (one epoch).

    Dict datapoints become rows as they are; list/tuple datapoints become rows with the
    columns ``columns`` (default ``"0"``, ``"1"``, ...). The flow is pickled to Ray Data
    tasks and iterated there, streaming; with ``num_shards > 1``, task *i* reads
    ``flow.shard(num_shards, i)`` (in parallel, rows of the shards interleaved).
    """
    if not isinstance(flow, DataFlow):
        raise TypeError(f"to_ray: expected a DataFlow, got {type(flow).__name__}")
    n = check_int("to_ray", "num_shards", num_shards)
    ray = connected_ray("to_ray")
    seeds = ray.data.range(n, override_num_blocks=n)
    return seeds.flat_map(_ShardRows(flow, n, list(columns) if columns is not None else None))
