"""Giving large allocations back their heap where ``tf.data``'s ``from_generator`` takes it.

TensorFlow's ``GeneratorDataset`` kernel (what ``tf.data.Dataset.from_generator`` runs) calls
``mallopt(M_MMAP_THRESHOLD, 128 KiB)`` when it is created. That freezes glibc's adaptive
thresholds for the whole process: every allocation above 128 KiB becomes a fresh memory map,
released again when freed, so a flow that makes a new batch array per batch pays a page fault
per 4 KiB of it, every batch.

:func:`lift_mmap_threshold` sets the two thresholds where glibc's own adaptive rule takes them
for large buffers: the mmap threshold at 32 MiB (``DEFAULT_MMAP_THRESHOLD_MAX`` on 64-bit
glibc) and the trim threshold at twice that; freed blocks below 32 MiB then stay in malloc's
heaps for the next batch, as in any process where TensorFlow has not run.
``dataflow_to_dataset`` and ``ZMQInput`` call it when each iteration of their dataset starts
(after TensorFlow's kernel has set its value). ``DATAFLOW_MALLOPT=0`` in the environment leaves
malloc as TensorFlow set it. Only glibc has these settings; elsewhere this does nothing.
"""

from __future__ import annotations

import ctypes
import logging
import os
from typing import Any

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "lift_mmap_threshold"]

log = logging.getLogger("dataflow.adapters.tf")

MMAP_THRESHOLD = 32 * 2**20  #: glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD  #: what glibc's adaptive rule pairs with it
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # <malloc.h>
_OPT_OUT = "DATAFLOW_MALLOPT"


_mallopt: Any = None  # glibc's, if the process's C library is glibc
try:
    _libc = ctypes.CDLL(None)
    _libc.gnu_get_libc_version  # noqa: B018 (only glibc has it)
    _mallopt = _libc.mallopt
except (OSError, AttributeError, TypeError):  # TypeError: Windows has no CDLL(None)
    pass
_logged = False


def lift_mmap_threshold() -> bool:
    """Set glibc's mmap and trim thresholds to 32 MiB and 64 MiB; ``True`` when both were set
    (``False`` without glibc, or with ``DATAFLOW_MALLOPT=0``). Process-wide, cheap (two calls
    into libc), safe from any thread."""
    global _logged
    if _mallopt is None or os.environ.get(_OPT_OUT, "1") == "0":
        return False
    done = all(
        _mallopt(param, value) == 1
        for param, value in ((_M_MMAP_THRESHOLD, MMAP_THRESHOLD), (_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    )
    if not _logged:
        _logged = True
        log.debug(
            "malloc thresholds %s: mmap %d, trim %d bytes (%s=0 leaves them as TensorFlow set them)",
            "set" if done else "NOT set", MMAP_THRESHOLD, TRIM_THRESHOLD, _OPT_OUT,
        )
    return done
