"""The ported tensorpack pipelines (examples/tensorpack_migration/) on tensorpack 0.11 and on
dataflow, side by side, in one run: the same code with only the imports changed, the same
files (synthetic, in the real formats), the same per-datapoint functions.

Pipelines (items/s = images delivered per second):

- ``cifar``: ``Cifar10("test")`` (10,000 images, the official pickle layout) -> augment
  (numpy paste/crop/flip/mean, the CIFAR ResNet recipe) -> ``BatchData(128)``, in process.
- ``cifar mp``: the same under ``MultiProcessRunner(ds, 3, 2)``, as in cifar10-resnet.py.
- ``lmdb``: the tutorial's read side: ``LMDBSerializer.load`` (each library reads the database
  its own serializer wrote from ``BinaryILSVRC12``) -> ``LocallyShuffleData(1000)`` ->
  ``cv2.imdecode`` -> ``BatchData(64)``.
- ``imagenet val``: ``ILSVRC12Files`` -> ``MultiThreadMapData(2 threads, imread + resize,
  strict)`` -> ``BatchData(32)``.
- ``detection``: annotation dicts -> ``MultiProcessMapData(2 procs, imread + resize + flip of
  image and boxes)``.

The image augmentation is the same numpy/OpenCV code in both (the image layer is compared in
its own benchmark), so the ratios measure the dataflow machinery and the loaders.

    pip install tensorpack==0.11 opencv-python-headless lmdb
    python benchmarks/tensorpack_migration.py [--rounds 3] [--only cifar,lmdb,...]
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "examples", "tensorpack_migration"))

import cv2  # noqa: E402
import synthetic  # noqa: E402

from benchmarks._harness import TimedContender, machine_line, markdown_table, run_timed_rounds  # noqa: E402

PIPELINES = ("cifar", "cifar mp", "lmdb", "imagenet val", "detection")


# -- the same per-datapoint functions for both libraries --------------------------------------
def cifar_augment(img: np.ndarray) -> np.ndarray:
    canvas = np.zeros((40, 40, 3), np.uint8)
    canvas[4:36, 4:36] = img
    y, x = np.random.randint(0, 9, size=2)
    out = canvas[y : y + 32, x : x + 32]
    if np.random.rand() < 0.5:
        out = out[:, ::-1]
    return out.astype(np.float32) - 120.0


def decode(jpeg: np.ndarray) -> np.ndarray:
    return cv2.imdecode(jpeg, cv2.IMREAD_COLOR)


def val_map(dp: list) -> tuple:
    fname, cls = dp
    im = cv2.resize(cv2.imread(fname, cv2.IMREAD_COLOR), (56, 56))
    return im[4:52, 4:52], cls


def det_map(roidb: dict) -> dict:
    im = cv2.imread(roidb["file_name"], cv2.IMREAD_COLOR).astype("float32")
    h, w = im.shape[:2]
    scale = 48 / min(h, w)
    im = cv2.resize(im, (round(w * scale), round(h * scale)))
    boxes = roidb["boxes"] * scale
    if np.random.rand() < 0.5:
        im = im[:, ::-1]
        boxes = boxes[:, [2, 1, 0, 3]] * [-1, 1, -1, 1] + [im.shape[1], 0, im.shape[1], 0]
    return {"image": im, "gt_boxes": boxes.astype("float32"), "gt_labels": roidb["class"]}


# -- the pipelines, written once against a module of tensorpack's names -----------------------
def build(lib: Any, pipeline: str, data: dict[str, Any]) -> tuple[Any, int]:
    """(flow, datapoints per run) of ``pipeline`` using the names of module ``lib``."""
    if pipeline in ("cifar", "cifar mp"):
        ds = lib.dataset.Cifar10("test", shuffle=True, dir=data["cifar"])
        ds = lib.MapDataComponent(ds, cifar_augment, 0)
        ds = lib.BatchData(ds, 128)
        if pipeline == "cifar mp":
            ds = lib.MultiProcessRunner(ds, 3, 2)
        return ds, 10_000 // 128
    if pipeline == "lmdb":
        ds = lib.LMDBSerializer.load(data["lmdb"][lib.__name__], shuffle=False)
        ds = lib.LocallyShuffleData(ds, 1000)
        ds = lib.MapDataComponent(ds, decode, 0)
        ds = lib.BatchData(ds, 64)
        return ds, data["n_train"] // 64
    if pipeline == "imagenet val":
        ds = lib.dataset.ILSVRC12Files(data["ilsvrc"]["dir"], "val", meta_dir=data["ilsvrc"]["meta_dir"])
        ds = lib.MultiThreadMapData(ds, 2, val_map, buffer_size=200, strict=True)
        ds = lib.BatchData(ds, 32, remainder=True)
        return ds, -(-data["n_val"] // 32)
    if pipeline == "detection":
        ds = lib.DataFromList(data["roidbs"], shuffle=True)
        ds = lib.MultiProcessMapData(ds, 2, det_map)
        return ds, len(data["roidbs"])
    raise ValueError(pipeline)


def contender(name: str, lib: Any, pipeline: str, data: dict[str, Any]) -> TimedContender:
    """Each run builds the pipeline, starts it, warms it up (a tenth of the run), then times a
    fixed number of datapoints and closes it: no worker of one contender runs (or reads ahead)
    while the other is timed."""

    def size(dp: Any) -> int:
        return 1 if pipeline == "detection" else len(dp[0])

    def run() -> tuple[int, float]:
        df, per_run = build(lib, pipeline, data)
        per_run *= 3
        df.reset_state()
        try:
            it = iter(df)  # one iterator: tensorpack's LocallyShuffleData never ends an epoch
            for _ in itertools.islice(it, max(1, per_run // 10)):
                pass
            t0 = time.perf_counter()
            n = sum(size(dp) for dp in itertools.islice(it, per_run))
            return n, time.perf_counter() - t0
        finally:
            del it
            getattr(df, "close", lambda: None)()
            if hasattr(df, "procs") or hasattr(df, "_procs"):  # tensorpack: no close(); stop its workers
                for p in getattr(df, "procs", None) or getattr(df, "_procs", []):
                    p.terminate()

    return TimedContender(name, run)


# -- data ---------------------------------------------------------------------------------------
def make_data(tmp: Path, libs: dict[str, Any]) -> dict[str, Any]:
    synthetic.write_cifar(tmp / "cifar", 10, per_batch=10_000)
    ilsvrc = synthetic.write_ilsvrc(tmp / "ilsvrc", classes=10, per_class=100, val=500, size=64)
    data: dict[str, Any] = {"cifar": str(tmp / "cifar"), "ilsvrc": ilsvrc, "n_train": 1000, "n_val": 500}
    data["lmdb"] = {}
    for lib in libs.values():
        files = lib.dataset.ILSVRC12Files(ilsvrc["dir"], "train", meta_dir=ilsvrc["meta_dir"], shuffle=False)
        files.reset_state()
        jpegs = [[np.fromfile(f, np.uint8), int(c)] for f, c in files]
        path = str(tmp / f"train-{lib.__name__}.lmdb")
        lib.LMDBSerializer.save(lib.DataFromList(jpegs, shuffle=False), path)
        data["lmdb"][lib.__name__] = path
    det = tmp / "det"
    det.mkdir()
    import detection_boxes

    data["roidbs"] = detection_boxes.write_roidbs(str(det), n=400)
    return data


def load_libs() -> dict[str, Any]:
    import dataflow

    libs: dict[str, Any] = {"dataflow": dataflow}
    try:
        import tensorpack.dataflow as tp

        libs["tensorpack 0.11"] = tp
    except Exception as e:  # noqa: BLE001 - any import failure means: no peer
        print(f"tensorpack 0.11 does not import here ({type(e).__name__}: {e}); measuring dataflow only",
              file=sys.stderr)  # fmt: skip
    return libs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default=",".join(PIPELINES))
    parser.add_argument("--max-foreign", type=float, default=0.5, help="cores others may use during a run")
    args = parser.parse_args()
    os.environ.setdefault("TQDM_DISABLE", "1")
    libs = load_libs()
    print(f"tensorpack_migration: {args.rounds} rounds, medians; {machine_line()}\n")
    with tempfile.TemporaryDirectory() as tmp:
        data = make_data(Path(tmp), libs)
        for pipeline in args.only.split(","):
            contenders = [contender(name, lib, pipeline, data) for name, lib in libs.items()]
            results, quiet = run_timed_rounds(contenders, rounds=args.rounds, max_foreign=args.max_foreign)
            refs = [n for n in libs if n != "dataflow"]
            print(f"### {pipeline}\n")
            print(markdown_table(results, refs, unit="images/s") + "\n")
            print(quiet.line() + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
