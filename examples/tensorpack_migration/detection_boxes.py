"""A detection-style dataflow in the shape of tensorpack's FasterRCNN input pipeline
(examples/FasterRCNN/data.py): a list of annotation dicts, images read from JPEG files, one
random geometric transform applied identically to the image and to its boxes, then a parallel
map. Ported by changing only the imports; runs on synthetic JPEGs with boxes.

    python examples/tensorpack_migration/detection_boxes.py [--batches N] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import os
import tempfile

import cv2
import numpy as np

# --- the only change: tensorpack.dataflow -> dataflow ----------------------------------------
from dataflow import DataFromList, MultiProcessMapData, MultiThreadMapData, imgaug

SHORT_EDGE = 48


# --- as in tensorpack's examples/FasterRCNN (common.py, data.py), simplified -------------------
def box_to_point4(boxes):
    b = boxes[:, [0, 1, 2, 3, 0, 3, 2, 1]]
    return b.reshape((-1, 2))


def point4_to_box(points):
    p = points.reshape((-1, 4, 2))
    minxy, maxxy = p.min(axis=1), p.max(axis=1)
    return np.concatenate((minxy, maxxy), axis=1)


def get_train_dataflow(roidbs, num_proc=2):
    ds = DataFromList(roidbs, shuffle=True)
    aug = imgaug.AugmentorList([imgaug.ResizeShortestEdge(SHORT_EDGE), imgaug.Flip(horiz=True)])

    def preprocess(roidb):
        fname, boxes, klass = roidb["file_name"], roidb["boxes"], roidb["class"]
        boxes = np.copy(boxes)
        im = cv2.imread(fname, cv2.IMREAD_COLOR)
        assert im is not None, fname
        im = im.astype("float32")
        tfms = aug.get_transform(im)
        im = tfms.apply_image(im)
        points = box_to_point4(boxes)
        points = tfms.apply_coords(points)
        boxes = point4_to_box(points)
        if len(boxes) == 0:
            return None  # tensorpack's convention: dropped by the map
        return {"image": im, "gt_boxes": boxes.astype("float32"), "gt_labels": klass, "file_name": fname}

    if num_proc > 1:
        return MultiProcessMapData(ds, num_proc, preprocess)
    return MultiThreadMapData(ds, 2, preprocess)


# --- synthetic data: a bright box on a dark image, so the boxes can be checked -----------------
def write_roidbs(root, n=12, seed=0):
    rng = np.random.default_rng(seed)
    roidbs = []
    for i in range(n):
        h, w = int(rng.integers(60, 90)), int(rng.integers(60, 90))
        img = np.zeros((h, w, 3), np.uint8)
        x0, y0 = int(rng.integers(0, w // 2)), int(rng.integers(0, h // 2))
        x1, y1 = x0 + int(rng.integers(10, w // 2)), y0 + int(rng.integers(10, h // 2))
        img[y0:y1, x0:x1] = 255
        path = os.path.join(root, f"{i:06d}.jpg")
        cv2.imwrite(path, img)
        roidbs.append({"file_name": path, "boxes": np.array([[x0, y0, x1, y1]], np.float32),
                       "class": np.array([1 + i % 3], np.int32)})  # fmt: skip
    return roidbs


def check(dp):
    """The transformed box still frames the bright region of the transformed image."""
    x0, y0, x1, y1 = dp["gt_boxes"][0]
    inside = dp["image"][int(y0) + 2 : int(y1) - 2, int(x0) + 2 : int(x1) - 2]
    assert inside.size and inside.mean() > 200, (dp["file_name"], dp["gt_boxes"])
    assert min(dp["image"].shape[:2]) == SHORT_EDGE


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=8, help="datapoints to take")
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        ds = get_train_dataflow(write_roidbs(tmp))
        ds.reset_state()
        try:
            for i, dp in enumerate(ds):
                if i == args.batches:
                    break
                check(dp)
                print(f"detection: image {dp['image'].shape} boxes {dp['gt_boxes'].round(1).tolist()}")
        finally:
            ds.close()


if __name__ == "__main__":
    main()
