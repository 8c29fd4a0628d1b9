"""Batching: :class:`BatchData` and :class:`BatchDataByShape`.

Both keep upstream order within a batch, start every epoch with an empty buffer (nothing is
carried into the next epoch) and return list datapoints for list/tuple input and dict
datapoints for dict input. See :func:`dataflow.ops._stack.stack_component` for how each
component is batched.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .._checks import check_int
from ..base import DataFlow, ProxyDataFlow
from ..errors import LengthUnknownError
from ._components import get_component
from ._stack import collate

__all__ = ["BatchData", "BatchDataByShape"]


class BatchData(ProxyDataFlow):
    """Group ``batch_size`` consecutive datapoints into one, component by component.

    - arrays of one shape are stacked (``np.stack``), with the dtype promoted over every
      element (no int32 truncation, no uint8 wrap-around as in tensorpack);
    - Python/numpy scalars become a 1-D array whose dtype fits all of them (Python floats
      give float64, ints int64);
    - ``str``, ``bytes`` and other objects become lists; ``use_list=True`` keeps every
      component as a list.

    A shape mismatch raises :class:`~dataflow.errors.ComponentError` (a ``ValueError``) naming
    the component and the shapes seen; dict datapoints with different keys name the keys.

    With ``remainder=False`` the last incomplete batch of an epoch is dropped and
    ``len == len(ds) // batch_size``; with ``remainder=True`` it is produced and
    ``len == ceil(len(ds) / batch_size)``.
    """

    def __init__(
        self, ds: DataFlow, batch_size: int, remainder: bool = False, use_list: bool = False
    ) -> None:
        super().__init__(ds)
        stage = type(self).__name__
        self.batch_size = check_int(stage, "batch_size", batch_size)
        if not remainder:
            try:
                size = len(ds)
            except (TypeError, NotImplementedError):
                size = None
            if size is not None and size < self.batch_size:
                raise ValueError(
                    f"{stage}: batch_size {self.batch_size} is larger than the upstream's length "
                    f"{size}, so with remainder=False no batch would ever be produced; use a "
                    f"smaller batch_size or remainder=True"
                )
        self.remainder = bool(remainder)
        self.use_list = bool(use_list)

    def __len__(self) -> int:
        size = len(self.ds)
        if self.remainder:
            return -(-size // self.batch_size)
        return size // self.batch_size

    def _batch(self, holder: list[Any]) -> Any:
        """One batch from a list of datapoints (subclasses change how components combine)."""
        return collate(type(self).__name__, holder, self.use_list)

    def __iter__(self) -> Iterator[Any]:
        bs, batch = self.batch_size, self._batch
        holder: list[Any] = []
        append = holder.append
        for dp in self.ds:
            append(dp)
            if len(holder) == bs:
                yield batch(holder)
                holder = []
                append = holder.append
        if holder and self.remainder:
            yield batch(holder)

    @staticmethod
    def aggregate_batch(data_holder: list[Any], use_list: bool = False) -> Any:
        """Batch a list of datapoints (tensorpack's static helper, kept for compatibility)."""
        return collate("BatchData", data_holder, use_list)


class BatchDataByShape(BatchData):
    """Batch datapoints whose component ``idx`` has the same shape.

    Datapoints are grouped by ``dp[idx].shape``; a group is produced when it reaches
    ``batch_size``. At the end of an epoch incomplete groups are dropped
    (``remainder=False``, the tensorpack behaviour) or produced (``remainder=True``), in the
    order their shapes first appeared; nothing is carried into the next epoch. Within a batch
    the upstream order is kept; across shapes, batches come out when they fill.

    ``len`` (only with ``remainder=False``) is ``len(ds) // batch_size``, an upper bound.
    """

    def __init__(self, ds: DataFlow, batch_size: int, idx: int | str, remainder: bool = False) -> None:
        super().__init__(ds, batch_size, remainder=True)
        self.remainder = bool(remainder)
        self.idx = idx

    def __len__(self) -> int:
        if self.remainder:
            raise LengthUnknownError(
                "BatchDataByShape: the number of batches with remainder=True depends on the shapes"
            )
        return len(self.ds) // self.batch_size

    def __iter__(self) -> Iterator[Any]:
        bs, idx, stage = self.batch_size, self.idx, type(self).__name__
        groups: dict[tuple[int, ...], list[Any]] = {}
        for dp in self.ds:
            comp = get_component(stage, dp, idx)
            try:
                shape = comp.shape
            except AttributeError:
                raise TypeError(
                    f"{stage}: component {idx!r} must be a numpy array to group by shape, got "
                    f"{type(comp).__name__}"
                ) from None
            group = groups.setdefault(shape, [])
            group.append(dp)
            if len(group) == bs:
                yield collate(stage, group, self.use_list)
                groups[shape] = []
        if self.remainder:
            for group in groups.values():
                if group:
                    yield collate(stage, group, self.use_list)
