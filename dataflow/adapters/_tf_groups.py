"""Handing datapoints to tf.data several at a time (used by ``dataflow_to_dataset``).

Every element that ``tf.data.Dataset.from_generator`` takes from Python costs one call from
one of tf.data's threads into Python and back (about 0.5-1 ms on a 2-core machine, whatever
the element's size). :func:`grouped_dataset` pays it once per *group*: its generator reads up
to :data:`GROUP_MAX` consecutive datapoints of equal shapes (fewer when they reach
:data:`GROUP_BYTES`, when reading them took :data:`GROUP_WINDOW_S`, at a change of shape, at
the end or at an error), stacks each component into one array (64-byte aligned, so
TensorFlow can use it without a copy) and tf.data splits the group again
(``flat_map`` of ``from_tensor_slices``).

What the consumer sees is unchanged: the same elements, in the same order, with the same
dtypes and shapes (the signature's); an epoch of the flow per iteration; an exception in the
flow ends the iteration after every datapoint read before it, as a ``tf.errors.OpError``
naming the original type and message. What changes: the flow is read up to a group ahead.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ..ops._components import describe_kind
from ._aligned import AlignedPool
from ._malloc import lift_mmap_threshold
from ._require import require

tf = require("tensorflow", "tf", "dataflow.adapters.tf")

__all__ = ["GROUP_BYTES", "GROUP_MAX", "GROUP_WINDOW_S", "generator_dataset", "grouped_dataset"]

GROUP_MAX = 16  #: datapoints per crossing into tf.data, at most
GROUP_BYTES = 16 * 2**20  #: a group stops growing once it holds this many bytes
GROUP_WINDOW_S = 0.02  #: ... or once reading it took this long (a slow flow crosses alone)
_POOL = 4  # group buffers kept per component
_STAGE = "dataflow_to_dataset"


def flat_signature(signature: Any) -> tuple[list[Any] | None, list[Any]] | None:
    """``(keys, specs)`` of a flat tuple (``keys=None``) or dict of ``tf.TensorSpec``;
    ``None`` for any other signature (nested, ragged, sparse: not grouped)."""
    if isinstance(signature, dict):
        keys: list[Any] | None = list(signature)
        specs = list(signature.values())
    elif isinstance(signature, tuple):
        keys, specs = None, list(signature)
    else:
        return None
    if not specs or not all(isinstance(s, tf.TensorSpec) for s in specs):
        return None
    return keys, specs


def grouped_dataset(open_flow: Callable[[], Iterator[Any]], signature: Any) -> Any:
    """A dataset of the datapoints of ``open_flow()`` (one call per iteration of the dataset,
    closed when it ends), handed over in groups; ``signature`` must be flat (see
    :func:`flat_signature`)."""
    flat = flat_signature(signature)
    if flat is None:
        raise ValueError(f"{_STAGE}: cannot group datapoints of signature {signature!r}")
    keys, specs = flat
    group_specs = [tf.TensorSpec((None, *s.shape), s.dtype) for s in specs]
    group_signature = dict(zip(keys, group_specs)) if keys is not None else tuple(group_specs)
    stackers = [_Stacker(keys[i] if keys is not None else i, s) for i, s in enumerate(specs)]

    def generator() -> Iterator[Any]:
        it = open_flow()
        try:
            for columns in _groups(it, keys, len(specs)):
                arrays = [st.stack(col) for st, col in zip(stackers, columns)]
                yield dict(zip(keys, arrays)) if keys is not None else tuple(arrays)
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                close()

    groups = generator_dataset(generator, group_signature)
    if keys is not None:
        return groups.flat_map(lambda group: tf.data.Dataset.from_tensor_slices(group))
    # (measured: splitting with from_tensor_slices costs less than .unbatch())
    return groups.flat_map(lambda *group: tf.data.Dataset.from_tensor_slices(group))


def generator_dataset(generator: Callable[[], Iterator[Any]], signature: Any) -> Any:
    """``tf.data.Dataset.from_generator(generator, output_signature=signature)``, whose every
    iteration first sets malloc's thresholds back (after ``from_generator``'s kernel has frozen
    them; see :mod:`._malloc`). Every ``from_generator`` of the adapters goes through here."""

    def lifted() -> Iterator[Any]:
        lift_mmap_threshold()
        yield from generator()  # closing this closes generator() too

    return tf.data.Dataset.from_generator(lifted, output_signature=signature)


def _groups(it: Iterator[Any], keys: list[Any] | None, width: int) -> Iterator[list[list[Any]]]:
    """Groups of consecutive datapoints of equal component shapes, as columns."""
    clock = time.perf_counter
    pending: list[Any] | None = None  # a datapoint that did not fit the last group
    while True:
        columns: list[list[Any]] = [[] for _ in range(width)]
        shapes: tuple[Any, ...] | None = None
        most = GROUP_MAX
        count = 0
        error: BaseException | None = None
        ended = False
        start = clock()
        if pending is not None:
            shapes, most = _first(pending, columns)
            count, pending = 1, None
        try:
            while count < most and (count == 0 or clock() - start < GROUP_WINDOW_S):
                values = _components(next(it), keys, width)
                if count == 0:
                    shapes, most = _first(values, columns)
                elif _shapes(values) != shapes:
                    pending = values
                    break
                else:
                    for col, v in zip(columns, values):
                        col.append(v)
                count += 1
        except StopIteration:
            ended = True
        except Exception as e:  # delivered after the datapoints read before it
            error = e
        if count:
            yield columns
        if error is not None:
            raise error
        if ended:
            return


def _first(values: list[Any], columns: list[list[Any]]) -> tuple[tuple[Any, ...], int]:
    """Start a group with ``values``: its shapes and how many datapoints it may hold."""
    for col, v in zip(columns, values):
        col.append(v)
    nbytes = sum(v.nbytes if isinstance(v, np.ndarray) else 8 for v in values)
    return _shapes(values), max(1, min(GROUP_MAX, GROUP_BYTES // max(1, nbytes)))


def _shapes(values: list[Any]) -> tuple[Any, ...]:
    return tuple(v.shape if type(v) is np.ndarray else np.shape(v) for v in values)


def _components(dp: Any, keys: list[Any] | None, width: int) -> list[Any]:
    """The components of one datapoint in signature order; a clear error if it does not
    have the signature's structure."""
    if keys is not None:
        if isinstance(dp, dict) and len(dp) == width and all(k in dp for k in keys):
            return [dp[k] for k in keys]
        raise TypeError(f"{_STAGE}: the signature has keys {keys}, the flow yielded a {describe_kind(dp)}")
    if not isinstance(dp, (list, tuple)) or len(dp) != width:
        raise TypeError(
            f"{_STAGE}: the signature has {width} components, the flow yielded a {describe_kind(dp)}"
        )
    return list(dp)


