"""Storage formats, read side: one epoch over a saved dataset, this library vs tensorpack 0.11.

Data: ``--size`` datapoints ``[int, uint8[32, 32, 3], float32[10]]`` (3,120 payload bytes
each), saved once per contender with its own serializer in a temporary directory. Each
contender reads one full epoch per run and decodes every datapoint. Contenders, in one run:

- ``dataflow LMDB`` / ``tensorpack LMDB``: ``LMDBSerializer.load(path, shuffle=...)``, in
  key order and shuffled (random access);
- ``dataflow TFRecord``: ``TFRecordSerializer.load(path)``, both CRCs checked (CRC-32C by
  ``google-crc32c`` when installed, else pure Python: say which below);
- ``tensorpack TFRecord``: needs TensorFlow; left out with a note when it is missing;
- ``LMDBData`` of both, yielding ``[key, value bytes]`` without decoding: the storage layer
  alone, without the codec.

tensorpack's contenders run in a separate (spawned) process that the rounds drive one epoch
at a time, because importing tensorpack patches the ``msgpack`` module globally.

MB/s counts the payload (array bytes + 8 for the int), the same for every contender, so it
is comparable across formats. Medians of ``--rounds`` rounds; ratios within this run.

``--clock cpu`` times each epoch by the CPU time of the thread that reads it
(``time.thread_time``, measured in the process that runs the epoch, the peer's included)
instead of the wall clock: every contender is single-threaded, so on a shared machine whose
other jobs keep the cores busy this measures each reader's own cost, where wall-clock rates
mostly measure the scheduler.

    pip install lmdb google-crc32c tensorpack==0.11   # tensorflow for tensorpack's TFRecord
    python benchmarks/formats_read.py [--size 5000] [--rounds 7] [--clock wall|cpu]
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import multiprocessing
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._harness import Result, machine_line, note, quiet_stdout, wait_quiet  # noqa: E402

Run = Callable[[], tuple[int, float, float]]

PAYLOAD = 32 * 32 * 3 + 10 * 4 + 8
TP_LMDB = "tensorpack LMDB, in order"
RAW_OURS = "dataflow LMDBData (raw bytes, no decoding)"
RAW_TP = "tensorpack LMDBData (raw bytes, no decoding)"


def make_data(size: int) -> list[list]:
    rng = np.random.default_rng(0)
    return [
        [i, rng.integers(0, 256, (32, 32, 3), dtype=np.uint8), rng.random(10, dtype=np.float32)]
        for i in range(size)
    ]


def _epoch(df) -> Callable[[], tuple[int, float, float]]:
    df.reset_state()

    def run() -> tuple[int, float, float]:
        """One epoch: ``(items, wall seconds, CPU seconds of this thread)``."""
        n = 0
        c0, t0 = time.thread_time(), time.perf_counter()
        for _ in df:
            n += 1
        return n, time.perf_counter() - t0, time.thread_time() - c0

    return run


def ours(data: list, tmp: str) -> list[tuple[str, Run]]:
    from dataflow import DataFromList, LMDBData, LMDBSerializer, TFRecordSerializer
    from dataflow.formats._crc32c import implementation

    lmdb_path, tfr_path = os.path.join(tmp, "ours.lmdb"), os.path.join(tmp, "ours.tfrecord")
    LMDBSerializer.save(DataFromList(data, shuffle=False), lmdb_path)
    TFRecordSerializer.save(DataFromList(data, shuffle=False), tfr_path)
    note(f"dataflow TFRecord: CRC-32C by {implementation()}")
    return [
        ("dataflow LMDB, in order", _epoch(LMDBSerializer.load(lmdb_path, shuffle=False))),
        ("dataflow LMDB, shuffled", _epoch(LMDBSerializer.load(lmdb_path, shuffle=True))),
        ("dataflow TFRecord", _epoch(TFRecordSerializer.load(tfr_path))),
        (RAW_OURS, _epoch(LMDBData(lmdb_path, shuffle=False))),
    ]


def _tensorpack_flows(size: int, tmp: str) -> dict:
    """Runs in the peer process: save with tensorpack, return its flows by contender name."""
    from tensorpack.dataflow import DataFromList, LMDBData, LMDBSerializer
    from tensorpack.utils import logger

    logger.setLevel(logging.WARNING)
    data = make_data(size)
    path = os.path.join(tmp, "tensorpack.lmdb")
    LMDBSerializer.save(DataFromList(data, shuffle=False), path)
    copy1, copy2 = (shutil.copy(path, os.path.join(tmp, f"tensorpack-{i}.lmdb")) for i in (1, 2))
    flows = {  # a copy each: tensorpack (and lmdb) open a file only once per process
        TP_LMDB: LMDBSerializer.load(path, shuffle=False),
        "tensorpack LMDB, shuffled": LMDBSerializer.load(copy1, shuffle=True),
        RAW_TP: LMDBData(copy2, shuffle=False),
    }
    try:
        from tensorpack.dataflow import TFRecordSerializer
        from tensorpack.dataflow.serialize import tf  # noqa: F401  (missing without TensorFlow)
    except ImportError:
        return flows
    tfr = os.path.join(tmp, "tensorpack.tfrecord")
    TFRecordSerializer.save(DataFromList(data, shuffle=False), tfr)
    flows["tensorpack TFRecord"] = _FreshEachEpoch(lambda: TFRecordSerializer.load(tfr, size=size))
    return flows


class _FreshEachEpoch:
    """tensorpack's TFRecord reader wraps one generator, so its second epoch is empty (and
    ``FixedSizeData`` then raises "generator raised StopIteration"): load it anew per epoch."""

    def __init__(self, load: Callable) -> None:
        self.load = load

    def reset_state(self) -> None:
        pass

    def __iter__(self):  # type: ignore[no-untyped-def]
        df = self.load()
        df.reset_state()
        return iter(df)


def _peer_main(conn, size: int, tmp: str) -> None:
    """The peer process: answers "run one epoch of <name>" with the item count."""
    with quiet_stdout():
        flows = _tensorpack_flows(size, tmp)
        runs = {name: _epoch(df) for name, df in flows.items()}
        conn.send(list(runs))
        for name in iter(conn.recv, None):
            conn.send(runs[name]())


def tensorpack(size: int, tmp: str) -> list[tuple[str, Run]]:
    """tensorpack's contenders, run in a separate process: importing tensorpack patches the
    ``msgpack`` module globally (``msgpack_numpy.patch()``), which must not touch ours."""
    if importlib.util.find_spec("tensorpack") is None:  # importing it here would patch msgpack
        note("tensorpack not installed: pip install tensorpack==0.11 to compare")
        return []
    ctx = multiprocessing.get_context("spawn")
    conn, child = ctx.Pipe()
    proc = ctx.Process(target=_peer_main, args=(child, size, tmp), daemon=True)
    proc.start()
    names = conn.recv()
    if "tensorpack TFRecord" not in names:
        note("tensorpack TFRecord left out: it needs TensorFlow (pip install tensorflow)")
    _PEERS.append((proc, conn))

    def remote(name: str) -> Run:
        def run() -> tuple[int, float, float]:
            conn.send(name)
            return conn.recv()  # type: ignore[no-any-return]

        return run

    return [(name, remote(name)) for name in names]


_PEERS: list = []


def run_rounds(contenders: list[tuple[str, Run]], rounds: int, cpu: bool) -> list[Result]:
    """Interleave the contenders round by round after one warm-up epoch each; items/s per
    round, by the wall clock or by the reading thread's CPU time."""
    results = [Result(name) for name, _ in contenders]
    for _, run in contenders:
        run()
    for _ in range(rounds):
        for (_, run), r in zip(contenders, results):
            n, wall, cpu_s = run()
            r.rates.append(n / (cpu_s if cpu else wall))
    return results


