"""Property tests: for every geometric augmentor, the image and its coordinates move together.

A smooth blob (Gaussian, sigma 2 px) is drawn on a black image at a random point; after a
random augmentor's transform, the blob's centre of mass in the output is where
``apply_coords`` puts the point.

Coordinates follow tensorpack's convention: ``(x, y)`` floats with ``(0, 0)`` the top-left
corner of the image, so the centre of pixel ``[row, col]`` is ``(col + 0.5, row + 0.5)``
(flip maps ``x -> w - x``; resize scales by ``new_w / w``). In it, flips, transposes,
crops and resizes are exact: the blob lands within 0.1 px of the point (tensorpack: 0.02).

tensorpack's warps (Shift, Rotation, RotationAndCropValid, Affine) apply their matrix to the
coordinates as given, which is exact for pixel-index coordinates (pixel centres at integers)
and off by ``(A - I) (0.5, 0.5)`` in the corner convention: up to 1 px on an axis for a
180-degree rotation. So a warp passes when it is exact (0.15 px) in either convention:
tensorpack's pixel-index one, or the corner one an implementation may have fixed it to. A
chain that mixes warps with flips or resizes is held to 1 px per axis, the contract
tensorpack keeps. Written against tensorpack's API (``DATAFLOW_IMGAUG_IMPL=tensorpack`` runs
it on tensorpack, see ``_impl.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.image._impl import UNDER_TENSORPACK, imgaug_under_test, rand_image, seed_draws

pytestmark = [pytest.mark.framework] if UNDER_TENSORPACK else []  # tensorpack imports TensorFlow
imgaug = imgaug_under_test()
PROPERTY = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])  # fmt: skip
SIGMA = 2.0


def _frac(lo: float, hi: float) -> st.SearchStrategy[float]:
    return st.floats(lo, hi, allow_nan=False)


#: warps: exact in tensorpack's pixel-index convention or in the corner one (see the module)
WARPS = {"Shift", "Rotation", "Rotation(step)", "RotationAndCropValid", "Affine"}
#: mixes warps and flips/resizes: within 1 px per axis
MIXED = {"chain"}
# name -> strategy of a factory (image shape -> augmentor); every geometric tensorpack augmentor
GEOMETRIC: dict[str, st.SearchStrategy[Callable[[tuple[int, int]], Any]]] = {
    "Flip(horiz)": _frac(0, 1).map(lambda p: lambda s: imgaug.Flip(horiz=True, prob=p)),
    "Flip(vert)": _frac(0, 1).map(lambda p: lambda s: imgaug.Flip(vert=True, prob=p)),
    "Transpose": _frac(0, 1).map(lambda p: lambda s: imgaug.Transpose(prob=p)),
    "Resize": st.tuples(st.integers(24, 96), st.integers(24, 96)).map(lambda hw: lambda s: imgaug.Resize(hw)),
    "ResizeShortestEdge": st.integers(24, 96).map(lambda n: lambda s: imgaug.ResizeShortestEdge(n)),
    "RandomResize": _frac(0.7, 1.0).map(
        lambda lo: lambda s: imgaug.RandomResize((lo, 1.4), (lo, 1.4), aspect_ratio_thres=0.4)),
    "RandomResize(px)": st.integers(30, 60).map(
        lambda lo: lambda s: imgaug.RandomResize((lo, 90), aspect_ratio_thres=0)),
    "RandomCrop": _frac(0.5, 1).map(
        lambda f: lambda s: imgaug.RandomCrop((int(s[0] * f), int(s[1] * f)))),
    "CenterCrop": _frac(0.5, 1).map(lambda f: lambda s: imgaug.CenterCrop((int(s[0] * f), int(s[1] * f)))),
    "RandomCropRandomShape": _frac(0.4, 1).map(
        lambda f: lambda s: imgaug.RandomCropRandomShape(int(s[1] * f), int(s[0] * f))),
    "GoogleNetRandomCropAndResize": st.integers(32, 72).map(
        lambda n: lambda s: imgaug.GoogleNetRandomCropAndResize((0.3, 1.0), target_shape=n)),
    "Shift": st.tuples(_frac(0, 0.3), _frac(0, 0.3)).map(lambda f: lambda s: imgaug.Shift(*f)),
    "Rotation": _frac(0, 60).map(lambda d: lambda s: imgaug.Rotation(d, center_range=(0.2, 0.8))),
    "Rotation(step)": st.sampled_from([90, 180]).map(
        lambda step: lambda s: imgaug.Rotation(180, step_deg=step)),
    "RotationAndCropValid": _frac(0, 45).map(lambda d: lambda s: imgaug.RotationAndCropValid(d)),
    "Affine": st.tuples(_frac(0, 30), _frac(0, 10)).map(
        lambda a: lambda s: imgaug.Affine(scale=(0.8, 1.2), translate_frac=(0.1, 0.1),
                                          rotate_max_deg=a[0], shear=a[1])),  # fmt: skip
    "chain": st.just(lambda s: imgaug.AugmentorList([
        imgaug.ResizeShortestEdge(56), imgaug.RandomCrop((48, 48)), imgaug.Flip(horiz=True),
        imgaug.Rotation(20), imgaug.Flip(vert=True)])),
}  # fmt: skip


def blob_image(h: int, w: int, x: float, y: float, dtype: str, channels: int) -> np.ndarray:
    """A Gaussian of peak 255 centred at pixel index (x, y)."""
    ys, xs = np.mgrid[:h, :w].astype(np.float32)
    g = 255.0 * np.exp(-((xs - x) ** 2 + (ys - y) ** 2) / (2 * SIGMA**2))
    img = np.repeat(g[:, :, None], channels, axis=2) if channels else g
    return np.rint(img).astype(np.uint8) if dtype == "uint8" else img.astype(dtype)


def blob_centre(out: np.ndarray) -> tuple[float, float] | None:
    """The blob's centre of mass in tensorpack's coordinates, or None when it touches the
    border (partly cut off: its centre of mass would be biased)."""
    plane = np.asarray(out, np.float64)
    plane = plane[..., 0] if plane.ndim == 3 else plane
    peak = plane.max()
    edge = max(plane[0].max(), plane[-1].max(), plane[:, 0].max(), plane[:, -1].max())
    if peak < 50 or edge > 0.01 * peak:
        return None
    ys, xs = np.mgrid[: plane.shape[0], : plane.shape[1]]
    total = plane.sum()
    return float((xs * plane).sum() / total) + 0.5, float((ys * plane).sum() / total) + 0.5


@PROPERTY
@given(
    name=st.sampled_from(sorted(GEOMETRIC)),
    data=st.data(),
    h=st.integers(32, 80),
    w=st.integers(32, 80),
    dtype=st.sampled_from(["uint8", "float32"]),
    channels=st.sampled_from([3, 1, 0]),
    seed=st.integers(0, 2**16),
)
def test_marked_point_lands_where_apply_coords_says(
    name: str, data: st.DataObject, h: int, w: int, dtype: str, channels: int, seed: int
) -> None:
    factory = data.draw(GEOMETRIC[name], label="augmentor")
    x = data.draw(st.floats(8, w - 9), label="x")
    y = data.draw(st.floats(8, h - 9), label="y")
    aug = seed_draws(factory((h, w)), seed)
    img = blob_image(h, w, x, y, dtype, channels)
    tfm = aug.get_transform(img)
    out = tfm.apply_image(img)
    assert out.dtype == img.dtype
    assert out.ndim == img.ndim
    moved = np.asarray(tfm.apply_coords(np.asarray([[x + 0.5, y + 0.5]], np.float32)), np.float64)
    assert moved.shape == (1, 2)
    centre = blob_centre(out)
    assume(centre is not None)  # the point was cropped away or lies at the border
    assert centre is not None
    err = np.abs(np.subtract(centre, moved[0])).max()
    if name in MIXED:
        assert err <= 1.0, (centre, moved)
    elif name in WARPS:
        as_index = np.asarray(tfm.apply_coords(np.asarray([[x, y]], np.float32)), np.float64)[0] + 0.5
        assert min(err, np.abs(np.subtract(centre, as_index)).max()) <= 0.15, (centre, moved, as_index)
    else:
        assert err <= 0.1, (centre, moved)


@PROPERTY
@given(seed=st.integers(0, 2**16), n=st.integers(1, 20))
def test_coordinates_of_one_transform_are_deterministic(seed: int, n: int) -> None:
    """The same transform moves the same coordinates the same way twice, and the image's
    size is what the coordinates assume: corners map inside the output's extent."""
    aug = seed_draws(imgaug.AugmentorList([
        imgaug.RandomResize((0.8, 1.25), (0.8, 1.25)), imgaug.RandomCrop((40, 40)),
        imgaug.Flip(horiz=True), imgaug.Transpose()]), seed)  # fmt: skip
    img = rand_image((60, 70, 3), seed=seed)
    tfm = aug.get_transform(img)
    out = tfm.apply_image(img)
    assert out.shape == (40, 40, 3)
    pts = np.random.RandomState(seed).uniform(0, 60, size=(n, 2)).astype(np.float32)
    a = np.asarray(tfm.apply_coords(pts.copy()))
    b = np.asarray(tfm.apply_coords(pts.copy()))
    np.testing.assert_array_equal(a, b)


