"""A restricted unpickler for the datasets distributed as Python pickles (CIFAR-10/100).

Those files hold plain dicts of lists, strings and numpy arrays. :func:`load_plain_pickle`
reconstructs exactly that: the only globals it lets a pickle name are numpy's array and dtype
rebuilders (``ndarray``, ``dtype``, ``_reconstruct``, ``scalar``) and the latin-1 ``bytes``
rebuilder Python 3 writes under protocol 2. Any other class or function
(``os.system``, ``builtins.eval``, a user class...) raises :class:`FormatError` before anything
runs, so a tampered file cannot execute code.
"""

from __future__ import annotations

import pickle
from typing import Any, BinaryIO

import numpy as np

from ..formats._common import FormatError

__all__ = ["load_plain_pickle"]


def _latin1_bytes(text: str, encoding: str = "latin1") -> bytes:
    """What Python 3 writes for ``bytes`` under pickle protocol 2 (``_codecs.encode``), limited
    to that one use."""
    if encoding not in ("latin1", "latin-1") or not isinstance(text, str):
        raise pickle.UnpicklingError(f"_codecs.encode with {encoding!r} is not plain data")
    return text.encode("latin1")


_ALLOWED = {
    ("_codecs", "encode"): _latin1_bytes,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("numpy.core.multiarray", "_reconstruct"): np._core.multiarray._reconstruct,  # type: ignore[attr-defined]
    ("numpy._core.multiarray", "_reconstruct"): np._core.multiarray._reconstruct,  # type: ignore[attr-defined]
    ("numpy.core.multiarray", "scalar"): np._core.multiarray.scalar,  # type: ignore[attr-defined]
    ("numpy._core.multiarray", "scalar"): np._core.multiarray.scalar,  # type: ignore[attr-defined]
}


class _PlainUnpickler(pickle.Unpickler):
    def __init__(self, f: BinaryIO, where: str) -> None:
        super().__init__(f, encoding="latin1")  # numpy's advice for Python 2 pickles
        self._where = where

    def find_class(self, module: str, name: str) -> Any:
        obj = _ALLOWED.get((module, name))
        if obj is None:
            raise FormatError(
                f"{self._where}: the pickle refers to {module}.{name}; only plain data and numpy "
                f"arrays are accepted from dataset files (refusing to run code from a file)"
            )
        return obj


def _plain_keys(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k.decode("latin1") if isinstance(k, bytes) else k: v for k, v in obj.items()}
    return obj


def load_plain_pickle(path: str, stage: str) -> Any:
    """Unpickle ``path`` allowing only plain data and numpy arrays; dict keys that are
    ``bytes`` become ``str`` (Python 2 and 3 pickles of the same file read alike)."""
    where = f"{stage}: {path}"
    with open(path, "rb") as f:
        try:
            return _plain_keys(_PlainUnpickler(f, where).load())
        except FormatError:
            raise
        except Exception as e:  # truncated or not a pickle
            raise FormatError(f"{where}: not a readable pickle ({type(e).__name__}: {e})") from e
