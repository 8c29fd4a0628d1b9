"""Pipelines for ``python -m dataflow bench``: the built-in :func:`demo_pipeline`, and
:func:`load_pipeline` for a user's ``module:function``."""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import numpy as np

from ..base import DataFlow
from ..ops._batch import BatchData
from ..ops._map import MapData
from ..sources._fake import FakeData

__all__ = ["demo_pipeline", "load_pipeline"]


class _FlipAndNormalize:
    """Flip the image horizontally with probability 1/2, scale it to float32 in [-1, 1].

    The generator is created lazily, in the process that iterates, from ``seed``.
    """

    def __init__(self, seed: int | None = None) -> None:
        self.seed = seed
        self._rng: np.random.Generator | None = None

    def __call__(self, dp: list[Any]) -> list[Any]:
        if self._rng is None:
            self._rng = np.random.default_rng(self.seed)
        img, label = dp
        if self._rng.random() < 0.5:
            img = img[:, ::-1]
        out = img.astype(np.float32)
        out *= np.float32(1 / 127.5)
        out -= np.float32(1.0)
        return [out, label]


def demo_pipeline(size: int = 20000, seed: int | None = None) -> DataFlow[Any]:
    """A small image-classification pipeline, in-process.

    ``size`` fake 32x32x3 ``uint8`` images with ``int64`` labels in ``[0, 10)``
    (:class:`~dataflow.FakeData`) -> random horizontal flip and normalization to ``float32``
    in ``[-1, 1]`` (:class:`~dataflow.MapData`) -> batches of 64 (:class:`~dataflow.BatchData`):
    ``size // 64`` datapoints ``[float32 (64, 32, 32, 3), int64 (64,)]`` per epoch.
    ``seed`` makes the images and flips reproducible.
    """
    images = FakeData(
        [[32, 32, 3], []],
        size=size,
        random=True,
        dtype=["uint8", "int64"],
        domain=[(0, 256), (0, 10)],
        seed=seed,
    )
    return BatchData(MapData(images, _FlipAndNormalize(seed)), 64)


class _PipelineSpecError(ValueError):
    """A ``module:function`` spec that does not lead to a DataFlow (the CLI exits with 2)."""


def load_pipeline(spec: str) -> DataFlow[Any]:
    """Import ``module`` and return ``function()`` for a spec ``"module:function"``.

    ``function`` may be a dotted path inside the module (``"mod:Factory.build"``); if it
    names a DataFlow object rather than a callable, that object is returned.

    Raises ``ValueError`` (a private subclass, which the CLI reports with exit status 2) when
    the spec is malformed, the module or the function does not exist, the function needs
    arguments, or the result is not a DataFlow (no ``__iter__``/``reset_state``). Errors
    raised while importing or calling the user's code (other than the module itself being
    absent) propagate unchanged, with their traceback.
    """
    module_name, sep, attr_path = spec.partition(":")
    if not sep or not module_name or not attr_path or ":" in attr_path:
        raise _PipelineSpecError(f"--pipeline must look like 'package.module:function', got {spec!r}")
    try:
        obj: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        missing = e.name or ""
        if module_name == missing or module_name.startswith(missing + "."):
            raise _PipelineSpecError(
                f"--pipeline {spec!r}: no module named {missing!r} (is it on PYTHONPATH, or in "
                f"the current directory?)"
            ) from None
        raise
    for part in attr_path.split("."):
        if not hasattr(obj, part):
            raise _PipelineSpecError(
                f"--pipeline {spec!r}: module {module_name!r} has no attribute {attr_path!r}"
            )
        obj = getattr(obj, part)
    if _is_flow(obj) or not callable(obj):
        flow = obj
    else:
        _check_no_args(spec, obj)
        flow = obj()
    if not _is_flow(flow):
        raise _PipelineSpecError(
            f"--pipeline {spec!r} must return a DataFlow (an object with __iter__ and "
            f"reset_state), got {type(flow).__name__}"
        )
    return flow  # type: ignore[no-any-return]


def _is_flow(obj: object) -> bool:
    return not isinstance(obj, type) and hasattr(obj, "__iter__") and hasattr(obj, "reset_state")


def _check_no_args(spec: str, func: Any) -> None:
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):  # some builtins have no signature: just call them
        return
    try:
        signature.bind()
    except TypeError:
        raise _PipelineSpecError(
            f"--pipeline {spec!r} must name a function callable with no arguments; it takes {signature}"
        ) from None
