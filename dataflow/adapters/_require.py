"""Importing an optional framework with an error that says what to install."""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["require"]


def require(module: str, extra: str, what: str) -> ModuleType:
    """``import module``, or ``ImportError`` naming the extra: ``pip install "dataflow-ml[extra]"``."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(
            f'{what} needs {module}, which is not installed: pip install "dataflow-ml[{extra}]" '
            f"(or install {module} yourself)"
        ) from e
