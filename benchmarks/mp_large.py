"""Process runner, large arrays: 2 workers, each an endless source of ``(64, 224, 224, 3)`` uint8.

Each datapoint is ``[array]`` (9.6 MB). Every worker yields the **same preallocated array**
every time, so only the transport is measured; every contender sends one datapoint per
message (tensorpack: one ``send`` each; torch: one queue item; dataflow: datapoints of 64 KiB
and more go alone), so none gains from pickle memoization. The consumer reads one byte of
each datapoint and drops it before asking for the next. Contenders, interleaved round by round:

- ``memcpy``: single-thread ``np.copyto`` of a 9.6 MB array into a preallocated one (the
  reference; per round, the median of the copies made in 0.5 s);
- ``dataflow``: ``MultiProcessRunnerZMQ(source, num_proc=2)`` (shared-memory rings), also
  with ``copy=True`` and with ``shm_bytes=0`` (everything over ZMQ);
- ``tensorpack 0.11``: ``MultiProcessRunnerZMQ(source, num_proc=2)`` (if installed);
- ``torch DataLoader``: ``DataLoader(IterableDataset, num_workers=2, batch_size=None)`` (if
  installed; it converts the array to a tensor and sends it through shared memory).

Each run starts the pipeline, receives untimed for ``--warmup`` s and >= 64 items (start-up,
first touches of shared memory, filling queues), counts what arrives in ``--seconds``, closes
it and waits for its workers to be gone. A run during which other processes used more than
``--max-foreign`` cores is done again (up to ``--retries`` times).

    pip install tensorpack==0.11 torch   # optional peers
    python benchmarks/mp_large.py [--seconds 3] [--warmup 1] [--rounds 5] [--warmup-items 64]
                                  [--no-variants]

Target (issue 4): dataflow (default) >= 1.0x memcpy.
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
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import psutil

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

NUM_PROC = 2
SHAPE = (64, 224, 224, 3)
NBYTES = int(np.prod(SHAPE))  # 9,633,792 bytes
MIN_WARMUP_ITEMS = 64  # > 2 passes over each default ring (128 MiB = 13 arrays per worker)
WARMUP_ITEMS = [MIN_WARMUP_ITEMS]  # --warmup-items
MEMCPY_MIN_REPS = 30
MEMCPY_SECONDS = 0.5  # copies for at least this long per round; the round's rate is their median

MEMCPY = "memcpy (np.copyto, 1 thread)"
DF = "dataflow"
TP = "tensorpack 0.11"
TORCH = "torch DataLoader"


def make_array() -> np.ndarray:
    return np.random.default_rng(0).integers(0, 256, SHAPE, dtype=np.uint8)


def large_items() -> Iterator[list]:
    """The source every contender runs in each worker: ``[the same array]`` forever."""
    arr = make_array()  # made once, before the first datapoint
    while True:
        yield [arr]


# -- measuring (self-contained: psutil, a dev dependency, finds the contender's workers) ------


def _note(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _cpu_snapshot() -> tuple[float | None, float]:
    """(CPU seconds the machine spent busy since boot or ``None`` without procfs, CPU seconds
    of this process and its live children)."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            user, nice, system, _idle, _iowait, irq, softirq = map(int, f.readline().split()[1:8])
        busy: float | None = (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        busy = None
    ours = sum(os.times()[:2])
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            ours += sum(child.cpu_times()[:2])
    return busy, ours


def _foreign(busy0: float | None, ours0: float, elapsed: float) -> float | None:
    """Cores other processes used on average since :func:`_cpu_snapshot` gave the args."""
    busy1, ours1 = _cpu_snapshot()
    if busy0 is None or busy1 is None:
        return None
    return max(0.0, (busy1 - busy0) - (ours1 - ours0)) / elapsed


@dataclass
class Window:
    """One timed window: items, seconds, and the cores other processes used meanwhile."""

    items: int
    seconds: float
    foreign: float | None


def _drain(it: Iterator[Any], seconds: float, min_items: int = 1) -> tuple[int, float]:
    """Receive for ``seconds`` (and ``min_items``): read one byte of each datapoint, drop it
    before asking for the next."""
    n = 0
    t0 = time.perf_counter()
    deadline = t0 + seconds
    while n < min_items or time.perf_counter() < deadline:
        dp = next(it)
        int(dp[0][0, 0, 0, 0])
        del dp
        n += 1
    return n, time.perf_counter() - t0


def timed_drain(it: Iterator[Any], warmup: float, seconds: float, check: np.ndarray) -> Window:
    """Check the first datapoint in full, receive untimed for ``warmup`` s (and at least
    :data:`MIN_WARMUP_ITEMS`), then count what arrives in ``seconds``."""
    got = np.asarray(next(it)[0])
    if got.shape != SHAPE or got.dtype != np.uint8 or not np.array_equal(got, check):
        raise RuntimeError(f"mp_large: wrong datapoint received: {got.dtype} {got.shape}")
    del got
    _drain(it, warmup, WARMUP_ITEMS[0])
    busy0, ours0 = _cpu_snapshot()
    n, elapsed = _drain(it, seconds)
    return Window(n, elapsed, _foreign(busy0, ours0, elapsed))


def settle(name: str, timeout: float = 10.0) -> None:
    """Collect garbage and wait until this process has no running child left."""
    gc.collect()
    deadline = time.monotonic() + timeout
    while True:
        alive = []
        for p in psutil.Process().children(recursive=True):
            with contextlib.suppress(psutil.NoSuchProcess):
                if p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(p.pid)
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    if alive:
        _note(f"{name}: child process(es) {alive} still alive after clean-up")


def wait_quiet(max_foreign: float, timeout: float = 60.0) -> None:
    """Wait (up to ``timeout`` s) for a 0.5 s window in which others use <= ``max_foreign``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        busy0, ours0 = _cpu_snapshot()
        time.sleep(0.5)
        foreign = _foreign(busy0, ours0, 0.5)
        if foreign is None or foreign <= max_foreign:
            return
    _note(f"the machine stays busy (others use > {max_foreign:g} cores); measuring anyway")


# -- contenders ----------------------------------------------------------------------------


@dataclass
class Contender:
    name: str
    run: Callable[[], Window]
    gbps: list[float] = field(default_factory=list)
    foreign: list[float] = field(default_factory=list)


def memcpy(_warmup: float, _seconds: float, _check: np.ndarray) -> Contender:
    src = make_array()
    dst = np.empty_like(src)
    np.copyto(dst, src)  # fault the destination's pages in

    def run() -> Window:
        times: list[float] = []
        busy0, ours0 = _cpu_snapshot()
        t0 = time.perf_counter()
        while len(times) < MEMCPY_MIN_REPS or time.perf_counter() - t0 < MEMCPY_SECONDS:
            t = time.perf_counter()
            np.copyto(dst, src)
            times.append(time.perf_counter() - t)
        elapsed = time.perf_counter() - t0
        return Window(1, statistics.median(times), _foreign(busy0, ours0, elapsed))

    return Contender(MEMCPY, run)


def pipeline(name: str, open_: Callable[[], tuple[Iterator[Any], Callable[[], None]]], *a: Any) -> Contender:
    """A contender that starts a pipeline (``open_`` gives its iterator and how to stop it),
    measures it with :func:`timed_drain` and stops it."""

    def run() -> Window:
        it, stop = open_()
        try:
            return timed_drain(it, *a)
        finally:
            stop()

    return Contender(name, run)


def ours(name: str, *a: Any, **kwargs: Any) -> Contender:
    from dataflow.base import DataFlow
    from dataflow.parallel._runners import MultiProcessRunnerZMQ

    class Source(DataFlow):
        def __iter__(self) -> Iterator[list]:
            return large_items()

    def open_() -> tuple[Iterator[Any], Callable[[], None]]:
        df = MultiProcessRunnerZMQ(Source(), num_proc=NUM_PROC, **kwargs)
        df.reset_state()
        it = iter(df)
        return it, lambda: (it.close(), df.close())

    return pipeline(name, open_, *a)


def tensorpack(*a: Any) -> Contender | None:
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            from tensorpack.dataflow import DataFlow, MultiProcessRunnerZMQ
    except ImportError:
        _note(f"{TP} not installed (pip install tensorpack==0.11): skipping it")
        return None
    logging.getLogger("tensorpack").setLevel(logging.WARNING)

    class Source(DataFlow):
        def __iter__(self) -> Iterator[list]:
            return large_items()

    def open_() -> tuple[Iterator[Any], Callable[[], None]]:
        df = MultiProcessRunnerZMQ(Source(), num_proc=NUM_PROC)
        df.reset_state()
        held = [df, iter(df)]

        def stop() -> None:
            held[1].close()
            with contextlib.redirect_stdout(io.StringIO()):  # no close(): __del__ stops workers
                held.clear()
                gc.collect()

        return held[1], stop

    return pipeline(TP, open_, *a)


def torch_loader(*a: Any) -> Contender | None:
    try:
        import torch.utils.data as tud
    except ImportError:
        _note(f"torch not installed (pip install torch): skipping {TORCH}")
        return None

    class Source(tud.IterableDataset):
        def __iter__(self) -> Iterator[list]:
            return large_items()

    def open_() -> tuple[Iterator[Any], Callable[[], None]]:
        it = iter(tud.DataLoader(Source(), num_workers=NUM_PROC, batch_size=None))
        return it, it._shutdown_workers  # what its __del__ does, but now

    return pipeline(TORCH, open_, *a)


# -- report --------------------------------------------------------------------------------


def _ratio(c: Contender, ref: Contender | None) -> str:
    return "–" if ref is None else f"{statistics.median(c.gbps) / statistics.median(ref.gbps):.2f}x"


def markdown_table(contenders: list[Contender]) -> str:
    by_name = {c.name: c for c in contenders}
    rows = [
        f"| contender | median GB/s | min–max GB/s | median items/s | vs memcpy | vs {TP} "
        "| others' CPU (cores) |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in contenders:
        med = statistics.median(c.gbps)
        foreign = f"{statistics.median(c.foreign):.2f}" if c.foreign else "n/a"
        rows.append(
            f"| {c.name} | {med:.2f} | {min(c.gbps):.2f}–{max(c.gbps):.2f} | {med * 1e9 / NBYTES:,.0f} "
            f"| {_ratio(c, by_name[MEMCPY])} | {_ratio(c, by_name.get(TP))} | {foreign} |"
        )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="timed part of each round")
    parser.add_argument("--warmup", type=float, default=1.0, help="untimed receiving before it")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--max-foreign", type=float, default=0.25, help="redo runs if others use more")
    parser.add_argument("--retries", type=int, default=3, help="redone runs at most, per run")
    parser.add_argument("--warmup-items", type=int, default=MIN_WARMUP_ITEMS, help="untimed items, at least")
    parser.add_argument("--no-variants", action="store_true", help="leave out copy=True and shm_bytes=0")
    args = parser.parse_args()
    WARMUP_ITEMS[0] = args.warmup_items
    check = make_array()
    a = (args.warmup, args.seconds, check)
    made = [
        memcpy(*a),
        ours(DF, *a),
        None if args.no_variants else ours(f"{DF} copy=True", *a, copy=True),
        None if args.no_variants else ours(f"{DF} shm_bytes=0", *a, shm_bytes=0),
        tensorpack(*a),
        torch_loader(*a),
    ]
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
                _note(f"{c.name}: other processes used {w.foreign:.2f} cores during the run; again")
            c.gbps.append(w.items * NBYTES / w.seconds / 1e9)
            if w.foreign is not None:
                c.foreign.append(w.foreign)
        _note(f"round {r + 1}/{args.rounds} done; load average {os.getloadavg()[0]:.2f}")
    load1 = os.getloadavg()
    print(
        f"mp_large: {NUM_PROC} workers, each yielding the same {SHAPE} uint8 array "
        f"({NBYTES / 1e6:.1f} MB) forever; GB/s (1e9 B/s) received over {args.seconds:g} s after "
        f"{args.warmup:g} s warm-up (worker start-up excluded), one byte read per datapoint, "
        f"{args.rounds} rounds interleaved, medians; memcpy: median of the copies made in "
        f"{MEMCPY_SECONDS:g} s per round. {platform.python_implementation()} {platform.python_version()}, "
        f"{os.cpu_count()} cores, {platform.machine()}; load average (1 min) {load0[0]:.2f} "
        f"before, {load1[0]:.2f} after (includes this benchmark's own processes); others' CPU: "
        f"cores used by other processes during the timed windows (median); {redone} run(s) "
        f"redone because others used more than {args.max_foreign:g} cores\n"
    )
    print(markdown_table(contenders))
    print("\nTarget: dataflow (default) >= 1.0x memcpy", flush=True)


if __name__ == "__main__":
    main()
