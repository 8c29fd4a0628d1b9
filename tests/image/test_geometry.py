"""Each geometric augmentor against its definition: where the pixels go, the output size, and
that ``apply_coords`` says the same."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("cv2")

from dataflow import imgaug  # noqa: E402


def _img(h: int = 30, w: int = 40, c: int | None = 3, dtype: str = "uint8") -> np.ndarray:
    rng = np.random.default_rng(0)
    shape = (h, w) if c is None else (h, w, c)
    return (rng.random(shape) * 255).astype(dtype)


def test_flip_horizontal_mirrors_pixels_and_maps_x_to_w_minus_x() -> None:
    img = _img()
    t = imgaug.Flip(horiz=True, prob=1.0).get_transform(img)
    out = t.apply_image(img)
    np.testing.assert_array_equal(out, img[:, ::-1])
    assert out.flags.c_contiguous
    coords = np.array([[0.0, 0.0], [10.5, 3.5], [40.0, 30.0]])
    np.testing.assert_allclose(t.apply_coords(coords), [[40, 0], [29.5, 3.5], [0, 30]])
    np.testing.assert_array_equal(coords, [[0.0, 0.0], [10.5, 3.5], [40.0, 30.0]])  # input untouched


def test_flip_vertical_and_probability_zero() -> None:
    img = _img(c=None)
    t = imgaug.Flip(vert=True, prob=1.0).get_transform(img)
    np.testing.assert_array_equal(t.apply_image(img), img[::-1])
    np.testing.assert_allclose(t.apply_coords(np.array([[1.0, 2.0]])), [[1, 28]])
    never = imgaug.Flip(horiz=True, prob=0.0)
    for _ in range(20):
        np.testing.assert_array_equal(never.augment(img), img)


def test_flip_probability_is_respected() -> None:
    img = _img()
    aug = imgaug.Flip(horiz=True, prob=0.3)
    flipped = sum(not np.array_equal(aug.augment(img), img) for _ in range(2000))
    assert 500 < flipped < 700


@pytest.mark.parametrize("kwargs", [{}, {"horiz": True, "vert": True}])
def test_flip_needs_exactly_one_direction(kwargs: dict) -> None:
    with pytest.raises(ValueError, match="Flip"):
        imgaug.Flip(**kwargs)


def test_transpose_swaps_axes_and_coords() -> None:
    img = _img(c=3)
    t = imgaug.Transpose(prob=1.0).get_transform(img)
    np.testing.assert_array_equal(t.apply_image(img), img.transpose(1, 0, 2))
    np.testing.assert_allclose(t.apply_coords(np.array([[3.0, 7.0]])), [[7, 3]])
    gray1 = _img(c=1)
    assert t.apply_image(gray1).shape == (40, 30, 1)


@pytest.mark.parametrize("c", [None, 1, 3])
def test_resize_gives_the_size_keeps_ndim_and_scales_coords(c: int | None) -> None:
    img = _img(c=c)
    t = imgaug.Resize((15, 80)).get_transform(img)
    out = t.apply_image(img)
    assert out.shape[:2] == (15, 80) and out.ndim == img.ndim
    np.testing.assert_allclose(t.apply_coords(np.array([[40.0, 30.0], [10.0, 6.0]])), [[80, 15], [20, 3]])
    assert imgaug.Resize(16).augment(img).shape[:2] == (16, 16)


def test_resize_transform_refuses_another_image_size() -> None:
    t = imgaug.Resize(10).get_transform(_img())
    with pytest.raises(ValueError, match="ResizeTransform"):
        t.apply_image(_img(20, 20))


@pytest.mark.parametrize(("h", "w", "expect"), [(30, 40, (24, 32)), (40, 30, (32, 24)), (25, 25, (24, 24))])
def test_resize_shortest_edge(h: int, w: int, expect: tuple[int, int]) -> None:
    out = imgaug.ResizeShortestEdge(24).augment(_img(h, w))
    assert out.shape[:2] == expect


def test_random_resize_scale_ranges_and_aspect_ratio() -> None:
    img = _img(100, 200)
    aug = imgaug.RandomResize((0.5, 1.5), (0.5, 1.5), aspect_ratio_thres=0.1)
    for _ in range(50):
        h, w = aug.augment(img).shape[:2]
        assert 49 <= h <= 151 and 99 <= w <= 301
        assert abs(w / h - 2.0) / 2.0 < 0.1 + 0.03  # rounding to whole pixels
    keep = imgaug.RandomResize((0.5, 1.5), aspect_ratio_thres=0)
    for _ in range(20):
        h, w = keep.augment(img).shape[:2]
        assert abs(w - 2 * h) <= 1
    pixels = imgaug.RandomResize((50, 60), (20, 30), aspect_ratio_thres=1.0)
    for _ in range(20):
        h, w = pixels.augment(img).shape[:2]
        assert 50 <= w <= 60 and 20 <= h <= 30


def test_random_crop_takes_the_region_its_coords_say() -> None:
    img = _img(30, 40)
    aug = imgaug.RandomCrop((10, 12))
    seen = set()
    for _ in range(200):
        t = aug.get_transform(img)
        out = t.apply_image(img)
        assert out.shape == (10, 12, 3)
        x0, y0 = -t.apply_coords(np.zeros((1, 2)))[0]
        np.testing.assert_array_equal(out, img[int(y0) : int(y0) + 10, int(x0) : int(x0) + 12])
        seen.add((int(y0), int(x0)))
    ys, xs = zip(*seen)
    assert min(ys) == 0 and max(ys) == 20 and min(xs) == 0 and max(xs) == 28  # every offset reachable


def test_center_crop_and_crop_too_large() -> None:
    img = _img(30, 40)
    out = imgaug.CenterCrop(10).augment(img)
    np.testing.assert_array_equal(out, img[10:20, 15:25])
    with pytest.raises(ValueError, match="RandomCrop"):
        imgaug.RandomCrop(50).get_transform(img)
    with pytest.raises(ValueError, match="CenterCrop"):
        imgaug.CenterCrop((31, 10)).get_transform(img)


def test_random_crop_random_shape_bounds() -> None:
    img = _img(30, 40)
    aug = imgaug.RandomCropRandomShape(5, 6, wmax=20, hmax=10)
    for _ in range(100):
        h, w = aug.augment(img).shape[:2]
        assert 6 <= h <= 10 and 5 <= w <= 20


def test_googlenet_crop_gives_target_shape_and_falls_back() -> None:
    aug = imgaug.GoogleNetRandomCropAndResize(target_shape=16)
    for _ in range(30):
        assert aug.augment(_img(30, 40)).shape == (16, 16, 3)
    # a crop of at least 99% of the area with aspect ratio 4 never fits a square: the fallback
    fallback = imgaug.GoogleNetRandomCropAndResize((0.99, 1.0), (4.0, 4.1), target_shape=16)
    img = _img(40, 40)
    t = fallback.get_transform(img)
    np.testing.assert_array_equal(t.apply_image(img), imgaug.Resize(16).augment(img))


def test_paste_get_transform_without_an_image_binds_at_the_first_apply_image() -> None:
    img = _img(10, 12)
    for t in (imgaug.CenterPaste((20, 30)).get_transform(None), imgaug.CenterPaste((20, 30)).get_transform()):
        with pytest.raises(RuntimeError, match="made when apply_image first runs"):
            t.apply_coords(np.zeros((1, 2)))
        out = t.apply_image(img)
        np.testing.assert_array_equal(out, imgaug.CenterPaste((20, 30)).augment(img))
        np.testing.assert_allclose(t.apply_coords(np.array([[0.0, 0.0]])), [[9, 5]])
    t = imgaug.RandomPaste((20, 30)).get_transform()
    out = t.apply_image(img)
    x0, y0 = t.apply_coords(np.zeros((1, 2)))[0].astype(int)
    np.testing.assert_array_equal(out[y0 : y0 + 10, x0 : x0 + 12], img)


def test_center_and_random_paste_place_the_image_and_move_coords() -> None:
    img = _img(10, 12)
    t = imgaug.CenterPaste((20, 30)).get_transform(img)
    out = t.apply_image(img)
    assert out.shape == (20, 30, 3)
    np.testing.assert_array_equal(out[5:15, 9:21], img)
    assert out.sum() == img.astype(np.int64).sum()  # zero background
    np.testing.assert_allclose(t.apply_coords(np.array([[0.0, 0.0]])), [[9, 5]])
    filled = imgaug.CenterPaste((20, 30), imgaug.ConstantBackgroundFiller(7)).augment(img)
    assert filled[0, 0, 0] == 7
    rp = imgaug.RandomPaste((20, 30))
    for _ in range(20):
        t = rp.get_transform(img)
        out = t.apply_image(img)
        x0, y0 = t.apply_coords(np.zeros((1, 2)))[0].astype(int)
        np.testing.assert_array_equal(out[y0 : y0 + 10, x0 : x0 + 12], img)
    with pytest.raises(ValueError, match="RandomPaste"):
        rp.get_transform(_img(20, 12))


def test_shift_moves_by_whole_pixels() -> None:
    img = np.zeros((30, 40), np.float32)
    img[15, 20] = 1
    aug = imgaug.Shift(0.2, 0.2, border=0)
    for _ in range(20):
        t = aug.get_transform(img)
        out = t.apply_image(img)
        ((x, y),) = t.apply_coords(np.array([[20.5, 15.5]]))
        assert out[int(y), int(x)] == 1 and out.sum() == 1


def test_rotation_by_180_about_the_centre_reverses_the_image() -> None:
    img = _img(21, 31, c=None).astype(np.float32)
    aug = imgaug.Rotation(180, center_range=(0.5, 0.5), step_deg=180, interp=0)
    for _ in range(10):
        t = aug.get_transform(img)
        out = t.apply_image(img)
        if np.array_equal(out, img):
            continue
        np.testing.assert_allclose(out, img[::-1, ::-1])
        np.testing.assert_allclose(t.apply_coords(np.array([[0.5, 0.5]])), [[30.5, 20.5]], atol=1e-9)


def test_rotation_and_crop_valid_has_no_border_pixels() -> None:
    img = np.full((40, 60), 200, np.uint8)
    aug = imgaug.RotationAndCropValid(30, interp=0)
    for _ in range(30):
        out = aug.augment(img)
        assert out.shape[0] <= 40 and out.shape[1] <= 60
        assert (out[1:-1, 1:-1] == 200).all()
    w, h = imgaug.RotationAndCropValid.largest_rotated_rect(60, 40, 0.0)
    assert (w, h) == (60, 40)


def test_affine_identity_when_nothing_is_random() -> None:
    img = _img(c=3)
    t = imgaug.Affine().get_transform(img)
    np.testing.assert_array_equal(t.apply_image(img), img)
    np.testing.assert_allclose(t.apply_coords(np.array([[3.0, 4.0]])), [[3, 4]])


def test_transform_list_and_augmentor_list_agree() -> None:
    augs = imgaug.AugmentorList(
        [imgaug.ResizeShortestEdge(20), imgaug.RandomCrop(16), imgaug.Flip(horiz=True)]
    )
    img = _img()
    tfms = augs.get_transform(img)
    a = tfms.apply_image(img.copy())
    b = tfms.apply_image(img.copy())
    np.testing.assert_array_equal(a, b)
    assert a.shape == (16, 16, 3)
    coords = tfms.apply_coords(np.array([[0.0, 0.0]]))
    assert coords.shape == (1, 2)
    fresh = imgaug.AugmentorList([imgaug.Resize(10)]).get_transform(img)
    lazy = imgaug.AugmentorList([imgaug.Resize(10), imgaug.Flip(horiz=True)]).get_transform(img)
    with pytest.raises(RuntimeError, match="apply_image"):
        lazy.apply_coords(np.zeros((1, 2)))  # the flip is drawn when the image is applied
    assert fresh.apply_image(img).shape == (10, 10, 3)


def test_coords_must_be_n_by_2() -> None:
    t = imgaug.Flip(horiz=True, prob=1).get_transform(_img())
    with pytest.raises(ValueError, match="N x 2"):
        t.apply_coords(np.zeros((3, 3)))
    out = t.apply_coords(np.array([[1, 2]], dtype=np.int32))
    assert out.dtype == np.float64
    assert t.apply_coords(np.array([[1, 2]], dtype=np.float32)).dtype == np.float32
