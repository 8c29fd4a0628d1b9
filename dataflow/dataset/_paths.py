"""Where the dataset loaders look for files, and the errors they raise when files are missing.

Order: the explicit ``dir=``/``data_dir=`` argument; else ``$TENSORPACK_DATASET/<name>``; else
``~/tensorpack_data/<name>`` (tensorpack's places, so existing downloads are found). Nothing is
downloaded: a missing file raises :class:`FileNotFoundError` naming the path looked at and
where the official files come from.
"""

from __future__ import annotations

import os
from typing import Any

from ..formats._common import FormatError

__all__ = ["FormatError", "check_choice", "dataset_dir", "missing", "require_file"]


def dataset_dir(name: str, explicit: Any = None) -> str:
    """The directory of dataset ``name``: ``explicit`` if given, else under
    ``$TENSORPACK_DATASET``, else under ``~/tensorpack_data``."""
    if explicit is not None:
        return os.path.expanduser(os.fspath(explicit))  # type: ignore[no-any-return]
    root = os.environ.get("TENSORPACK_DATASET") or os.path.join(os.path.expanduser("~"), "tensorpack_data")
    return os.path.join(root, name)


def missing(stage: str, path: str, source: str) -> FileNotFoundError:
    return FileNotFoundError(
        f"{stage}: {path!r} does not exist. Put the official files there ({source}), or pass "
        f"the directory explicitly, or set $TENSORPACK_DATASET to the folder holding them; "
        f"nothing is downloaded automatically"
    )


def require_file(stage: str, path: str, source: str) -> str:
    if not os.path.isfile(path):
        raise missing(stage, path, source)
    return path


def check_choice(stage: str, name: str, value: object, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ValueError(f"{stage}: {name} must be one of {', '.join(map(repr, choices))}, got {value!r}")
    return str(value)
