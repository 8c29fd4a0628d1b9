"""Which image layer the tests in ``tests/image`` run against, and their shared helpers.

``DATAFLOW_IMGAUG_IMPL=tensorpack`` makes the tests that are written against tensorpack's
public API (the ported tensorpack tests, the coordinate properties, the parity tests) import
``tensorpack.dataflow.imgaug`` / ``tensorpack.dataflow`` instead of ``dataflow.imgaug`` /
``dataflow``. That validates the tests themselves on the implementation they were written
for; the default (``dataflow``) runs them on ours::

    DATAFLOW_IMGAUG_IMPL=tensorpack python -m pytest tests/image -q   # the tests are right
    python -m pytest tests/image -q                                   # ours passes them

tensorpack is imported only by :func:`tensorpack_imgaug` (the oracle of the parity tests) or
under the switch: ``import tensorpack`` also imports TensorFlow when it is installed, so
the modules that call it are marked ``framework`` (run last, see ``tests/conftest.py``).

One tensorpack bug is patched where tensorpack is loaded (in tensorpack's module only):
``imgaug.Affine`` passes 0-d arrays as the angle and scale of ``cv2.getRotationMatrix2D``,
which OpenCV 5 refuses ("Argument 'angle' can not be safely parsed to 'double'"), so
tensorpack 0.11's Affine raises ``TypeError`` on every call with OpenCV 5.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import numpy as np

IMPL = os.environ.get("DATAFLOW_IMGAUG_IMPL", "dataflow")
if IMPL not in ("dataflow", "tensorpack"):
    raise RuntimeError(f"DATAFLOW_IMGAUG_IMPL must be 'dataflow' or 'tensorpack', not {IMPL!r}")
UNDER_TENSORPACK = IMPL == "tensorpack"


class _Cv2Floats:
    """``cv2`` as tensorpack's geometry module sees it: ``getRotationMatrix2D`` takes floats
    from 0-d arrays, as OpenCV 4 did (see the module docstring)."""

    def __getattr__(self, name: str) -> Any:
        import cv2

        return getattr(cv2, name)

    @staticmethod
    def getRotationMatrix2D(center: Any, angle: Any, scale: Any) -> Any:  # noqa: N802 - cv2's name
        import cv2

        return cv2.getRotationMatrix2D(tuple(float(c) for c in center), float(angle), float(scale))


def _load_tensorpack_imgaug() -> ModuleType:
    import tensorpack.dataflow as tp

    # The package object from tensorpack.dataflow, put back in sys.modules if a test removed
    # it there: importing it anew would fail (its __init__ deletes the names of submodules that
    # are already imported: KeyError 'base').
    tp_imgaug = sys.modules.setdefault("tensorpack.dataflow.imgaug", tp.imgaug)
    geometry = sys.modules["tensorpack.dataflow.imgaug.geometry"]
    if not isinstance(geometry.cv2, _Cv2Floats):
        geometry.cv2 = _Cv2Floats()
    return tp_imgaug


def imgaug_under_test() -> ModuleType:
    """``dataflow.imgaug`` (or ``tensorpack.dataflow.imgaug`` under the switch)."""
    if UNDER_TENSORPACK:
        return _load_tensorpack_imgaug()
    from dataflow import imgaug

    return imgaug


def flows_under_test() -> ModuleType:
    """``dataflow`` (or ``tensorpack.dataflow`` under the switch): the image flows' package."""
    if UNDER_TENSORPACK:
        return tensorpack_flows()
    import dataflow

    return dataflow


def tensorpack_imgaug() -> ModuleType:
    """tensorpack 0.11's imgaug, the oracle of the parity tests (the ``[test]`` extra installs
    tensorpack, so a missing one is an error, not a skip). Called from test bodies, not at
    import: collecting the tests imports neither tensorpack nor TensorFlow, and tensorpack's
    global changes (``msgpack_numpy.patch()``, TensorFlow's signal handlers) wait for the
    ``framework`` tests, which run last."""
    return _load_tensorpack_imgaug()


def tensorpack_flows() -> ModuleType:
    """``tensorpack.dataflow`` (see :func:`tensorpack_imgaug`)."""
    _load_tensorpack_imgaug()
    return sys.modules["tensorpack.dataflow"]


class SharedDraws(np.random.RandomState):
    """The random stream both implementations get in a parity test: a ``RandomState`` (what
    tensorpack's augmentors have as ``self.rng``) that also answers the ``Generator``
    spellings an implementation built on numpy's ``Generator`` may call, drawing them from
    the same legacy stream. Two augmentors given ``SharedDraws(s)`` draw the same parameters
    as long as they draw in the same order with the same calls."""

    def integers(self, low: Any, high: Any = None, size: Any = None, dtype: Any = np.int64,
                 endpoint: bool = False) -> Any:  # fmt: skip
        if high is None:
            low, high = 0, low
        return self.randint(low, high + 1 if endpoint else high, size=size, dtype=dtype)

    def random(self, size: Any = None, dtype: Any = np.float64, out: Any = None) -> Any:
        value = self.random_sample(size)
        return value if dtype is np.float64 else np.asarray(value, dtype=dtype)

    def standard_normal(self, size: Any = None, dtype: Any = np.float64, out: Any = None) -> Any:
        value = super().standard_normal(size)
        return value if dtype is np.float64 else np.asarray(value, dtype=dtype)


def augmentors_within(aug: Any) -> Iterator[Any]:
    """``aug`` and every augmentor nested in it (lists, meta augmentors), found through its
    attributes, so this works on both implementations whatever they call the fields."""
    seen: set[int] = set()
    stack = [aug]
    while stack:
        a = stack.pop()
        if id(a) in seen:
            continue
        seen.add(id(a))
        yield a
        for value in vars(a).values():
            items = value if isinstance(value, (list, tuple)) else [value]
            stack.extend(v for v in items if hasattr(v, "get_transform") and hasattr(v, "reset_state"))


def seed_draws(aug: Any, seed: int) -> Any:
    """Give ``aug`` and every nested augmentor its own :class:`SharedDraws` stream derived from
    ``seed`` and its position; returns ``aug``."""
    for i, a in enumerate(augmentors_within(aug)):
        a.rng = SharedDraws(seed * 1000 + i)
    return aug


def rand_image(shape: tuple[int, ...], dtype: str = "uint8", seed: int = 0) -> np.ndarray:
    """A reproducible random image: uint8 in [0, 255], float32 in [0, 255)."""
    rng = np.random.RandomState(seed)
    if dtype == "uint8":
        return rng.randint(0, 256, size=shape).astype(np.uint8)
    return (rng.rand(*shape) * 255).astype(dtype)
