"""Parity with tensorpack 0.11 (the oracle): every augmentor, built with the same arguments and
given the same random draws, turns the same input into the same output.

Same draws: both augmentors (and every augmentor nested in a meta augmentor, in the order
they are built) get a ``RandomState`` seeded alike (:class:`~tests.image._impl.SharedDraws`),
so they draw the same parameters as long as they draw in the same order. Each case runs 6
draws on a uint8 and a float32 image (or the inputs tensorpack supports for it).

Compared: the image (uint8 within 1 level: OpenCV vs numpy rounding; float32 within 1e-3),
and for geometric augmentors ``apply_coords`` (1e-4 px). Deliberate differences, checked as
such (see docs/migration.rst):

- Warps (Shift, Rotation, RotationAndCropValid, Affine): the image is tensorpack's; the
  coordinates are mapped in the pixel-corner convention all other transforms use, so
  ``ours(p) == tensorpack(p - 0.5) + 0.5`` (tensorpack applies the pixel-index matrix as is).
- CenterPaste/RandomPaste: the image is tensorpack's; ``apply_coords`` moves the points by
  the paste offset (tensorpack raises ``NotImplementedError``).
- MeanVarianceNormalize returns float32, as tensorpack documents and did on numpy 1; on
  numpy 2 tensorpack's returns float64 (a float64 scalar now promotes the array). The values
  are compared.
- tensorpack 0.11's Affine raises ``TypeError`` with OpenCV 5 (0-d arrays given to
  ``getRotationMatrix2D``); the oracle is patched for that (``_impl.py``).

Under ``DATAFLOW_IMGAUG_IMPL=tensorpack`` both sides are tensorpack: that checks the harness
(same draws give the same output), and the deliberate differences are expected to vanish.

tensorpack 0.11 is the ``[test]`` extra's (it installs and imports with numpy 2).
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import cv2
import numpy as np
import pytest

from tests.image._impl import UNDER_TENSORPACK, SharedDraws, imgaug_under_test, rand_image, tensorpack_imgaug

pytestmark = pytest.mark.framework  # tensorpack imports TensorFlow when it is installed
ours = imgaug_under_test()
DIFFERS = not UNDER_TENSORPACK  # the deliberate differences exist (ours is not tensorpack)

EIGVAL = np.asarray([0.2175, 0.0188, 0.0045][::-1]) * 255.0
EIGVEC = np.array([[-0.5675, 0.7192, 0.4009], [-0.5808, -0.0045, -0.8140], [-0.5836, -0.6948, 0.4203]],
                  dtype="float32")[::-1, ::-1]  # fmt: skip
U8, F32, GRAY = "uint8", "float32", "gray"

# id -> (build(lib, seeded), inputs). ``seeded(aug)`` gives aug the next SharedDraws stream.
Build = Callable[[Any, Callable[[Any], Any]], Any]
PHOTOMETRIC: dict[str, tuple[Build, tuple[str, ...]]] = {
    "Brightness": (lambda L, s: s(L.Brightness(30)), (U8, F32, GRAY)),
    "Brightness(clip=False)": (lambda L, s: s(L.Brightness(30, clip=False)), (F32,)),
    "BrightnessScale": (lambda L, s: s(L.BrightnessScale((0.6, 1.4))), (U8, F32)),
    "BrightnessScale(clip=False)": (lambda L, s: s(L.BrightnessScale((0.6, 1.4), clip=False)), (F32,)),
    "Contrast": (lambda L, s: s(L.Contrast((0.6, 1.4))), (U8, F32, GRAY)),
    "Contrast(rgb=True)": (lambda L, s: s(L.Contrast((0.6, 1.4), rgb=True)), (U8, F32)),
    "Contrast(rgb=False,clip=False)": (lambda L, s: s(L.Contrast((0.6, 1.4), rgb=False, clip=False)), (F32,)),
    "Saturation": (lambda L, s: s(L.Saturation(0.4)), (U8, F32)),
    "Saturation(rgb=False)": (lambda L, s: s(L.Saturation(0.4, rgb=False)), (U8, F32)),
    "Lighting": (lambda L, s: s(L.Lighting(0.1, EIGVAL, EIGVEC)), (U8, F32)),
    "Hue": (lambda L, s: s(L.Hue((-40, 40))), (U8, F32)),
    "Hue(bgr)": (lambda L, s: s(L.Hue(rgb=False)), (U8,)),
    "GaussianBlur": (lambda L, s: s(L.GaussianBlur()), (U8, F32, GRAY)),
    "GaussianBlur(asym)": (lambda L, s: s(L.GaussianBlur((0, 5), (0.5, 2.0), symmetric=False)), (U8, F32)),
    "Gamma": (lambda L, s: s(L.Gamma()), (U8, F32)),
    "Clip": (lambda L, s: s(L.Clip(20, 200)), (U8, F32)),
    "MeanVarianceNormalize": (lambda L, s: s(L.MeanVarianceNormalize()), (U8, F32)),
    "MeanVarianceNormalize(per channel)": (lambda L, s: s(L.MeanVarianceNormalize(False)), (U8, F32)),
    "MinMaxNormalize": (lambda L, s: s(L.MinMaxNormalize()), (U8, F32)),
    "MinMaxNormalize(0,1,per channel)": (lambda L, s: s(L.MinMaxNormalize(0, 1, False)), (U8, F32)),
    "GaussianNoise": (lambda L, s: s(L.GaussianNoise(5)), (U8, F32)),
    "SaltPepperNoise": (lambda L, s: s(L.SaltPepperNoise(0.1, 0.2)), (U8, F32, GRAY)),
    "JpegNoise": (lambda L, s: s(L.JpegNoise()), (U8,)),
    "RandomCutout": (lambda L, s: s(L.RandomCutout(8, 10, fill=7.0)), (U8, F32)),
    "ColorSpace": (lambda L, s: s(L.ColorSpace(cv2.COLOR_BGR2HSV)), (U8,)),
    "ColorSpace(gray)": (lambda L, s: s(L.ColorSpace(cv2.COLOR_BGR2GRAY)), (U8, F32)),
    "Grayscale": (lambda L, s: s(L.Grayscale()), (U8, F32)),
    "Grayscale(rgb,keepshape)": (lambda L, s: s(L.Grayscale(rgb=True, keepshape=True)), (U8, F32)),
    "Grayscale(keepdims=False)": (lambda L, s: s(L.Grayscale(keepdims=False)), (U8,)),
    "ToUint8": (lambda L, s: s(L.ToUint8()), (F32,)),
    "ToFloat32": (lambda L, s: s(L.ToFloat32()), (U8,)),
    "Identity": (lambda L, s: s(L.Identity()), (U8,)),
    "RandomApplyAug": (lambda L, s: s(L.RandomApplyAug(s(L.Brightness(40)), 0.5)), (U8,)),
    "RandomOrderAug(fbresnet colour)": (lambda L, s: s(L.RandomOrderAug([
        s(L.BrightnessScale((0.6, 1.4))), s(L.Contrast((0.6, 1.4), rgb=False)),
        s(L.Saturation(0.4, rgb=False)), s(L.Lighting(0.1, EIGVAL, EIGVEC))])), (F32,)),
}  # fmt: skip

GEOMETRIC: dict[str, tuple[Build, tuple[str, ...]]] = {
    "Flip(horiz)": (lambda L, s: s(L.Flip(horiz=True)), (U8, F32, GRAY)),
    "Flip(vert,prob=0.3)": (lambda L, s: s(L.Flip(vert=True, prob=0.3)), (U8,)),
    "Transpose": (lambda L, s: s(L.Transpose()), (U8, GRAY)),
    "Resize": (lambda L, s: s(L.Resize((30, 70))), (U8, F32, GRAY)),
    "Resize(cubic)": (lambda L, s: s(L.Resize(25, interp=cv2.INTER_CUBIC)), (U8, F32)),
    "ResizeShortestEdge": (lambda L, s: s(L.ResizeShortestEdge(32)), (U8, F32)),
    "ResizeShortestEdge(area)": (lambda L, s: s(L.ResizeShortestEdge(20, cv2.INTER_AREA)), (U8,)),
    "RandomResize": (lambda L, s: s(L.RandomResize((0.8, 1.3), (0.8, 1.3))), (U8, F32)),
    "RandomResize(px,keep ratio)": (lambda L, s: s(L.RandomResize((30, 80), aspect_ratio_thres=0)), (U8,)),
    "RandomCrop": (lambda L, s: s(L.RandomCrop((30, 40))), (U8, F32, GRAY)),
    "CenterCrop": (lambda L, s: s(L.CenterCrop(31)), (U8,)),
    "RandomCropRandomShape": (lambda L, s: s(L.RandomCropRandomShape(20, 20)), (U8,)),
    "GoogleNetRandomCropAndResize": (
        lambda L, s: s(L.GoogleNetRandomCropAndResize(target_shape=32)), (U8, F32)),
    "GoogleNetRandomCropAndResize(fallback)": (lambda L, s: s(L.GoogleNetRandomCropAndResize(
        (0.9, 1.0), (5.0, 6.0), target_shape=24, interp=cv2.INTER_CUBIC)), (U8,)),
    "RandomChooseAug": (lambda L, s: s(L.RandomChooseAug(
        [s(L.Flip(horiz=True)), s(L.Transpose()), s(L.Resize(20))])), (U8,)),
    "RandomChooseAug(p)": (lambda L, s: s(L.RandomChooseAug(
        [(s(L.Flip(vert=True)), 0.3), (s(L.RandomCrop(20)), 0.7)])), (U8,)),
    "AugmentorList(fbresnet)": (lambda L, s: L.AugmentorList([
        s(L.GoogleNetRandomCropAndResize(interp=cv2.INTER_CUBIC, target_shape=32)), s(L.ToFloat32()),
        s(L.RandomOrderAug([s(L.BrightnessScale((0.6, 1.4))), s(L.Contrast((0.6, 1.4), rgb=False)),
                            s(L.Saturation(0.4, rgb=False)), s(L.Lighting(0.1, EIGVAL, EIGVEC))])),
        s(L.ToUint8()), s(L.Flip(horiz=True))]), (U8,)),
}  # fmt: skip
#: coordinates: ours(p) == tensorpack(p - 0.5) + 0.5 (see the module)
WARPS: dict[str, tuple[Build, tuple[str, ...]]] = {
    "Shift": (lambda L, s: s(L.Shift(0.2, 0.3)), (U8, F32)),
    "Shift(constant)": (lambda L, s: s(L.Shift(0.2, 0.2, border=cv2.BORDER_CONSTANT, border_value=9)), (U8,)),
    "Rotation": (lambda L, s: s(L.Rotation(30)), (U8, F32, GRAY)),
    "Rotation(step)": (lambda L, s: s(L.Rotation(180, step_deg=90, interp=cv2.INTER_NEAREST)), (U8,)),
    "RotationAndCropValid": (lambda L, s: s(L.RotationAndCropValid(30)), (U8, F32)),
    "Affine": (lambda L, s: s(L.Affine((0.8, 1.2), (0.1, 0.1), 20, 10)), (U8, F32)),
    "Affine(rotate only)": (lambda L, s: s(L.Affine(rotate_max_deg=45, border=cv2.BORDER_CONSTANT)), (U8,)),
}  # fmt: skip
#: coordinates: tensorpack raises NotImplementedError; ours moves them with the image
PASTES: dict[str, tuple[Build, tuple[str, ...]]] = {
    "CenterPaste": (lambda L, s: s(L.CenterPaste((60, 80))), (U8, F32, GRAY)),
    "RandomPaste": (lambda L, s: s(L.RandomPaste((61, 79), L.ConstantBackgroundFiller(17))), (U8, F32)),
}  # fmt: skip
#: tensorpack returns float64 on numpy 2 where it documents (and ours returns) float32
NUMPY2_FLOAT64 = {"MeanVarianceNormalize", "MeanVarianceNormalize(per channel)"}
POINTS = np.asarray([[0, 0], [5.5, 3.25], [20, 30], [55.9, 39.9], [28, 20]], dtype=np.float32)


def _inputs(kind: str, seed: int) -> np.ndarray:
    if kind == GRAY:
        return rand_image((40, 56), seed=seed)
    return rand_image((40, 56, 3), dtype=kind, seed=seed)


def _pair(build: Build, seed: int) -> tuple[Any, Any]:
    """The same augmentor from both libraries, each nested augmentor (in build order) with the
    same SharedDraws stream in both."""
    built = []
    for lib in (ours, tensorpack_imgaug()):
        marked: list[Any] = []
        top = build(lib, lambda aug, marked=marked: marked.append(aug) or aug)
        # seeded once all is built: tensorpack's meta augmentors reset their parts when built
        for i, aug in enumerate(marked):
            aug.rng = SharedDraws(seed * 100 + i)
        built.append(top)
    return built[0], built[1]


def _assert_same_image(mine: np.ndarray, theirs: np.ndarray, name: str = "") -> None:
    mine, theirs = np.asarray(mine), np.asarray(theirs)
    if name in NUMPY2_FLOAT64 and theirs.dtype == np.float64 and mine.dtype == np.float32:
        theirs = theirs.astype(np.float32)
    assert mine.shape == theirs.shape and mine.dtype == theirs.dtype, (mine.shape, mine.dtype, theirs.shape,
                                                                      theirs.dtype)  # fmt: skip
    if mine.dtype == np.uint8:
        assert np.abs(mine.astype(int) - theirs.astype(int)).max(initial=0) <= 1
    else:
        np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-3)


def _run(build: Build, kind: str, draw: int, name: str = "") -> tuple[Any, Any]:
    """Both transforms after applying them to the same image; asserts the images agree."""
    mine_aug, tp_aug = _pair(build, draw)
    img = _inputs(kind, draw)
    mine_t, tp_t = mine_aug.get_transform(img.copy()), tp_aug.get_transform(img.copy())
    _assert_same_image(mine_t.apply_image(img.copy()), tp_t.apply_image(img.copy()), name)
    return mine_t, tp_t


def _cases(table: dict[str, tuple[Build, tuple[str, ...]]]) -> list[Any]:
    return [pytest.param(build, kind, name, id=f"{name}-{kind}") for name, (build, kinds) in table.items()
            for kind in kinds]  # fmt: skip


@pytest.mark.parametrize(("build", "kind", "name"), _cases(PHOTOMETRIC))
def test_photometric_augmentor_matches_tensorpack(build: Build, kind: str, name: str) -> None:
    for draw in range(6):
        mine_t, tp_t = _run(build, kind, draw, name)
        np.testing.assert_array_equal(mine_t.apply_coords(POINTS.copy()), POINTS)
        np.testing.assert_array_equal(tp_t.apply_coords(POINTS.copy()), POINTS)


def test_map_image_matches_tensorpack_with_and_without_coord_func() -> None:
    def func(im: np.ndarray) -> np.ndarray:
        return im[::2, ::-1] * 2

    def coord_func(c: np.ndarray) -> np.ndarray:
        return c * [-1, 0.5] + [56, 0]

    img = _inputs(F32, 0)
    for with_coords in (False, True):
        kwargs = {"coord_func": coord_func} if with_coords else {}
        mine_t, tp_t = (L.MapImage(func, **kwargs).get_transform(img) for L in (ours, tensorpack_imgaug()))
        _assert_same_image(mine_t.apply_image(img.copy()), tp_t.apply_image(img.copy()))
        if with_coords:
            np.testing.assert_allclose(mine_t.apply_coords(POINTS.copy()), tp_t.apply_coords(POINTS.copy()))
        else:
            for t in (mine_t, tp_t):
                with pytest.raises(NotImplementedError):
                    t.apply_coords(POINTS.copy())


def _coords(t: Any, points: np.ndarray) -> np.ndarray:
    return np.asarray(t.apply_coords(points.copy()), np.float64)


@pytest.mark.parametrize(("build", "kind", "name"), _cases(GEOMETRIC))
def test_geometric_augmentor_matches_tensorpack(build: Build, kind: str, name: str) -> None:
    for draw in range(6):
        mine_t, tp_t = _run(build, kind, draw)
        np.testing.assert_allclose(_coords(mine_t, POINTS), _coords(tp_t, POINTS), atol=1e-4)


@pytest.mark.parametrize(("build", "kind", "name"), _cases(WARPS))
def test_warp_matches_tensorpack_with_coords_half_a_pixel_apart(build: Build, kind: str, name: str) -> None:
    for draw in range(6):
        mine_t, tp_t = _run(build, kind, draw)
        expected = _coords(tp_t, POINTS - 0.5) + 0.5 if DIFFERS else _coords(tp_t, POINTS)
        np.testing.assert_allclose(_coords(mine_t, POINTS), expected, atol=1e-3)


@pytest.mark.parametrize(("build", "kind", "name"), _cases(PASTES))
def test_paste_matches_tensorpack_image_and_moves_coords(build: Build, kind: str, name: str) -> None:
    for draw in range(6):
        mine_t, tp_t = _run(build, kind, draw)
        img = _inputs(kind, draw)
        out = mine_t.apply_image(img.copy())
        ys, xs = np.argwhere(np.all(out.reshape(out.shape[0], out.shape[1], -1) == img.reshape(
            img.shape[0], img.shape[1], -1)[0, 0], axis=-1))[0]  # where the image's first pixel went
        with pytest.raises(NotImplementedError):
            tp_t.apply_coords(POINTS.copy())
        if not DIFFERS:
            continue
        moved = np.asarray(mine_t.apply_coords(POINTS.copy()), np.float64)
        np.testing.assert_allclose(moved - POINTS, np.broadcast_to([xs, ys], POINTS.shape), atol=1e-5)



def test_center_paste_get_transform_called_as_tensorpack_callers_do() -> None:
    """tensorpack's ``CenterPaste.get_transform(self, _)`` ignores its argument and centres the
    image ``apply_image`` gets: callers pass ``None``, an image or a placeholder, positionally."""
    tp = tensorpack_imgaug()
    for kind in (U8, F32, GRAY):
        img = _inputs(kind, 0)
        want = tp.CenterPaste((60, 80)).get_transform(None).apply_image(img.copy())
        for arg in (None, img, SimpleNamespace(shape=img.shape)):  # a placeholder: just a shape
            got = ours.CenterPaste((60, 80)).get_transform(arg).apply_image(img.copy())
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
        aug = ours.AugmentorList([ours.Flip(horiz=True, prob=0.0), ours.CenterPaste((60, 80))])
        np.testing.assert_array_equal(aug.augment(img.copy()), want)  # LazyTransform(a.get_transform)


#: tensorpack's ``self.rng`` is a ``RandomState``; code that pins it for reproducibility
#: (``aug.rng = np.random.RandomState(0)``) works there for every augmentor
RANDOMSTATE_USERS = {
    "RandomCrop": lambda: ours.RandomCrop(20),
    "JpegNoise": lambda: ours.JpegNoise(),
    "SaltPepperNoise": lambda: ours.SaltPepperNoise(),
    "GaussianNoise": lambda: ours.GaussianNoise(),
}
GAP = ("known gap: these augmentors call Generator-only methods (integers, random(dtype=), "
       "standard_normal(dtype=)) on self.rng, so a plain RandomState assigned to it fails")  # fmt: skip


@pytest.mark.xfail(not UNDER_TENSORPACK, strict=True, raises=(AttributeError, TypeError), reason=GAP)
@pytest.mark.parametrize("name", sorted(RANDOMSTATE_USERS))
def test_augmentor_takes_a_plain_randomstate_as_rng(name: str) -> None:
    aug = RANDOMSTATE_USERS[name]()
    aug.rng = np.random.RandomState(0)
    out = aug.augment(_inputs(U8, 0))
    assert out.dtype == np.uint8
