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

    def map(self, func: Callable[..., Any], *, item_rng: bool = False, seed: int | None = None) -> DataFlow:
        """``MapData(self, func)``: ``func(dp)``; a ``None`` result drops the datapoint. With
        ``item_rng=True``, ``func(dp, rng)`` gets a generator seeded per datapoint (exact
        resume and the same randomness at any worker count)."""
        from .ops.map import MapData

        return MapData(self, func, item_rng=item_rng, seed=seed)  # type: ignore[arg-type]

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

    def padded_batch(self, batch_size: int, padding_value: Any = 0, remainder: bool = False) -> DataFlow:
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

    def shard(self, num_shards: int, index: int, equal: bool = True, pad: bool = False) -> DataFlow:
        """``ShardData(self, num_shards, index, equal, pad)``: rank ``index``'s disjoint part of
        every epoch (by index right after a random-access source, else by position)."""
        from .ops.shard import ShardData

        return ShardData(self, num_shards, index, equal=equal, pad=pad)  # type: ignore[arg-type]

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

    def parallel_map(
        self,
        func: Callable[[Any], Any],
        num_proc: int | None = None,
        num_thread: int | None = None,
        *,
        ordered: bool = True,
        strict: bool = True,
        buffer_size: int = 200,
        backend: str = "processes",
        **kwargs: Any,
    ) -> DataFlow:
        """``func`` in ``num_proc`` processes (``MultiProcessMapDataZMQ``) or ``num_thread``
        threads (``MultiThreadMapData``); give exactly one of the two. With
        ``backend="ray"``, the ``num_proc`` workers are Ray actors (``RayMapData``; ``kwargs``
        such as ``ray_remote_args=`` go to it).

        Unlike the classes (whose defaults follow tensorpack), the fluent spelling defaults to
        ``ordered=True, strict=True``: it behaves like ``.map(func)``, only faster: the same
        datapoints in the same order, one exact pass per epoch.
        """
        if (num_proc is None) == (num_thread is None):
            raise ValueError(
                f"parallel_map: give exactly one of num_proc= (processes) or num_thread= (threads), "
                f"got num_proc={num_proc!r}, num_thread={num_thread!r}"
            )
        if backend not in ("processes", "ray"):
            raise ValueError(f"parallel_map: backend must be 'processes' or 'ray', got {backend!r}")
        if backend == "ray":
            if num_proc is None:
                raise ValueError("parallel_map: backend='ray' runs num_proc= Ray actors; give num_proc")
            from .on_ray.maps import RayMapData

            return RayMapData(self, num_proc, func, buffer_size, strict, ordered=ordered, **kwargs)  # type: ignore[arg-type]
        if num_proc is not None:
            from .parallel.maps import MultiProcessMapDataZMQ

            return MultiProcessMapDataZMQ(
                self,
                num_proc,
                func,
                buffer_size,
                strict,
                ordered=ordered,
                **kwargs,  # type: ignore[arg-type]
            )
        from .parallel.threads import MultiThreadMapData

        return MultiThreadMapData(
            self,
            num_thread,
            func,
            buffer_size,
            strict,
            ordered=ordered,
            **kwargs,  # type: ignore[arg-type]
        )

    def parallel(self, num_proc: int = 1, **kwargs: Any) -> DataFlow:
        """``MultiProcessRunnerZMQ(self, num_proc, **kwargs)``: run copies of this flow in
        ``num_proc`` processes (each produces the whole flow: see the class)."""
        from .parallel.runners import MultiProcessRunnerZMQ

        return MultiProcessRunnerZMQ(self, num_proc, **kwargs)  # type: ignore[arg-type]

    def prefetch(self, num_prefetch: int = 2, **kwargs: Any) -> DataFlow:
        """``ThreadPrefetchData(self, num_prefetch)``: read ahead in a background thread."""
        from .parallel.threads import ThreadPrefetchData

        return ThreadPrefetchData(self, num_prefetch, **kwargs)  # type: ignore[arg-type]

    def speed_test(self, size: int = 5000, warmup: int = 0) -> SpeedResult:
        """Reset, iterate ``size`` datapoints with a progress bar and return the throughput."""
        from .tools.speed import TestDataSpeed

        return TestDataSpeed(self, size=size, warmup=warmup).start()  # type: ignore[arg-type]
