"""Synthetic data for benchmarks and tests: :class:`FakeData`."""

from __future__ import annotations

import functools
import numbers
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from .._errors import StateError
from .._state_fields import decode_items, encode_items, field, int_field, position
from ..base import RNGDataFlow
from ._memory import is_int as _is_int

__all__ = ["FakeData"]


def _is_pair(v: object) -> bool:
    return isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(x, numbers.Real) for x in v)


def _fake_component(shape: Any, dtype: Any, domain: Any) -> tuple[Any, ...]:
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


def _sampler(rng: np.random.Generator, shape: tuple[Any, ...], dt: np.dtype, lo: Any, hi: Any) -> Any:
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
        return np.minimum(v, top, out=v)  # type: ignore[no-any-return]

    return draw


class FakeData(RNGDataFlow[Any]):
    """``size`` datapoints ``[array(shapes[0]), array(shapes[1]), ...]`` of random values.

    ``dtype``: one dtype or one per component. ``domain``: a ``(low, high)`` pair, or one per
    component. Floats are uniform in ``[low, high)``; ints/bools are ``rng.integers(low,
    high)``, where the default ``(0, 1)`` means the dtype's range clipped to ``[0, 256)``.
    ``random=True`` draws new arrays for every datapoint; ``random=False`` draws one
    datapoint in ``reset_state()`` and yields a new list of *the same arrays* every time
    (do not modify them in place). ``len`` is ``size``. ``reset_state()`` is required;
    ``seed=`` makes the data reproducible. Reentrant. Its state is the RNG's and the position
    in the epoch (plus the fixed datapoint with ``random=False``).
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

    def _repr_args(self) -> dict[str, Any]:
        return {"shapes": [c[0] for c in self._components], **super()._repr_args()}

    def __len__(self) -> int:
        return self._size

    def reset_state(self) -> None:
        super().reset_state()
        if not self.random:
            self._fixed = [_sampler(self.rng, *c)() for c in self._components]

    def __iter__(self) -> Iterator[list[Any]]:
        draws = [_sampler(self.rng, *c) for c in self._components]  # rng: raises before reset
        counter = iter(range(self._size))
        start = self.__dict__.pop("_resume", 0)
        if start:
            counter.__setstate__(start)  # type: ignore[attr-defined]
        self._counter = counter
        if not self.random:
            return self._same(counter, self._fixed)
        return self._drawn(counter, draws)

    @staticmethod
    def _same(counter: Iterator[int], fixed: list[np.ndarray]) -> Iterator[list[Any]]:
        for _ in counter:
            yield list(fixed)

    @staticmethod
    def _drawn(counter: Iterator[int], draws: list[Any]) -> Iterator[list[Any]]:
        for _ in counter:
            yield [d() for d in draws]

    def _get_state(self, live: bool) -> dict[str, Any]:
        counter = self.__dict__.get("_counter")
        state: dict[str, Any] = {"rng": self._save_rng(), "size": self._size}
        state["position"] = position(counter, self._size) if live and counter is not None else 0
        state["fixed"] = None if self.random else encode_items("FakeData", self._fixed, "fixed arrays")
        return state

    def _set_state(self, state: Mapping[str, Any], live: bool) -> None:
        if int_field("FakeData", state, "size") != self._size:
            raise StateError(
                f"FakeData: the state was saved for size={state['size']}, this one has size={self._size}"
            )
        rng = field("FakeData", state, "rng", (dict, type(None)))
        position = int_field("FakeData", state, "position", 0, self._size)
        fixed = None if self.random else decode_items("FakeData", state, "fixed")
        self._load_rng(rng)
        if fixed is not None:
            self._fixed = fixed
        if live and position:
            self._resume = position