def table(results: list[Result], reference: str | None) -> str:
    by_name = {r.name: r for r in results}
    ref = by_name.get(reference) if reference else None
    head = "| contender | median items/s | median MB/s | min–max items/s |"
    rows = [head + (f" vs {reference} |" if ref else ""), "|---|---|---|---|" + ("---|" if ref else "")]
    for r in results:
        ratio = f" {r.median / ref.median:.2f}x |" if ref else ""
        rows.append(
            f"| {r.name} | {r.median:,.0f} | {r.median * PAYLOAD / 1e6:,.1f} | "
            f"{min(r.rates):,.0f}–{max(r.rates):,.0f} |{ratio}"
        )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--clock", choices=("wall", "cpu"), default="wall",
        help="time epochs by the wall clock or by the reading thread's CPU time",
    )  # fmt: skip
    args = parser.parse_args()
    os.environ.setdefault("TQDM_DISABLE", "1")
    data = make_data(args.size)
    with tempfile.TemporaryDirectory() as tmp:
        contenders = ours(data, tmp) + tensorpack(args.size, tmp)
        try:
            if args.clock == "wall":
                wait_quiet()  # a shared machine: start when other processes are idle
            results = run_rounds(contenders, args.rounds, cpu=args.clock == "cpu")
        finally:
            for proc, conn in _PEERS:
                conn.send(None)
                proc.join(30)
    reference = TP_LMDB if any(r.name == TP_LMDB for r in results) else None
    print(
        f"formats_read: one epoch over {args.size:,} x [int, uint8[32,32,3], float32[10]] "
        f"({PAYLOAD:,} payload bytes each), {args.rounds} rounds, medians, {args.clock} clock; "
        f"{machine_line()}\n"
    )
    print(table(results, reference))


if __name__ == "__main__":
    main()
