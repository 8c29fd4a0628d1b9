"""Reading an in-memory Hugging Face ``datasets.Dataset`` row by row: ``DataFromHF`` vs
``datasets``' own ways to get one numpy row at a time.

Data: ``--size`` rows of ``{"i": int64, "x": float32[16], "s": 32-character str}`` made with
``Dataset.from_dict`` (in memory). Every contender reads one epoch and hands out each row as a
dict of numpy values:

- ``dataflow DataFromHF``: ``DataFromHF(ds)`` (in order; rows read in Arrow blocks);
- ``dataflow DataFromHF, shuffled``: ``DataFromHF(ds, shuffle=True, seed=0)`` (a new
  permutation, rows gathered with Arrow ``take``);
- ``dataflow DataFromHFIterable``: ``from_hf(ds.to_iterable_dataset(num_shards=8))``;
- ``datasets, for row in ds.with_format("numpy")``: the library's own row iteration;
- ``datasets, ds.with_format("numpy")[i]``: random access by index, in a random order;
- ``datasets, to_iterable_dataset().with_format("numpy")``: its stream, row by row;
- for reference, ``datasets``' batch iteration ``ds.with_format("numpy").iter(batch_size=1024)``
  cut into rows by a hand loop (not checkpointable).

Slow contenders read ``--sample`` rows (their rate is rows/s over that sample). Medians of
``--rounds`` rounds, wall clock.

    pip install datasets
    python benchmarks/hf_read.py [--size 1000000] [--rounds 3] [--sample 50000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from itertools import islice
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._harness import machine_line, note  # noqa: E402


def make(size: int) -> Any:
    import datasets

    datasets.disable_progress_bars()
    rng = np.random.default_rng(0)
    return datasets.Dataset.from_dict({
        "i": np.arange(size, dtype=np.int64),
        "x": rng.random((size, 16), dtype=np.float32),
        "s": [f"{i:032d}" for i in range(size)],
    })


def _ours(ds: Any, **kw: Any) -> Iterable[Any]:
    from dataflow import from_hf

    df = from_hf(ds, **kw)
    df.reset_state()
    return df


def _by_index(ds: Any, n: int) -> Iterable[Any]:
    numpy = ds.with_format("numpy")
    order = np.random.default_rng(0).permutation(len(ds))[:n].tolist()
    return (numpy[i] for i in order)


def _batches(ds: Any) -> Iterable[Any]:
    for batch in ds.with_format("numpy").iter(batch_size=1024):
        keys = list(batch)
        for row in zip(*batch.values()):
            yield dict(zip(keys, row))


def rate(make_iter: Callable[[], Iterable[Any]], rows: int) -> float:
    it = make_iter()
    start = time.perf_counter()
    count = sum(1 for _ in islice(it, rows))
    return count / (time.perf_counter() - start)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sample", type=int, default=50_000, help="rows read by the slow contenders")
    args = ap.parse_args()
    try:
        ds = make(args.size)
    except ImportError:
        note("hf_read: datasets is not installed (pip install datasets); nothing to measure")
        return
    n, sample = args.size, min(args.sample, args.size)
    contenders: list[tuple[str, Callable[[], Iterable[Any]], int]] = [
        ("dataflow DataFromHF", lambda: _ours(ds), n),
        ("dataflow DataFromHF, shuffled", lambda: _ours(ds, shuffle=True, seed=0), n),
        ("dataflow DataFromHFIterable", lambda: _ours(ds.to_iterable_dataset(num_shards=8)), n),
        ('datasets, for row in ds.with_format("numpy")', lambda: iter(ds.with_format("numpy")), sample),
        ('datasets, ds.with_format("numpy")[i], random order', lambda: _by_index(ds, sample), sample),
        ("datasets, to_iterable_dataset() numpy rows",
         lambda: iter(ds.to_iterable_dataset(num_shards=8).with_format("numpy")), sample),
        ("datasets, iter(batch_size=1024) cut into rows by hand (reference)", lambda: _batches(ds), n),
    ]
    results: dict[str, list[float]] = {name: [] for name, _, _ in contenders}
    for _ in range(args.rounds):
        for name, build, rows in contenders:
            results[name].append(rate(build, rows))
    base = statistics.median(results['datasets, for row in ds.with_format("numpy")'])
    print(f"hf_read: {n:,} rows of {{int64, float32[16], str[32]}} in memory; {args.rounds} rounds; "
          f"slow contenders read {sample:,} rows; {machine_line()}\n")
    print("| contender | median rows/s | min–max rows/s | vs datasets' row iteration |")
    print("|---|---|---|---|")
    for name, _, _ in contenders:
        r = results[name]
        print(f"| {name} | {statistics.median(r):,.0f} | {min(r):,.0f}–{max(r):,.0f} | "
              f"{statistics.median(r) / base:.1f}x |")


if __name__ == "__main__":
    main()
