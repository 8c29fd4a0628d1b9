"""Owned copies of received datapoints, for ``copy=True`` (no Ray here).

Ray hands the consumer numpy arrays of 100 KiB and more as **read-only views** of its object
store (zero-copy: they stay valid while referenced). :func:`owned` gives a datapoint whose
read-only arrays are replaced by private, writable copies; everything else is kept as is.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["owned"]


def owned(obj: Any) -> Any:
    """``obj`` with every read-only numpy array (in lists, tuples and dicts, nested) copied."""
    if isinstance(obj, np.ndarray):
        return obj if obj.flags.writeable else obj.copy()
    if isinstance(obj, list):
        return [owned(x) for x in obj]
    if isinstance(obj, dict):
        out = {k: owned(v) for k, v in obj.items()}
        if type(obj) is not dict:
            try:
                return type(obj)(out)
            except TypeError:  # e.g. defaultdict: its first argument is the factory
                pass
        return out
    if isinstance(obj, tuple):
        items = [owned(x) for x in obj]
        return type(obj)(*items) if hasattr(obj, "_fields") else type(obj)(items)
    return obj
