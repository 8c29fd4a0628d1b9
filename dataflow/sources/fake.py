"""Synthetic data for benchmarks and tests: :class:`FakeData`."""

from __future__ import annotations

import functools
import numbers
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ..base import RNGDataFlow
from .memory import _is_int

__all__ = ["FakeData"]


def _is_pair(v: object) -> bool:
    return isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(x, numbers.Real) for x in v)


def _fake_component(shape: Any, dtype: Any, domain: Any) -> tuple:
    if not isinstance(shape, (list, tuple)) or not all(_is_int(d, 0) for d in shape):
        raise ValueError(
            f"FakeData: each shape must be a list/tuple of non-negative ints, got "
            f"{shape!r}; e.g. shapes=[[224, 224, 3], [1]]"
        )
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise ValueError(f"FakeData: unknown dtype {dtype!r}") from None
    if dt.kind not in "fiub":
        raise ValueError(f"FakeData: dtype must be a float, int or bool dtype, got {dtype!r}")
    if not (_is_pair(domain) and domain[0] < domain[1]):
        raise ValueError(f"FakeData: domain must be a (low, high) pair with low < high, got {domain!r}")
    lo, hi = domain
    if dt.kind in "iub":
        bounds = (0, 2) if dt.kind == "b" else (int(np.iinfo(dt).min), int(np.iinfo(dt).max) + 1)
        if tuple(domain) == (0, 1):  # the default: a useful range such as pixels [0, 256)
            lo, hi = max(bounds[0], 0), min(bounds[1], 256)
        elif not (float(lo).is_integer() and float(hi).is_integer() and bounds[0] <= lo and hi <= bounds[1]):
            raise ValueError(
                f"FakeData: domain {domain!r} must be integers within "
                f"[{bounds[0]}, {bounds[1]}] for dtype {dt}"
            )
        lo, hi = int(lo), int(hi)
    return tuple(int(d) for d in shape), dt, lo, hi


def _sampler(rng: np.random.Generator, shape: tuple, dt: np.dtype, lo: Any, hi: Any):
    if dt.kind in "iub":
        return functools.partial(rng.integers, lo, hi, shape, dt)
    native = np.dtype(np.float32) if dt.itemsize <= 4 else np.dtype(np.float64)
    if native == dt and (lo, hi) == (0, 1):
        return functools.partial(rng.random, shape, dt)

    top = np.nextafter(dt.type(hi), dt.type(lo))  # rounding must not reach ``hi``

    def draw() -> np.ndarray:
        v = rng.random(shape, native)
        v *= hi - lo
        v += lo
        v = v if native == dt else v.astype(dt)
        return np.minimum(v, top, out=v)

    return draw


class FakeData(RNGDataFlow):
    """``size`` datapoints ``[array(shapes[0]), array(shapes[1]), ...]`` of random values.

    ``dtype``: one dtype or one per component. ``domain``: a ``(low, high)`` pair, or one per
    component. Floats are uniform in ``[low, high)``; ints/bools are ``rng.integers(low,
    high)``, where the default ``(0, 1)`` means the dtype's range clipped to ``[0, 256)``.
    ``random=True`` draws new arrays for every datapoint; ``random=False`` draws one
    datapoint in ``reset_state()`` and yields a new list of *the same arrays* every time
    (do not modify them in place). ``len`` is ``size``. ``reset_state()`` is required;
    ``seed=`` makes the data reproducible. Reentrant.
    """

    def __init__(
        self,
        shapes: Sequence[Sequence[int]],
        size: int = 1000,
        random: bool = True,
        dtype: Any = "float32",
        domain: Any = (0, 1),
        seed: int | None = None,
    ) -> None:
        super().__init__(seed)
        if not isinstance(shapes, (list, tuple)) or not shapes:
            raise ValueError(
                f"FakeData: shapes must be a non-empty list of shapes, got "
                f"{shapes!r}; e.g. shapes=[[224, 224, 3], [1]]"
            )
        n = len(shapes)
        dtypes = list(dtype) if isinstance(dtype, (list, tuple)) else [dtype] * n
        per_shape = isinstance(domain, (list, tuple)) and not _is_pair(domain)
        domains = list(domain) if per_shape else [domain] * n
        for name, lst in (("dtype", dtypes), ("domain", domains)):
            if len(lst) != n:
                raise ValueError(
                    f"FakeData: got {len(lst)} {name}s for {n} shapes; give one {name} or one per shape"
                )
        self._components = [_fake_component(*c) for c in zip(shapes, dtypes, domains, strict=True)]
        if not _is_int(size, 1):
            raise ValueError(f"FakeData: size must be an int >= 1, got {size!r}")
        self._size = int(size)
        self.random = random
        self._fixed: list[np.ndarray] = []

    def __len__(self) -> int:
        return self._size

    def reset_state(self) -> None:
        super().reset_state()
        if not self.random:
            self._fixed = [_sampler(self.rng, *c)() for c in self._components]

    def __iter__(self) -> Iterator[list]:
        draws = [_sampler(self.rng, *c) for c in self._components]  # rng: raises before reset
        if not self.random:
            fixed = self._fixed
            for _ in range(self._size):
                yield list(fixed)
            return
        for _ in range(self._size):
            yield [d() for d in draws]
