"""Fluent spelling of the transforms: ``df.map(f).batch(64)`` builds ``BatchData(MapData(df, f), 64)``.

Each method returns a new flow wrapping ``self`` and builds exactly the object the class
spelling would; nothing is iterated or reset. Imports are local because ``ops`` depends on
``base``, which mixes this class in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

if TYPE_CHECKING:
    from .base import DataFlow
    from .tools._speed import SpeedResult

__all__ = ["FluentMixin", "T_co", "U"]

#: The datapoint type of a flow (``DataFlow[T_co]``): what ``__iter__`` yields.
T_co = TypeVar("T_co", covariant=True)
#: The datapoint type a ``map`` turns it into.
U = TypeVar("U")


def _as_flow(flow: FluentMixin[T_co]) -> DataFlow[T_co]:
    """``flow`` typed as the :class:`~dataflow.DataFlow` it is (the only class mixing this in)."""
    return cast("DataFlow[T_co]", flow)


class FluentMixin(Generic[T_co]):
    """Methods every :class:`~dataflow.DataFlow` has for building pipelines fluently.

    Types: ``map``/``parallel_map`` turn a ``DataFlow[T]`` into a ``DataFlow[U]`` (``U``: what
    ``func`` returns, ``None`` dropped); ``filter``, ``shuffle``, ``repeat``, ``take``,
    ``shard``, ``cache``, ``prefetch`` and ``parallel`` keep ``T``; stages that reshape
    datapoints (``batch``, ``select``, ``map_component``, ...) give ``DataFlow[Any]``.
    """

    def map(
        self, func: Callable[..., U | None], *, item_rng: bool = False, seed: int | None = None
    ) -> DataFlow[U]:
        """``MapData(self, func)``: ``func(dp)``; a ``None`` result drops the datapoint. With
        ``item_rng=True``, ``func(dp, rng)`` gets a generator seeded per datapoint (exact
        resume and the same randomness at any worker count)."""
        from .ops._map import MapData

        return MapData(_as_flow(self), func, item_rng=item_rng, seed=seed)

    def map_component(self, func: Callable[[Any], Any], index: int | str = 0) -> DataFlow[Any]:
        """``MapDataComponent(self, func, index)``: replace ``dp[index]`` with ``func(dp[index])``."""
        from .ops._map import MapDataComponent

        return MapDataComponent(_as_flow(self), func, index)

    def filter(self, predicate: Callable[[Any], bool]) -> DataFlow[T_co]:
        """``FilterData(self, predicate)``: keep datapoints for which ``predicate(dp)`` is true."""
        from .ops._map import FilterData

        return FilterData(_as_flow(self), predicate)

    def select(self, idxs: Sequence[int | str]) -> DataFlow[Any]:
        """``SelectComponent(self, idxs)``: keep (and reorder) the given components."""
        from .ops._map import SelectComponent

        return SelectComponent(_as_flow(self), idxs)

    def batch(self, batch_size: int, remainder: bool = False, use_list: bool = False) -> DataFlow[Any]:
        """``BatchData(self, batch_size, remainder, use_list)``."""
        from .ops._batch import BatchData

        return BatchData(_as_flow(self), batch_size, remainder=remainder, use_list=use_list)

    def padded_batch(self, batch_size: int, padding_value: Any = 0, remainder: bool = False) -> DataFlow[Any]:
        """``PaddedBatchData(self, batch_size, padding_value, remainder)``."""
        from .ops._padded_batch import PaddedBatchData

        return PaddedBatchData(_as_flow(self), batch_size, padding_value=padding_value, remainder=remainder)

    def bucket_by_length(
        self,
        length_fn: Callable[[Any], int],
        boundaries: Sequence[int],
        batch_sizes: Sequence[int],
        padding_value: Any = 0,
        drop_remainder: bool = False,
    ) -> DataFlow[Any]:
        """``BucketByLengthData(self, length_fn, boundaries, batch_sizes, padding_value,
        drop_remainder)``: batches of datapoints of similar length, padded per batch."""
        from .ops._bucket import BucketByLengthData

        return BucketByLengthData(
            _as_flow(self), length_fn, boundaries, batch_sizes,
            padding_value=padding_value, drop_remainder=drop_remainder,
        )

    def pack(
        self,
        seq_len: int,
        keys: Sequence[str | int] = ("tokens",),
        method: str = "first_fit",
        num_bins: int = 16,
        overlong: str = "truncate",
    ) -> DataFlow[Any]:
        """``PackData(self, seq_len, keys, method, num_bins, overlong)``."""
        from .ops._pack import PackData

        return PackData(
            _as_flow(self), seq_len, keys=keys, method=method, num_bins=num_bins, overlong=overlong
        )

    def shuffle(self, buffer_size: int, num_reuse: int = 1, seed: int | None = None) -> DataFlow[T_co]:
        """``LocallyShuffleData(self, buffer_size, num_reuse, seed=seed)``."""
        from .ops._shuffle import LocallyShuffleData

        return LocallyShuffleData(_as_flow(self), buffer_size, num_reuse=num_reuse, seed=seed)

    def repeat(self, num: int = -1) -> DataFlow[T_co]:
        """``RepeatedData(self, num)``: ``num`` epochs of ``self`` as one; ``-1`` repeats forever."""
        from .ops._repeat import RepeatedData

        return RepeatedData(_as_flow(self), num)

    def take(self, n: int) -> DataFlow[T_co]:
        """``TakeData(self, n)``: at most the first ``n`` datapoints of each epoch."""
        from .ops._repeat import TakeData

        return TakeData(_as_flow(self), n)

    def shard(self, num_shards: int, index: int, equal: bool = True, pad: bool = False) -> DataFlow[T_co]:
        """``ShardData(self, num_shards, index, equal, pad)``: rank ``index``'s disjoint part of
        every epoch (by index right after a random-access source, else by position)."""
        from .ops._shard import ShardData

        return ShardData(_as_flow(self), num_shards, index, equal=equal, pad=pad)

    def cache(self, shuffle: bool = False, seed: int | None = None) -> DataFlow[T_co]:
        """``CacheData(self, shuffle, seed=seed)``: keep the first complete pass in memory."""
        from .ops._cache import CacheData

        return CacheData(_as_flow(self), shuffle=shuffle, seed=seed)

    def interleave(
        self, func: Callable[[Any], Any], cycle_length: int = 2, block_length: int = 1
    ) -> DataFlow[Any]:
        """``InterleaveData(self, func, cycle_length, block_length)``."""
        from .ops._interleave import InterleaveData

        return InterleaveData(_as_flow(self), func, cycle_length=cycle_length, block_length=block_length)

    def parallel_map(
        self,
        func: Callable[[Any], U | None],
        num_proc: int | None = None,
        num_thread: int | None = None,
        *,
        ordered: bool = True,
        strict: bool = True,
        buffer_size: int | str | None = None,
        backend: str = "processes",
        **kwargs: Any,
    ) -> DataFlow[U]:
        """``func`` in ``num_proc`` processes (``MultiProcessMapDataZMQ``) or ``num_thread``
        threads (``MultiThreadMapData``); give exactly one of the two. With
        ``backend="ray"``, the ``num_proc`` workers are Ray actors (``RayMapData``; ``kwargs``
        such as ``ray_remote_args=`` go to it). ``buffer_size``: datapoints in flight; by
        default 200 for processes and threads, and ``"auto"`` for Ray (sized by the measured
        map time and bytes, see :class:`~dataflow.on_ray.RayMapData`).

        Unlike the classes (whose defaults follow tensorpack), the fluent spelling defaults to
        ``ordered=True, strict=True``: it behaves like ``.map(func)``, only faster: the same
        datapoints in the same order, one exact pass per epoch.
        """
        if backend not in ("processes", "ray"):
            raise ValueError(f"parallel_map: backend must be 'processes' or 'ray', got {backend!r}")
        cls: Callable[..., DataFlow[U]]
        if backend == "ray":
            if num_proc is None or num_thread is not None:
                raise ValueError("parallel_map: backend='ray' runs num_proc= Ray actors; give num_proc only")
            from .on_ray._maps import RayMapData as cls
        elif num_proc is not None and num_thread is None:
            from .parallel._maps import MultiProcessMapDataZMQ as cls
        elif num_thread is not None and num_proc is None:
            from .parallel._threads import MultiThreadMapData as cls
        else:
            raise ValueError(
                f"parallel_map: give exactly one of num_proc= (processes) or num_thread= (threads), "
                f"got num_proc={num_proc!r}, num_thread={num_thread!r}"
            )
        workers = num_proc if num_thread is None else num_thread
        if buffer_size is None:
            buffer_size = "auto" if backend == "ray" else 200
        return cls(_as_flow(self), workers, func, buffer_size, strict, ordered=ordered, **kwargs)

    def parallel(self, num_proc: int = 1, **kwargs: Any) -> DataFlow[T_co]:
        """``MultiProcessRunnerZMQ(self, num_proc, **kwargs)``: run copies of this flow in
        ``num_proc`` processes (each produces the whole flow: see the class)."""
        from .parallel._runners import MultiProcessRunnerZMQ

        return MultiProcessRunnerZMQ(_as_flow(self), num_proc, **kwargs)

    def prefetch(self, num_prefetch: int = 2, **kwargs: Any) -> DataFlow[T_co]:
        """``ThreadPrefetchData(self, num_prefetch)``: read ahead in a background thread."""
        from .parallel._threads import ThreadPrefetchData

        return ThreadPrefetchData(_as_flow(self), num_prefetch, **kwargs)

    def speed_test(self, size: int = 5000, warmup: int = 0, *, progress: bool = True) -> SpeedResult:
        """Reset, iterate ``size`` datapoints with a progress bar (unless ``progress=False``)
        and return the throughput."""
        from .tools._speed import TestDataSpeed

        return TestDataSpeed(_as_flow(self), size=size, warmup=warmup, progress=progress).start()
