"""Property: for every geometric augmentor, a marked pixel ends where ``apply_coords`` says its
centre goes (pixel ``(i, j)`` has centre ``(j + 0.5, i + 0.5)``).

Exact movers (flip, transpose, crop, paste, whole-pixel shifts) must put the pixel exactly
there; interpolating ones (resize, rotation, affine) must put the marked intensity's centroid
within a pixel of it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

pytest.importorskip("cv2")

from dataflow import imgaug  # noqa: E402

EXACT: dict[str, Callable[[], Any]] = {
    "Flip(horiz)": lambda: imgaug.Flip(horiz=True, prob=0.5),
    "Flip(vert)": lambda: imgaug.Flip(vert=True, prob=0.5),
    "Transpose": lambda: imgaug.Transpose(prob=0.5),
    "RandomCrop": lambda: imgaug.RandomCrop((20, 22)),
    "CenterCrop": lambda: imgaug.CenterCrop((21, 19)),
    "RandomCropRandomShape": lambda: imgaug.RandomCropRandomShape(10, 10),
    "CenterPaste": lambda: imgaug.CenterPaste((50, 61)),
    "RandomPaste": lambda: imgaug.RandomPaste((50, 61)),
    "Shift": lambda: imgaug.Shift(0.3, 0.3, border=0),
    "Rotation(step 90)": lambda: imgaug.Rotation(
        180, center_range=(0.5, 0.5), step_deg=90, interp=0, border=0
    ),
    "chain": lambda: imgaug.AugmentorList(
        [imgaug.CenterPaste((48, 48)), imgaug.RandomCrop(40), imgaug.Flip(horiz=True), imgaug.Transpose()]
    ),
}
INTERPOLATING: dict[str, Callable[[], Any]] = {
    "Resize": lambda: imgaug.Resize((45, 23)),
    "ResizeShortestEdge": lambda: imgaug.ResizeShortestEdge(50),
    "RandomResize": lambda: imgaug.RandomResize((0.7, 1.6), (0.7, 1.6), aspect_ratio_thres=0.5),
    "GoogleNetRandomCropAndResize": lambda: imgaug.GoogleNetRandomCropAndResize((0.3, 1.0), target_shape=48),
    "Rotation": lambda: imgaug.Rotation(40, border=0),
    "RotationAndCropValid": lambda: imgaug.RotationAndCropValid(25),
    "Affine": lambda: imgaug.Affine((0.8, 1.3), (0.1, 0.1), 30, 15, border=0),
    "RandomChooseAug": lambda: imgaug.RandomChooseAug([imgaug.Rotation(20, border=0), imgaug.Resize(33)]),
    "RandomApplyAug": lambda: imgaug.RandomApplyAug(imgaug.Affine(rotate_max_deg=45, border=0), 0.5),
}

H, W = 30, 34
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _marked(i: int, j: int) -> np.ndarray:
    img = np.zeros((H, W), np.float32)
    img[i, j] = 1.0
    return img


def _centre(i: int, j: int) -> np.ndarray:
    return np.array([[j + 0.5, i + 0.5]])


@pytest.mark.parametrize("name", sorted(EXACT))
@SETTINGS
@given(data=st.data())
def test_exact_movers_put_the_pixel_where_coords_say(name: str, data: st.DataObject) -> None:
    aug = EXACT[name]()
    aug.rng.bit_generator.state = np.random.PCG64(data.draw(st.integers(0, 2**32))).state
    i, j = data.draw(st.integers(0, H - 1)), data.draw(st.integers(0, W - 1))
    img = _marked(i, j)
    t = aug.get_transform(img)
    out = t.apply_image(img)
    ((x, y),) = t.apply_coords(_centre(i, j))
    inside = 0 <= x < out.shape[1] and 0 <= y < out.shape[0]
    if not inside:  # cropped away (or shifted out): the pixel must be gone
        assert out.sum() == 0
        return
    col, row = round(x - 0.5), round(y - 0.5)
    assert abs(x - 0.5 - col) < 1e-6 and abs(y - 0.5 - row) < 1e-6, (x, y)  # still a pixel centre
    assert out[row, col] == 1.0 and out.sum() == 1.0


@pytest.mark.parametrize("name", sorted(INTERPOLATING))
@SETTINGS
@given(data=st.data())
def test_interpolating_movers_put_the_centroid_where_coords_say(name: str, data: st.DataObject) -> None:
    aug = INTERPOLATING[name]()
    for a in [aug, *getattr(aug, "aug_lists", []), *filter(None, [getattr(aug, "aug", None)])]:
        a.rng.bit_generator.state = np.random.PCG64(data.draw(st.integers(0, 2**32))).state
    i, j = data.draw(st.integers(2, H - 3)), data.draw(st.integers(2, W - 3))
    img = np.zeros((H, W), np.float32)
    img[i - 1 : i + 2, j - 1 : j + 2] = 1.0  # a 3 x 3 block centred on (i, j): robust to shrinking
    t = aug.get_transform(img)
    out = t.apply_image(img)
    ((x, y),) = t.apply_coords(_centre(i, j))
    assume(2 <= x <= out.shape[1] - 2 and 2 <= y <= out.shape[0] - 2)  # fully inside the output
    total = out.sum()
    assume(total > 0)
    ys, xs = np.mgrid[: out.shape[0], : out.shape[1]]
    cx, cy = (out * (xs + 0.5)).sum() / total, (out * (ys + 0.5)).sum() / total
    assert abs(cx - x) < 0.75 and abs(cy - y) < 0.75, (name, (cx, cy), (x, y))
