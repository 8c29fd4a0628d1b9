"""Where an augmentor's ``self.rng`` comes from, and how a tree of augmentors is saved.

- ``reset_state()`` seeds ``self.rng`` (a :class:`~dataflow.CompatGenerator`: numpy
  ``Generator`` methods plus tensorpack's ``RandomState`` spellings) from
  :func:`next_seed_sequence`: the seed source a flow installed with :func:`seeding_from`
  (the flow's ``seed=``), else :func:`dataflow._seeding.seed_sequence` (``set_seed``, the
  worker's key in a parallel runner, else fresh entropy).
- An augmentor never reset is seeded on its first draw the same way; one that was seeded before
  a ``fork`` reseeds itself on its first draw in the child (tensorpack did this with
  ``os.register_at_fork``), so forked workers never repeat each other's augmentations.
- :func:`save_tree` / :func:`load_tree` turn the RNG states of an augmentor and of every
  augmentor it holds (attributes, lists and tuples of augmentors, in attribute order) into plain
  data and back: that is what makes an augmented flow resume bit-identically.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from .. import _seeding as seeding
from .._errors import StateError, StateUnsupportedError
from .._rng import CompatGenerator, new_rng
from .._state_fields import _to_plain, from_plain

__all__ = ["check_tree", "fork_generation", "fresh_rng", "load_tree", "save_tree", "seeding_from", "walk"]

_local = threading.local()
#: How many forks this process descends from; an RNG seeded at another count is reseeded.
_forks = [0]


def _after_fork_in_child() -> None:
    _forks[0] += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def fork_generation() -> int:
    return _forks[0]


@contextmanager
def seeding_from(seq: np.random.SeedSequence | None) -> Iterator[None]:
    """Within the block, augmentors reset in this thread take successive children of ``seq``
    (``None``: the usual :mod:`dataflow._seeding` rules)."""
    old = getattr(_local, "source", None)
    _local.source = seq
    try:
        yield
    finally:
        _local.source = old


def fresh_rng() -> CompatGenerator:
    """A new generator for one augmentor (see the module docstring)."""
    src = getattr(_local, "source", None)
    return new_rng(src.spawn(1)[0] if src is not None else seeding.seed_sequence(None))


def _is_augmentor(value: object) -> bool:
    """Whether ``value`` is an ``ImageAugmentor`` (told by the class's marker: this module does
    not import ``imgaug.base``, which imports it)."""
    return getattr(type(value), "_image_augmentor", False) is True


def _children(aug: Any) -> Iterator[Any]:
    for value in list(vars(aug).values()):
        if _is_augmentor(value):
            yield value
        elif isinstance(value, (list, tuple)):
            for v in value:
                if _is_augmentor(v):
                    yield v
                elif isinstance(v, (list, tuple)):  # RandomChooseAug's (aug, prob) pairs
                    yield from (x for x in v if _is_augmentor(x))


def walk(aug: Any) -> list[Any]:
    """``aug`` and every augmentor under it, depth first, each once."""
    out: list[Any] = []
    seen: set[int] = set()

    def visit(a: Any) -> None:
        if id(a) in seen:
            return
        seen.add(id(a))
        out.append(a)
        for c in _children(a):
            visit(c)

    visit(aug)
    return out


def _save_one(stage: str, aug: Any) -> Any:
    rng = aug.__dict__.get("_rng")
    if rng is None:
        return None
    if isinstance(rng, np.random.RandomState):
        return {"kind": "RandomState", "state": _to_plain(rng.get_state(legacy=False))}
    bitgen = getattr(rng, "bit_generator", None)
    if bitgen is None:
        raise StateUnsupportedError(
            f"{stage}: augmentor {type(aug).__name__} has an rng of type {type(rng).__name__}, "
            f"whose state cannot be saved; use a numpy Generator or RandomState"
        )
    return {"kind": "bit_generator", "state": _to_plain(bitgen.state)}


def save_tree(stage: str, root: Any) -> list[Any]:
    """The RNG state of every augmentor under ``root`` (``None`` for one never seeded)."""
    return [_save_one(stage, a) for a in walk(root)]


def check_tree(stage: str, root: Any, states: Any) -> list[Any]:
    """The augmentors under ``root`` if ``states`` (from :func:`save_tree`) fits them, else a
    :class:`StateError` saying why."""
    augs = walk(root)
    if not isinstance(states, list) or len(states) != len(augs):
        got = len(states) if isinstance(states, list) else type(states).__name__
        raise StateError(
            f"{stage}: the state holds {got} augmentor RNG states, this flow has {len(augs)} "
            f"augmentors; resume with the same augmentors"
        )
    for aug, st in zip(augs, states):
        if st is not None and not (
            isinstance(st, dict) and st.get("kind") in ("RandomState", "bit_generator")
        ):
            raise StateError(
                f"{stage}: augmentor RNG state for {type(aug).__name__} is corrupted: {st!r:.80}"
            )
    return augs


def load_tree(stage: str, root: Any, states: Any) -> None:
    """Restore :func:`save_tree`'s output; checked whole before anything changes."""
    augs = check_tree(stage, root, states)
    gen = fork_generation()
    for aug, st in zip(augs, states):
        if st is None:
            continue
        try:
            state = from_plain(st["state"])
            if st["kind"] == "RandomState":
                rng: Any = np.random.RandomState()
                rng.set_state(state)
            else:
                rng = aug.__dict__.get("_rng")
                if rng is None or isinstance(rng, np.random.RandomState):
                    rng = new_rng(np.random.SeedSequence(0))  # its state is replaced next line
                rng.bit_generator.state = state
        except (TypeError, ValueError, KeyError, AttributeError) as e:
            raise StateError(
                f"{stage}: the saved RNG state of augmentor {type(aug).__name__} does not fit ({e})"
            ) from e
        aug.__dict__["_rng"] = rng
        aug.__dict__["_rng_fork"] = gen
