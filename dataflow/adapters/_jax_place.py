"""Placing the numeric numpy leaves of a batch on a JAX device, cheaply.

``jax.device_put`` spends more Python per array before its C++ transfer (flattening,
abstractifying, sharding checks) than the transfer itself takes on the CPU backend when the
array is 64-byte aligned (XLA then aliases the numpy buffer instead of copying it). For a
single-device target :class:`Placer` calls that C++
transfer (``batched_device_put``, the function ``jax.device_put`` ends in) with the same
abstract value, sharding and ``committed`` flag ``jax.device_put`` would use, and checks
once per dtype that the result matches ``jax.device_put``'s (type, abstract value, sharding,
committed); on any difference or error, or for a multi-device sharding, it uses
``jax.device_put`` itself. jax's internals are only read, never patched.

The target is resolved when the :class:`Placer` is made, in the consumer's thread (the
default device and ``jax_enable_x64`` may be set per thread, by ``jax.default_device`` and
``jax.enable_x64``); placing may then happen in any thread.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..ops._stack import stack_component, stack_into, stackable
from ._aligned import ALIGN, AlignedPool
from ._require import require

jax = require("jax", "jax", "dataflow.adapters.jax")

__all__ = ["Placer", "is_array_leaf"]

log = logging.getLogger("dataflow.adapters.jax")
_MAX_AVALS = 256  # cached abstract values (one per shape and dtype); cleared when full
_WIDE = (np.int64, np.uint64, np.float64, np.complex128)
_ALIGN_MIN_BYTES = 64 * 1024  # below this, XLA's own (synchronous) copy is as cheap
_POOL = 8  # aligned buffers kept (arrays alive in the consumer hold theirs)


def is_array_leaf(x: Any) -> bool:
    """A numeric numpy array or scalar: what :func:`prefetch_to_device` transfers."""
    return isinstance(x, (np.ndarray, np.generic)) and x.dtype.kind in "iufcb"


def _internals() -> tuple[Any, Any] | None:
    """``(batched_device_put, ShapedArray)`` from jax's internals, or ``None`` where this jax
    lacks one of them."""
    try:
        from jax._src import core
        from jax._src.lib import xla_client  # type: ignore[attr-defined]

        return xla_client.batched_device_put, core.ShapedArray
    except Exception:  # another jax version: the public path only
        return None


class Placer:
    """``place(x)``: ``x`` (a numeric numpy array or scalar) as a ``jax.Array`` on the target
    that ``jax.device_put(x, sharding)`` would give in the thread that made this object."""

    def __init__(self, sharding: Any) -> None:
        self.sharding = sharding
        self._device: Any = None
        target: Any = None  # a single-device sharding: the direct transfer may be used
        if sharding is None:
            probe = jax.device_put(np.zeros(0, np.float32))
            self._device, target = next(iter(probe.sharding.device_set)), probe.sharding
        elif isinstance(sharding, jax.Device):
            self._device, target = sharding, jax.sharding.SingleDeviceSharding(sharding)
        elif isinstance(sharding, jax.sharding.SingleDeviceSharding):
            self._device, target = next(iter(sharding.device_set)), sharding
        self._target = target
        self._committed = sharding is not None
        # the dtypes jax makes of 64-bit ones (32-bit unless jax_enable_x64), read here
        self._canonical = {np.dtype(t): np.dtype(jax.dtypes.canonicalize_dtype(t)) for t in _WIDE}
        self._x64 = self._canonical[np.dtype(np.int64)] == np.dtype(np.int64)
        self._avals: dict[tuple[tuple[int, ...], np.dtype], Any] = {}
        self._fast = _internals() if target is not None else None
        # on the CPU backend an aligned array is aliased, an unaligned one copied by XLA at
        # about a third of memcpy's speed: a copy of ours into aligned memory is cheaper
        self._align = self._device is not None and self._device.platform == "cpu"
        self._buffers = AlignedPool(_POOL)
        if self._fast is not None and not self._matches_device_put():
            self._fast = None
        #: batches stacked by :meth:`stack` are placed without a copy
        self.aligns = self._align and self._fast is not None

    def stack(self, stage: str, key: Any, values: Sequence[Any]) -> Any:
        """A ``stack`` for :func:`~dataflow.ops._stack.collate` (what ``BatchData`` batches
        with): a large numeric component (one :func:`is_array_leaf` places) is stacked
        straight into aligned memory that XLA then uses as it is, instead of being stacked
        and then copied there. Same results as
        :func:`~dataflow.ops._stack.stack_component`. Call it in the thread that places."""
        first = stackable(values, _ALIGN_MIN_BYTES)
        if first is None or not first.dtype.isnative or first.dtype.kind not in "iufcb":
            return stack_component(stage, key, values)
        return stack_into(values, self._buffers.empty((len(values), *first.shape), first.dtype))

    def _matches_device_put(self) -> bool:
        """The direct transfer gives what ``jax.device_put`` gives here (checked on a few
        dtypes, in the consumer's thread)."""
        for dtype in (np.float32, np.int64, np.uint8, np.bool_):
            x = np.ones((2, 3), dtype)
            try:
                fast, ref = self._direct(x), jax.device_put(x, self.sharding)
                if (
                    type(fast) is type(ref)
                    and fast.aval == ref.aval
                    and fast.sharding == ref.sharding
                    and fast.committed == ref.committed
                    and np.array_equal(np.asarray(fast), np.asarray(ref))
                ):
                    continue
                why = f"it gives {fast.aval} on {fast.sharding}, jax.device_put {ref.aval} on {ref.sharding}"
            except Exception as e:
                why = f"{type(e).__name__}: {e}"
            log.debug("prefetch_to_device: using jax.device_put (the direct transfer differs: %s)", why)
            return False
        return True

    def _direct(self, x: np.ndarray) -> Any:
        key = (x.shape, x.dtype)
        aval = self._avals.get(key)
        fast: Any = self._fast
        if aval is None:
            if len(self._avals) >= _MAX_AVALS:
                self._avals.clear()
            aval = self._avals[key] = fast[1](x.shape, self._canonical.get(x.dtype, x.dtype))
        return fast[0](aval, self._target, [x], [self._device], self._committed, enable_x64=self._x64)

    def _public(self, x: Any) -> Any:
        if self.sharding is None:  # the default device of the thread that made this placer
            with jax.default_device(self._device):
                return jax.device_put(x)
        return jax.device_put(x, self.sharding)

    def __call__(self, x: Any) -> Any:
        if self._fast is None or type(x) is not np.ndarray:
            return self._public(x)
        if not x.flags.c_contiguous or not x.dtype.isnative:
            return self._public(x)
        if self._align and x.nbytes >= _ALIGN_MIN_BYTES and x.__array_interface__["data"][0] % ALIGN:
            # XLA keeps a reference to an aliased array: the pool reuses a buffer only after it
            aligned = self._buffers.empty(x.shape, x.dtype)
            np.copyto(aligned, x)
            x = aligned
        try:
            return self._direct(x)
        except Exception:  # e.g. a dtype the direct path does not take: jax.device_put decides
            return self._public(x)
