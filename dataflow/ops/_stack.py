"""Turning a list of datapoints into one batch: dtype from all elements, errors that name
the component. Shared by :class:`~dataflow.BatchData` and its variants."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._errors import ComponentError
from ._components import describe_kind

__all__ = ["StackComponent", "collate", "stack_component", "stack_into", "stackable"]

#: batches one component: ``(stage, key, values) -> batched``
StackComponent = Callable[[str, Any, Sequence[Any]], Any]

_SEQUENCE_TYPES = {list, tuple}
_NUMBER_TYPES = (bool, int, float, complex, np.generic)


def stack_component(stage: str, key: Any, values: Sequence[Any]) -> Any:
    """Batch one component: arrays stack, numbers become an array, anything else a list.

    - numpy arrays of one shape → stacked on a new first axis (dtype promoted over all of them: a uint8 and
      an int8 give int16, never a silent wrap-around);
    - Python/numpy scalars → a 1-D array whose dtype fits every value (ints that do not fit
      int64 become uint64 when non-negative, else an error);
    - ``str``, ``bytes`` and other objects → a ``list``.
    """
    first = values[0]
    if isinstance(first, np.ndarray):
        try:  # asarray of equal-shape arrays == np.stack, but ~3x faster for small arrays
            arr = np.asarray(values)
        except (ValueError, TypeError):
            raise _shape_error(stage, key, values) from None
        if arr.ndim != first.ndim + 1:  # a non-array element that numpy broadcast or nested
            raise _shape_error(stage, key, values)
        return arr
    if isinstance(first, _NUMBER_TYPES):
        try:
            arr = np.asarray(values)
        except (ValueError, TypeError):
            raise _shape_error(stage, key, values) from None
        if arr.dtype.kind in "fcbiu" and arr.ndim == 1:
            if arr.dtype.kind == "f" and not isinstance(first, (float, np.floating)):
                return _big_ints(stage, key, values, arr)
            return arr
        if arr.dtype.kind == "O":
            return _big_ints(stage, key, values, arr)
        raise _type_error(stage, key, values)
    return list(values)


def stackable(values: Sequence[Any], min_bytes: int) -> np.ndarray | None:
    """The first of ``values`` if they can be stacked into memory of the caller's choosing
    (:func:`stack_into`) with what :func:`stack_component` would give: numpy arrays (not
    subclasses) of one shape (at least 1-D) and one dtype (no objects), ``min_bytes`` or more
    in all; else ``None``."""
    first = values[0]
    if type(first) is not np.ndarray or not first.ndim or first.dtype.hasobject:
        return None
    if first.nbytes * len(values) < min_bytes:
        return None
    shape, dtype = first.shape, first.dtype
    for v in values:
        if type(v) is not np.ndarray or v.shape != shape or v.dtype != dtype:
            return None
    return first


def stack_into(values: Sequence[np.ndarray], out: np.ndarray) -> np.ndarray:
    """Stack ``values`` (:func:`stackable`) into ``out``, C-contiguous, of shape
    ``(len(values), *shape)`` and their dtype; returns ``out``."""
    np.concatenate(values, axis=0, out=out.reshape((-1, *values[0].shape[1:])))
    return out


def _big_ints(stage: str, key: Any, values: Sequence[Any], arr: np.ndarray) -> np.ndarray:
    """numpy picked float64/object for integers (beyond int64, or uint64 mixed with signed
    ints): use int64 or uint64 when every value fits, never wrap or round, else refuse."""
    if not all(isinstance(v, (int, np.integer)) for v in values):
        if arr.dtype.kind == "f":
            return arr  # a genuine mix of ints and floats
        raise _type_error(stage, key, values)
    ints = [int(v) for v in values]
    lo, hi = min(ints), max(ints)
    if lo >= -(2**63) and hi < 2**63:
        return np.array(ints, dtype=np.int64)
    if lo >= 0 and hi < 2**64:
        return np.array(ints, dtype=np.uint64)
    raise ComponentError(
        f"{stage}: component {key!r} holds integers that fit neither int64 nor uint64 "
        f"(min {lo}, max {hi}); use use_list=True to keep Python ints"
    )


def _shape_error(stage: str, key: Any, values: Sequence[Any]) -> ComponentError:
    shapes = sorted({str(np.shape(v)) if _is_arraylike(v) else type(v).__name__ for v in values})
    return ComponentError(
        f"{stage}: component {key!r} cannot be stacked: its elements have different shapes "
        f"{', '.join(shapes)}. Make them equal, pad them (PaddedBatchData / .padded_batch), "
        f"group them (BatchDataByShape) or keep lists (use_list=True)"
    )


def _type_error(stage: str, key: Any, values: Sequence[Any]) -> ComponentError:
    kinds = sorted({type(v).__name__ for v in values})
    return ComponentError(
        f"{stage}: component {key!r} mixes types {kinds} in one batch; make them uniform or use use_list=True"
    )


def _is_arraylike(v: object) -> bool:
    return isinstance(v, (np.ndarray, list, tuple, *_NUMBER_TYPES))


def collate(
    stage: str,
    holder: list[Any],
    use_list: bool = False,
    stack: StackComponent = stack_component,
) -> Any:
    """Batch a list of datapoints component by component.

    List/tuple datapoints give a list of batched components; dict datapoints a dict. All
    datapoints must have the same number of components (or the same keys). ``stack`` batches
    one component (default :func:`stack_component`; one with the same results may choose
    where the memory comes from).
    """
    kinds = set(map(type, holder))
    if kinds <= _SEQUENCE_TYPES or all(isinstance(dp, (list, tuple)) for dp in holder):
        try:
            columns = list(zip(*holder, strict=True))
        except ValueError:
            sizes = sorted({len(dp) for dp in holder})
            raise ComponentError(
                f"{stage}: datapoints in one batch have different numbers of components {sizes}"
            ) from None
        if use_list:
            return [list(c) for c in columns]
        return [stack(stage, i, c) for i, c in enumerate(columns)]
    if all(isinstance(dp, dict) for dp in holder):
        keys = holder[0].keys()
        for n, dp in enumerate(holder):
            if dp.keys() != keys:
                raise ComponentError(
                    f"{stage}: dict datapoints in one batch have different keys: the first has "
                    f"{sorted(map(str, keys))}, datapoint {n} has {sorted(map(str, dp))} "
                    f"(missing {sorted(map(str, keys - dp.keys()))}, "
                    f"extra {sorted(map(str, dp.keys() - keys))})"
                )
        if use_list:
            return {k: [dp[k] for dp in holder] for k in keys}
        return {k: stack(stage, k, [dp[k] for dp in holder]) for k in keys}
    bad = next((dp for dp in holder if not isinstance(dp, (list, tuple, dict))), None)
    if bad is None:
        raise ComponentError(f"{stage}: a batch mixes dict and list/tuple datapoints")
    raise ComponentError(
        f"{stage}: a datapoint must be a list/tuple or dict of components, got "
        f"{describe_kind(bad)}; wrap single values as [value]"
    )
