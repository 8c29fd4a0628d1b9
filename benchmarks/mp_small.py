"""Process runner, small datapoints: 2 workers, each an endless source of ``[int, float32[10]]``.

Each contender starts 2 worker processes that each produce their own endless stream; the
consumer only receives and counts. Contenders, in one run:

- ``dataflow``: ``MultiProcessRunnerZMQ(source, num_proc=2)``;
- ``tensorpack 0.11``: ``MultiProcessRunnerZMQ(source, num_proc=2)`` (if installed);
- ``torch DataLoader``: ``DataLoader(IterableDataset, num_workers=2, batch_size=None)``, the
  per-item equivalent (if torch is installed).

Every round builds the pipeline, starts it, receives for ``--warmup`` seconds (not timed:
worker start-up and filling the queues stay out), then counts what arrives in ``--seconds``,
then closes it and waits until its worker processes are gone. Prints medians and ratios.

    pip install tensorpack==0.11 torch   # optional peers
    python benchmarks/mp_small.py [--seconds 2] [--rounds 5]

Target (issue 3): >= 3x tensorpack.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import sys
from collections.abc import Iterator

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._harness import (  # noqa: E402
    Result,
    TimedContender,
    drain_for,
    machine_line,
    markdown_table,
    note,
    quiet_stdout,
    run_timed_rounds,
)

NUM_PROC = 2
DIM = 10
_POOL = 1024  # distinct arrays a source cycles through (allocation stays out of the measurement)

TP = "tensorpack 0.11"
TORCH = "torch DataLoader"


def small_items() -> Iterator[list]:
    """The source every contender runs in each of its workers: ``[i, float32[10]]`` forever.
    Each datapoint is a fresh list; its array is one of 1024 made up front."""
    rng = np.random.default_rng(os.getpid())
    arrays = [rng.random(DIM, dtype=np.float32) for _ in range(_POOL)]
    i = 0
    while True:
        yield [i, arrays[i % _POOL]]
        i += 1


def _measure(it: Iterator, warmup: float, seconds: float, batch: int | None) -> tuple[int, float]:
    weight = batch or 1
    every = 1 if batch else 64
    drain_for(it, warmup, weight, every)
    return drain_for(it, seconds, weight, every)


def ours(batch: int | None, warmup: float, seconds: float) -> TimedContender:
    from dataflow import DataFlow, MultiProcessRunnerZMQ

    class Source(DataFlow):
        def __iter__(self) -> Iterator[list]:
            return small_items()

    def run() -> tuple[int, float]:
        src = Source() if batch is None else Source().batch(batch)
        df = MultiProcessRunnerZMQ(src, num_proc=NUM_PROC)
        df.reset_state()
        it = iter(df)
        try:
            return _measure(it, warmup, seconds, batch)
        finally:
            it.close()
            df.close()

    return TimedContender("dataflow", run)


def tensorpack(batch: int | None, warmup: float, seconds: float) -> TimedContender | None:
    try:
        with quiet_stdout():
            from tensorpack.dataflow import BatchData, DataFlow, MultiProcessRunnerZMQ
    except ImportError:
        note(f"{TP} not installed (pip install tensorpack==0.11): skipping it")
        return None
    logging.getLogger("tensorpack").setLevel(logging.WARNING)

    class Source(DataFlow):
        def __iter__(self) -> Iterator[list]:
            return small_items()

    def run() -> tuple[int, float]:
        src = Source() if batch is None else BatchData(Source(), batch)
        df = MultiProcessRunnerZMQ(src, num_proc=NUM_PROC)
        df.reset_state()
        it = iter(df)
        try:
            return _measure(it, warmup, seconds, batch)
        finally:
            it.close()
            del it
            with quiet_stdout():  # tensorpack has no close(); its __del__ stops the workers
                del df
                gc.collect()

    return TimedContender(TP, run)


def torch_loader(batch: int | None, warmup: float, seconds: float) -> TimedContender | None:
    try:
        import torch.utils.data as tud
    except ImportError:
        note(f"torch not installed (pip install torch): skipping {TORCH}")
        return None

    class Source(tud.IterableDataset):
        def __iter__(self) -> Iterator[list]:
            return small_items()

    def run() -> tuple[int, float]:
        # batch_size=None: items one by one (default_convert makes the arrays tensors);
        # batch_size=64: batches assembled in the workers by the default collate.
        loader = tud.DataLoader(Source(), num_workers=NUM_PROC, batch_size=batch)
        it = iter(loader)
        try:
            return _measure(it, warmup, seconds, batch)
        finally:
            it._shutdown_workers()  # what its __del__ does, but now

    return TimedContender(TORCH, run)


def main_for(title: str, batch: int | None, targets: str) -> list[Result]:
    """Parse the command line, run the contenders, print the table (shared with mp_batch)."""
    parser = argparse.ArgumentParser(description=title)
    parser.add_argument("--seconds", type=float, default=2.0, help="timed part of each round")
    parser.add_argument("--warmup", type=float, default=0.5, help="untimed receiving before it")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    made = [f(batch, args.warmup, args.seconds) for f in (ours, tensorpack, torch_loader)]
    contenders = [c for c in made if c is not None]
    results, quiet = run_timed_rounds(contenders, rounds=args.rounds)
    refs = [c.name for c in contenders if c.name != "dataflow"]
    what = "[int, float32[10]]" if batch is None else f"batches of {batch} x [int, float32[10]]"
    print(
        f"{title}: {NUM_PROC} workers, endless {what}; items/s received over {args.seconds:g} s "
        f"after {args.warmup:g} s warm-up (worker start-up excluded), {args.rounds} rounds, "
        f"medians; {machine_line()}; {quiet.line()}\n"
    )
    print(markdown_table(results, refs or ["dataflow"], unit="items/s"))
    print(f"\nTarget: {targets}")
    return results


if __name__ == "__main__":
    main_for("mp_small", None, ">= 3x tensorpack 0.11")
