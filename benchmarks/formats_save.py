"""Storage formats, write side: saving a flow of large datapoints, this library vs tensorpack 0.11.

Data: ``--size`` datapoints ``[int, uint8[--mb MiB]]`` from a flow that yields the same
(random) array each time, so the source holds one array and the measured work is encoding
and writing. Each contender saves one epoch to a fresh file per run (deleted after the run,
outside the timing). Contenders, in one run:

- ``dataflow LMDB`` / ``tensorpack LMDB``: ``LMDBSerializer.save(df, path)``;
- ``dataflow TFRecord`` / ``tensorpack TFRecord``: ``TFRecordSerializer.save(df, path)``
  (tensorpack's needs TensorFlow; left out with a note when it is missing);
- ``dataflow HDF5`` / ``tensorpack HDF5``: ``HDF5Serializer.save(df, path, ["i", "blob"])``
  (both need ``h5py``; left out with a note when it is missing). tensorpack's collects the
  whole epoch in memory and writes each column at the end; ours streams rows in chunks.

Ours writes to a temporary file renamed into place once complete (all-or-nothing saves, no
fsync unless ``durable=True``); tensorpack writes in place.

Every save is timed by both clocks, and the table shows both: the wall clock, and the CPU
time of the process that saves (all its threads, the kernel's copying into the page cache
included), which on a shared machine whose other jobs keep the cores busy measures the work
rather than the scheduler (and the disk, which the other jobs share too). ``--clock`` picks
the one listed first. ``--formats tfrecord`` (comma-separated: lmdb, tfrecord, hdf5) runs only
those formats. ``--dir /dev/shm`` takes the disk out.

tensorpack's contenders run in a separate (spawned) process driven one save at a time,
because importing tensorpack patches the ``msgpack`` module globally. Medians of
``--rounds`` rounds; ratios within this run.

    pip install lmdb google-crc32c h5py tensorpack==0.11 tensorflow-cpu
    python benchmarks/formats_save.py [--size 1000] [--mb 1] [--rounds 3] [--dir /tmp] [--clock wall|cpu]
                                       [--formats lmdb,tfrecord,hdf5]
"""

from __future__ import annotations

import argparse
import importlib.util
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._harness import machine_line, note, quiet_stdout  # noqa: E402

HDF5_PATHS = ["i", "blob"]  # the HDF5 datasets of the two components


def _array(mb: float):  # type: ignore[no-untyped-def]
    import numpy as np

    return np.random.default_rng(0).integers(0, 256, int(mb * (1 << 20)), dtype=np.uint8)


def _timed(save: Callable[[str], None], path: str) -> tuple[float, float]:
    """Save once: ``(wall seconds, CPU seconds of this process)``; the files are removed
    afterwards, outside the timing. Every save starts with no dirty pages left by the one
    before (``os.sync()``, untimed): else a save that follows one leaving 1 GB to write back
    (LMDB's writemap) is throttled by the kernel for the other's writeback."""
    os.sync()
    c0, t0 = time.process_time(), time.perf_counter()
    save(path)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    for p in (path, path + ".index"):
        if os.path.isdir(p):
            shutil.rmtree(p)
        elif os.path.exists(p):
            os.remove(p)
    return seconds, cpu


def ours(size: int, mb: float, tmp: str) -> dict[str, Callable[[], tuple[float, float]]]:
    from dataflow import DataFlow, LMDBSerializer, TFRecordSerializer

    arr = _array(mb)

    class Big(DataFlow):
        def __len__(self) -> int:
            return size

        def __iter__(self):  # type: ignore[no-untyped-def]
            for i in range(size):
                yield [i, arr]

    runs = {
        "dataflow LMDB": lambda: _timed(
            lambda p: LMDBSerializer.save(Big(), p, progress=False), os.path.join(tmp, "ours.lmdb")
        ),
        "dataflow TFRecord": lambda: _timed(
            lambda p: TFRecordSerializer.save(Big(), p, progress=False), os.path.join(tmp, "ours.tfrecord")
        ),
    }
    if importlib.util.find_spec("h5py") is None:
        note("HDF5 left out: pip install h5py to compare it")
    else:
        from dataflow import HDF5Serializer

        runs["dataflow HDF5"] = lambda: _timed(
            lambda p: HDF5Serializer.save(Big(), p, HDF5_PATHS, progress=False), os.path.join(tmp, "ours.h5")
        )
    return runs


