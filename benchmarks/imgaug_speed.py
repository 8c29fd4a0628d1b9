"""Image augmentation: the same augmentor chains on ``dataflow.imgaug`` and on tensorpack 0.11's
``imgaug``, in one run, images/s (issue 15: "at least as fast as tensorpack's implementation
on 224x224 images").

Chains (written once against a module with tensorpack's augmentor names; uint8 BGR inputs,
200 distinct random images per chain, cycled):

- ``fbresnet train`` (256x384 -> 224x224): tensorpack's ImageNet ``fbresnet_augmentor``:
  ``GoogleNetRandomCropAndResize(cubic)``, ``ToFloat32``, ``RandomOrderAug`` of
  BrightnessScale / Contrast / Saturation / Lighting, ``ToUint8``, ``Flip``.
- ``crop + colour`` (256x384 -> 224x224): ``RandomCrop(224)``, ``Flip``, ``Brightness``,
  ``Contrast``, ``Saturation``, ``Lighting`` on uint8.
- ``colour 224`` (224x224): ``Flip``, ``BrightnessScale``, ``Contrast``, ``Saturation``,
  ``Lighting`` on images already at size.
- ``resize val`` (256x384 -> 224x224): ``ResizeShortestEdge(224, cubic)``, ``CenterCrop(224)``.
- ``detection`` (256x384, 32 boxes = 64 corner points): ``ResizeShortestEdge(320)``,
  ``Rotation(10)``, ``RandomCrop(288)``, ``Flip``; ``get_transform`` then ``apply_image`` and
  ``apply_coords``.
- ``flow``: ``AugmentImageComponent(DataFromList([img, label]...), fbresnet train)``, one epoch
  (copy=True, the default: each image is copied first).
- ``flow coords``: ``AugmentImageCoordinates`` with the detection chain over ``[img, points]``.
  tensorpack 0.11's raises on numpy 2 (``np.float``); it is given ``np.float = np.floating``,
  the one-line fix its users need.
- ``ops`` (``--only ops``): each augmentor alone on 224x224 uint8, to locate differences
  (``augment(img)``; runs of about ``--op-seconds``). tensorpack's Flip returns a view, ours
  a contiguous copy.

Each run times a fixed number of images (``--images``), round after round for both
libraries; the table gives medians and the ratio. OpenCV runs with ``--cv-threads`` threads
(1 by default, as in data-loading workers; the same for both).

    pip install tensorpack==0.11 opencv-python-headless
    python benchmarks/imgaug_speed.py [--rounds 5] [--images 300] [--only "fbresnet train,flow,ops"]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import cv2  # noqa: E402

from benchmarks._harness import TimedContender, machine_line, markdown_table, run_timed_rounds  # noqa: E402

EIGVAL = np.asarray([0.2175, 0.0188, 0.0045][::-1]) * 255.0
EIGVEC = np.array([[-0.5675, 0.7192, 0.4009], [-0.5808, -0.0045, -0.8140], [-0.5836, -0.6948, 0.4203]],
                  dtype="float32")[::-1, ::-1]  # fmt: skip
CROP_SHAPE, SQUARE_SHAPE = (256, 384, 3), (224, 224, 3)


def colour(L: Any, clip: bool = True) -> list[Any]:
    return [L.BrightnessScale((0.6, 1.4)), L.Contrast((0.6, 1.4), rgb=False), L.Saturation(0.4, rgb=False),
            L.Lighting(0.1, eigval=EIGVAL, eigvec=EIGVEC)]  # fmt: skip


def fbresnet(L: Any) -> list[Any]:
    return [L.GoogleNetRandomCropAndResize(interp=cv2.INTER_CUBIC), L.ToFloat32(),
            L.RandomOrderAug(colour(L)), L.ToUint8(), L.Flip(horiz=True)]  # fmt: skip


def crop_colour(L: Any) -> list[Any]:
    return [L.RandomCrop(224), L.Flip(horiz=True), L.Brightness(30), L.Contrast((0.6, 1.4)),
            L.Saturation(0.4), L.Lighting(0.1, EIGVAL, EIGVEC)]  # fmt: skip


def detection(L: Any) -> list[Any]:
    return [L.ResizeShortestEdge(320), L.Rotation(10), L.RandomCrop(288), L.Flip(horiz=True)]


#: chain name -> (augmentors(lib), input shape, with coordinates)
CHAINS: dict[str, tuple[Callable[[Any], list[Any]], tuple[int, int, int], bool]] = {
    "fbresnet train": (fbresnet, CROP_SHAPE, False),
    "crop + colour": (crop_colour, CROP_SHAPE, False),
    "colour 224": (lambda L: [L.Flip(horiz=True), *colour(L)], SQUARE_SHAPE, False),
    "resize val": (lambda L: [L.ResizeShortestEdge(224, cv2.INTER_CUBIC), L.CenterCrop(224)], CROP_SHAPE,
                   False),
    "detection": (detection, CROP_SHAPE, True),
}  # fmt: skip

#: single augmentors on 224x224 uint8 (``--only ops``)
OPS: dict[str, Callable[[Any], Any]] = {
    "Flip": lambda L: L.Flip(horiz=True, prob=1.0),
    "Resize(112)": lambda L: L.Resize(112),
    "ResizeShortestEdge(256)": lambda L: L.ResizeShortestEdge(256),
    "RandomCrop(200)": lambda L: L.RandomCrop(200),
    "GoogleNetRandomCropAndResize": lambda L: L.GoogleNetRandomCropAndResize(),
    "Rotation(30)": lambda L: L.Rotation(30),
    "Shift": lambda L: L.Shift(0.1, 0.1),
    "Brightness": lambda L: L.Brightness(30),
    "BrightnessScale": lambda L: L.BrightnessScale((0.6, 1.4)),
    "Contrast": lambda L: L.Contrast((0.6, 1.4)),
    "Contrast(rgb=False)": lambda L: L.Contrast((0.6, 1.4), rgb=False),
    "Saturation": lambda L: L.Saturation(0.4),
    "Lighting": lambda L: L.Lighting(0.1, EIGVAL, EIGVEC),
    "Hue": lambda L: L.Hue(),
    "GaussianBlur": lambda L: L.GaussianBlur(),
    "Gamma": lambda L: L.Gamma(),
    "GaussianNoise": lambda L: L.GaussianNoise(),
    "SaltPepperNoise": lambda L: L.SaltPepperNoise(),
    "JpegNoise": lambda L: L.JpegNoise(),
    "ToFloat32": lambda L: L.ToFloat32(),
    "MeanVarianceNormalize": lambda L: L.MeanVarianceNormalize(),
    "Grayscale": lambda L: L.Grayscale(keepshape=True),
}


def make_images(shape: tuple[int, int, int], n: int = 200) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    base = rng.integers(0, 256, size=(n, *shape), dtype=np.uint8)
    return [cv2.GaussianBlur(im, (5, 5), 0) for im in base]  # natural-ish images, not white noise


def boxes_for(shape: tuple[int, int, int], n: int = 200) -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    return [(rng.random((64, 2)) * [shape[1], shape[0]]).astype(np.float32) for _ in range(n)]


def chain_contender(name: str, lib: Any, chain: str, count: int) -> TimedContender:
    build, shape, with_coords = CHAINS[chain]
    images, boxes = make_images(shape), boxes_for(shape)
    augs = lib.imgaug.AugmentorList(build(lib.imgaug))
    augs.reset_state()
    for im in images[:10]:  # first calls (OpenCV, RNG seeding) are not timed
        augs.get_transform(im).apply_image(im)

    def run() -> tuple[int, float]:
        n = len(images)
        t0 = time.perf_counter()
        if with_coords:
            for i in range(count):
                tfm = augs.get_transform(images[i % n])
                tfm.apply_image(images[i % n])
                tfm.apply_coords(boxes[i % n].copy())
        else:
            for i in range(count):
                augs.augment(images[i % n])
        return count, time.perf_counter() - t0

    return TimedContender(name, run)


def op_contender(name: str, lib: Any, op: str, seconds: float) -> TimedContender:
    """One augmentor; each run times as many images as take about ``seconds`` (measured on
    the untimed first calls)."""
    images = make_images(SQUARE_SHAPE, 50)
    aug = OPS[op](lib.imgaug)
    aug.reset_state()
    aug.augment(images[0].copy())  # the first call (OpenCV, RNG seeding) is not timed
    t0 = time.perf_counter()
    for im in images[:10]:
        aug.augment(im.copy())
    count = max(20, int(seconds / ((time.perf_counter() - t0) / 10)))

    def run() -> tuple[int, float]:
        t0 = time.perf_counter()
        for i in range(count):
            aug.augment(images[i % 50].copy() if op == "SaltPepperNoise" else images[i % 50])
        return count, time.perf_counter() - t0

    return TimedContender(name, run)


def flow_contender(name: str, lib: Any, coords: bool, count: int) -> TimedContender:
    if coords:
        data = [[im, b] for im, b in zip(make_images(CROP_SHAPE), boxes_for(CROP_SHAPE))]
    else:
        data = [[im, i % 1000] for i, im in enumerate(make_images(CROP_SHAPE))]
    epochs = max(1, count // len(data))

    def make() -> Any:
        ds = lib.DataFromList(data, shuffle=False)
        if coords:
            return lib.AugmentImageCoordinates(ds, detection(lib.imgaug))
        return lib.AugmentImageComponent(ds, fbresnet(lib.imgaug))

    warm = make()
    warm.reset_state()
    for _ in zip(range(10), warm):  # first calls (OpenCV, RNG seeding) are not timed
        pass

    def run() -> tuple[int, float]:
        ds = make()
        ds.reset_state()
        t0 = time.perf_counter()
        n = sum(1 for _ in range(epochs) for _ in ds)
        return n, time.perf_counter() - t0

    return TimedContender(name, run)


def load_libs() -> dict[str, Any]:
    import dataflow

    libs: dict[str, Any] = {"dataflow": dataflow}
    try:
        import tensorpack.dataflow as tp
    except Exception as e:  # noqa: BLE001 - any import failure means: no peer
        print(f"tensorpack 0.11 does not import here ({type(e).__name__}: {e}); measuring dataflow only",
              file=sys.stderr)  # fmt: skip
    else:
        libs["tensorpack 0.11"] = tp
        if not hasattr(np, "float"):  # tensorpack's validate_coords (AugmentImageCoordinates)
            np.float = np.floating  # type: ignore[attr-defined]
    return libs


def print_ops(libs: dict[str, Any], refs: list[str], args: argparse.Namespace) -> None:
    """One row per augmentor of OPS: dataflow's and the peer's medians and their ratio."""
    rows = []
    for op in args.ops.split(",") if args.ops else OPS:
        contenders = [op_contender(n, lib, op, args.op_seconds) for n, lib in libs.items()]
        results, _ = run_timed_rounds(contenders, rounds=args.rounds, max_foreign=args.max_foreign)
        by = {r.name: r.median for r in results}
        peer = f"{by[refs[0]]:,.0f} | {by['dataflow'] / by[refs[0]]:.2f}x |" if refs else "- | - |"
        rows.append(f"| {op} | {by['dataflow']:,.0f} | {peer}")
        print(rows[-1], file=sys.stderr, flush=True)
    print("### ops (224x224 uint8, one augmentor)\n")
    print(f"| augmentor | dataflow images/s | {refs[0] if refs else 'peer'} images/s | ratio |")
    print("|---|---|---|---|")
    print("\n".join(rows) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--images", type=int, default=300, help="images timed per run")
    parser.add_argument("--only", default=",".join([*CHAINS, "flow", "flow coords"]),
                        help="comma-separated chains; 'ops' for single augmentors")  # fmt: skip
    parser.add_argument("--ops", default="", help="with --only ops: these augmentors (default: all)")
    parser.add_argument("--op-seconds", type=float, default=0.3, help="seconds per run of one op (ops)")
    parser.add_argument("--cv-threads", type=int, default=1)
    parser.add_argument("--max-foreign", type=float, default=0.5, help="cores others may use during a run")
    args = parser.parse_args()
    cv2.setNumThreads(args.cv_threads)
    libs = load_libs()
    refs = [n for n in libs if n != "dataflow"]
    print(f"imgaug_speed: {args.rounds} rounds x {args.images} images, medians; OpenCV {cv2.__version__} "
          f"({args.cv_threads} thread(s)), numpy {np.__version__}; {machine_line()}\n")  # fmt: skip
    for what in args.only.split(","):
        if what == "ops":
            print_ops(libs, refs, args)
            continue
        if what in ("flow", "flow coords"):
            contenders = [flow_contender(n, lib, what == "flow coords", args.images)
                          for n, lib in libs.items()]  # fmt: skip
        else:
            contenders = [chain_contender(n, lib, what, args.images) for n, lib in libs.items()]
        results, quiet = run_timed_rounds(contenders, rounds=args.rounds, max_foreign=args.max_foreign)
        print(f"### {what}\n")
        print(markdown_table(results, refs, unit="images/s") + "\n")
        print(quiet.line() + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
