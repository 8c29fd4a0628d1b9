"""Reading Parquet: ``ParquetData`` vs pyarrow's own loops, Hugging Face ``datasets`` and Ray
Data over the same files, and the cost of a checkpoint and of resuming late in an epoch.

Data: ``--rows`` rows (1M) of ``{"id": int64, "x": float32[16], "s": 32-byte str}`` in
``--files`` files (8), ``--group`` rows per row group (16384), zstd, written once by pyarrow.
Every contender reads one epoch of all files, in file order:

rows (one dict per row):
- ``dataflow ParquetData``: ``{"id": np.int64, "x": float32 array, "s": str}`` per row;
- ``pyarrow iter_batches().to_pylist()``: the hand loop over each file's batches (Python values);
- ``datasets IterableDataset``: ``load_dataset("parquet", data_files=..., streaming=True)``,
  Hugging Face's reader of the files themselves (Python values);
- ``datasets Dataset``: ``Dataset.from_parquet(files)``, iterated (Arrow cache written once
  before the rounds, not timed);
- ``Ray Data read_parquet().iter_rows()``: ``ray.init(num_cpus=2)`` (started before the rounds).

batches of 1024 rows (dicts of numpy columns):
- ``dataflow ParquetData(batch_rows=1024)``;
- ``pyarrow iter_batches(1024) + to_numpy``: the library's own ceiling (``x`` flattened and
  reshaped to ``(n, 16)``, ``s`` as an object array);
- ``Ray Data iter_batches(numpy)``.

resume: ``state_dict()`` in the middle of the epoch (median of 200 calls) and the time from
a new ``ParquetData`` loading the state taken at row 900k (scaled with ``--rows``) to its first
row (``reset_state`` and the footers included), against reading up to that row.

Medians of ``--rounds`` rounds (after one warm-up round), wall clock, interleaved.

    pip install pyarrow datasets "ray[data]"
    python benchmarks/parquet_read.py [--rows 1000000] [--files 8] [--group 16384] [--rounds 3]
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._harness import machine_line, note  # noqa: E402

OURS_ROWS = "dataflow ParquetData"
OURS_BATCH = "dataflow ParquetData(batch_rows=1024)"


def write_files(folder: str, rows: int, files: int, group: int) -> list[str]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    paths, per = [], -(-rows // files)
    for k in range(files):
        lo, hi = k * per, min(rows, (k + 1) * per)
        n = hi - lo
        x = pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 16, dtype=np.float32)), 16)
        s = pa.array([f"{i:032d}" for i in range(lo, hi)])
        table = pa.table({"id": np.arange(lo, hi, dtype=np.int64), "x": x, "s": s})
        path = os.path.join(folder, f"part-{k:03d}.parquet")
        pq.write_table(table, path, row_group_size=group, compression="zstd")
        paths.append(path)
    return paths


def ours_rows(paths: list[str]) -> Callable[[], int]:
    from dataflow import ParquetData

    df = ParquetData(paths)
    df.reset_state()

    def epoch() -> int:
        n = 0
        for _ in df:
            n += 1
        return n

    return epoch


def ours_batches(paths: list[str]) -> Callable[[], int]:
    from dataflow import ParquetData

    df = ParquetData(paths, batch_rows=1024)
    df.reset_state()
    return lambda: sum(len(b["id"]) for b in df)


def pyarrow_pylist(paths: list[str]) -> Callable[[], int]:
    import pyarrow.parquet as pq

    def epoch() -> int:
        n = 0
        for path in paths:
            for batch in pq.ParquetFile(path).iter_batches():
                for _ in batch.to_pylist():
                    n += 1
        return n

    return epoch


def pyarrow_numpy(paths: list[str]) -> Callable[[], int]:
    import pyarrow.parquet as pq

    def epoch() -> int:
        n = 0
        for path in paths:
            for batch in pq.ParquetFile(path).iter_batches(batch_size=1024):
                cols = {
                    "id": batch.column(0).to_numpy(),
                    "x": batch.column(1).flatten().to_numpy().reshape(len(batch), -1),
                    "s": batch.column(2).to_numpy(zero_copy_only=False),
                }
                n += len(cols["id"])
        return n

    return epoch


def hf_streaming(paths: list[str]) -> Callable[[], int]:
    import datasets

    datasets.disable_progress_bars()
    ds = datasets.load_dataset("parquet", data_files=paths, split="train", streaming=True)

    def epoch() -> int:
        n = 0
        for _ in ds:
            n += 1
        return n

    return epoch


def hf_dataset(paths: list[str], cache: str) -> Callable[[], int]:
    import datasets

    datasets.disable_progress_bars()
    ds = datasets.Dataset.from_parquet(paths, cache_dir=cache)

    def epoch() -> int:
        n = 0
        for _ in ds:
            n += 1
        return n

    return epoch


def ray_rows(paths: list[str], batches: bool = False) -> Callable[[], int]:
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
        ray.data.DataContext.get_current().enable_progress_bars = False
        logging.getLogger("ray.data").setLevel(logging.WARNING)

    def epoch() -> int:
        ds = ray.data.read_parquet(paths)
        if batches:
            return sum(len(b["id"]) for b in ds.iter_batches(batch_size=1024, batch_format="numpy"))
        n = 0
        for _ in ds.iter_rows():
            n += 1
        return n

    return epoch


def measure(contenders: dict[str, Callable[[], int]], rows: int, rounds: int) -> dict[str, list[float]]:
    rates: dict[str, list[float]] = {name: [] for name in contenders}
    for rnd in range(rounds + 1):  # round 0 warms up
        for name, epoch in contenders.items():
            t0 = time.perf_counter()
            n = epoch()
            wall = time.perf_counter() - t0
            if n != rows:
                raise SystemExit(f"{name} read {n} rows, not {rows}")
            if rnd:
                rates[name].append(n / wall)
    return rates


def table(title: str, rates: dict[str, list[float]], ours: str) -> None:
    ref = statistics.median(rates[ours])
    print(f"### {title}\n")
    print(f"| contender | median rows/s | min–max | {ours} vs this |")
    print("|---|---|---|---|")
    for name, r in rates.items():
        med = statistics.median(r)
        print(f"| {name} | {med:,.0f} | {min(r):,.0f}–{max(r):,.0f} | {ref / med:.2f}x |")
    print()


def resume(paths: list[str], rows: int, rounds: int) -> None:
    from dataflow import ParquetData

    at = rows * 9 // 10
    df = ParquetData(paths, shuffle=True, seed=0)
    df.reset_state()
    it = iter(df)
    for _ in range(at):
        next(it)
    lat = []
    for _ in range(200):
        t0 = time.perf_counter()
        state = df.state_dict()
        lat.append(time.perf_counter() - t0)
    expected = next(it)
    resumed, skipped = [], []
    for _ in range(max(rounds, 3)):
        t0 = time.perf_counter()
        again = ParquetData(paths, shuffle=True, seed=0)
        again.load_state_dict(state)
        again.reset_state()
        first = next(iter(again))
        resumed.append(time.perf_counter() - t0)
        assert first["id"] == expected["id"]
        t0 = time.perf_counter()
        plain = ParquetData(paths, shuffle=True, seed=0)
        plain.reset_state()
        walk = iter(plain)
        for _ in range(at + 1):
            next(walk)
        skipped.append(time.perf_counter() - t0)
    print(f"### resume at row {at:,} of {rows:,} (shuffled)\n")
    print("| what | median | min–max |")
    print("|---|---|---|")
    ms = [t * 1e3 for t in lat]
    spread = f"{min(ms):.3f}–{max(ms):.3f}"
    print(f"| dataflow state_dict() mid-epoch (ms) | {statistics.median(ms):.3f} | {spread} |")
    print(
        f"| dataflow resume: build, load_state_dict, reset_state, first row (s) | "
        f"{statistics.median(resumed):.4f} | {min(resumed):.4f}–{max(resumed):.4f} |"
    )
    print(
        f"| reading rows 0..{at:,} to get there, for reference (s) | {statistics.median(skipped):.3f} | "
        f"{min(skipped):.3f}–{max(skipped):.3f} |"
    )
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--group", type=int, default=16384)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-peers", action="store_true", help="pyarrow only (no datasets, no Ray)")
    args = parser.parse_args()
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_files(tmp, args.rows, args.files, args.group)
        rows: dict[str, Callable[[], int]] = {
            OURS_ROWS: ours_rows(paths),
            "pyarrow iter_batches().to_pylist()": pyarrow_pylist(paths),
        }
        batches: dict[str, Callable[[], int]] = {
            OURS_BATCH: ours_batches(paths),
            "pyarrow iter_batches(1024) + to_numpy": pyarrow_numpy(paths),
        }
        if not args.no_peers:
            peers: list[tuple[dict[str, Callable[[], int]], str, Callable[[], Callable[[], int]]]] = [
                (rows, "datasets IterableDataset (streaming the files)", lambda: hf_streaming(paths)),
                (rows, "datasets Dataset.from_parquet (Arrow cache, not timed)",
                 lambda: hf_dataset(paths, os.path.join(tmp, "hf"))),
                (rows, "Ray Data read_parquet().iter_rows()", lambda: ray_rows(paths)),
                (batches, "Ray Data iter_batches(1024, numpy)", lambda: ray_rows(paths, batches=True)),
            ]
            for target, name, make in peers:
                try:
                    target[name] = make()
                except ImportError as e:
                    note(f"{name}: not installed ({e.name}); skipping it")
        row_rates = measure(rows, args.rows, args.rounds)
        batch_rates = measure(batches, args.rows, args.rounds)
        print(
            f"parquet_read: {args.rows:,} rows of {{int64, float32[16], 32-byte str}} in {args.files} files, "
            f"{args.group} rows per row group, zstd; {args.rounds} rounds, medians; {machine_line()}\n"
        )
        table("rows: one dict per row", row_rates, OURS_ROWS)
        table("batches: dicts of numpy columns, 1024 rows", batch_rates, OURS_BATCH)
        resume(paths, args.rows, args.rounds)


if __name__ == "__main__":
    main()
