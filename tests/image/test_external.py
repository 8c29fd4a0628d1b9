"""Augmentors from elsewhere: Albumentations transforms (the real library where installed, and
an object of the same call shape always), torchvision-style callables and plain functions.
They transform images only and say so when asked for coordinates."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("cv2")

from dataflow import AugmentImageComponent, AugmentImageCoordinates, DataFromList, imgaug  # noqa: E402


def _img() -> np.ndarray:
    return (np.random.default_rng(0).random((12, 16, 3)) * 255).astype(np.uint8)


class FakeAlbumentations:
    """Albumentations 2.x's call shape: ``t(image=img)`` -> dict, ``set_random_seed``,
    ``targets``; flips left-right with probability p from its own generator."""

    targets = {"image": None}

    def __init__(self, p: float = 0.5) -> None:
        self.p = p
        self.random_generator = np.random.default_rng()

    def set_random_seed(self, seed: int) -> None:
        self.random_generator = np.random.default_rng(seed)

    def __call__(self, *, image: np.ndarray) -> dict[str, Any]:
        flip = self.random_generator.random() < self.p
        return {"image": image[:, ::-1].copy() if flip else image}


def test_albumentations_like_object_is_wrapped_and_seeded_from_our_rng() -> None:
    chain = imgaug.AugmentorList([FakeAlbumentations(0.5)])
    assert isinstance(chain.augmentors[0], imgaug.Albumentations)
    img = _img()
    outs = []
    for _ in range(2):
        chain.rng.bit_generator.state = np.random.PCG64(1).state  # not the wrapper's rng
        chain.augmentors[0].rng.bit_generator.state = np.random.PCG64(5).state
        outs.append([chain.augment(img).tobytes() for _ in range(20)])
    assert outs[0] == outs[1]  # the same draws from the same state
    assert len(set(outs[0])) == 2  # and both outcomes occur
    t = chain.augmentors[0].get_transform(img)
    np.testing.assert_array_equal(t.apply_image(img), t.apply_image(img))  # one draw, replayed
    with pytest.raises(NotImplementedError, match="coordinates"):
        t.apply_coords(np.zeros((1, 2)))


def test_real_albumentations_transforms() -> None:
    albu = pytest.importorskip("albumentations")
    img = _img()
    flip = AugmentImageComponent(
        DataFromList([[img]] * 30, shuffle=False), [albu.HorizontalFlip(p=0.5)], seed=3
    )
    flip.reset_state()
    outs = [dp[0] for dp in flip]
    assert {o.tobytes() for o in outs} == {img.tobytes(), img[:, ::-1].tobytes()}
    again = AugmentImageComponent(
        DataFromList([[img]] * 30, shuffle=False), [albu.HorizontalFlip(p=0.5)], seed=3
    )
    again.reset_state()
    assert [dp[0].tobytes() for dp in again] == [o.tobytes() for o in outs]
    compose = imgaug.Albumentations(
        albu.Compose([albu.RandomBrightnessContrast(p=1), albu.HorizontalFlip(p=1)])
    )
    assert compose.augment(img).shape == img.shape
    coords = AugmentImageCoordinates(DataFromList([[img, np.zeros((1, 2))]]), [albu.HorizontalFlip(p=1)])
    coords.reset_state()
    with pytest.raises(NotImplementedError, match="Albumentations"):
        list(coords)


def test_plain_and_torchvision_style_callables_apply_to_images_only() -> None:
    class Invert:  # a torchvision-style transform object
        def __call__(self, img: np.ndarray) -> np.ndarray:
            return 255 - img

    img = _img()
    chain = imgaug.AugmentorList([Invert(), lambda x: x // 2])
    np.testing.assert_array_equal(chain.augment(img), (255 - img) // 2)
    assert "Invert" in repr(chain)
    ds = AugmentImageCoordinates(DataFromList([[img, np.zeros((1, 2))]]), [Invert()])
    ds.reset_state()
    with pytest.raises(NotImplementedError, match="Invert.*cannot transform coordinates"):
        list(ds)


def test_map_image_coord_func() -> None:
    img = _img()
    shift = imgaug.MapImage(lambda x: np.roll(x, 1, axis=1), coord_func=lambda c: c + [1, 0])
    t = shift.get_transform(img)
    np.testing.assert_allclose(t.apply_coords(np.array([[2.0, 3.0]])), [[3, 3]])
    with pytest.raises(NotImplementedError, match="coord_func"):
        imgaug.MapImage(lambda x: x).get_transform(img).apply_coords(np.zeros((1, 2)))


def test_iaaugmentor_uses_the_deterministic_copy() -> None:
    class FakeIAA:
        def __init__(self) -> None:
            self.calls = 0

        def to_deterministic(self) -> Any:
            self.calls += 1
            return self

        def augment_image(self, img: np.ndarray) -> np.ndarray:
            return img[::-1]

    fake = FakeIAA()
    aug = imgaug.IAAugmentor(fake)
    np.testing.assert_array_equal(aug.augment(_img()), _img()[::-1])
    assert fake.calls == 1


def test_not_an_augmentor() -> None:
    with pytest.raises(TypeError, match="AugmentorList: an augmentor must be"):
        imgaug.AugmentorList([3])
    with pytest.raises(TypeError, match="list or tuple"):
        imgaug.AugmentorList(imgaug.Flip(horiz=True))  # type: ignore[arg-type]
