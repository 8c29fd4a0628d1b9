"""The image flows: ImageFromFile reads what was written (and names files it cannot decode);
the Augment* flows apply one draw to images, masks and coordinates, never modify the upstream's
datapoints, and resume bit-identically from a state_dict."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

cv2 = pytest.importorskip("cv2")

import dataflow  # noqa: E402
from dataflow import (  # noqa: E402
    AugmentImageComponent,
    AugmentImageComponents,
    AugmentImageCoordinates,
    DataFromList,
    FormatError,
    ImageFromFile,
    StateError,
    imgaug,
)


def _write(tmp_path: Path, n: int = 6) -> tuple[list[str], list[np.ndarray]]:
    rng = np.random.default_rng(0)
    files, imgs = [], []
    for i in range(n):
        img = (rng.random((10 + i, 12, 3)) * 255).astype(np.uint8)  # BGR, as OpenCV writes it
        path = str(tmp_path / f"{i}.png")
        cv2.imwrite(path, img)
        files.append(path)
        imgs.append(img)
    return files, imgs


def test_image_from_file_reads_rgb_in_order(tmp_path: Path) -> None:
    files, imgs = _write(tmp_path)
    ds = ImageFromFile(files)
    assert len(ds) == 6
    ds.reset_state()
    out = [dp[0] for dp in ds]
    for got, want in zip(out, imgs):
        np.testing.assert_array_equal(got, want[:, :, ::-1])
        assert got.flags.c_contiguous


def test_image_from_file_gray_resize_and_shuffle(tmp_path: Path) -> None:
    files, imgs = _write(tmp_path)
    gray = ImageFromFile(files, channel=1, resize=(8, 9))
    gray.reset_state()
    shapes = {dp[0].shape for dp in gray}
    assert shapes == {(8, 9, 1)}
    shuffled = ImageFromFile(files, shuffle=True, seed=1)
    shuffled.reset_state()
    heights = [dp[0].shape[0] for dp in shuffled]
    assert sorted(heights) == list(range(10, 16)) and heights != sorted(heights)
    assert files == sorted(files, key=lambda f: int(Path(f).stem))  # the caller's list untouched
    with pytest.raises(ValueError, match="channel"):
        ImageFromFile(files, channel=2)
    with pytest.raises(ValueError, match="no image files"):
        ImageFromFile([])


def test_image_from_file_undecodable_and_missing_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "broken.jpg"
    bad.write_bytes(b"\xff\xd8 this is not a JPEG")
    ds = ImageFromFile([str(bad)])
    ds.reset_state()
    with pytest.raises(FormatError, match="broken.jpg"):
        list(ds)
    gone = ImageFromFile([str(tmp_path / "nope.png")])
    gone.reset_state()
    with pytest.raises(FileNotFoundError, match="nope.png"):
        list(gone)


def test_image_from_file_resumes_mid_epoch(tmp_path: Path) -> None:
    files, _ = _write(tmp_path)
    ds = ImageFromFile(files, shuffle=True, seed=4)
    ds.reset_state()
    full = [dp[0] for dp in ds]
    ds2 = ImageFromFile(files, shuffle=True, seed=4)
    ds2.reset_state()
    it = iter(ds2)
    head = [next(it)[0] for _ in range(2)]
    st = ds2.state_dict()
    ds3 = ImageFromFile(files, shuffle=True, seed=4)
    ds3.load_state_dict(st)
    ds3.reset_state()
    rest = [dp[0] for dp in ds3]
    assert len(head + rest) == len(full)
    assert all(np.array_equal(a, b) for a, b in zip(head + rest, full))


def _images(n: int = 12) -> list[list[Any]]:
    rng = np.random.default_rng(5)
    return [[(rng.random((30, 40, 3)) * 255).astype(np.uint8), i] for i in range(n)]


CHAIN = [
    lambda: imgaug.ResizeShortestEdge(26),
    lambda: imgaug.RandomCrop(24),
    lambda: imgaug.Flip(horiz=True),
    lambda: imgaug.RandomApplyAug(imgaug.Rotation(15), 0.5),
    lambda: imgaug.RandomOrderAug([imgaug.Brightness(30), imgaug.Contrast((0.7, 1.3))]),
    lambda: imgaug.GaussianNoise(3),
]


def _build(kind: str, data: list, seed: int | None = 7) -> Any:
    src = DataFromList(data, shuffle=True, seed=3)
    augs = [f() for f in CHAIN]
    if kind == "component":
        return AugmentImageComponent(src, augs, seed=seed)
    if kind == "coordinates":
        return AugmentImageCoordinates(src, augs[:4], seed=seed)
    return AugmentImageComponents(src, augs[:4], index=(0, 1), coords_index=(2,), seed=seed)


def _data(kind: str) -> list:
    data = _images()
    if kind == "coordinates":
        return [[img, np.array([[5.5, 6.5], [20.0, 10.0]])] for img, _ in data]
    if kind == "components":
        return [[img, img[:, :, 0].copy(), np.array([[1.0, 2.0]])] for img, _ in data]
    return data


def _same(a: Any, b: Any) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(a, b)) and len(a) == len(b)


@pytest.mark.parametrize("kind", ["component", "coordinates", "components"])
@pytest.mark.parametrize("cut", [0, 5, 12, 17])
@pytest.mark.parametrize("load_first", [True, False])
def test_resumed_augmented_stream_is_bit_identical(kind: str, cut: int, load_first: bool) -> None:
    data = _data(kind)
    ds = _build(kind, data)
    ds.reset_state()
    full = [dp for _ in range(3) for dp in ds]
    ds = _build(kind, data)
    ds.reset_state()
    got: list = []
    it = iter(ds)
    while len(got) < cut:
        try:
            got.append(next(it))
        except StopIteration:
            it = iter(ds)
    state = dataflow.checkpoint.state_from_json(dataflow.checkpoint.state_to_json(ds.state_dict()))
    again = _build(kind, data, seed=None)  # the seed comes from the state
    if load_first:
        again.load_state_dict(state)
        again.reset_state()
    else:
        again.reset_state()
        again.load_state_dict(state)
    while len(got) < len(full):
        got.extend(again)
    assert all(_same(a, b) for a, b in zip(got, full)), kind


def test_seed_makes_runs_reproducible_and_differs_between_seeds() -> None:
    def run(seed: int) -> list:
        ds = _build("component", _images(), seed=seed)
        ds.reset_state()
        return [dp[0] for dp in ds]

    assert _same(run(1), run(1))
    assert not _same(run(1), run(2))
    dataflow.set_seed(11)
    try:
        a = run_unseeded()
        dataflow.set_seed(11)
        b = run_unseeded()
    finally:
        dataflow.set_seed(None)
    assert _same(a, b)


def run_unseeded() -> list:
    ds = AugmentImageComponent(DataFromList(_images(), shuffle=False), [f() for f in CHAIN])
    ds.reset_state()
    return [dp[0] for dp in ds]


def test_state_for_other_augmentors_is_refused() -> None:
    ds = _build("component", _images())
    ds.reset_state()
    next(iter(ds))
    state = ds.state_dict()
    other = AugmentImageComponent(DataFromList(_images(), shuffle=True, seed=3), [imgaug.Flip(horiz=True)])
    with pytest.raises(StateError, match="augmentor"):
        other.load_state_dict(state)


def test_upstream_datapoints_are_never_modified() -> None:
    data = _images(4)
    before = [dp[0].copy() for dp in data]
    ds = AugmentImageComponent(DataFromList(data, shuffle=False), [imgaug.SaltPepperNoise(0.3, 0.3)])
    ds.reset_state()
    out = list(ds)
    assert all(np.array_equal(dp[0], b) for dp, b in zip(data, before))
    assert not np.array_equal(out[0][0], before[0])
    coords = [[d[0], np.array([[1.0, 1.0]])] for d in data]
    c = AugmentImageCoordinates(DataFromList(coords, shuffle=False), [imgaug.Flip(horiz=True, prob=1)])
    c.reset_state()
    res = list(c)
    np.testing.assert_array_equal(coords[0][1], [[1.0, 1.0]])
    np.testing.assert_array_equal(res[0][1], [[39.0, 1.0]])


def test_components_share_one_draw_for_images_masks_and_coords() -> None:
    rng = np.random.default_rng(2)
    data = []
    for _ in range(20):
        img = np.zeros((30, 40), np.uint8)
        y, x = int(rng.integers(5, 25)), int(rng.integers(5, 35))
        img[y, x] = 255
        data.append({"img": img, "mask": img.copy(), "pt": np.array([[x + 0.5, y + 0.5]])})
    augs = [imgaug.RandomCrop((28, 36)), imgaug.Flip(horiz=True), imgaug.Transpose()]
    ds = AugmentImageComponents(
        DataFromList(data, shuffle=False), augs, index=("img", "mask"), coords_index=("pt",)
    )
    ds.reset_state()
    for dp in ds:
        assert isinstance(dp, dict)
        np.testing.assert_array_equal(dp["img"], dp["mask"])
        ((x, y),) = dp["pt"]
        if 0 <= x < dp["img"].shape[1] and 0 <= y < dp["img"].shape[0]:
            assert dp["img"][int(y), int(x)] == 255


def test_catch_exceptions_drops_bad_datapoints_and_counts(caplog: pytest.LogCaptureFixture) -> None:
    data = [
        [np.zeros((30, 30, 3), np.uint8)],
        [np.zeros((5, 5, 3), np.uint8)],
        [np.zeros((30, 30, 3), np.uint8)],
    ]
    strict = AugmentImageComponent(DataFromList(data, shuffle=False), [imgaug.RandomCrop(20)])
    strict.reset_state()
    with pytest.raises(ValueError, match="RandomCrop"):
        list(strict)
    lenient = AugmentImageComponent(
        DataFromList(data, shuffle=False), [imgaug.RandomCrop(20)], catch_exceptions=True
    )
    lenient.reset_state()
    with caplog.at_level("WARNING", logger="dataflow"):
        assert len(list(lenient)) == 2
    assert "1 augmentation errors" in caplog.text


def test_bad_components_are_named() -> None:
    ds = AugmentImageCoordinates(
        DataFromList([[np.zeros((4, 4), np.uint8), np.zeros((3, 3))]]), [imgaug.Identity()]
    )
    ds.reset_state()
    with pytest.raises(ValueError, match="AugmentImageCoordinates: component 1 must be an N x 2"):
        list(ds)
    ds = AugmentImageComponent(DataFromList([["not an image"]]), [imgaug.Identity()])
    ds.reset_state()
    with pytest.raises(TypeError, match="AugmentImageComponent: an image must be a numpy array"):
        list(ds)
    with pytest.raises(TypeError, match="augmentor"):
        AugmentImageComponent(DataFromList([[1]]), [42])


def test_repr_and_fluent_compatible_pipeline() -> None:
    ds = AugmentImageComponent(DataFromList(_images(2)), [imgaug.Flip(horiz=True), imgaug.Resize(8)], index=0)
    text = repr(ds)
    assert "AugmentImageComponent" in text and "Flip, Resize" in text
    batched = ds.batch(2)
    batched.reset_state()
    ((imgs, labels),) = list(batched)
    assert imgs.shape == (2, 8, 8, 3)


def test_resume_through_a_worker_process_is_bit_identical() -> None:
    """The augmentors' states travel with the worker's state (a one-worker runner is ordered)."""
    img = _images(1)[0][0]

    def build() -> Any:
        src = DataFromList([[img, i] for i in range(15)], shuffle=True, seed=2)
        ds = AugmentImageComponent(src, [imgaug.RandomCrop(10), imgaug.Brightness(20)], seed=1)
        return dataflow.MultiProcessRunnerZMQ(ds, num_proc=1, timeout=60)

    def key(dp: Any) -> tuple:
        return dp[1], dp[0].tobytes()

    runner = build()
    runner.reset_state()
    try:
        full = [key(dp) for _ in range(2) for dp in runner]
        again = build()
        again.reset_state()
        try:
            it = iter(again)
            head = [key(next(it)) for _ in range(7)]
            state = again.state_dict()
        finally:
            again.close()
        resumed = build()
        resumed.load_state_dict(state)
        resumed.reset_state()
        try:
            rest = [key(dp) for _ in range(2) for dp in resumed]
        finally:
            resumed.close()
    finally:
        runner.close()
    assert head + rest[: len(full) - 7] == full
