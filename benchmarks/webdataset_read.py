"""WebDataset tar shards: reading and writing them, this library vs the ``webdataset`` package.

Data: ``--samples`` samples ``{"__key__", "jpg": ~``--image-bytes`` random bytes, "cls": int}``
in ``--shards`` shards (the bytes are drawn from a pool of 64 random blobs of slightly
different sizes, so the data set need not be held in memory twice; the readers and writers
see ordinary bytes). Contenders, interleaved round by round, medians of ``--rounds`` rounds
(after one warm-up round), wall clock, the shards in the page cache:

- read: ``dataflow WebDatasetData(urls, decode=False)`` vs ``webdataset WebDataset(urls)``
  (``shardshuffle=False``, no decoding: its samples are bytes too), one epoch each over the
  same shards, every sample touched;
- write: ``dataflow WebDatasetSerializer.save(df, pattern, maxcount=...)`` vs
  ``webdataset ShardWriter(pattern, maxcount=...)`` writing the same samples (ints encoded
  by both), each into its own folder, replacing the previous round's shards.

    pip install webdataset
    python benchmarks/webdataset_read.py [--samples 20000] [--shards 20] [--image-bytes 100000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._harness import machine_line, note  # noqa: E402

OURS_READ = "dataflow WebDatasetData(decode=False)"
THEIRS_READ = "webdataset WebDataset(urls)"
OURS_WRITE = "dataflow WebDatasetSerializer.save"
THEIRS_WRITE = "webdataset ShardWriter"


def make_samples(n: int, image_bytes: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(0)
    pool = [rng.bytes(image_bytes - 512 + int(rng.integers(0, 1024))) for _ in range(64)]
    return [{"__key__": f"{i:08d}", "jpg": pool[i % 64], "cls": i} for i in range(n)]


def ours_write(samples: list[dict[str, Any]], folder: str, per_shard: int) -> Callable[[], float]:
    from dataflow import DataFromList, WebDatasetSerializer

    def run() -> float:
        t0 = time.perf_counter()
        WebDatasetSerializer.save(
            DataFromList(samples, shuffle=False),
            os.path.join(folder, "shard-%06d.tar"),
            maxcount=per_shard,
            overwrite=True,
            progress=False,
        )
        return time.perf_counter() - t0

    return run


def theirs_write(samples: list[dict[str, Any]], folder: str, per_shard: int) -> Callable[[], float]:
    import webdataset as wds

    def run() -> float:
        for path in glob.glob(os.path.join(folder, "*.tar")):
            os.remove(path)
        t0 = time.perf_counter()
        with wds.ShardWriter(os.path.join(folder, "shard-%06d.tar"), maxcount=per_shard, verbose=0) as w:
            for s in samples:
                w.write(s)
        return time.perf_counter() - t0

    return run


def ours_read(urls: list[str]) -> Callable[[], tuple[int, float]]:
    from dataflow import WebDatasetData

    df = WebDatasetData(urls, decode=False)
    df.reset_state()

    def run() -> tuple[int, float]:
        n = 0
        t0 = time.perf_counter()
        for s in df:
            n += len(s["jpg"]) > 0
        return n, time.perf_counter() - t0

    return run


def theirs_read(urls: list[str]) -> Callable[[], tuple[int, float]]:
    import webdataset as wds

    def run() -> tuple[int, float]:
        n = 0
        t0 = time.perf_counter()
        for s in wds.WebDataset(urls, shardshuffle=False):
            n += len(s["jpg"]) > 0
        return n, time.perf_counter() - t0

    return run


def _row(
    name: str, values: list[float], ref: float, fmt: str, better: Callable[[float, float], float]
) -> str:
    med = statistics.median(values)
    return f"| {name} | {med:{fmt}} | {min(values):{fmt}}–{max(values):{fmt}} | {better(med, ref):.2f}x |"


def _table(
    title: str, unit: str, runs: dict[str, list[float]], theirs: str, fmt: str,
    better: Callable[[float, float], float],
) -> None:
    """One markdown table: each contender's median ``unit`` and its ratio to ``theirs``."""
    print(f"### {title}\n")
    print(f"| contender | median {unit} | min–max | vs {theirs} |")
    print("|---|---|---|---|")
    ref = statistics.median(runs[theirs])
    for name, values in runs.items():
        print(_row(name, values, ref, fmt, better))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=20000)
    parser.add_argument("--shards", type=int, default=20)
    parser.add_argument("--image-bytes", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # webdataset warns about shardshuffle=None and more
    try:
        import webdataset  # noqa: F401
    except ImportError:
        note("webdataset not installed: pip install webdataset to compare; skipping")
        return
    samples = make_samples(args.samples, args.image_bytes)
    per_shard = -(-args.samples // args.shards)
    tmp = tempfile.mkdtemp(prefix="wds-bench-")
    try:
        mine, theirs = os.path.join(tmp, "ours"), os.path.join(tmp, "theirs")
        os.makedirs(mine)
        os.makedirs(theirs)
        writers = {
            OURS_WRITE: ours_write(samples, mine, per_shard),
            THEIRS_WRITE: theirs_write(samples, theirs, per_shard),
        }
        seconds: dict[str, list[float]] = {name: [] for name in writers}
        for rnd in range(args.rounds + 1):  # round 0 warms up
            for name, run in writers.items():
                took = run()
                if rnd:
                    seconds[name].append(took)
        urls = sorted(glob.glob(os.path.join(mine, "*.tar")))
        assert len(urls) == args.shards, urls
        readers = {OURS_READ: ours_read(urls), THEIRS_READ: theirs_read(urls)}
        rates: dict[str, list[float]] = {name: [] for name in readers}
        for rnd in range(args.rounds + 1):
            for name, read in readers.items():
                n, took = read()
                assert n == args.samples, (name, n)
                if rnd:
                    rates[name].append(n / took)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    mb = args.samples * args.image_bytes / 1e6
    print(
        f"webdataset_read: {args.samples:,} samples {{jpg ~{args.image_bytes:,} bytes, cls}} in "
        f"{args.shards} shards (~{mb:,.0f} MB), {args.rounds} rounds, medians; {machine_line()}\n"
    )
    _table(
        "read one epoch, no decoding", "samples/s", rates, THEIRS_READ, ",.0f",
        lambda mine, theirs: mine / theirs,
    )
    print()
    _table("write the shards", "s", seconds, THEIRS_WRITE, ".2f", lambda mine, theirs: theirs / mine)


if __name__ == "__main__":
    main()
