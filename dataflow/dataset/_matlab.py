"""MATLAB ``.mat`` files for the loaders that need them, through SciPy (an optional extra)."""

from __future__ import annotations

from typing import Any

from ..adapters._require import require
from ._paths import FormatError

__all__ = ["loadmat"]


def loadmat(stage: str, path: str) -> dict[str, Any]:
    scipy_io = require("scipy.io", "datasets", f"{stage} (reading .mat files)")
    try:
        return scipy_io.loadmat(path)  # type: ignore[no-any-return]
    except (ValueError, TypeError, OSError) as e:
        raise FormatError(f"{stage}: {path}: not a readable .mat file ({e})") from e


def field(stage: str, path: str, mat: dict[str, Any], key: str) -> Any:
    if key not in mat:
        raise FormatError(f"{stage}: {path}: no variable {key!r} in the .mat file")
    return mat[key]
