"""Parity of the image flows with tensorpack 0.11's: ``ImageFromFile``,
``AugmentImageComponent``, ``AugmentImageComponents`` and ``AugmentImageCoordinates`` give
the same datapoints for the same files, the same input flow and the same augmentor draws
(each augmentor gets the same :class:`~tests.image._impl.SharedDraws` stream after
``reset_state()``, which reseeds them in both libraries).

tensorpack 0.11's coordinate flows do not run on numpy 2: its ``validate_coords`` uses
``np.float`` (removed in numpy 2.0) and raises ``AttributeError`` for every datapoint with
coordinates. Their oracle is tensorpack's augmentors applied by hand, as the flow did; under
``DATAFLOW_IMGAUG_IMPL=tensorpack`` the test puts ``np.float`` back for the duration, as
``np.floating`` (what the check means; numpy >= 1.20 read ``issubdtype(float32, float)`` as
float64 and refused float32 coordinates).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from tests.image._impl import UNDER_TENSORPACK, SharedDraws, flows_under_test, rand_image, tensorpack_flows

pytestmark = pytest.mark.framework  # tensorpack imports TensorFlow when it is installed

flows = flows_under_test()
ours = flows.imgaug


@pytest.fixture(autouse=True)
def _np_float_for_tensorpack_flows(monkeypatch: pytest.MonkeyPatch) -> None:
    if UNDER_TENSORPACK and not hasattr(np, "float"):
        monkeypatch.setattr(np, "float", np.floating, raising=False)


def _chain(lib: Any) -> tuple[Any, list[Any]]:
    """A detection-style random chain and its augmentors in a fixed order."""
    augs = [lib.RandomResize((0.8, 1.25), (0.8, 1.25)), lib.RandomCrop((26, 30)), lib.Flip(horiz=True),
            lib.Transpose(), lib.Brightness(20), lib.Contrast((0.7, 1.3))]  # fmt: skip
    return augs, augs


def _seed(augs: list[Any], seed: int) -> None:
    for i, a in enumerate(augs):
        a.rng = SharedDraws(seed * 100 + i)


def _assert_same_datapoints(mine: list[Any], theirs: list[Any]) -> None:
    assert len(mine) == len(theirs)
    for a, b in zip(mine, theirs):
        keys = sorted(a) if isinstance(a, dict) else list(range(len(a)))
        assert keys == (sorted(b) if isinstance(b, dict) else list(range(len(b))))
        for k in keys:
            x, y = np.asarray(a[k]), np.asarray(b[k])
            assert x.shape == y.shape and x.dtype.kind == y.dtype.kind, (k, x.shape, y.shape, x.dtype)
            np.testing.assert_allclose(x.astype(np.float64), y.astype(np.float64), atol=1e-4)


def _write_images(tmp: Path) -> list[str]:
    files = []
    for i, (shape, ext) in enumerate([((30, 40, 3), "png"), ((24, 24, 3), "jpg"), ((32, 20), "png"),
                                      ((41, 37, 3), "bmp")]):  # fmt: skip
        path = str(tmp / f"im{i}.{ext}")
        assert cv2.imwrite(path, rand_image(shape, seed=i))
        files.append(path)
    return files


@pytest.mark.parametrize("kwargs", [{}, {"channel": 1}, {"resize": (20, 30)}, {"resize": 25, "channel": 1}],
                         ids=["rgb", "gray", "resize hw", "resize int gray"])  # fmt: skip
def test_image_from_file_matches_tensorpack(tmp_path: Path, kwargs: dict[str, Any]) -> None:
    files = _write_images(tmp_path)
    got = []
    for lib in (flows, tensorpack_flows()):
        ds = lib.ImageFromFile(list(files), **kwargs)
        ds.reset_state()
        assert len(ds) == len(files)
        got.append(list(ds))
    _assert_same_datapoints(*got)
    assert got[0][0][0].dtype == np.uint8 and got[0][0][0].ndim == 3


def _source(n: int = 12) -> list[list[Any]]:
    return [[i, rand_image((36 + i % 3 * 5, 44 + i % 2 * 7, 3), seed=i)] for i in range(n)]


def test_augment_image_component_matches_tensorpack_and_leaves_its_input() -> None:
    got, sources = [], []
    for lib, aug_lib in ((flows, ours), (tensorpack_flows(), tensorpack_flows().imgaug)):
        data = _source()
        before = [dp[1].copy() for dp in data]
        augs, leaves = _chain(aug_lib)
        ds = lib.AugmentImageComponent(lib.DataFromList(data, shuffle=False), augs, index=1)
        ds.reset_state()
        _seed(leaves, 7)
        got.append(list(ds))
        sources.append((data, before))
    _assert_same_datapoints(*got)
    for data, before in sources:  # copy=True: the input images are not modified
        for dp, b in zip(data, before):
            np.testing.assert_array_equal(dp[1], b)


def test_augment_image_components_image_and_mask_match_tensorpack() -> None:
    got = []
    for lib, aug_lib in ((flows, ours), (tensorpack_flows(), tensorpack_flows().imgaug)):
        data = [[img, (img[..., 0] > 128).astype(np.uint8), label] for label, img in _source()]
        augs, leaves = _chain(aug_lib)
        ds = lib.AugmentImageComponents(lib.DataFromList(data, shuffle=False), augs[:4], index=(0, 1))
        ds.reset_state()
        _seed(leaves[:4], 3)
        got.append(list(ds))
    _assert_same_datapoints(*got)
    for img, mask, _ in got[0]:  # the mask moved with the image
        assert img.shape[:2] == mask.shape[:2]


def _expected_with_coords(data: list[Any], seed: int) -> list[Any]:
    """What tensorpack's AugmentImageCoordinates does per datapoint (it cannot run on numpy 2)."""
    tp_imgaug = tensorpack_flows().imgaug
    augs, leaves = _chain(tp_imgaug)
    chain = tp_imgaug.AugmentorList(augs)
    _seed(leaves, seed)
    out = []
    for dp in data:
        img, coords = dp[0].copy(), dp[1].copy()
        tfms = chain.get_transform(img)
        out.append([tfms.apply_image(img), tfms.apply_coords(coords), *dp[2:]])
    return out


