"""Batching by length: :class:`BucketByLengthData` (tf.data's ``bucket_by_sequence_length``)."""

from __future__ import annotations

import bisect
import numbers
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from .._checks import check_callable, check_int
from .._errors import LengthUnknownError, StateError
from .._state_fields import decode_items, encode_items, field
from ..base import DataFlow
from ._padded_batch import PaddedBatchData

__all__ = ["BucketByLengthData"]


class BucketByLengthData(PaddedBatchData):
    """Batch datapoints of similar length together, each batch padded to its longest element.

    ``length_fn(dp)`` gives a datapoint's length, an ``int >= 0``. ``boundaries`` (strictly
    increasing ints) split lengths into ``len(boundaries) + 1`` buckets: a datapoint of length
    ``L`` goes to the first bucket whose boundary is ``> L`` (the last bucket takes every
    ``L >= boundaries[-1]``). Bucket ``i`` emits a batch as soon as it holds
    ``batch_sizes[i]`` datapoints (``len(batch_sizes) == len(boundaries) + 1``), so batches come
    out in the order they fill, each in upstream order. At the end of an epoch the partly
    filled buckets are emitted in bucket order, or dropped with ``drop_remainder=True``;
    nothing is carried into the next epoch.

    A batch is built as by :class:`PaddedBatchData`: every array (or list of numbers)
    component is padded at the end of each axis to the largest size *in that batch*, with
    ``padding_value`` (one value, or a mapping from component index/key to value; components
    not in it pad with 0); scalars, strings and objects are batched as by :class:`BatchData`.

    Exact resume: the datapoints waiting in the buckets are part of the state. ``len`` raises
    :class:`~dataflow.LengthUnknownError`: the number of batches depends on the lengths.
    """

    def __init__(
        self,
        ds: DataFlow[Any],
        length_fn: Callable[[Any], int],
        boundaries: Sequence[int],
        batch_sizes: Sequence[int],
        padding_value: Any = 0,
        drop_remainder: bool = False,
    ) -> None:
        stage = type(self).__name__
        check_callable(stage, "length_fn", length_fn)
        if isinstance(boundaries, (str, bytes)) or not isinstance(boundaries, Sequence):
            raise TypeError(f"{stage}: boundaries must be a sequence of ints, got {boundaries!r:.80}")
        if isinstance(batch_sizes, (str, bytes)) or not isinstance(batch_sizes, Sequence):
            raise TypeError(f"{stage}: batch_sizes must be a sequence of ints, got {batch_sizes!r:.80}")
        bounds = [check_int(stage, f"boundaries[{i}]", b) for i, b in enumerate(boundaries)]
        for i in range(1, len(bounds)):
            if bounds[i] <= bounds[i - 1]:
                raise ValueError(
                    f"{stage}: boundaries must be strictly increasing, got {bounds} "
                    f"(boundaries[{i}] = {bounds[i]} <= boundaries[{i - 1}] = {bounds[i - 1]})"
                )
        sizes = [check_int(stage, f"batch_sizes[{i}]", b) for i, b in enumerate(batch_sizes)]
        if len(sizes) != len(bounds) + 1:
            raise ValueError(
                f"{stage}: batch_sizes must have len(boundaries) + 1 = {len(bounds) + 1} entries "
                f"(one per bucket), got {len(sizes)}: {sizes}"
            )
        super().__init__(ds, max(sizes), padding_value=padding_value, remainder=True)
        self.length_fn = length_fn
        self.boundaries = bounds
        self.batch_sizes = sizes
        self.drop_remainder = bool(drop_remainder)
        self.remainder = not self.drop_remainder

    def __len__(self) -> int:
        raise LengthUnknownError(f"{type(self).__name__}: the number of batches depends on the lengths")

    def _bucket_of(self, dp: Any) -> int:
        """The index of the bucket ``dp`` goes to."""
        length = self.length_fn(dp)
        if isinstance(length, bool) or not isinstance(length, numbers.Integral) or length < 0:
            raise TypeError(
                f"{type(self).__name__}: length_fn must return an int >= 0, got "
                f"{type(length).__name__} ({length!r:.60}) for a datapoint"
            )
        return bisect.bisect_right(self.boundaries, int(length))

    def __iter__(self) -> Iterator[Any]:
        buckets = self.__dict__.pop("_resume", None)
        self._buckets: list[list[Any]] = buckets or [[] for _ in self.batch_sizes]
        return self._bucketed(iter(self.ds), self._buckets)

    def _bucketed(self, itr: Iterator[Any], buckets: list[list[Any]]) -> Iterator[Any]:
        sizes, bucket_of = self.batch_sizes, self._bucket_of
        for dp in itr:
            i = bucket_of(dp)
            bucket = buckets[i]
            bucket.append(dp)
            if len(bucket) == sizes[i]:
                buckets[i] = []  # before the yield: the state then holds only what waits
                yield self._batch(bucket)
        if self.remainder:
            for i, bucket in enumerate(buckets):
                if bucket:
                    buckets[i] = []
                    yield self._batch(bucket)

    def _get_state(self, live: bool) -> dict[str, Any]:
        buckets = self.__dict__.get("_buckets") if live else None
        buckets = buckets or [[] for _ in self.batch_sizes]
        flat = [dp for b in buckets for dp in b]
        return {
            "sizes": [len(b) for b in buckets],
            "buckets": encode_items(type(self).__name__, flat, "waiting datapoints") if flat else None,
        }

    def _set_state(self, state: Mapping[str, Any], live: bool) -> None:
        stage = type(self).__name__
        sizes = field(stage, state, "sizes", list)
        flat = decode_items(stage, state, "buckets") if state.get("buckets") is not None else []
        if (
            len(sizes) != len(self.batch_sizes)
            or any(isinstance(n, bool) or not isinstance(n, int) or not 0 <= n < cap
                   for n, cap in zip(sizes, self.batch_sizes))
            or sum(sizes) != len(flat)
        ):
            raise StateError(
                f"{stage}: the saved buckets (sizes {sizes!r:.80}) do not fit this stage's "
                f"{len(self.batch_sizes)} buckets of batch sizes {self.batch_sizes}; the state is "
                f"corrupted or was saved with other boundaries"
            )
        if live:
            buckets, pos = [], 0
            for n in sizes:
                buckets.append(list(flat[pos : pos + n]))
                pos += n
            self._resume = buckets