def _peer_main(conn, size: int, mb: float, tmp: str) -> None:  # type: ignore[no-untyped-def]
    """The peer process: answers "save once with <name>" with the seconds it took."""
    with quiet_stdout():
        import logging

        from tensorpack.dataflow import DataFlow, LMDBSerializer
        from tensorpack.utils import logger

        logger.setLevel(logging.WARNING)
        arr = _array(mb)

        class Big(DataFlow):
            def __len__(self) -> int:
                return size

            def __iter__(self):  # type: ignore[no-untyped-def]
                for i in range(size):
                    yield [i, arr]

        runs = {
            "tensorpack LMDB": lambda: _timed(
                lambda p: LMDBSerializer.save(Big(), p), os.path.join(tmp, "tp.lmdb")
            )
        }
        try:
            from tensorpack.dataflow import TFRecordSerializer
            from tensorpack.dataflow.serialize import tf  # noqa: F401  (missing without TensorFlow)
        except ImportError:
            pass
        else:
            runs["tensorpack TFRecord"] = lambda: _timed(
                lambda p: TFRecordSerializer.save(Big(), p), os.path.join(tmp, "tp.tfrecord")
            )
        if importlib.util.find_spec("h5py") is not None:
            from tensorpack.dataflow import HDF5Serializer

            runs["tensorpack HDF5"] = lambda: _timed(
                lambda p: HDF5Serializer.save(Big(), p, HDF5_PATHS), os.path.join(tmp, "tp.h5")
            )
        conn.send(list(runs))
        for name in iter(conn.recv, None):
            conn.send(runs[name]())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--mb", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", default=None, help="where to write (default: the temp directory)")
    parser.add_argument(
        "--clock", choices=("wall", "cpu"), default="wall",
        help="time saves by the wall clock or by the saving process's CPU time (all threads)",
    )  # fmt: skip
    parser.add_argument("--formats", default="lmdb,tfrecord,hdf5", help="comma-separated formats to save")
    args = parser.parse_args()
    formats = {f.strip().lower() for f in args.formats.split(",") if f.strip()}
    unknown = formats - {"lmdb", "tfrecord", "hdf5"}
    if unknown or not formats:
        parser.error(f"--formats: unknown format(s) {sorted(unknown)}; choose from lmdb, tfrecord, hdf5")
    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        runs = ours(args.size, args.mb, tmp)
        peer = None
        if importlib.util.find_spec("tensorpack") is None:
            note("tensorpack not installed: pip install tensorpack==0.11 to compare")
        else:
            ctx = multiprocessing.get_context("spawn")
            conn, child = ctx.Pipe()
            peer = ctx.Process(target=_peer_main, args=(child, args.size, args.mb, tmp), daemon=True)
            peer.start()
            names = conn.recv()
            if "tensorpack TFRecord" not in names:
                note("tensorpack TFRecord left out: it needs TensorFlow (pip install tensorflow-cpu)")
            for name in names:
                runs[name] = (lambda n: lambda: (conn.send(n), conn.recv())[1])(name)
        runs = {name: run for name, run in runs.items() if name.split()[-1].lower() in formats}
        try:
            for run in runs.values():  # warm-up: imports, first allocations
                run()
            timings: dict[str, dict[str, list[float]]] = {"wall": {}, "cpu": {}}
            for _ in range(args.rounds):
                for name, run in runs.items():
                    wall, cpu = run()
                    timings["wall"].setdefault(name, []).append(wall)
                    timings["cpu"].setdefault(name, []).append(cpu)
        finally:
            if peer is not None:
                conn.send(None)
                peer.join(30)
    clocks = (args.clock, "cpu" if args.clock == "wall" else "wall")
    print(
        f"formats_save: {args.size:,} x [int, uint8[{args.mb:g} MiB]], {args.rounds} rounds, "
        f"medians, {clocks[0]} clock first, written to {args.dir or tempfile.gettempdir()}; "
        f"{machine_line()}\n"
    )
    header = " | ".join(f"median {c} s | MB/s | min–max {c} s | vs tensorpack ({c})" for c in clocks)
    print(f"| contender | {header} |")
    print("|---" * 9 + "|")
    for name in runs:
        cells = []
        for clock in clocks:
            s = timings[clock][name]
            med = {n: statistics.median(v) for n, v in timings[clock].items()}
            peer_name = "tensorpack " + name.split()[-1]
            ratio = f"{med[peer_name] / med[name]:.2f}x" if peer_name in med and peer_name != name else ""
            mbps = args.size * args.mb * (1 << 20) / 1e6 / med[name]
            cells.append(f"{med[name]:.2f} | {mbps:,.0f} | {min(s):.2f}–{max(s):.2f} | {ratio}")
        print(f"| {name} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
