"""Time to first batch: 2 worker processes over a list of 100,000 ``[int, float32[10]]``.

What a user waits for between building a parallel pipeline and holding its first batch of
64 (the list already exists; every library and its imports are loaded before the clock
starts, and each contender runs once untimed first). Contenders, in one run:

- ``dataflow runner``: ``MultiProcessRunnerZMQ(DataFromList(data).batch(64), num_proc=2)``;
- ``dataflow parallel_map``: ``DataFromList(data).parallel_map(f, num_proc=2).batch(64)``
  (an ordered, strict process map of a trivial function, batched in the consumer);
- ``dataflow map_and_batch``: ``MultiProcessMapAndBatchDataZMQ(DataFromList(data), 2, f, 64,
  strict=True)`` (mapped and batched in the workers, as torch's loader does);
- ``tensorpack 0.11``: ``MultiProcessRunnerZMQ(BatchData(DataFromList(data), 64), 2)``;
- ``torch DataLoader``: ``DataLoader(data, batch_size=64, num_workers=2)`` (its default
  collate, in the workers);
- ``grain`` (only with ``--grain``: it spawns its workers and pickles the list to each, about
  30 s per run on 2 cores): ``MapDataset.source(data).batch(64).to_iter_dataset()
  .mp_prefetch(num_workers=2)``.

Each run times from building the pipeline to holding its first batch, then closes it
(untimed) and waits until its workers are gone. A second table times ``start + close``:
building, starting and closing the pipeline without reading anything (for torch: creating
the iterator, which starts the workers, and shutting it down). Ratios are speed ratios: the
peer's time divided by ours (above 1.00x: we are faster).

    pip install tensorpack==0.11 torch   # optional peers
    python benchmarks/ttfb.py [--rounds 7] [--size 100000] [--grain] [--max-foreign 0.5]

Targets (issue 13): first batch no later than tensorpack's and torch's; ``start + close`` of
a runner under 0.1 s.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._harness import (  # noqa: E402
    Result,
    TimedContender,
    machine_line,
    note,
    quiet_stdout,
    run_timed_rounds,
)

NUM_PROC = 2
BATCH = 64
TP = "tensorpack 0.11"
TORCH = "torch DataLoader"
GRAIN = "grain"

# A contender opens its pipeline and returns (first batch getter, closer).
Opener = Callable[[], tuple[Callable[[], Any], Callable[[], None]]]


def make_data(size: int) -> list[list[Any]]:
    rng = np.random.default_rng(0)
    return [[i, rng.random(10, dtype=np.float32)] for i in range(size)]


def identity(dp: Any) -> Any:
    return dp


def ours_runner(data: list[Any]) -> Opener:
    from dataflow import DataFromList, MultiProcessRunnerZMQ

    def open_() -> tuple[Callable[[], Any], Callable[[], None]]:
        df = MultiProcessRunnerZMQ(DataFromList(data, shuffle=False).batch(BATCH), num_proc=NUM_PROC)
        df.reset_state()
        return lambda: next(iter(df)), df.close

    return open_


def ours_map(data: list[Any]) -> Opener:
    from dataflow import DataFromList

    def open_() -> tuple[Callable[[], Any], Callable[[], None]]:
        df = DataFromList(data, shuffle=False).parallel_map(identity, num_proc=NUM_PROC).batch(BATCH)
        df.reset_state()
        return lambda: next(iter(df)), df.close

    return open_


def ours_map_and_batch(data: list[Any]) -> Opener:
    from dataflow import DataFromList, MultiProcessMapAndBatchDataZMQ

    def open_() -> tuple[Callable[[], Any], Callable[[], None]]:
        src = DataFromList(data, shuffle=False)
        df = MultiProcessMapAndBatchDataZMQ(src, NUM_PROC, identity, BATCH, strict=True)
        df.reset_state()
        return lambda: next(iter(df)), df.close

    return open_


def tensorpack(data: list[Any]) -> Opener | None:
    try:
        with quiet_stdout():
            from tensorpack.dataflow import BatchData, DataFromList, MultiProcessRunnerZMQ
    except ImportError:
        note(f"{TP} not installed (pip install tensorpack==0.11): skipping it")
        return None
    logging.getLogger("tensorpack").setLevel(logging.WARNING)

    def open_() -> tuple[Callable[[], Any], Callable[[], None]]:
        holder = [MultiProcessRunnerZMQ(BatchData(DataFromList(data, shuffle=False), BATCH), NUM_PROC)]
        holder[0].reset_state()

        def close() -> None:
            with quiet_stdout():  # tensorpack has no close(); its __del__ stops the workers
                holder.clear()
                gc.collect()

        return lambda: next(iter(holder[0])), close

    return open_


def torch_loader(data: list[Any]) -> Opener | None:
    try:
        import torch.utils.data as tud
    except ImportError:
        note(f"torch not installed (pip install torch): skipping {TORCH}")
        return None

    def open_() -> tuple[Callable[[], Any], Callable[[], None]]:
        it = iter(tud.DataLoader(data, batch_size=BATCH, num_workers=NUM_PROC))  # starts the workers
        return lambda: next(it), it._shutdown_workers  # what its __del__ does, but now

    return open_


def grain_loader(data: list[Any]) -> Opener | None:
    try:
        import grain
        from absl import flags
    except ImportError:
        note("grain not installed (pip install grain): skipping it")
        return None
    flags.FLAGS.mark_as_parsed()  # grain reads absl flags; this script has none of its own

    def open_() -> tuple[Callable[[], Any], Callable[[], None]]:
        options = grain.multiprocessing.MultiprocessingOptions(num_workers=NUM_PROC)
        ds = grain.MapDataset.source(data).batch(BATCH).to_iter_dataset().mp_prefetch(options)
        holder = [iter(ds)]

        def close() -> None:
            holder.clear()
            gc.collect()

        return lambda: next(holder[0]), close

    return open_


def first_batch(name: str, open_: Opener) -> TimedContender:
    def run() -> tuple[int, float]:
        t0 = time.perf_counter()
        get, close = open_()
        try:
            batch = get()
            seconds = time.perf_counter() - t0
            if len(batch) != 2 or len(batch[0]) != BATCH:
                raise RuntimeError(f"{name}: unexpected first batch {type(batch).__name__}")
        finally:
            close()
        return 1, seconds

    return TimedContender(name, run)


def start_close(name: str, open_: Opener) -> TimedContender:
    def run() -> tuple[int, float]:
        t0 = time.perf_counter()
        _, close = open_()
        close()
        return 1, time.perf_counter() - t0

    return TimedContender(name, run)


def seconds_table(results: list[Result], refs: list[str]) -> str:
    """Median seconds per contender and speed ratios (the reference's time over ours)."""
    secs = {r.name: [1 / x for x in r.rates] for r in results}
    med = {name: statistics.median(s) for name, s in secs.items()}
    head = "| contender | median s | min–max s | " + " | ".join(f"vs {n}" for n in refs) + " |"
    rows = [head, "|" + "---|" * (3 + len(refs))]
    for r in results:
        s = secs[r.name]
        ratios = " | ".join(f"{med[n] / med[r.name]:.2f}x" for n in refs)
        rows.append(f"| {r.name} | {med[r.name]:.3f} | {min(s):.3f}–{max(s):.3f} | {ratios} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--size", type=int, default=100_000, help="datapoints in the list")
    parser.add_argument("--grain", action="store_true", help="also grain (about 30 s per run)")
    parser.add_argument("--max-foreign", type=float, default=0.5, help="redo a run if others use more cores")
    args = parser.parse_args()
    data = make_data(args.size)
    peers = [(TP, tensorpack(data)), (TORCH, torch_loader(data))]
    if args.grain:
        peers.append((GRAIN, grain_loader(data)))
    openers = [
        ("dataflow runner", ours_runner(data)),
        ("dataflow parallel_map", ours_map(data)),
        ("dataflow map_and_batch", ours_map_and_batch(data)),
    ]
    openers += [(name, o) for name, o in peers if o is not None]
    refs = [name for name, o in peers if o is not None]
    for name, open_ in openers:  # warm-up: lazy imports and first-use costs stay out
        first_batch(name, open_).run()
    tables = []
    for title, make in (("first batch", first_batch), ("start + close", start_close)):
        contenders = [make(name, o) for name, o in openers]
        results, quiet = run_timed_rounds(
            contenders, rounds=args.rounds, max_foreign=args.max_foreign, retries=2
        )
        tables.append((title, results, quiet))
    print(
        f"ttfb: {NUM_PROC} workers over a list of {args.size:,} [int, float32[10]], batches of "
        f"{BATCH}; seconds from building the pipeline to holding its first batch (imports and one "
        f"warm-up run excluded), {args.rounds} rounds, medians; {machine_line()}\n"
    )
    for title, results, quiet in tables:
        print(f"### {title} ({quiet.line()})\n")
        print(seconds_table(results, refs or [results[0].name]))
        print()
    print("Targets (issue 13): first batch no later than tensorpack's and torch's; start + close of a "
          "runner under 0.1 s.")


if __name__ == "__main__":
    main()
