"""Handing datapoints to tf.data several at a time (used by ``dataflow_to_dataset``).

Every element that ``tf.data.Dataset.from_generator`` takes from Python costs one call from
one of tf.data's threads into Python and back, whatever the element's size.
:func:`grouped_dataset` pays it once per *group*: its generator reads up to
:data:`GROUP_MAX` consecutive datapoints of equal shapes (fewer when they reach
:data:`GROUP_BYTES`, when reading them took :data:`GROUP_WINDOW_S`, at a change of shape, at
the end or at an error) into one 64-byte aligned array per component, which TensorFlow can
use without a copy (see :mod:`._tf_fill`: each datapoint is copied into its row as it is read,
and a plain ``BatchData``'s batches are stacked straight into theirs), and tf.data splits the
group again (``flat_map`` of ``from_tensor_slices``).

What the consumer sees is unchanged: the same elements, in the same order, with the same
dtypes and shapes (the signature's); an epoch of the flow per iteration; an exception in the
flow ends the iteration after every datapoint read before it, as a ``tf.errors.OpError``
naming the original type and message. What changes: the flow is read up to a group ahead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ..base import close_iterator
from ..ops._stack import StackComponent
from ._malloc import lift_mmap_threshold
from ._require import require
from ._tf_fill import GROUP_BYTES, GROUP_MAX, GROUP_WINDOW_S, STAGE, GroupFiller

tf = require("tensorflow", "tf", "dataflow.adapters.tf")

__all__ = ["GROUP_BYTES", "GROUP_MAX", "GROUP_WINDOW_S", "generator_dataset", "grouped_dataset"]


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


def grouped_dataset(open_flow: Callable[[StackComponent], Iterator[Any]], signature: Any) -> Any:
    """A dataset of the datapoints of ``open_flow(stack)`` (one call per iteration of the
    dataset, closed when it ends), handed over in groups; ``signature`` must be flat (see
    :func:`flat_signature`). ``open_flow`` may batch with ``stack`` (a
    :data:`~dataflow.ops._stack.StackComponent`) to stack batches straight into the group."""
    flat = flat_signature(signature)
    if flat is None:
        raise ValueError(f"{STAGE}: cannot group datapoints of signature {signature!r}")
    keys, specs = flat
    group_specs = [tf.TensorSpec((None, *s.shape), s.dtype) for s in specs]
    group_signature = dict(zip(keys, group_specs)) if keys is not None else tuple(group_specs)

    def generator() -> Iterator[Any]:
        filler = GroupFiller(keys, specs)
        it = open_flow(filler.stack)
        try:
            for arrays in filler.groups(it):
                yield dict(zip(keys, arrays)) if keys is not None else tuple(arrays)
        finally:
            close_iterator(it)

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
