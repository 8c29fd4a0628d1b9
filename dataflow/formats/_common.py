"""What every storage format shares: the error type, optional-package imports, the file
metadata (format name, version, count, writer) and the save loop with its progress bar."""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from typing import Any, Union

from .._errors import FormatError
from .._progress import check_progress, progress_bar, progress_enabled
from .._version import __version__

__all__ = [
    "FormatError",
    "PathType",
    "check_flow",
    "check_meta",
    "fspath",
    "iterate_for_save",
    "make_meta",
    "require",
]

PathType = Union[str, "os.PathLike[str]"]


def require(module: str, extra: str, stage: str) -> Any:
    """Import the optional package ``module`` (an extra of ``dataflow-ml``) or raise an
    :class:`ImportError` saying how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(
            f"{stage} needs the optional package {module!r}, which is not installed; "
            f'install it with: pip install "dataflow-ml[{extra}]"'
        ) from e


def fspath(stage: str, name: str, path: object) -> str:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{stage}: {name} must be a str or os.PathLike, got {type(path).__name__} ({path!r})")
    return os.fspath(path)


def check_flow(stage: str, df: object) -> None:
    if isinstance(df, type) or not (hasattr(df, "__iter__") and hasattr(df, "reset_state")):
        what = df.__name__ if isinstance(df, type) else type(df).__name__
        raise TypeError(
            f"{stage}: df must be a DataFlow instance (with __iter__ and reset_state), got {what}; "
            f"wrap a list with DataFromList(...)"
        )


def make_meta(fmt: str, version: int, count: int) -> dict[str, Any]:
    """The metadata each saved file carries (encoded with the safe codec or as attributes)."""
    return {"format": fmt, "version": version, "count": count, "writer": f"dataflow-ml {__version__}"}


def check_meta(stage: str, path: str, meta: Any, fmt: str, supported: int) -> int:
    """Validate metadata read from ``path``; return its record count. Refuse another format
    and versions newer than ``supported``, naming the version (and library) that wrote it."""
    if not isinstance(meta, dict) or meta.get("format") != fmt:
        raise FormatError(f"{stage}: {path} has malformed {fmt} metadata ({meta!r}); is it a {fmt} file?")
    version, count = meta.get("version"), meta.get("count")
    if not isinstance(version, int) or version < 1:
        raise FormatError(f"{stage}: {path} has an invalid format version {version!r}")
    if version > supported:
        writer = meta.get("writer", "an unknown writer")
        raise FormatError(
            f"{stage}: {path} was written with {fmt} format version {version} (by {writer}), newer "
            f"than the version {supported} this library reads; upgrade dataflow-ml to read it"
        )
    if not isinstance(count, int) or count < 0:
        raise FormatError(f"{stage}: {path} has an invalid record count {count!r} in its metadata")
    return count


def iterate_for_save(stage: str, df: Any, progress: bool = True) -> Iterator[Any]:
    """``df.reset_state()``, then its datapoints, with a tqdm progress bar when ``len(df)``
    is known and ``progress`` (see :mod:`dataflow._progress`). The flow is not closed (the
    caller owns it)."""
    check_progress(stage, progress)
    check_flow(stage, df)
    df.reset_state()
    try:
        total: int | None = len(df)
    except (TypeError, NotImplementedError):  # LengthUnknownError is both
        total = None
    if total is None or not progress_enabled(progress):
        yield from df
        return
    with progress_bar(stage, progress, total=total, desc=stage, leave=False) as bar:
        for dp in df:
            yield dp
            bar.update()
