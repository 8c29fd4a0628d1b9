"""All-or-nothing file writes: write to a temporary file next to the target, then rename.

A save that fails or is interrupted (an exception in the flow, ``KeyboardInterrupt``, a
killed process) removes its temporary file, or leaves it under its temporary name, and
leaves the target untouched: either there is no file at the target path, or the complete
previous one. The rename (``os.replace``) is atomic on POSIX and Windows.

With ``durable=True`` the data is also flushed to the disk (``fsync``) before the rename and
the rename after it, so the file survives a power loss or a kernel crash too. It is off by
default, as in ``tf.io.TFRecordWriter``, ``numpy.save`` and ``torch.save``: a killed or
preempted process loses nothing the page cache holds, and the flush makes a save wait for
the disk (measured: a 50 MB TFRecord save took 3x as long). A file cut short by a power loss
is detected when read (record counts, CRCs), never read as if complete.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator

__all__ = ["atomic_write", "check_target"]


def check_target(stage: str, path: str, overwrite: bool) -> None:
    """Refuse to replace an existing file unless ``overwrite``; refuse a missing directory."""
    if os.path.isdir(path):
        raise IsADirectoryError(f"{stage}: {path} is a directory; give a file path to write to")
    if os.path.exists(path) and not overwrite:
        raise FileExistsError(
            f"{stage}: {path} already exists; remove it or pass overwrite=True to replace it "
            f"(the old file stays intact until the new one is complete)"
        )
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise FileNotFoundError(f"{stage}: the directory {parent} of {path} does not exist; create it first")


@contextlib.contextmanager
def atomic_write(
    stage: str, path: str, overwrite: bool = False, durable: bool = False, create: bool = True
) -> Iterator[str]:
    """Yield a temporary path in ``path``'s directory; on a clean exit, rename it to
    ``path`` (fsyncing the file before and its directory after when ``durable``); on any
    exception (``BaseException`` included) delete it and re-raise.

    The temporary file exists, empty: write it opened **without** truncating it (``"r+b"``,
    ``os.O_WRONLY``). On ext4 (``auto_da_alloc``, the default), a file truncated and then
    written is flushed to the disk by its ``close()``, synchronously: ~0.5 s per GB here,
    for a guarantee that ``durable`` gives when it is wanted. With ``create=False`` the
    path does not exist yet, for a writer that can only create a file or truncate one
    (``h5py``: create it exclusively, mode ``"x"``); it lies in a new private directory
    next to ``path`` (removed afterwards), so cleaning up after a failure can only remove
    what this save made."""
    check_target(stage, path, overwrite)
    directory, name = os.path.split(os.path.abspath(path))
    private = None if create else _create_temp_dir(directory, name)
    tmp = _create_temp(directory, name) if private is None else os.path.join(private, name)
    try:
        try:
            yield tmp
            if durable:
                _fsync(tmp)
            os.replace(tmp, path)
        except BaseException:
            _remove(tmp)
            raise
    finally:
        if private is not None:
            with contextlib.suppress(OSError):
                os.rmdir(private)
    if durable:
        _fsync_dir(directory)


def _temp_name(directory: str, name: str) -> str:
    return os.path.join(directory, f".{name}.{secrets.token_hex(6)}.tmp")


def _create_temp_dir(directory: str, name: str) -> str:
    """A new empty directory ``.<name>.<random>.tmp`` (owner-only, like ``mkdtemp``)."""
    while True:
        tmp = _temp_name(directory, name)
        try:
            os.mkdir(tmp, 0o700)
        except FileExistsError:
            continue
        return tmp


def _create_temp(directory: str, name: str) -> str:
    """A new empty file ``.<name>.<random>.tmp``, with the permissions a plain ``open``
    gives (``0o666`` less the umask; ``tempfile.mkstemp`` would make it owner-only)."""
    while True:
        tmp = _temp_name(directory, name)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        os.close(fd)
        return tmp


def _remove(path: str) -> None:
    for p in (path, path + "-lock"):  # LMDB opened with a lock would leave "<file>-lock"
        with contextlib.suppress(FileNotFoundError):
            os.remove(p)


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(directory: str) -> None:
    """Make the rename durable; not every platform can fsync a directory."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
