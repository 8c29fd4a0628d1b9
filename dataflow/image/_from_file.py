"""Reading image files: :class:`ImageFromFile`."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..formats._common import FormatError
from ..formats._storage import STORAGE_ARGS, ShardStorage, StorageReader, redact
from ..imgaug._opencv import cv2
from ..imgaug.misc import shape2d
from ..sources._indexed import IndexedSource

__all__ = ["ImageFromFile"]


class ImageFromFile(StorageReader, IndexedSource[Any]):
    """Yield ``[image]`` for each file of ``files``: an ``(h, w, 3)`` RGB ``uint8`` array
    (``channel=3``; grayscale files are converted) or ``(h, w, 1)`` (``channel=1``),
    resized to ``resize`` (``(h, w)`` or an int) when given.

    ``shuffle``: a new order every epoch, drawn from ``self.rng`` (``seed=``, else
    :func:`dataflow.set_seed`; ``reset_state()`` is then required). ``files`` is copied, never
    reordered in place (tensorpack shuffled the caller's list). ``len`` is exact; random access,
    so it resumes without re-reading and ``.shard()`` reads only its rank's files. A file OpenCV
    cannot decode raises :class:`~dataflow.FormatError` naming it; a missing file,
    :class:`FileNotFoundError`. Images are contiguous arrays.

    ``files`` may also hold fsspec URLs and globs (expanded once, sorted), read with the
    keyword arguments of remote files (``storage_options=``, ``retries=``, ``timeout=``,
    ``cache_dir=``...; see :doc:`/object_stores`): one request per image, so put a thread or
    process map after it to fetch several at once.
    """

    def __init__(
        self,
        files: Sequence[str],
        channel: int = 3,
        resize: Any = None,
        shuffle: bool = False,
        *,
        seed: int | None = None,
        **storage: Any,
    ) -> None:
        super().__init__(seed)
        if isinstance(files, (str, bytes)) or not isinstance(files, Sequence):
            raise TypeError(f"ImageFromFile: files must be a list of paths, got {type(files).__name__}")
        if len(files) == 0:
            raise ValueError("ImageFromFile: no image files given")
        unknown = sorted(set(storage) - set(STORAGE_ARGS))
        if unknown:
            raise TypeError(f"ImageFromFile: unexpected keyword argument {unknown[0]!r}")
        self._storage = ShardStorage("ImageFromFile", list(files), name="files", **storage)
        self.files = self._storage.urls
        if channel not in (1, 3):
            raise ValueError(f"ImageFromFile: channel must be 1 or 3, got {channel!r}")
        self.channel = int(channel)
        self.resize = None if resize is None else shape2d(resize, "ImageFromFile")
        self._shuffle = bool(shuffle)

    @property
    def imread_mode(self) -> int:
        """The ``cv2.imread`` flag used (tensorpack's attribute)."""
        return 0 if self.channel == 1 else 1  # cv2.IMREAD_GRAYSCALE / IMREAD_COLOR

    def _num_items(self) -> int:
        return len(self.files)

    def _getter(self) -> Callable[[int], Any]:
        return self._read

    def _read(self, i: int) -> list[np.ndarray]:
        cv = cv2()
        path = self.files[i]
        if self._storage.remote:
            data = np.frombuffer(self._storage.fetch(i), np.uint8)
            im = cv.imdecode(data, self.imread_mode) if data.size else None
            path = redact(path)
        else:
            im = cv.imread(path, self.imread_mode)
        if im is None:
            if not self._storage.remote and not os.path.isfile(path):
                raise FileNotFoundError(f"ImageFromFile: no such image file: {path}")
            raise FormatError(f"ImageFromFile: {path}: OpenCV cannot decode it as an image")
        if self.resize is not None:
            im = cv.resize(im, (self.resize[1], self.resize[0]))
        if self.channel == 3:
            im = cv.cvtColor(im, cv.COLOR_BGR2RGB)
        else:
            im = im[:, :, np.newaxis]
        return [im]