PHOTOMETRIC = [
    lambda: imgaug.Brightness(30), lambda: imgaug.BrightnessScale((0.5, 1.5)),
    lambda: imgaug.Contrast((0.5, 1.5)), lambda: imgaug.Saturation(0.4),
    lambda: imgaug.Lighting(0.1, [0.2, 0.02, 0.004], np.eye(3)), lambda: imgaug.Hue((-30, 30)),
    lambda: imgaug.GaussianBlur(), lambda: imgaug.Gamma(), lambda: imgaug.Clip(10, 200),
    lambda: imgaug.GaussianNoise(), lambda: imgaug.SaltPepperNoise(), lambda: imgaug.JpegNoise(),
    lambda: imgaug.RandomCutout(4, 4), lambda: imgaug.MeanVarianceNormalize(),
    lambda: imgaug.MinMaxNormalize(), lambda: imgaug.Grayscale(keepshape=True),
    lambda: imgaug.ToFloat32(), lambda: imgaug.ToUint8(),
    lambda: imgaug.Identity(),
]  # fmt: skip


@pytest.mark.parametrize("make", PHOTOMETRIC, ids=lambda f: type(f()).__name__)
def test_photometric_augmentor_leaves_coordinates_alone(make: Callable[[], Any]) -> None:
    aug = seed_draws(make(), 3)
    img = rand_image((32, 40, 3), seed=1)
    tfm = aug.get_transform(img)
    out = tfm.apply_image(img.copy())
    assert out.shape[:2] == img.shape[:2]
    pts = np.asarray([[0, 0], [3.5, 7.25], [40, 32]], dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(tfm.apply_coords(pts.copy())), pts)
