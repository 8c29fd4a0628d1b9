"""CRC-32C (Castagnoli), as TFRecord files use it, and TFRecord's masking of it.

:func:`crc32c` is ``google-crc32c`` (a core dependency of dataflow-ml: C, hardware
accelerated, GB/s). Only when that package is missing or was built without its C extension
(an unusual platform) does it fall back to :func:`crc32c_python`, a table-driven pure-Python
implementation (slicing by 8: correct, but about 10-30 MB/s), and it warns once when it does.
"""

from __future__ import annotations

import struct
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from .._warn import warn

__all__ = ["crc32c", "crc32c_parts", "crc32c_python", "implementation", "masked_crc32c", "mask"]

_POLY = 0x82F63B78  # CRC-32C, reflected
_MASK_DELTA = 0xA282EAD8


def _make_tables() -> list[list[int]]:
    first = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        first.append(c)
    tables = [first]
    for _ in range(7):  # tables[k][n]: the CRC of byte n followed by k zero bytes
        prev = tables[-1]
        tables.append([(prev[n] >> 8) ^ first[prev[n] & 0xFF] for n in range(256)])
    return tables


_T: list[list[int]] = []  # built on first use of the pure-Python CRC


def crc32c_python(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """CRC-32C of ``data`` in pure Python (continuing from ``crc``, 0 for a new one)."""
    if not _T:
        _T.extend(_make_tables())
    t0, t1, t2, t3, t4, t5, t6, t7 = _T
    view = memoryview(data).cast("B")
    c = crc ^ 0xFFFFFFFF
    n8 = len(view) // 8 * 8
    for lo, hi in struct.iter_unpack("<II", view[:n8]):
        lo ^= c
        c = (
            t7[lo & 0xFF]
            ^ t6[(lo >> 8) & 0xFF]
            ^ t5[(lo >> 16) & 0xFF]
            ^ t4[lo >> 24]
            ^ t3[hi & 0xFF]
            ^ t2[(hi >> 8) & 0xFF]
            ^ t1[(hi >> 16) & 0xFF]
            ^ t0[hi >> 24]
        )
    for b in view[n8:]:
        c = t0[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


_SLOW = (
    "dataflow.formats: {why}, so TFRecord checksums use a pure-Python CRC-32C (about 20 MB/s "
    "instead of GB/s); reinstall it with: pip install --force-reinstall google-crc32c"
)


def _select() -> tuple[Callable[[bytes], int], str]:
    try:
        with warnings.catch_warnings():  # it warns on import when it has no C extension
            warnings.simplefilter("ignore")
            import google_crc32c
    except ImportError:
        warn(_SLOW.format(why="google-crc32c (a dependency of dataflow-ml) is not installed"), RuntimeWarning)
        return crc32c_python, "python"
    if getattr(google_crc32c, "implementation", "c") != "c":  # its own fallback is slower still
        warn(_SLOW.format(why="google-crc32c was installed without its C extension"), RuntimeWarning)
        return crc32c_python, "python"
    return google_crc32c.value, "google-crc32c"


def _first_call(data: bytes) -> int:
    """Choose the implementation on first use (so importing this module imports nothing)."""
    global _crc, _implementation
    _crc, _implementation = _select()
    return _crc(data)


_crc: Callable[[bytes], int] = _first_call
_implementation = ""


def implementation() -> str:
    """``"google-crc32c"`` or ``"python"``: what :func:`crc32c` uses."""
    if not _implementation:
        crc32c(b"")
    return _implementation


def crc32c(data: bytes) -> int:
    """CRC-32C of ``data`` (``bytes``; an unsigned 32-bit int)."""
    return _crc(data)


def crc32c_parts(parts: Sequence[Any]) -> int:
    """CRC-32C of the concatenation of ``parts`` (contiguous buffers: bytes, memoryviews,
    arrays), without joining them into one ``bytes``."""
    crc = 0
    if implementation() == "google-crc32c":
        import google_crc32c
        import numpy as np

        extend = google_crc32c.extend
        for part in parts:  # its C code takes arrays and bytes, not memoryviews
            crc = extend(crc, part if isinstance(part, bytes) else np.frombuffer(part, np.uint8))
        return crc
    for part in parts:
        crc = crc32c_python(part, crc)
    return crc


def mask(crc: int) -> int:
    """TFRecord's masking of a CRC: ``((crc >> 15 | crc << 17) + 0xa282ead8) & 0xffffffff``."""
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    """TFRecord's masked CRC of ``data``."""
    c = _crc(data)
    return (((c >> 15) | (c << 17)) + _MASK_DELTA) & 0xFFFFFFFF
