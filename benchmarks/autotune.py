"""Autotune: ``num_proc="auto", buffer_size="auto"`` against a grid of fixed configurations.

Scenarios (``--only`` picks some):

- ``mp_map``: the ~4 ms pure-Python function of ``mp_map.py`` over ``--items`` datapoints;
- ``cheap``: the trivial map (returns its datapoint) over 100,000 ``[int, float32]``;
- ``files``: a cheap map that reads one of 2,000 small files (4 KiB, in the page cache) per
  datapoint, the epoch of a dataset of image files before decoding.

Contenders per scenario, in one run: ``serial`` (``.map(f)``, in-process), every fixed
``parallel_map(f, num_proc=p, buffer_size=b)`` of the grid ``p in 1..cores`` x ``b in
(50, 200, 800)``, and ``auto``. A round builds the pipeline and times two passes over it,
worker start-up (and the autotuner's probe) included, so what ``auto`` spends on measuring
counts against it. Ordered, strict (the fluent defaults).

    python benchmarks/autotune.py [--rounds 3] [--only mp_map cheap files]

Target (issue 13): ``auto`` >= 0.9x the best fixed configuration, and never below serial.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._harness import (  # noqa: E402
    TimedContender,
    machine_line,
    markdown_table,
    run_timed_rounds,
)
from benchmarks.mp_map import calibrate, make_data, trivial, work  # noqa: E402

BUFFERS = (50, 200, 800)
PASSES = 2


def read_file(dp: list) -> list:
    """The file-reading map: the bytes of the file the datapoint names."""
    with open(dp[1], "rb") as f:
        return [dp[0], f.read()]


def contender(name: str, data: list, f: Callable, **kw: Any) -> TimedContender:
    from dataflow import DataFromList

    def run() -> tuple[int, float]:
        t0 = time.perf_counter()
        src = DataFromList(data, shuffle=False)
        df = src.parallel_map(f, **kw) if kw else src.map(f)
        df.reset_state()
        n = sum(1 for _ in range(PASSES) for _ in df)
        seconds = time.perf_counter() - t0
        df.close()
        return n, seconds

    return TimedContender(name, run)


def scenario(name: str, data: list, f: Callable, rounds: int) -> None:
    cores = len(os.sched_getaffinity(0))
    made = [contender("serial (.map)", data, f)]
    for p in range(1, cores + 1):
        for b in BUFFERS:
            made.append(contender(f"num_proc={p}, buffer_size={b}", data, f, num_proc=p, buffer_size=b))
    made.append(contender("auto", data, f, num_proc="auto", buffer_size="auto"))
    results, quiet = run_timed_rounds(made, rounds=rounds, max_foreign=0.5, retries=2)
    best = max(results[:-1], key=lambda r: r.median)  # the grid: serial and every fixed config
    print(
        f"\n### {name}: {len(data):,} datapoints, {PASSES} passes timed from build (start-up and "
        f"probe included); {rounds} rounds, medians; {machine_line()}; {quiet.line()}\n"
    )
    refs = ["serial (.map)"] + ([best.name] if best is not results[0] else [])
    print(markdown_table(results, refs, unit="items/s"))
    auto = results[-1]
    print(
        f"\nauto vs best fixed ({best.name}): {auto.median / best.median:.2f}x; auto vs serial: "
        f"{auto.median / results[0].median:.2f}x (target >= 0.9x best, >= 1.0x serial)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--items", type=int, default=300, help="datapoints of the mp_map scenario")
    parser.add_argument("--only", nargs="*", default=["mp_map", "cheap", "files"])
    args = parser.parse_args()
    if "mp_map" in args.only:
        iters, ms = calibrate(4.0)
        scenario(f"mp_map ({ms:.1f} ms map)", make_data(args.items), functools.partial(work, iters=iters),
                 args.rounds)
    if "cheap" in args.only:
        data = [[i, np.float32(i)] for i in range(100_000)]
        scenario("cheap (trivial map)", data, trivial, args.rounds)
    if "files" in args.only:
        with tempfile.TemporaryDirectory() as tmp:
            paths = []
            for i in range(2000):
                path = os.path.join(tmp, f"{i:05d}.bin")
                with open(path, "wb") as fh:
                    fh.write(os.urandom(4096))
                paths.append(path)
            data = [[i, p] for i, p in enumerate(paths)]
            for dp in data:  # into the page cache
                read_file(dp)
            scenario("files (2,000 x 4 KiB, page cache)", data, read_file, args.rounds)


if __name__ == "__main__":
    main()
