"""Pipelines built from a plain-data spec, so a child process can build the same one.

A spec is a dict of ints/bools/strings (hypothesis draws it; JSON carries it to the child):
``n`` source size, ``shuffle`` the source, ``aug`` a per-item-random map, ``buffer`` a shuffle
buffer size (0: none), ``parallel`` one of ``none | thread | fork | spawn`` with ``workers``
(an ordered map of 2 or 3 workers), ``batch`` (0: none) and ``remainder``, ``shard`` (0: none, else
``[world, rank]``). :func:`specs` draws one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from hypothesis import strategies as st

import dataflow as D


@st.composite
def specs(
    draw: Any, parallel: Sequence[str] = ("none", "thread", "fork", "spawn"), workers: Sequence[int] = (2, 3),
    max_n: int = 40,
) -> dict[str, Any]:
    """A pipeline spec; ``parallel`` and ``workers``: the parallel maps to draw from."""
    n = draw(st.integers(1, max_n))
    world = draw(st.sampled_from([0, 2, 3]))
    return {
        "n": n,
        "shuffle": draw(st.booleans()),
        "aug": draw(st.booleans()),
        "buffer": draw(st.sampled_from([0, 2, 5])),
        "parallel": draw(st.sampled_from(list(parallel))),
        "workers": draw(st.sampled_from(list(workers))),
        "batch": draw(st.sampled_from([0, 1, 4])),
        "remainder": draw(st.booleans()),
        "shard": [world, draw(st.integers(0, world - 1))] if world else 0,
    }


def augment(dp: list[Any], rng: np.random.Generator) -> list[Any]:
    """A random augmentation drawing from the per-datapoint generator."""
    return [dp[0], dp[1] + rng.standard_normal(2).astype(np.float32)]


def double(dp: list[Any]) -> list[Any]:
    """A deterministic parallel map (module level: spawn workers import it)."""
    return [dp[0] * 2, dp[1] * 2]


def build(spec: dict[str, Any], workers: int | None = None) -> D.DataFlow:
    """The pipeline of ``spec``; ``workers`` overrides the parallel map's worker count."""
    data = [[i, np.full(2, i, dtype=np.float32)] for i in range(spec["n"])]
    df: D.DataFlow = D.DataFromList(data, shuffle=spec["shuffle"], seed=11)
    if spec["shard"]:
        world, rank = spec["shard"]
        df = df.shard(world, rank)
    if spec["aug"]:
        df = df.map(augment, item_rng=True, seed=5)
    if spec["buffer"]:
        df = df.shuffle(spec["buffer"], seed=7)
    par = spec["parallel"]
    n_workers = workers or spec["workers"]
    if par == "thread":
        df = D.MultiThreadMapData(df, n_workers, double, strict=True, ordered=True)
    elif par in ("fork", "spawn"):
        df = D.MultiProcessMapDataZMQ(df, n_workers, double, strict=True, ordered=True, start_method=par)
    if spec["batch"]:
        df = df.batch(spec["batch"], remainder=spec["remainder"])
    return df