class _Stacker:
    """Stacks one component of a group into an array of the signature's dtype (numeric
    groups into pooled aligned buffers, see :mod:`._aligned`)."""

    def __init__(self, key: Any, spec: Any) -> None:
        self.key = key
        self.shape = tuple(spec.shape.as_list()) if spec.shape.rank is not None else None
        self.string = spec.dtype == tf.string
        self.dtype = np.dtype(object) if self.string else np.dtype(spec.dtype.as_numpy_dtype)
        self._pool = AlignedPool(_POOL)

    def stack(self, values: list[Any]) -> np.ndarray:
        first = values[0]
        shape = first.shape if type(first) is np.ndarray else np.shape(first)
        self._check(shape)
        try:
            if type(first) is np.ndarray and not self.string:
                out = self._pool.empty((len(values), *shape), self.dtype)
                np.stack(values, out=out, casting="unsafe")
                return out
            return np.asarray(values, dtype=self.dtype)
        except (TypeError, ValueError) as e:
            raise TypeError(
                f"{_STAGE}: component {self.key!r} ({type(first).__name__} of shape {shape}) cannot be "
                f"converted to the signature's {self.dtype if not self.string else 'string'}: {e}"
            ) from None

    def _check(self, shape: tuple[int, ...]) -> None:
        want = self.shape
        if want is None:
            return
        if len(shape) != len(want) or any(w is not None and w != d for w, d in zip(want, shape)):
            raise TypeError(
                f"{_STAGE}: component {self.key!r} has shape {tuple(shape)}, but the signature "
                f"says {tuple(want)} (None: any size); pass output_signature= to allow it"
            )
