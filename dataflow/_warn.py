"""Warnings that point at the user's line: :func:`warn` attributes a warning to the first
frame outside the ``dataflow`` package (what Python 3.12's ``skip_file_prefixes`` does),
so it names the user's call (``.shard(...)``, ``reset_state()``, the ``for`` loop) however
deep inside the library it was raised and whichever spelling (class or fluent) was used."""

from __future__ import annotations

import os
import sys
import warnings

__all__ = ["warn"]

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn(message: str, category: type[Warning]) -> None:
    """``warnings.warn(message, category)`` attributed to the user's code."""
    frame = sys._getframe(1)  # the function that called warn(): stacklevel 2
    level = 2
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level)
