"""Batching: :class:`BatchData` and :class:`BatchDataByShape`.

Both keep upstream order within a batch, start every epoch with an empty buffer (nothing is
carried into the next epoch) and return list datapoints for list/tuple input and dict
datapoints for dict input. :class:`BatchData` holds nothing between the batches it yields, so
its checkpoint state is its upstream's; :class:`BatchDataByShape` also saves its partly
filled groups. See :func:`dataflow.ops._stack.stack_component` for how each
component is batched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from .._checks import check_int
from .._errors import LengthUnknownError, StateError
from .._state_fields import decode_items, encode_items, field
from ..base import DataFlow, ProxyDataFlow
from ._components import get_component
from ._stack import StackComponent, collate

__all__ = ["BatchData", "BatchDataByShape", "epoch_stacked_by"]


def epoch_stacked_by(flow: Any, stack: StackComponent) -> Iterator[Any]:
    """An epoch of ``flow``: ``iter(flow)``, except that a plain :class:`BatchData` batches
    each component with ``stack`` (see :meth:`BatchData._epoch_stacked_by`). How the
    framework adapters have batches stacked straight into the memory they hand over."""
    if isinstance(flow, BatchData):
        stacked = flow._epoch_stacked_by(stack)
        if stacked is not None:
            return stacked
    return iter(flow)


class BatchData(ProxyDataFlow):
    """Group ``batch_size`` consecutive datapoints into one, component by component.

    - arrays of one shape are stacked (``np.stack``), with the dtype promoted over every
      element (no int32 truncation, no uint8 wrap-around as in tensorpack);
    - Python/numpy scalars become a 1-D array whose dtype fits all of them (Python floats
      give float64, ints int64);
    - ``str``, ``bytes`` and other objects become lists; ``use_list=True`` keeps every
      component as a list.

    A shape mismatch raises :class:`~dataflow._errors.ComponentError` (a ``ValueError``) naming
    the component and the shapes seen; dict datapoints with different keys name the keys.

    With ``remainder=False`` the last incomplete batch of an epoch is dropped and
    ``len == len(ds) // batch_size``; with ``remainder=True`` it is produced and
    ``len == ceil(len(ds) / batch_size)``.
    """

    def __init__(
        self, ds: DataFlow[Any], batch_size: int, remainder: bool = False, use_list: bool = False
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

    stateless = True  # between two yields the holder is empty: the position is the upstream's

    def __iter__(self) -> Iterator[Any]:
        return self._batches(iter(self.ds), self._batch)

    def _epoch_stacked_by(self, stack: StackComponent) -> Iterator[Any] | None:
        """One epoch exactly as ``iter(self)`` gives it, each component batched by ``stack``
        (which gives :func:`~dataflow.ops._stack.stack_component`'s results, in memory of its
        choosing: ``dataflow_to_dataset`` stacks batches straight into what it hands to
        TensorFlow). ``None`` for a subclass that batches in its own way, or ``use_list``."""
        cls = type(self)
        own = (cls.__iter__, cls._batches, cls._batch)
        if self.use_list or own != (BatchData.__iter__, BatchData._batches, BatchData._batch):
            return None
        stage = cls.__name__
        return self._track(self._batches(iter(self.ds), lambda holder: collate(stage, holder, False, stack)))

    def _batches(self, itr: Iterator[Any], batch: Callable[[list[Any]], Any]) -> Iterator[Any]:
        bs = self.batch_size
        holder: list[Any] = []
        append = holder.append
        for dp in itr:
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

    def __init__(self, ds: DataFlow[Any], batch_size: int, idx: int | str, remainder: bool = False) -> None:
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
        groups = self.__dict__.pop("_resume", None)
        self._groups: dict[tuple[int, ...], list[Any]] = {} if groups is None else groups
        return self._by_shape(iter(self.ds), self._groups)

    def _by_shape(self, itr: Iterator[Any], groups: dict[tuple[int, ...], list[Any]]) -> Iterator[Any]:
        bs, idx, stage = self.batch_size, self.idx, type(self).__name__
        for dp in itr:
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
                groups[shape] = []  # before the yield: the state then holds only what waits
                yield collate(stage, group, self.use_list)
        if self.remainder:
            for shape, group in list(groups.items()):
                if group:
                    groups[shape] = []
                    yield collate(stage, group, self.use_list)

    def _get_state(self, live: bool) -> dict[str, Any]:
        groups = self.__dict__.get("_groups") if live else None
        groups = groups or {}  # empty groups too: their order is the remainder's order
        flat = [dp for g in groups.values() for dp in g]
        return {
            "shapes": [list(s) for s in groups],
            "sizes": [len(g) for g in groups.values()],
            "groups": encode_items(type(self).__name__, flat, "waiting datapoints") if flat else None,
        }

    def _set_state(self, state: Mapping[str, Any], live: bool) -> None:
        stage = type(self).__name__
        shapes = field(stage, state, "shapes", list)
        sizes = field(stage, state, "sizes", list)
        flat = decode_items(stage, state, "groups") if state.get("groups") is not None else []
        if len(shapes) != len(sizes) or sum(sizes) != len(flat):
            raise StateError(f"{stage}: the saved groups are corrupted")
        if live:
            groups, pos = {}, 0
            for shape, n in zip(shapes, sizes):
                groups[tuple(shape)] = list(flat[pos : pos + n])
                pos += n
            self._resume = groups
