"""Fluent spelling of the transforms: ``df.map(f).batch(64)`` builds ``BatchData(MapData(df, f), 64)``.

Each method returns a new flow wrapping ``self`` and builds exactly the object the class
spelling would; nothing is iterated or reset. Imports are local because ``ops`` depends on
``base``, which mixes this class in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .base import DataFlow
    from .tools.speed import SpeedResult

__all__ = ["FluentMixin"]


class FluentMixin:
    """Methods every :class:`~dataflow.DataFlow` has for building pipelines fluently."""

    def map(self, func: Callable[[Any], Any]) -> DataFlow:
        """``MapData(self, func)``: ``func(dp)``; a ``None`` result drops the datapoint."""
        from .ops.map import MapData

        return MapData(self, func)  # type: ignore[arg-type]

    def map_component(self, func: Callable[[Any], Any], index: int | str = 0) -> DataFlow:
        """``MapDataComponent(self, func, index)``: replace ``dp[index]`` with ``func(dp[index])``."""
        from .ops.map import MapDataComponent

        return MapDataComponent(self, func, index)  # type: ignore[arg-type]

    def filter(self, predicate: Callable[[Any], bool]) -> DataFlow:
        """``FilterData(self, predicate)``: keep datapoints for which ``predicate(dp)`` is true."""
        from .ops.map import FilterData

        return FilterData(self, predicate)  # type: ignore[arg-type]

    def select(self, idxs: Sequence[int | str]) -> DataFlow:
        """``SelectComponent(self, idxs)``: keep (and reorder) the given components."""
        from .ops.map import SelectComponent

        return SelectComponent(self, idxs)  # type: ignore[arg-type]

    def batch(self, batch_size: int, remainder: bool = False, use_list: bool = False) -> DataFlow:
        """``BatchData(self, batch_size, remainder, use_list)``."""
        from .ops.batch import BatchData

        return BatchData(self, batch_size, remainder=remainder, use_list=use_list)  # type: ignore[arg-type]

    def padded_batch(
        self, batch_size: int, padding_value: Any = 0, remainder: bool = False
    ) -> DataFlow:
        """``PaddedBatchData(self, batch_size, padding_value, remainder)``."""
        from .ops.padded_batch import PaddedBatchData

        return PaddedBatchData(self, batch_size, padding_value=padding_value, remainder=remainder)  # type: ignore[arg-type]

    def shuffle(self, buffer_size: int, num_reuse: int = 1, seed: int | None = None) -> DataFlow:
        """``LocallyShuffleData(self, buffer_size, num_reuse, seed=seed)``."""
        from .ops.shuffle import LocallyShuffleData

        return LocallyShuffleData(self, buffer_size, num_reuse=num_reuse, seed=seed)  # type: ignore[arg-type]

    def repeat(self, num: int = -1) -> DataFlow:
        """``RepeatedData(self, num)``: ``num`` epochs of ``self`` as one; ``-1`` repeats forever."""
        from .ops.repeat import RepeatedData

        return RepeatedData(self, num)  # type: ignore[arg-type]

    def take(self, n: int) -> DataFlow:
        """``TakeData(self, n)``: at most the first ``n`` datapoints of each epoch."""
        from .ops.repeat import TakeData

        return TakeData(self, n)  # type: ignore[arg-type]

    def cache(self, shuffle: bool = False, seed: int | None = None) -> DataFlow:
        """``CacheData(self, shuffle, seed=seed)``: keep the first complete pass in memory."""
        from .ops.cache import CacheData

        return CacheData(self, shuffle=shuffle, seed=seed)  # type: ignore[arg-type]

    def interleave(
        self, func: Callable[[Any], Any], cycle_length: int = 2, block_length: int = 1
    ) -> DataFlow:
        """``InterleaveData(self, func, cycle_length, block_length)``."""
        from .ops.interleave import InterleaveData

        return InterleaveData(self, func, cycle_length=cycle_length, block_length=block_length)  # type: ignore[arg-type]

    def speed_test(self, size: int = 5000, warmup: int = 0) -> SpeedResult:
        """Reset, iterate ``size`` datapoints with a progress bar and return the throughput."""
        from .tools.speed import TestDataSpeed

        return TestDataSpeed(self, size=size, warmup=warmup).start()  # type: ignore[arg-type]
