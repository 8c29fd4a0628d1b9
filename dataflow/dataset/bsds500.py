"""BSDS500 edge detection from the official ``BSR/BSDS500/data`` layout (images as JPEG,
ground truth as ``.mat``); needs OpenCV and SciPy."""

from __future__ import annotations

import glob
import os
from typing import Any

import numpy as np

from ..sources._memory import DataFromArrays
from ._images import imread
from ._matlab import field, loadmat
from ._paths import FormatError, check_choice, dataset_dir, missing

__all__ = ["BSDS500"]

IMG_W, IMG_H = 481, 321
_SOURCE = "http://www.eecs.berkeley.edu/Research/Projects/CS/vision/grouping/BSR/BSR_bsds500.tgz, extracted"


class BSDS500(DataFromArrays):
    """``[image, label]``: ``image`` a 321x481x3 BGR ``uint8`` array (portrait images are
    transposed), ``label`` a 321x481 ``float32`` edge map in ``[0, 1]`` (the fraction of
    annotators marking each pixel). ``name``: ``"train"``, ``"test"`` or ``"val"``; ``data_dir``
    holds the ``BSR`` folder (else ``$TENSORPACK_DATASET/bsds500_data``, else
    ``~/tensorpack_data/bsds500_data``). Random access: checkpoints and shards by index."""

    def __init__(
        self, name: str, data_dir: Any = None, shuffle: bool = True, seed: int | None = None
    ) -> None:
        stage = "BSDS500"
        check_choice(stage, "name", name, ("train", "test", "val"))
        self.data_root = os.path.join(dataset_dir("bsds500_data", data_dir), "BSR", "BSDS500", "data")
        if not os.path.isdir(self.data_root):
            raise missing(stage, self.data_root, _SOURCE)
        files = sorted(glob.glob(os.path.join(self.data_root, "images", name, "*.jpg")))
        if not files:
            raise missing(stage, os.path.join(self.data_root, "images", name, "*.jpg"), _SOURCE)
        self.data = np.zeros((len(files), IMG_H, IMG_W, 3), dtype=np.uint8)
        self.label = np.zeros((len(files), IMG_H, IMG_W), dtype=np.float32)
        for i, f in enumerate(files):
            im = imread(stage, f)
            gt_file = os.path.join(
                self.data_root, "groundTruth", name, os.path.basename(f)[: -len(".jpg")] + ".mat"
            )
            gt = field(stage, gt_file, loadmat(stage, gt_file), "groundTruth")[0]
            edges = (
                sum(gt[k]["Boundaries"][0][0] for k in range(gt.shape[0])).astype(np.float32) / gt.shape[0]
            )
            self.data[i] = self._landscape(stage, f, im)
            self.label[i] = self._landscape(stage, gt_file, edges)
        super().__init__([self.data, self.label], shuffle=shuffle, seed=seed)

    @staticmethod
    def _landscape(stage: str, path: str, arr: np.ndarray) -> np.ndarray:
        if arr.shape[0] > arr.shape[1]:
            arr = np.swapaxes(arr, 0, 1)
        if arr.shape[:2] != (IMG_H, IMG_W):
            raise FormatError(f"{stage}: {path}: shape {arr.shape[:2]}, expected {(IMG_H, IMG_W)}")
        return arr
