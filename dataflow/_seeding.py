"""Seeds for every RNG-using flow, derived with :class:`numpy.random.SeedSequence`.

Rules, in order:

1. A flow built with ``seed=N`` uses ``SeedSequence(N)``.
2. Otherwise, after :func:`set_seed`, each flow that resets takes the next child of the
   global ``SeedSequence`` (``spawn``), so a program that builds and resets its flows in
   the same order gets the same streams on every run.
3. Otherwise, fresh OS entropy: every run differs.

Inside a worker (see :mod:`dataflow.parallel`), the runner calls :func:`enter_worker` so
that rule 1 and 2 seeds become the worker's child of that sequence
(``SeedSequence(N).spawn(n)[i]``): workers of one runner draw distinct, reproducible
streams. Thread safety: :func:`set_seed` and :func:`seed_sequence` take a lock.
"""

from __future__ import annotations

import threading

import numpy as np

__all__ = [
    "ItemSeed",
    "check_seed",
    "enter_worker",
    "get_seed",
    "item_rng",
    "is_seeded",
    "item_seed",
    "resolve_seed",
    "seed_sequence",
    "set_seed",
]

_lock = threading.Lock()
_global_root: np.random.SeedSequence | None = None
_global_seed: int | None = None
_worker_key: tuple[int, ...] = ()


def set_seed(seed: int | None) -> None:
    """Make every flow without its own ``seed=`` reproducible (``None`` restores fresh entropy).

    Call it before the flows are reset. Each later ``reset_state()`` of an RNG-using flow
    draws the next child of ``SeedSequence(seed)``.
    """
    global _global_root, _global_seed
    seed = check_seed("set_seed", seed)
    with _lock:
        _global_seed = None if seed is None else int(seed)
        _global_root = None if seed is None else np.random.SeedSequence(int(seed))


def get_seed() -> int | None:
    """The seed given to :func:`set_seed`, or ``None``."""
    return _global_seed


def enter_worker(worker_key: tuple[int, ...], seed: int | None = None) -> None:
    """Mark this process (or thread pool) as worker ``worker_key`` of a parallel runner.

    Called by the runners before the worker resets its flow. Afterwards:

    - flows built with ``seed=N`` use ``SeedSequence(N).spawn(...)[worker_key]``;
    - flows without one draw from ``SeedSequence(seed)`` spawned along ``worker_key``
      (``seed`` is the runner's ``seed=``, else the :func:`set_seed` seed), or fresh entropy;
    - Python's :mod:`random` and numpy's legacy global RNG are reseeded from the same
      sequence, so augmentations that use them differ across workers (and are reproducible
      when a seed is given) instead of repeating the parent's state in every fork.
    """
    global _worker_key, _global_root
    import random

    key = tuple(int(k) for k in worker_key)
    base = seed if seed is not None else _global_seed
    with _lock:
        _worker_key = key
        if base is not None:
            _global_root = np.random.SeedSequence(base, spawn_key=key)
        root = _global_root if _global_root is not None else np.random.SeedSequence()
        state = root.spawn(1)[0].generate_state(2)
    random.seed(int(state[0]))
    np.random.seed(int(state[1]))


def is_seeded(seed: int | None) -> bool:
    """Whether a flow built with ``seed`` draws a reproducible stream (its own seed, or one
    from :func:`set_seed` or a parallel runner's seed in this process)."""
    return seed is not None or _global_root is not None


def resolve_seed(seed: int | None) -> int | None:
    """The seed a parallel runner hands its workers: its own ``seed=``, else :func:`set_seed`'s.

    Resolved in the parent because spawn/forkserver workers do not inherit module state."""
    return seed if seed is not None else _global_seed


def seed_sequence(seed: int | None = None) -> np.random.SeedSequence:
    """The :class:`~numpy.random.SeedSequence` a flow built with ``seed=`` should use now."""
    if seed is not None:
        return np.random.SeedSequence(int(seed), spawn_key=_worker_key)
    with _lock:
        if _global_root is not None:
            return _global_root.spawn(1)[0]  # type: ignore[no-any-return]
    return np.random.SeedSequence()


def check_seed(stage: str, seed: object) -> int | None:
    """Validate a ``seed=`` argument of ``stage``; returns it as ``int`` or ``None``."""
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"{stage}: seed must be a non-negative int or None, got {seed!r}")
    return int(seed)


#: The base of per-item RNGs: ``(entropy, spawn_key)`` of a :class:`~numpy.random.SeedSequence`.
ItemSeed = tuple[int, tuple[int, ...]]


def item_seed(seed: int | None) -> ItemSeed:
    """The base a stage with per-item RNGs uses (its ``seed=``, else :func:`set_seed`'s, else
    fresh entropy; worker-aware like :func:`seed_sequence`). Plain ints, so it can be saved in
    a state and sent to workers."""
    ss = seed_sequence(seed)
    return int(ss.entropy), tuple(int(k) for k in ss.spawn_key)  # type: ignore[arg-type]


def item_rng(base: ItemSeed, epoch: int, index: int) -> np.random.Generator:
    """The generator for item ``index`` of epoch ``epoch``: a function of these three only, so
    a datapoint gets the same randomness in any worker, at any worker count, after a resume.
    Costs a few microseconds: meant for augmentations, not for per-item work of a microsecond.
    """
    entropy, key = base
    seq = np.random.SeedSequence(entropy, spawn_key=(*key, epoch, index))
    return np.random.Generator(np.random.PCG64(seq))
