"""tensorpack's CIFAR-10 ResNet input pipeline (examples/ResNet/cifar10-resnet.py, ``get_data``),
ported by changing only the imports. Runs on tiny CIFAR-10 batches written in the official
"python version" format (pickled dicts, as Python 2 wrote them).

    python examples/tensorpack_migration/cifar_resnet.py [--batches N] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

# --- the only change: tensorpack.dataflow -> dataflow ----------------------------------------
from dataflow import AugmentImageComponent, BatchData, MultiProcessRunner, dataset, imgaug

BATCH_SIZE = 16


# --- get_data, as written for tensorpack (with the data directory passed in) -------------------
def get_data(train_or_test, dir=None):
    isTrain = train_or_test == "train"
    ds = dataset.Cifar10(train_or_test, dir=dir)
    pp_mean = ds.get_per_pixel_mean(("train",))
    if isTrain:
        augmentors = [
            imgaug.CenterPaste((40, 40)),
            imgaug.RandomCrop((32, 32)),
            imgaug.Flip(horiz=True),
            imgaug.MapImage(lambda x: x - pp_mean),
        ]
    else:
        augmentors = [imgaug.MapImage(lambda x: x - pp_mean)]
    ds = AugmentImageComponent(ds, augmentors)
    ds = BatchData(ds, BATCH_SIZE, remainder=not isTrain)
    if isTrain:
        ds = MultiProcessRunner(ds, 3, 2)
    return ds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import synthetic

    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        synthetic.write_cifar(Path(tmp), 10, per_batch=20)
        for split in ("train", "test"):
            ds = get_data(split, dir=tmp)
            ds.reset_state()
            try:
                for i, (images, labels) in enumerate(ds):
                    if i == args.batches:
                        break
                    assert images.shape[1:] == (32, 32, 3) and images.dtype == np.float32
                    print(
                        f"cifar {split}: images {images.shape} mean {images.mean():+.2f} labels {labels[:4]}"
                    )
            finally:
                ds.close()


if __name__ == "__main__":
    main()
