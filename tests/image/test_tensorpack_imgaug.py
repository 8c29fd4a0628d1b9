"""tensorpack 0.11's own imgaug tests (``tensorpack/dataflow/imgaug/imgaug_test.py``), ported
by changing only the imports: ``from .base import ...`` (relative, inside tensorpack) became
``from dataflow.imgaug import ...``. The class and test bodies are tensorpack's, unchanged.

The two ``if __name__ == '__main__'`` demos of tensorpack's imgaug (in ``imgaug_test.py`` and
``transform.py``; they show images in a window) follow as tests: same augmentors, same
transform, with the visual check written as an assertion.

``DATAFLOW_IMGAUG_IMPL=tensorpack`` imports tensorpack's own modules instead, to check that
the port is faithful (see ``tests/image/_impl.py``)."""

# ruff: noqa: UP008 -- tensorpack's super(Class, self) is kept as written
import sys  # noqa: F401  (imported by tensorpack's test; used by its __main__ demo)
import unittest

import cv2
import numpy as np
import pytest

from tests.image._impl import UNDER_TENSORPACK

if UNDER_TENSORPACK:  # validate the port on tensorpack itself
    from tensorpack.dataflow.imgaug import (
        AugmentorList,
        Contrast,
        Flip,
        ImageAugmentor,
        Resize,
        SaltPepperNoise,
    )
    from tensorpack.dataflow.imgaug.transform import WarpAffineTransform
else:
    from dataflow.imgaug import AugmentorList, Contrast, Flip, ImageAugmentor, Resize, SaltPepperNoise
    from dataflow.imgaug.transform import WarpAffineTransform

pytestmark = [pytest.mark.framework] if UNDER_TENSORPACK else []  # tensorpack imports TensorFlow


# ---- tensorpack/dataflow/imgaug/imgaug_test.py, unchanged below the imports ----------------
def _rand_image(shape=(20, 20)):
    return np.random.rand(*shape).astype("float32")


class LegacyBrightness(ImageAugmentor):
    def __init__(self, delta, clip=True):
        super(LegacyBrightness, self).__init__()
        assert delta > 0
        self._init(locals())

    def _get_augment_params(self, _):
        v = self._rand_range(-self.delta, self.delta)
        return v

    def _augment(self, img, v):
        old_dtype = img.dtype
        img = img.astype('float32')
        img += v
        if self.clip or old_dtype == np.uint8:
            img = np.clip(img, 0, 255)
        return img.astype(old_dtype)


class LegacyFlip(ImageAugmentor):
    def __init__(self, horiz=False, vert=False, prob=0.5):
        super(LegacyFlip, self).__init__()
        if horiz and vert:
            raise ValueError("Cannot do both horiz and vert. Please use two Flip instead.")
        elif horiz:
            self.code = 1
        elif vert:
            self.code = 0
        else:
            raise ValueError("At least one of horiz or vert has to be True!")
        self._init(locals())

    def _get_augment_params(self, img):
        h, w = img.shape[:2]
        do = self._rand_range() < self.prob
        return (do, h, w)

    def _augment(self, img, param):
        do, _, _ = param
        if do:
            ret = cv2.flip(img, self.code)
            if img.ndim == 3 and ret.ndim == 2:
                ret = ret[:, :, np.newaxis]
        else:
            ret = img
        return ret

    def _augment_coords(self, coords, param):
        do, h, w = param
        if do:
            if self.code == 0:
                coords[:, 1] = h - coords[:, 1]
            elif self.code == 1:
                coords[:, 0] = w - coords[:, 0]
        return coords


