"""Arrays in memory that forked processes do not inherit: :func:`unforked_copy`.

A process forked while such an array exists gets no copy of its pages (``MADV_DONTFORK``),
so whatever this process then writes to or frees there never becomes the child's private
memory. In the child, the array's address range is taken by an inaccessible placeholder
mapping of no memory (made by an ``os.register_at_fork`` hook before any Python code of the
child runs): no other mapping of the child can land there, and freeing the inherited array
object in the child unmaps only the placeholder. Reading the array in the child is an
access to that placeholder (a segmentation fault): such arrays are for state that only the
process that made them reads, as an epoch's order is.

Linux only; elsewhere :func:`unforked_copy` returns an ordinary copy.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import sys
import weakref

import numpy as np

__all__ = ["unforked_copy"]

_LINUX = sys.platform.startswith("linux") and hasattr(mmap, "MADV_DONTFORK")
# Linux's values, the same on x86-64 and arm64 (the mmap module has no MAP_FIXED)
_PROT_NONE, _MAP_FIXED, _MAP_NORESERVE = 0, 0x10, 0x4000
_live: weakref.WeakValueDictionary[int, np.ndarray] = weakref.WeakValueDictionary()


def unforked_copy(values: np.ndarray) -> np.ndarray:
    """A 1-D int64 copy of ``values`` in memory that processes forked later do not inherit
    (see the module docstring)."""
    if not _LINUX:  # pragma: no cover - not Linux
        return np.array(values, dtype=np.int64)
    memory = mmap.mmap(-1, max(1, 8 * len(values)))
    memory.madvise(mmap.MADV_DONTFORK)
    held = np.frombuffer(memory, dtype=np.int64, count=len(values))  # keeps ``memory`` alive
    np.copyto(held, values, casting="same_kind")
    _live[id(held)] = held
    return held


def _placeholders_in_child() -> None:
    """In a forked child: an inaccessible mapping of no memory where each array was."""
    live = list(_live.values())
    if not live:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [
        ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long
    ]
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_FIXED | _MAP_NORESERVE
    for held in live:
        libc.mmap(held.ctypes.data, max(1, held.nbytes), _PROT_NONE, flags, -1, 0)


if _LINUX:
    os.register_at_fork(after_in_child=_placeholders_in_child)
