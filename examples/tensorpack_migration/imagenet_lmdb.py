"""tensorpack's "Efficient DataFlow" tutorial (ImageNet -> LMDB -> training batches) and its
ImageNet train/val dataflows (examples/ImageNetModels/imagenet_utils.py), ported by changing
only the imports. Runs on a tiny synthetic ImageNet written in the real layout (JPEG files in
``train/nXXXXXXXX/``, Caffe's ``train.txt``/``val.txt`` label lists).

    python examples/tensorpack_migration/imagenet_lmdb.py [--batches N] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import cv2
import numpy as np

# --- the only change: tensorpack.dataflow -> dataflow ----------------------------------------
from dataflow import (
    AugmentImageComponent,
    BatchData,
    LMDBSerializer,
    LocallyShuffleData,
    MapDataComponent,
    MultiProcessRunnerZMQ,
    MultiThreadMapData,
    dataset,
    imgaug,
)


# --- the tutorial, as written for tensorpack ---------------------------------------------------
class BinaryILSVRC12(dataset.ILSVRC12Files):
    def __iter__(self):
        for fname, label in super(BinaryILSVRC12, self).__iter__():  # noqa: UP008 - the tutorial verbatim
            with open(fname, "rb") as f:
                jpeg = f.read()
            jpeg = np.asarray(bytearray(jpeg), dtype="uint8")
            yield [jpeg, label]


def dump_lmdb(imagenet_dir, meta_dir, db_path):
    ds0 = BinaryILSVRC12(imagenet_dir, "train", meta_dir=meta_dir)
    ds1 = MultiProcessRunnerZMQ(ds0, num_proc=1)
    LMDBSerializer.save(ds1, db_path)


def lmdb_training_flow(db_path, batch_size, buffer_size=50):
    ds = LMDBSerializer.load(db_path, shuffle=False)
    ds = LocallyShuffleData(ds, buffer_size)
    ds = MapDataComponent(ds, lambda x: cv2.imdecode(x, cv2.IMREAD_COLOR), 0)
    ds = AugmentImageComponent(ds, fbresnet_augmentor(isTrain=True))
    ds = BatchData(ds, batch_size)
    ds = MultiProcessRunnerZMQ(ds, 2)
    return ds


# --- examples/ImageNetModels/imagenet_utils.py (sizes scaled down) -----------------------------
IMAGE_SIZE = 32


def fbresnet_augmentor(isTrain):
    if isTrain:
        return [imgaug.ResizeShortestEdge(IMAGE_SIZE + 4), imgaug.RandomCrop((IMAGE_SIZE, IMAGE_SIZE)),
                imgaug.Flip(horiz=True)]  # fmt: skip
    return [
        imgaug.ResizeShortestEdge(IMAGE_SIZE + 4, cv2.INTER_CUBIC),
        imgaug.CenterCrop((IMAGE_SIZE, IMAGE_SIZE)),
    ]


def get_imagenet_dataflow(datadir, name, batch_size, augmentors=None, parallel=2, meta_dir=None):
    assert name in ["train", "val", "test"]
    isTrain = name == "train"
    if augmentors is None:
        augmentors = fbresnet_augmentor(isTrain)
    if isTrain:
        ds = dataset.ILSVRC12(datadir, name, shuffle=True, meta_dir=meta_dir)
        ds = AugmentImageComponent(ds, augmentors, copy=False)
        ds = MultiProcessRunnerZMQ(ds, parallel)
        ds = BatchData(ds, batch_size, remainder=False)
    else:
        ds = dataset.ILSVRC12Files(datadir, name, shuffle=False, meta_dir=meta_dir)
        aug = imgaug.AugmentorList(augmentors)

        def mapf(dp):
            fname, cls = dp
            im = cv2.imread(fname, cv2.IMREAD_COLOR)
            im = aug.augment(im)
            return im, cls

        ds = MultiThreadMapData(ds, parallel, mapf, buffer_size=2000, strict=True)
        ds = BatchData(ds, batch_size, remainder=True)
        ds = MultiProcessRunnerZMQ(ds, 1)
    return ds


# --- run it on synthetic data -----------------------------------------------------------------
def take(ds, n):
    ds.reset_state()
    out = []
    try:
        for i, dp in enumerate(ds):
            if i == n:
                break
            out.append(dp)
    finally:
        ds.close()
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import synthetic

    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        w = synthetic.write_ilsvrc(Path(tmp), classes=4, per_class=6, val=10)
        db = os.path.join(tmp, "ILSVRC-train.lmdb")
        dump_lmdb(w["dir"], w["meta_dir"], db)
        for dp_name, ds in (
            ("lmdb train", lmdb_training_flow(db, batch_size=4)),
            ("imagenet train", get_imagenet_dataflow(w["dir"], "train", 4, meta_dir=w["meta_dir"])),
            ("imagenet val", get_imagenet_dataflow(w["dir"], "val", 4, meta_dir=w["meta_dir"])),
        ):
            for images, labels in take(ds, args.batches):
                assert images.shape == (len(labels), IMAGE_SIZE, IMAGE_SIZE, 3) and images.dtype == np.uint8
                print(f"{dp_name}: images {images.shape} labels {list(map(int, labels))}")


if __name__ == "__main__":
    main()
