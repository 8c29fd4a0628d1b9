"""Caltech-101 Silhouettes from the official ``caltech101_silhouettes_28_split1.mat``."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..sources._memory import DataFromArrays
from ._matlab import field, loadmat
from ._paths import FormatError, check_choice, dataset_dir, require_file

__all__ = ["Caltech101Silhouettes"]

_SOURCE = "https://people.cs.umass.edu/~marlin/data/caltech101_silhouettes_28_split1.mat"


class Caltech101Silhouettes(DataFromArrays):
    """``[image, label]``: ``image`` a 28x28 array in ``[0, 1]``, ``label`` in 0-100. ``name``:
    ``"train"``, ``"test"`` or ``"val"``; the file in ``dir``, else
    ``$TENSORPACK_DATASET/caltech101_data``, else ``~/tensorpack_data/caltech101_data``. Needs
    SciPy. Random access: shuffles with ``self.rng``, checkpoints and shards by index."""

    def __init__(self, name: str, shuffle: bool = True, dir: Any = None, seed: int | None = None) -> None:
        stage = "Caltech101Silhouettes"
        self.name = check_choice(stage, "name", name, ("train", "test", "val"))
        folder = dataset_dir("caltech101_data", dir)
        path = require_file(stage, os.path.join(folder, "caltech101_silhouettes_28_split1.mat"), _SOURCE)
        mat = loadmat(stage, path)
        data = np.asarray(field(stage, path, mat, f"{name}_data"))
        labels = np.asarray(field(stage, path, mat, f"{name}_labels")).ravel() - 1
        if data.ndim != 2 or data.shape[1] != 28 * 28 or len(data) != len(labels):
            raise FormatError(f"{stage}: {path}: {name}_data of shape {data.shape} for {len(labels)} labels")
        self.images, self.labels = data.reshape(-1, 28, 28), labels
        super().__init__([self.images, self.labels], shuffle=shuffle, seed=seed)
