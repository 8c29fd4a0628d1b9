"""SVHN cropped digits from the official ``{train,test,extra}_32x32.mat`` files."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..sources._memory import DataFromArrays
from ._matlab import field, loadmat
from ._paths import FormatError, check_choice, dataset_dir, require_file

__all__ = ["SVHNDigit"]

_SOURCE = "http://ufldl.stanford.edu/housenumbers/"


class SVHNDigit(DataFromArrays):
    """``[image, label]``: ``image`` a 32x32x3 ``uint8`` array, ``label`` in 0-9 (the files'
    label 10 for the digit 0 becomes 0). ``name``: ``"train"``, ``"test"`` or ``"extra"``; files
    in ``data_dir``, else ``$TENSORPACK_DATASET/svhn_data``, else ``~/tensorpack_data/svhn_data``.
    Needs SciPy. Random access: shuffles with ``self.rng``, checkpoints and shards by index."""

    def __init__(
        self, name: str, data_dir: Any = None, shuffle: bool = True, seed: int | None = None
    ) -> None:
        stage = "SVHNDigit"
        check_choice(stage, "name", name, ("train", "test", "extra"))
        path = require_file(
            stage, os.path.join(dataset_dir("svhn_data", data_dir), f"{name}_32x32.mat"), _SOURCE
        )
        mat = loadmat(stage, path)
        x, y = np.asarray(field(stage, path, mat, "X")), np.asarray(field(stage, path, mat, "y")).reshape(-1)
        if x.ndim != 4 or x.shape[3] != len(y):
            raise FormatError(f"{stage}: {path}: X of shape {x.shape} does not match {len(y)} labels")
        self.X = np.ascontiguousarray(x.transpose(3, 0, 1, 2))
        self.Y = np.where(y == 10, 0, y)
        super().__init__([self.X, self.Y], shuffle=shuffle, seed=seed)

    @staticmethod
    def get_per_pixel_mean(
        names: tuple[str, ...] = ("train", "test", "extra"), data_dir: Any = None
    ) -> np.ndarray:
        """The mean 32x32x3 image of the given splits."""
        images = [SVHNDigit(n, data_dir, shuffle=False).X for n in names]
        return np.concatenate(images).mean(axis=0)  # type: ignore[no-any-return]
