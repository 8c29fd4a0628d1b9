"""Lines of text files: :class:`TextLineData`."""

from __future__ import annotations

import codecs
import os
from collections.abc import Iterator, Sequence
from typing import Union

from ..base import RNGDataFlow

__all__ = ["TextLineData"]

PathType = Union[str, bytes, "os.PathLike[str]"]


class TextLineData(RNGDataFlow):
    """Yield ``[line]`` (a ``str``) for each line of each file (``tf.data.TextLineDataset``).

    Files are read in the given order, or in a new order each epoch with ``shuffle=True``;
    lines in file order. Trailing newlines (``\\n``, ``\\r\\n``, ``\\r``) are removed unless
    ``strip_newline=False`` (then each is given as ``\\n``). ``reset_state()`` is required and
    raises :class:`FileNotFoundError` for missing files. Each epoch opens its own files and
    closes them when it ends or its iterator is closed. ``len`` is unknown. Reentrant.
    """

    def __init__(
        self,
        paths: PathType | Sequence[PathType],
        strip_newline: bool = True,
        encoding: str = "utf-8",
        shuffle: bool = False,
        seed: int | None = None,
    ) -> None:
        super().__init__(seed)
        plist = [paths] if isinstance(paths, (str, bytes, os.PathLike)) else paths
        if not isinstance(plist, (list, tuple)):
            raise TypeError(
                f"TextLineData: paths must be a path or a list of paths, got {type(paths).__name__}"
            )
        if not plist:
            raise ValueError("TextLineData: paths is empty; give at least one file")
        for p in plist:
            if not isinstance(p, (str, bytes, os.PathLike)):
                raise TypeError(
                    f"TextLineData: each path must be a str or os.PathLike, got {p!r} ({type(p).__name__})"
                )
        try:
            codecs.lookup(encoding)
        except (LookupError, TypeError):
            raise ValueError(f"TextLineData: unknown encoding {encoding!r}") from None
        self.paths = [os.fspath(p) for p in plist]
        self.strip_newline = strip_newline
        self.encoding = encoding
        self._shuffle = shuffle

    def reset_state(self) -> None:
        super().reset_state()
        missing = [p for p in self.paths if not os.path.isfile(p)]
        if missing:
            raise FileNotFoundError(f"TextLineData: no such file: {', '.join(map(repr, missing))}")

    def __iter__(self) -> Iterator[list[str]]:
        perm = self.rng.permutation(len(self.paths)).tolist()  # rng: raises before reset
        paths = [self.paths[i] for i in perm] if self._shuffle else self.paths
        for path in paths:
            with open(path, encoding=self.encoding) as f:
                if self.strip_newline:
                    for line in f:
                        yield [line[:-1] if line[-1:] == "\n" else line]
                else:
                    for line in f:
                        yield [line]
