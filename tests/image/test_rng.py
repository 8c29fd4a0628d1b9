"""Augmentors' ``self.rng``: tensorpack's RandomState calls work, ``reset_state`` reseeds, and
forked workers draw different augmentations (whether the runner resets the flow or the
augmentor is used inside a map function)."""

from __future__ import annotations

import copy
import multiprocessing as mp
import pickle
from typing import Any

import numpy as np
import pytest

pytest.importorskip("cv2")

from dataflow import (  # noqa: E402
    AugmentImageComponent,
    CompatGenerator,
    DataFromList,
    MultiProcessMapDataZMQ,
    MultiProcessRunnerZMQ,
    imgaug,
)


class LegacyJitter(imgaug.ImageAugmentor):
    """Written for tensorpack: RandomState calls on self.rng, _init(locals())."""

    def __init__(self, amount: float = 3.0) -> None:
        super().__init__()
        self._init(locals())

    def get_transform(self, img: np.ndarray) -> Any:
        dx = self.rng.randint(-2, 3)
        noise = self.rng.rand(*img.shape[:2]) * self.amount
        scale = self.rng.uniform(0.9, 1.1)
        return imgaug.PhotometricTransform(lambda im: np.roll(im, dx, axis=1) * scale + noise[..., None])


def test_rng_is_compat_generator_with_randomstate_calls() -> None:
    aug = LegacyJitter()
    assert isinstance(aug.rng, CompatGenerator)
    out = aug.augment(np.zeros((4, 5, 3), np.float32))
    assert out.shape == (4, 5, 3)
    assert repr(aug) == "imgaug.LegacyJitter()"
    assert "amount=5" in repr(LegacyJitter(5))


def test_reset_state_reseeds() -> None:
    aug = imgaug.RandomCrop(2)
    a = aug.rng.integers(1 << 60)
    aug.reset_state()
    assert aug.rng.integers(1 << 60) != a


def test_pickled_copies_draw_their_own_stream() -> None:
    aug = imgaug.Flip(horiz=True)
    _ = aug.rng  # seeded
    clone = pickle.loads(pickle.dumps(aug))
    other = copy.deepcopy(aug)
    draws = [tuple(x.rng.integers(1 << 60, size=3)) for x in (aug, clone, other)]
    assert len(set(draws)) == 3


def _draw_in_child(aug: Any, q: Any) -> None:
    q.put(int(aug.rng.integers(1 << 60)))


def test_fork_reseeds_an_augmentor_in_the_child() -> None:
    aug = imgaug.Flip(horiz=True)
    _ = aug.rng  # seeded in the parent before the fork
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_draw_in_child, args=(aug, q)) for _ in range(2)]
    for p in procs:
        p.start()
    children = {q.get(timeout=60) for _ in procs}
    for p in procs:
        p.join(timeout=60)
    parent = int(aug.rng.integers(1 << 60))
    assert len(children | {parent}) == 3


def _images() -> list:
    img = (np.random.default_rng(0).random((20, 20, 3)) * 255).astype(np.uint8)
    return [[img, i] for i in range(40)]


def test_runner_workers_augment_differently() -> None:
    """Every datapoint is the same image and the workers split the epoch: two workers with one
    stream would repeat each other's crops."""
    img = (np.random.default_rng(0).random((40, 40, 3)) * 255).astype(np.uint8)
    ds = AugmentImageComponent(
        DataFromList([[img, i] for i in range(40)], shuffle=False), [imgaug.RandomCrop(10)]
    )
    _ = ds.augs.augmentors[0].rng  # seeded in the parent before the workers fork
    runner = MultiProcessRunnerZMQ(ds, num_proc=2)
    runner.reset_state()
    try:
        crops = [im.tobytes() for im, _ in runner]
    finally:
        runner.close()
    assert len(crops) == 40
    assert len(set(crops)) > 32  # 961 possible crops: ~39 distinct; one shared stream gives <= 25


def test_augmentor_inside_a_process_map_differs_per_worker() -> None:
    aug = imgaug.RandomCrop(10)
    _ = aug.rng  # seeded in the parent: a naive fork would repeat it in both workers

    def f(dp: list) -> list:
        return [aug.augment(dp[0]), dp[1]]

    data = [[_images()[0][0], i] for i in range(60)]
    ds = MultiProcessMapDataZMQ(DataFromList(data, shuffle=False), 2, f, start_method="fork")
    ds.reset_state()
    try:
        crops = [img.tobytes() for img, _ in ds]
    finally:
        ds.close()
    assert len(set(crops)) > 30  # 121 possible crops; identical worker streams would halve it