class ImgAugTest(unittest.TestCase):
    def _get_augs(self):
        return AugmentorList([
            Contrast((0.8, 1.2)),
            Flip(horiz=True),
            Resize((30, 30)),
            SaltPepperNoise()
        ])

    def _get_augs_with_legacy(self):
        return AugmentorList([
            LegacyBrightness(0.5),
            LegacyFlip(horiz=True),
            Resize((30, 30)),
            SaltPepperNoise()
        ])

    def test_augmentors(self):
        augmentors = self._get_augs()

        img = _rand_image()
        orig = img.copy()
        tfms = augmentors.get_transform(img)

        # test printing
        print(augmentors)
        print(tfms)

        newimg = tfms.apply_image(img)
        print(tfms)  # lazy ones will instantiate after the first apply

        newimg2 = tfms.apply_image(orig)
        self.assertTrue(np.allclose(newimg, newimg2))
        self.assertEqual(newimg2.shape[0], 30)

        coords = np.asarray([[0, 0], [10, 12]], dtype="float32")
        tfms.apply_coords(coords)

    def test_legacy_usage(self):
        augmentors = self._get_augs()

        img = _rand_image()
        orig = img.copy()
        newimg, tfms = augmentors.augment_return_params(img)
        newimg2 = augmentors.augment_with_params(orig, tfms)
        self.assertTrue(np.allclose(newimg, newimg2))
        self.assertEqual(newimg2.shape[0], 30)

        coords = np.asarray([[0, 0], [10, 12]], dtype="float32")
        augmentors.augment_coords(coords, tfms)

    def test_legacy_augs_new_usage(self):
        augmentors = self._get_augs_with_legacy()

        img = _rand_image()
        orig = img.copy()
        tfms = augmentors.get_transform(img)
        newimg = tfms.apply_image(img)
        newimg2 = tfms.apply_image(orig)
        self.assertTrue(np.allclose(newimg, newimg2))
        self.assertEqual(newimg2.shape[0], 30)

        coords = np.asarray([[0, 0], [10, 12]], dtype="float32")
        tfms.apply_coords(coords)

    def test_legacy_augs_legacy_usage(self):
        augmentors = self._get_augs_with_legacy()

        img = _rand_image()
        orig = img.copy()
        newimg, tfms = augmentors.augment_return_params(img)
        newimg2 = augmentors.augment_with_params(orig, tfms)
        self.assertTrue(np.allclose(newimg, newimg2))
        self.assertEqual(newimg2.shape[0], 30)

        coords = np.asarray([[0, 0], [10, 12]], dtype="float32")
        augmentors.augment_coords(coords, tfms)


# ---- the __main__ demos, as tests ------------------------------------------------------------
def test_imgaug_test_main_demo_replays_its_params() -> None:
    """imgaug_test.py's demo: Contrast + Flip + SaltPepperNoise on a BGR uint8 image, then the
    same params applied again. The demo calls ``_augment_return_params``/``_augment``, private
    names tensorpack 0.11 no longer has (it would raise AttributeError); their public
    spellings are used. The window that showed both results becomes: they are equal."""
    augmentors = AugmentorList([
        Contrast((0.8, 1.2)),
        Flip(horiz=True),
        # RandomCropRandomShape(0.3),
        SaltPepperNoise()
    ])  # fmt: skip
    img = np.random.RandomState(0).randint(0, 256, size=(60, 80, 3)).astype(np.uint8)  # cv2.imread(argv[1])
    orig = img.copy()
    newimg, prms = augmentors.augment_return_params(img)
    assert newimg.shape == img.shape and newimg.dtype == np.uint8
    np.testing.assert_array_equal(img, orig)  # the input is not changed
    again = augmentors.augment_with_params(orig.copy(), prms)
    np.testing.assert_array_equal(again, newimg)


def test_transform_main_demo_points_follow_the_warp() -> None:
    """transform.py's demo: a 20 degree rotation about (10, 70) into a 130x130 canvas, 20
    random points drawn on a 100x100 image; after ``apply_coords`` and ``apply_image`` the
    window showed the points drawn on the warped image where the warped points are. Here each
    point is one bright pixel of its own image; the warped pixel's centre of mass is where
    ``apply_coords`` puts the point, within 0.1 px (OpenCV's fixed-point interpolation moves it
    by up to ~0.06 px). tensorpack's ``apply_coords`` takes the demo's pixel-index points; an
    implementation in the pixel-corner convention (``(col + 0.5, row + 0.5)`` is a pixel's
    centre, as for flips and resizes) is held to the same 0.1 px in its own convention."""
    shape = (100, 100)
    center = (10, 70)
    mat = cv2.getRotationMatrix2D(center, 20, 1)
    trans = WarpAffineTransform(mat, (130, 130))
    coords = np.random.RandomState(0).randint(100, size=(20, 2))
    moved = trans.apply_coords(coords.copy())
    assert moved.shape == (20, 2)
    as_corner = trans.apply_coords(coords + 0.5) - 0.5  # the same points, as pixel centres
    checked = 0
    for (x, y), (mx, my), (cx, cy) in zip(coords, moved, as_corner):
        image = np.zeros(shape, np.float32)
        image[y, x] = 1.0  # draw_points
        out = trans.apply_image(image)
        assert out.shape == (130, 130)
        if not (1 <= mx <= 128 and 1 <= my <= 128):  # warped off the canvas
            continue
        ys, xs = np.mgrid[: out.shape[0], : out.shape[1]]
        total = out.sum()
        assert total == pytest.approx(1.0, abs=0.1)  # OpenCV interpolates in fixed point (1/32 px)
        sx, sy = (xs * out).sum() / total, (ys * out).sum() / total
        index_error = max(abs(sx - mx), abs(sy - my))
        corner_error = max(abs(sx - cx), abs(sy - cy))
        assert min(index_error, corner_error) < 0.1, (index_error, corner_error)
        checked += 1
    assert checked >= 10
