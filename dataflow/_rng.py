"""The random generator every :class:`~dataflow.RNGDataFlow` gets as ``self.rng``.

:class:`CompatGenerator` is a :class:`numpy.random.Generator` (so ``integers``, ``random``,
``standard_normal``... and every ``isinstance(rng, np.random.Generator)`` check work) that
also answers the :class:`numpy.random.RandomState` spellings tensorpack code calls:
``randint``, ``rand``, ``randn``, ``random_sample``, ``random_integers``, ``ranf``,
``sample``, ``tomaxint``, ``seed``, ``get_state`` and ``set_state``. The methods both classes
share (``uniform``, ``normal``, ``choice``, ``shuffle``, ``permutation``...) take the same
arguments in both.

Both method sets draw from the *one* bit generator (PCG64), so there is one stream to seed
per worker (:mod:`dataflow._seeding`) and one ``bit_generator.state`` to checkpoint. The values
differ from those of a ``RandomState`` given the same seed (another algorithm): code that
relied on tensorpack's exact numbers was never reproducible anyway, since tensorpack seeded
from the process id and the time.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["CompatGenerator", "new_rng"]

_INT64_MAX = int(np.iinfo(np.int64).max)


def _shape(args: tuple[int, ...]) -> tuple[int, ...] | None:
    return tuple(int(a) for a in args) if args else None


class CompatGenerator(np.random.Generator):
    """A numpy ``Generator`` that also has ``RandomState``'s legacy methods (see the module)."""

    def __reduce__(self) -> tuple[Any, ...]:
        # Generator pickles as a plain Generator; keep the class (and the stream) instead.
        return (type(self), (self.bit_generator,))

    # -- RandomState spellings ----------------------------------------------------------------
    def randint(self, low: Any, high: Any = None, size: Any = None, dtype: Any = int) -> Any:
        """``RandomState.randint``: integers in ``[low, high)`` (``[0, low)`` without ``high``)."""
        return self.integers(low, high, size=size, dtype=dtype)

    def rand(self, *shape: int) -> Any:
        """``RandomState.rand(d0, d1, ...)``: uniform floats in ``[0, 1)`` of that shape."""
        return self.random(_shape(shape))

    def randn(self, *shape: int) -> Any:
        """``RandomState.randn(d0, d1, ...)``: standard normal floats of that shape."""
        return self.standard_normal(_shape(shape))

    def random_sample(self, size: Any = None) -> Any:
        """``RandomState.random_sample``: uniform floats in ``[0, 1)``."""
        return self.random(size)

    ranf = random_sample
    sample = random_sample

    def random_integers(self, low: Any, high: Any = None, size: Any = None) -> Any:
        """``RandomState.random_integers``: integers in ``[low, high]`` (``[1, low]`` without
        ``high``), both ends included."""
        if high is None:
            low, high = 1, low
        return self.integers(low, high, size=size, endpoint=True)

    def tomaxint(self, size: Any = None) -> Any:
        """``RandomState.tomaxint``: integers in ``[0, sys.maxsize)``."""
        return self.integers(0, _INT64_MAX, size=size)

    def seed(self, seed: Any = None) -> None:
        """Restart the stream from ``seed`` (``RandomState.seed``), through a
        :class:`~numpy.random.SeedSequence`; ``None`` takes fresh OS entropy."""
        self.bit_generator.state = type(self.bit_generator)(seed).state

    def get_state(self, legacy: bool = True) -> dict[str, Any]:
        """The bit generator's state as a dict (what ``RandomState.get_state(legacy=False)``
        returns; the legacy Mersenne-Twister tuple does not exist for this generator)."""
        return dict(self.bit_generator.state)

    def set_state(self, state: Any) -> None:
        """Restore a :meth:`get_state` dict. A ``RandomState`` tuple is refused: it belongs to
        another algorithm."""
        if not isinstance(state, dict):
            raise ValueError(
                f"rng.set_state: expected the dict returned by rng.get_state(), got "
                f"{type(state).__name__} (a RandomState/Mersenne-Twister tuple cannot be loaded "
                f"into this PCG64 generator)"
            )
        self.bit_generator.state = state


def new_rng(seed_seq: np.random.SeedSequence) -> CompatGenerator:
    """The generator for one flow: PCG64 seeded by ``seed_seq`` (the stream of
    ``np.random.default_rng(seed_seq)``, with the legacy spellings added)."""
    return CompatGenerator(np.random.PCG64(seed_seq))
