"""dataflow/_seeding.py: set_seed, seed=, enter_worker, and the SeedSequence derivations they promise."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from dataflow import _seeding as seeding
from dataflow._seeding import enter_worker, get_seed, seed_sequence, set_seed
from dataflow.base import RNGDataFlow
from dataflow.ops._shuffle import LocallyShuffleData
from tests.helpers import ListFlow, collect


@pytest.fixture(autouse=True)
def restore_seeding() -> Iterator[None]:
    set_seed(None)
    enter_worker(())
    yield
    set_seed(None)
    enter_worker(())


class _Draws(RNGDataFlow):
    def __iter__(self) -> Iterator[Any]:
        yield [self.rng.random(4).tolist()]


def _first_draw(seed: int | None = None) -> list[float]:
    df = _Draws(seed=seed)
    df.reset_state()
    return collect(df)[0][0]


def _build_and_run() -> list[Any]:
    """A small program: two RNG-using flows built and reset in a fixed order."""
    a = LocallyShuffleData(ListFlow([[i] for i in range(30)]), buffer_size=8)
    b = _Draws()
    a.reset_state()
    b.reset_state()
    return [collect(a), collect(a), collect(b)]


def test_set_seed_makes_programs_reproducible() -> None:
    set_seed(1234)
    run1 = _build_and_run()
    set_seed(1234)
    run2 = _build_and_run()
    assert run1 == run2
    assert run1[0] != run1[1]  # epochs still differ
    set_seed(1235)
    assert _build_and_run() != run1


def test_set_seed_flows_take_successive_children() -> None:
    set_seed(77)
    first, second = _first_draw(), _first_draw()
    assert first != second
    children = np.random.SeedSequence(77).spawn(2)
    assert first == np.random.default_rng(children[0]).random(4).tolist()
    assert second == np.random.default_rng(children[1]).random(4).tolist()


def test_get_seed() -> None:
    assert get_seed() is None
    set_seed(5)
    assert get_seed() == 5
    set_seed(np.int64(6))
    assert get_seed() == 6 and type(get_seed()) is int
    set_seed(None)
    assert get_seed() is None


def test_without_seed_fresh_entropy() -> None:
    assert _first_draw() != _first_draw()
    set_seed(3)
    set_seed(None)
    assert _first_draw() != _first_draw()


def test_explicit_seed_beats_set_seed() -> None:
    expected = np.random.default_rng(np.random.SeedSequence(7)).random(4).tolist()
    assert _first_draw(7) == expected
    set_seed(1)
    assert _first_draw(7) == expected
    set_seed(2)
    assert _first_draw(7) == expected


@pytest.mark.parametrize("bad", [-1, 1.5, "1", True])  # bools too, as seed= does (check_seed)
def test_set_seed_rejects_bad_values(bad: object) -> None:
    with pytest.raises(ValueError, match=rf"set_seed: seed must be a non-negative int or None, got {bad!r}"):
        set_seed(bad)  # type: ignore[arg-type]
    assert get_seed() is None  # nothing changed


def test_check_seed() -> None:
    assert seeding.check_seed("S", None) is None
    assert seeding.check_seed("S", np.uint8(4)) == 4
    with pytest.raises(ValueError, match="S: seed must be a non-negative int or None, got False"):
        seeding.check_seed("S", False)


def test_enter_worker_with_explicit_seed_equals_spawned_child() -> None:
    s = 2024
    enter_worker((1,))
    value = _first_draw(s)
    expected = np.random.default_rng(np.random.SeedSequence(s).spawn(2)[1]).random(4).tolist()
    assert value == expected
    enter_worker((0,))
    value0 = _first_draw(s)
    assert value0 == np.random.default_rng(np.random.SeedSequence(s).spawn(2)[0]).random(4).tolist()
    assert value0 != value
    enter_worker(())
    assert _first_draw(s) == np.random.default_rng(np.random.SeedSequence(s)).random(4).tolist()


def test_enter_worker_with_explicit_seed_single_value() -> None:
    s = 99
    enter_worker((1,))
    df = _Draws(seed=s)
    df.reset_state()
    assert df.rng.random() == np.random.default_rng(np.random.SeedSequence(s).spawn(2)[1]).random()


def test_enter_worker_with_set_seed_distinct_and_reproducible_per_worker() -> None:
    s = 31
    set_seed(s)
    streams = {}
    for i in range(3):
        enter_worker((i,))
        streams[i] = _first_draw()
    assert len({tuple(v) for v in streams.values()}) == 3
    # worker i's root is SeedSequence(s).spawn(n)[i]; its flows take that root's children
    # (enter_worker itself may take one first, to reseed the legacy global RNGs)
    for i in range(3):
        children = np.random.SeedSequence(s).spawn(3)[i].spawn(4)
        assert any(streams[i] == np.random.default_rng(c).random(4).tolist() for c in children)
    # the same worker index again gives the same stream
    enter_worker((2,))
    assert _first_draw() == streams[2]


def test_enter_worker_without_seed_is_fresh_entropy() -> None:
    enter_worker((1,))
    assert _first_draw() != _first_draw()


def test_seed_sequence_helper() -> None:
    assert seed_sequence(5).entropy == 5
    enter_worker((3, 4))
    ss = seed_sequence(5)
    assert ss.entropy == 5 and tuple(ss.spawn_key) == (3, 4)


def test_enter_worker_runner_seed_and_legacy_rngs() -> None:
    draws = {}
    for i in (0, 1, 0):
        enter_worker((i,), seed=5)
        draws.setdefault(i, []).append((random.random(), np.random.random(), _first_draw()))
    assert draws[0][0] == draws[0][1]  # same worker key and seed: same streams
    assert draws[0][0][0] != draws[1][0][0]
    assert draws[0][0][1] != draws[1][0][1]
    assert draws[0][0][2] != draws[1][0][2]
