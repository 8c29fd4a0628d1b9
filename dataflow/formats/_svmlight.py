"""SVMlight / libsvm text files: :class:`SVMLightData`.

Parsed here (no scikit-learn needed), with scikit-learn's ``load_svmlight_file`` conventions:
``label idx:value ...`` per line, ``#`` comments, ``qid:`` ignored, feature indices one-based
unless some index is 0 (then zero-based), the feature count the largest index seen; ``X``
dense ``float64``, ``y`` ``float64``.
"""

from __future__ import annotations

import io
import os
from typing import Any

import numpy as np

from ..sources._memory import DataFromArrays
from ._common import FormatError, PathType, fspath
from ._storage import ShardStorage, StorageReader, redact

__all__ = ["SVMLightData", "read_svmlight"]


def read_svmlight(
    path: str, stage: str = "read_svmlight", storage: ShardStorage | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(X, y)`` of an SVMlight file (read through ``storage`` when given: a remote file);
    :class:`FormatError` names the file and line of a bad entry."""
    labels: list[float] = []
    rows: list[list[tuple[int, float]]] = []
    raw = storage.open(0) if storage is not None else open(path, "rb")  # noqa: SIM115 - closed below
    path = redact(path)
    with io.TextIOWrapper(raw) as f:
        for lineno, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            label, *pairs = line.split()
            try:
                labels.append(float(label))
                row = []
                for pair in pairs:
                    key, value = pair.split(":", 1)
                    if key != "qid":
                        row.append((int(key), float(value)))
            except ValueError as e:
                raise FormatError(f"{stage}: {path} line {lineno}: cannot parse {line[:60]!r} ({e})") from e
            rows.append(row)
    if not rows:
        raise FormatError(f"{stage}: {path} holds no sample")
    indices = [i for row in rows for i, _ in row]
    offset = 0 if indices and min(indices) == 0 else 1
    if indices and min(indices) < 0:
        raise FormatError(f"{stage}: {path}: negative feature index {min(indices)}")
    x = np.zeros((len(rows), (max(indices) + 1 - offset) if indices else 0), np.float64)
    for r, row in enumerate(rows):
        for i, v in row:
            x[r, i - offset] = v
    return x, np.asarray(labels, np.float64)


class SVMLightData(StorageReader, DataFromArrays):
    """``[X_i, y_i]`` for each sample of an SVMlight file: ``X_i`` a dense ``float64`` row,
    ``y_i`` a ``float64`` label. tensorpack's arguments. Random access: shuffles with
    ``self.rng``, checkpoints and shards by index."""

    def __init__(
        self, filename: PathType, shuffle: bool = True, seed: int | None = None, **storage: Any
    ) -> None:
        storage_ = ShardStorage.single(
            "SVMLightData", fspath("SVMLightData", "filename", filename), "filename", storage
        )
        path = storage_.urls[0]
        if not storage_.remote and not os.path.isfile(path):
            raise FileNotFoundError(f"SVMLightData: no such file: {path!r}")
        self.X, self.y = read_svmlight(path, "SVMLightData", storage_)
        self._storage = storage_
        super().__init__([self.X, self.y], shuffle=shuffle, seed=seed)