def _with_boxes(n: int = 12) -> list[list[Any]]:
    rng = np.random.RandomState(0)
    return [[img, rng.uniform(0, 36, size=(8, 2)).astype(np.float32), label] for label, img in _source(n)]


def test_augment_image_coordinates_matches_tensorpack_augmentors() -> None:
    data = _with_boxes()
    augs, leaves = _chain(ours)
    ds = flows.DataFromList(data, shuffle=False)
    ds = flows.AugmentImageCoordinates(ds, augs, img_index=0, coords_index=1)
    ds.reset_state()
    _seed(leaves, 5)
    _assert_same_datapoints(list(ds), _expected_with_coords(data, 5))


def test_augment_image_components_with_coords_matches_tensorpack_augmentors() -> None:
    data = [{"image": img, "mask": img[..., 1].copy(), "boxes": boxes, "label": label}
            for img, boxes, label in _with_boxes()]  # fmt: skip
    augs, leaves = _chain(ours)
    ds = flows.AugmentImageComponents(flows.DataFromList(data, shuffle=False), augs,
                                      index=("image", "mask"), coords_index=("boxes",))  # fmt: skip
    ds.reset_state()
    _seed(leaves, 9)
    got = list(ds)
    expected = _expected_with_coords([[d["image"], d["boxes"], d["label"]] for d in data], 9)
    _assert_same_datapoints([[d["image"], d["boxes"], d["label"]] for d in got], expected)
    for d in got:
        assert d["mask"].shape == d["image"].shape[:2]


def test_catch_exceptions_drops_the_same_datapoints_as_tensorpack() -> None:
    got = []
    for lib, aug_lib in ((flows, ours), (tensorpack_flows(), tensorpack_flows().imgaug)):
        data = [[rand_image((s, s, 3), seed=s)] for s in (30, 10, 25, 19, 40)]  # 10 and 19 are too small
        crop = aug_lib.RandomCrop(20)
        ds = lib.AugmentImageComponent(lib.DataFromList(data, shuffle=False), [crop], catch_exceptions=True)
        ds.reset_state()
        crop.rng = SharedDraws(1)
        got.append(list(ds))
    assert len(got[0]) == 3
    _assert_same_datapoints(*got)
