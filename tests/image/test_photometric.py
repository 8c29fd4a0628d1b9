"""Pixel-only augmentors: what each computes, that coordinates pass unchanged, dtypes kept; and,
where tensorpack is installed, that the fast uint8 paths give tensorpack's exact numbers for the
same random parameters."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

cv2 = pytest.importorskip("cv2")

from dataflow import imgaug  # noqa: E402

EIGVAL = [0.2175, 0.0188, 0.0045]
EIGVEC = [[-0.5675, 0.7192, 0.4009], [-0.5808, -0.0045, -0.8140], [-0.5836, -0.6948, 0.4203]]

PHOTOMETRIC = {
    "Hue": lambda: imgaug.Hue((-30, 30)),
    "Brightness": lambda: imgaug.Brightness(40),
    "BrightnessScale": lambda: imgaug.BrightnessScale((0.6, 1.4)),
    "Contrast": lambda: imgaug.Contrast((0.5, 1.5)),
    "Contrast(rgb)": lambda: imgaug.Contrast((0.5, 1.5), rgb=True),
    "Gamma": lambda: imgaug.Gamma(),
    "Saturation": lambda: imgaug.Saturation(0.4),
    "Lighting": lambda: imgaug.Lighting(10, EIGVAL, EIGVEC),
    "GaussianBlur": lambda: imgaug.GaussianBlur(),
    "GaussianNoise": lambda: imgaug.GaussianNoise(5),
    "SaltPepperNoise": lambda: imgaug.SaltPepperNoise(),
    "JpegNoise": lambda: imgaug.JpegNoise(),
    "RandomCutout": lambda: imgaug.RandomCutout((2, 8), (2, 8)),
    "Clip": lambda: imgaug.Clip(10, 200),
    "ToFloat32": lambda: imgaug.ToFloat32(),
    "ToUint8": lambda: imgaug.ToUint8(),
    "ColorSpace": lambda: imgaug.ColorSpace(cv2.COLOR_BGR2HSV),
    "Grayscale(keepshape)": lambda: imgaug.Grayscale(keepshape=True),
}


def _img(dtype: Any = np.uint8, shape: tuple[int, ...] = (24, 32, 3)) -> np.ndarray:
    return (np.random.default_rng(1).random(shape) * 255).astype(dtype)


@pytest.mark.parametrize("name", sorted(PHOTOMETRIC))
def test_photometric_keeps_shape_and_coordinates(name: str) -> None:
    img = _img()
    t = PHOTOMETRIC[name]().get_transform(img)
    out = t.apply_image(img.copy())
    assert out.shape == img.shape
    coords = np.array([[1.5, 2.5], [30.0, 20.0]])
    np.testing.assert_array_equal(t.apply_coords(coords), coords)


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_brightness_adds_one_value_and_clips(dtype: Any) -> None:
    img = _img(dtype)
    aug = imgaug.Brightness(50)
    out = aug.get_transform(img).apply_image(img.copy())
    assert out.dtype == dtype
    diff = out.astype(np.float64) - img
    inner = (img > 60) & (img < 190)  # away from the clip
    d = np.unique(np.round(diff[inner], 3))
    assert np.ptp(d) <= 1.0  # one offset (up to uint8 truncation)
    assert out.min() >= 0 and out.max() <= 255


def test_brightness_float_without_clip_can_leave_range() -> None:
    img = np.full((4, 4), 250.0, np.float32)
    t = imgaug.Brightness(100, clip=False).get_transform(img)
    out = t.apply_image(img.copy())
    assert not np.allclose(out, img)
    assert out.dtype == np.float32


def test_contrast_factor_one_is_identity_and_mean_is_kept() -> None:
    img = _img(np.float32)
    same = imgaug.Contrast((1.0, 1.0)).augment(img.copy())
    np.testing.assert_allclose(same, img, rtol=1e-5)
    flat = imgaug.Contrast((0.0, 1e-9), clip=False).augment(img.copy())
    np.testing.assert_allclose(flat, np.broadcast_to(img.mean(axis=(0, 1)), img.shape), rtol=1e-4)


def test_grayscale_and_colorspace_shapes() -> None:
    img = _img()
    assert imgaug.Grayscale().augment(img).shape == (24, 32, 1)
    assert imgaug.Grayscale(keepdims=False).augment(img).shape == (24, 32)
    three = imgaug.Grayscale(keepshape=True).augment(img)
    assert three.shape == img.shape and (three[..., 0] == three[..., 2]).all()
    np.testing.assert_array_equal(
        imgaug.Grayscale(rgb=True).augment(img)[..., 0], cv2.cvtColor(img, cv2.COLOR_RGB2GRAY)
    )
    with pytest.raises(ValueError, match="keepshape"):
        imgaug.Grayscale(keepdims=False, keepshape=True)


def test_converters() -> None:
    f = np.array([[-5.0, 12.7, 300.0]], np.float32)
    np.testing.assert_array_equal(imgaug.ToUint8().augment(f), [[0, 12, 255]])
    assert imgaug.ToFloat32().augment(_img()).dtype == np.float32
    np.testing.assert_array_equal(imgaug.Clip(0, 10).augment(f), [[0, 10, 10]])


def test_normalizers() -> None:
    img = _img(np.uint8)
    mv = imgaug.MeanVarianceNormalize().augment(img)
    assert mv.dtype == np.float32 and abs(mv.mean()) < 1e-4 and abs(mv.std() - 1) < 1e-3
    per = imgaug.MeanVarianceNormalize(all_channel=False).augment(img)
    np.testing.assert_allclose(per.mean(axis=(0, 1)), 0, atol=1e-4)
    mm = imgaug.MinMaxNormalize(-1, 1).augment(img)
    assert mm.min() == pytest.approx(-1) and mm.max() == pytest.approx(1)


def test_salt_pepper_sets_only_extremes() -> None:
    img = np.full((50, 50, 3), 128, np.uint8)
    out = imgaug.SaltPepperNoise(0.1, 0.2).augment(img.copy())
    vals, counts = np.unique(out, return_counts=True)
    assert set(vals.tolist()) == {0, 128, 255}
    frac = dict(zip(vals.tolist(), (counts / out.size).tolist()))
    assert abs(frac[255] - 0.1) < 0.03 and abs(frac[0] - 0.2) < 0.03


def test_cutout_blanks_one_rectangle_of_the_drawn_size() -> None:
    img = np.full((20, 20), 9, np.uint8)
    out = imgaug.RandomCutout(4, 6, fill=0).augment(img.copy())
    ys, xs = np.nonzero(out == 0)
    assert len(ys) == 24 and np.ptp(ys) == 3 and np.ptp(xs) == 5


def test_gaussian_blur_sizes_are_odd_and_symmetric() -> None:
    aug = imgaug.GaussianBlur(size_range=(1, 4), sigma_range=(0.5, 2.0))
    for _ in range(20):
        (sx, sy), (gx, gy) = aug._get_augment_params(None)
        assert sx == sy and sx in (3, 5, 7) and gx == gy and 0.5 <= gx < 2.0


def test_jpeg_noise_keeps_grayscale_and_float() -> None:
    assert imgaug.JpegNoise().augment(_img(shape=(16, 16, 1))).shape == (16, 16, 1)
    out = imgaug.JpegNoise().augment(_img(np.float32))
    assert out.dtype == np.float32


# -- the same numbers as tensorpack for the same random parameters ----------------------------
@pytest.fixture(scope="module")
def tp_imgaug() -> Any:
    """tensorpack's imgaug, loaded the one way the image tests share (tests/image/_impl.py);
    the tests using it are marked ``framework`` (tensorpack imports TensorFlow): they run last."""
    from tests.image._impl import tensorpack_imgaug

    return tensorpack_imgaug()


PARITY = [
    ("Brightness", (40,), [-33.3, 0.7, 12.2]),
    ("BrightnessScale", ((0.5, 1.5),), [0.61, 1.0, 1.37]),
    ("Contrast", ((0.5, 1.5),), [0.55, 1.0, 1.43]),
    ("Contrast", ((0.5, 1.5), False), [0.55, 1.43]),
    ("Gamma", (), [-0.4, 0.0, 0.33]),
    ("Saturation", (0.4,), [0.7, 1.0, 1.3]),
    ("Hue", ((-40, 40),), [-31.0, 0.0, 17.5]),
]


@pytest.mark.framework
@pytest.mark.parametrize(("name", "args", "params"), PARITY)
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_same_numbers_as_tensorpack(tp_imgaug: Any, name: str, args: tuple, params: list, dtype: Any) -> None:
    img = _img(dtype, (33, 47, 3))
    ours, theirs = getattr(imgaug, name)(*args), getattr(tp_imgaug, name)(*args)
    for p in params:
        p = np.float32(p)
        a = ours._augment(img.copy(), p)
        b = theirs._augment(img.copy(), p)
        assert a.dtype == b.dtype and a.shape == b.shape
        if dtype == np.uint8:
            np.testing.assert_array_equal(a, b, err_msg=f"{name}({p})")
        else:
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-3, err_msg=f"{name}({p})")


@pytest.mark.framework
def test_lighting_same_numbers_as_tensorpack(tp_imgaug: Any) -> None:
    img = _img(np.uint8)
    v = np.array([0.3, -1.2, 2.0], np.float32)
    a = imgaug.Lighting(10, EIGVAL, EIGVEC)._augment(img.copy(), v)
    b = tp_imgaug.Lighting(10, EIGVAL, EIGVEC)._augment(img.copy(), v)
    np.testing.assert_array_equal(a, b)
