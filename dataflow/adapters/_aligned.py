"""64-byte aligned host buffers, reused once nothing refers to them.

TensorFlow and XLA's CPU client use a numpy array's memory as it is (no copy) when it is
aligned to 64 bytes, and keep a reference to the array for as long as they use it. A fresh
multi-megabyte allocation costs a page fault per 4 KiB on first touch, more than copying the
bytes; so the buffers are pooled, and one is handed out again only when no array (ours,
TensorFlow's, XLA's or the user's) views it any more: its reference count says so.
"""

from __future__ import annotations

import math
import sys

import numpy as np

__all__ = ["ALIGN", "AlignedPool"]

ALIGN = 64


class AlignedPool:
    """Up to ``size`` buffers; :meth:`empty` gives an uninitialised C-order array in one that
    is free (or in a new one). Not thread-safe: one pool per producer."""

    def __init__(self, size: int = 4) -> None:
        self.size = size
        self._pool: list[np.ndarray] = []  # raw uint8 buffers
        self._starts: list[int] = []  # offset of each buffer's first aligned byte

    def empty(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        # math.prod and the offsets kept: np.prod and ndarray.ctypes cost ~10 us per call, as
        # much as the transfer this buffer saves a copy for
        need = math.prod(shape) * dtype.itemsize + ALIGN
        pool = self._pool
        # free: only the pool (and getrefcount's argument) refers to it, no view is left
        free = [i for i in range(len(pool)) if sys.getrefcount(pool[i]) <= 2]
        fit = [i for i in free if pool[i].nbytes >= need]
        if fit:
            raw, start = pool[fit[0]], self._starts[fit[0]]
        else:
            raw = np.empty(need, np.uint8)
            start = -raw.ctypes.data % ALIGN
            if len(pool) < self.size:
                pool.append(raw)
                self._starts.append(start)
            elif free:  # replace the smallest buffer not in use
                i = min(free, key=lambda i: pool[i].nbytes)
                pool[i], self._starts[i] = raw, start
        return raw[start : start + need - ALIGN].view(dtype).reshape(shape)
