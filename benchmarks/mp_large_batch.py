"""MapAndBatch, large arrays: 2 workers each map indices to ``(224, 224, 3)`` uint8 images and
batch 64 of them (9.6 MB per batch), endlessly.

The upstream (indices) is read in the consumer and sent to the workers; ``map_func`` returns
``[the same preallocated image]``, so what is measured is batching in the workers and the
transport of each 9.6 MB batch; the consumer reads one byte of each batch and drops it.
Contenders, interleaved round by round:

- ``memcpy``: single-thread ``np.copyto`` of a 9.6 MB array (the reference, as in
  ``mp_large.py``);
- ``dataflow``: ``MultiProcessMapAndBatchDataZMQ(indices, 2, map_func, 64)``: each batch is
  stacked straight into the worker's shared-memory ring and received as a view of it;
- ``dataflow, stack then copy``: the same, with the batch stacked in the worker's memory and
  then copied into the ring (what it did before issue 13, kept here as the before/after);
- ``dataflow shm_bytes=0``: everything over ZMQ;
- ``tensorpack 0.11``: ``MultiProcessMapAndBatchDataZMQ(indices, 2, map_func, 64)`` (if
  installed);
- ``torch DataLoader``: a map-style dataset of the same image, ``batch_size=64,
  num_workers=2`` (if installed; its default collate stacks into shared memory in the worker).

Timing as in ``mp_large.py``: start the pipeline, receive untimed for ``--warmup`` s (and at
least 64 batches), count what arrives in ``--seconds``, close it, wait until its workers are
gone; runs during which other processes used more than ``--max-foreign`` cores are redone.

    pip install tensorpack==0.11 torch   # optional peers
    python benchmarks/mp_large_batch.py [--seconds 3] [--warmup 1] [--rounds 5]

Target (issue 13, item 7): dataflow >= 1.0x memcpy.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import logging
import os
import platform
import statistics
import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.mp_large import (  # noqa: E402
    MEMCPY,
    NBYTES,
    NUM_PROC,
    SHAPE,
    Contender,
    markdown_table,
    memcpy,
    pipeline,
    settle,
    wait_quiet,
)

BATCH = SHAPE[0]
IMAGE = np.random.default_rng(0).integers(0, 256, SHAPE[1:], dtype=np.uint8)  # inherited by fork
INDICES = [[i] for i in range(1024)]

DF = "dataflow"
DF_OLD = "dataflow, stack then copy (before)"
TP = "tensorpack 0.11"
TORCH = "torch DataLoader"


def to_image(dp: list[int]) -> list[np.ndarray]:
    return [IMAGE]


def endless(df: Any) -> Iterator[Any]:
    """Epoch after epoch of a non-strict parallel map (each epoch is ``len(upstream)``
    datapoints' worth; the workers keep running across epochs)."""
    while True:
        yield from df


def ours(name: str, *a: Any, old: bool = False, **kwargs: Any) -> Contender:
    from dataflow import DataFromList
    from dataflow.ops._stack import stack_component
    from dataflow.parallel import _slot_batch
    from dataflow.parallel._maps import MultiProcessMapAndBatchDataZMQ

    def open_() -> tuple[Iterator[Any], Callable[[], None]]:
        # the workers fork from here: what ring_stacker is now is what they use
        _slot_batch.ring_stacker = (lambda ring: stack_component) if old else RING_STACKER  # type: ignore[assignment]
        df = MultiProcessMapAndBatchDataZMQ(
            DataFromList(INDICES, shuffle=False), NUM_PROC, to_image, BATCH, **kwargs
        )
        df.reset_state()
        it = endless(df)
        _slot_batch.ring_stacker = RING_STACKER
        return it, lambda: (it.close(), df.close())

    return pipeline(name, open_, *a)


def tensorpack(*a: Any) -> Contender | None:
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            from tensorpack.dataflow import DataFromList, MultiProcessMapAndBatchDataZMQ
    except ImportError:
        print(f"{TP} not installed (pip install tensorpack==0.11): skipping it", file=sys.stderr)
        return None
    logging.getLogger("tensorpack").setLevel(logging.WARNING)

    def open_() -> tuple[Iterator[Any], Callable[[], None]]:
        # buffer_size given: tensorpack 0.11 compares it with batch_size before its default is set
        df = MultiProcessMapAndBatchDataZMQ(
            DataFromList(INDICES, shuffle=False), NUM_PROC, to_image, BATCH, buffer_size=10 * BATCH
        )
        df.reset_state()
        held = [df, endless(df)]

        def stop() -> None:
            held[1].close()
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                held.clear()  # no close(): its __del__ stops the workers
                gc.collect()

        return held[1], stop

    return pipeline(TP, open_, *a)


def torch_loader(*a: Any) -> Contender | None:
    try:
        import torch.utils.data as tud
    except ImportError:
        print(f"torch not installed (pip install torch): skipping {TORCH}", file=sys.stderr)
        return None

    class Images(tud.Dataset):
        def __len__(self) -> int:
            return 10**9

        def __getitem__(self, i: int) -> list[np.ndarray]:
            return [IMAGE]

    def open_() -> tuple[Iterator[Any], Callable[[], None]]:
        it = iter(tud.DataLoader(Images(), batch_size=BATCH, num_workers=NUM_PROC))
        return it, it._shutdown_workers  # what its __del__ does, but now

    return pipeline(TORCH, open_, *a)


RING_STACKER: Any = None


def main() -> None:
    global RING_STACKER
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="timed part of each round")
    parser.add_argument("--warmup", type=float, default=1.0, help="untimed receiving before it")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--max-foreign", type=float, default=0.25, help="redo runs if others use more")
    parser.add_argument("--retries", type=int, default=3, help="redone runs at most, per run")
    parser.add_argument("--no-peers", action="store_true", help="only memcpy and dataflow")
    args = parser.parse_args()
    from dataflow.parallel import _slot_batch

    RING_STACKER = _slot_batch.ring_stacker
    check = np.stack([IMAGE] * BATCH)
    a = (args.warmup, args.seconds, check)
    made = [memcpy(*a), ours(DF, *a), ours(DF_OLD, *a, old=True), ours(f"{DF} shm_bytes=0", *a, shm_bytes=0)]
    if not args.no_peers:
        made += [tensorpack(*a), torch_loader(*a)]
    contenders = [c for c in made if c is not None]
    load0 = os.getloadavg()
    redone = 0
    for r in range(args.rounds):
        for c in contenders:
            for attempt in range(args.retries + 1):
                wait_quiet(args.max_foreign)
                w = c.run()
                settle(c.name)
                if w.foreign is None or w.foreign <= args.max_foreign or attempt == args.retries:
                    break
                redone += 1
                print(f"{c.name}: other processes used {w.foreign:.2f} cores during the run; again",
                      file=sys.stderr, flush=True)
            c.gbps.append(w.items * NBYTES / w.seconds / 1e9)
            if w.foreign is not None:
                c.foreign.append(w.foreign)
        load = os.getloadavg()[0]
        print(f"round {r + 1}/{args.rounds} done; load average {load:.2f}", file=sys.stderr, flush=True)
    load1 = os.getloadavg()
    print(
        f"mp_large_batch: {NUM_PROC} workers map indices to the same {SHAPE[1:]} uint8 image and "
        f"batch {BATCH} ({NBYTES / 1e6:.1f} MB per batch) forever; GB/s (1e9 B/s) received over "
        f"{args.seconds:g} s after {args.warmup:g} s warm-up (worker start-up excluded), one byte read "
        f"per batch, {args.rounds} rounds interleaved, medians; memcpy of one batch as in mp_large. "
        f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores, "
        f"{platform.machine()}; load average (1 min) {load0[0]:.2f} before, {load1[0]:.2f} after; "
        f"others' CPU: cores used by other processes during the timed windows (median); {redone} "
        f"run(s) redone because others used more than {args.max_foreign:g} cores\n"
    )
    print(markdown_table(contenders).replace("median items/s", "median batches/s"))
    med = {c.name: statistics.median(c.gbps) for c in contenders}
    print(f"\nTarget: dataflow >= 1.0x memcpy: {med[DF] / med[MEMCPY]:.2f}x", flush=True)


if __name__ == "__main__":
    main()
