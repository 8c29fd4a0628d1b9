"""Remote throughput: ``send_dataflow_zmq`` -> ``RemoteDataZMQ`` over tcp loopback, the
sender in a separate process, the receiver in this one.

Workloads (``--only`` picks one):

- ``small``: ``[int, float32[10]]`` datapoints (48 payload bytes);
- ``large``: ``[uint8 (64, 224, 224, 3)]`` datapoints (9.6 MB, a batch of images).

Contenders, in one run:

- ``dataflow``: our sender and receiver (safe codec, arrays as separate frames);
- ``dataflow + CURVE``: the same, authenticated and encrypted with CURVE;
- ``tensorpack 0.11``: its ``send_dataflow_zmq`` / ``RemoteDataZMQ`` with its default
  serializer (pickle; ``TENSORPACK_SERIALIZE``), if tensorpack is importable (its remote
  module needs no TensorFlow).

Every round starts a receiver and a sender process; the receiver drops the first
``warm-up`` datapoints (process start, connection, buffers filling), then times the next
``count`` ones. Our sender sends exactly that many and an end marker; tensorpack's loops
forever, so it is stopped after the count. Sources cycle through arrays made up front, so
the sender does little but serialise and send. Prints medians of items/s and of payload bytes/s
(array bytes plus 8 per int; kB/s for small datapoints, MB/s for large ones).

    pip install tensorpack==0.11   # optional peer
    python benchmarks/remote.py [--rounds 5] [--only small|large]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks._harness import (  # noqa: E402
    Result,
    TimedContender,
    machine_line,
    markdown_table,
    note,
    quiet_stdout,
    run_timed_rounds,
)

TP = "tensorpack 0.11"
WORKLOADS: dict[str, dict[str, Any]] = {
    # name: (what, payload bytes per datapoint, timed count, warm-up count)
    "small": {"what": "[int, float32[10]]", "bytes": 8 + 10 * 4, "count": 20_000, "warmup": 2_000},
    "large": {"what": "[uint8 (64,224,224,3)]", "bytes": 64 * 224 * 224 * 3, "count": 100, "warmup": 10},
}


def free_addr() -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{s.getsockname()[1]}"


def datapoints(workload: str, n: int) -> Iterator[list[Any]]:
    """``n`` datapoints of ``workload``, cycling through arrays made up front."""
    rng = np.random.default_rng(0)
    if workload == "small":
        pool = [rng.random(10, dtype=np.float32) for _ in range(1024)]
        for i in range(n):
            yield [i, pool[i % len(pool)]]
    else:
        pool = [rng.integers(0, 256, (64, 224, 224, 3), dtype=np.uint8) for _ in range(2)]
        for i in range(n):
            yield [pool[i % 2]]


# --- senders (run in a child process started by _start) ------------------------------------


def _send_ours(workload: str, n: str, addr: str, *keys: str) -> None:
    """``keys``: this sender's public and secret key and the receiver's public key (CURVE)."""
    count = int(n)
    curve = {}
    if keys:
        public, secret, server = (k.encode("ascii") for k in keys)
        curve = {"curve_keypair": (public, secret), "curve_server_key": server}
    from dataflow.base import DataFlow
    from dataflow.parallel._remote import send_dataflow_zmq

    class Source(DataFlow):
        def __len__(self) -> int:
            return count

        def __iter__(self) -> Iterator[list[Any]]:
            return datapoints(workload, count)

    send_dataflow_zmq(Source(), addr, progress=False, **curve)


def _send_tensorpack(workload: str, n: str, addr: str) -> None:
    count = int(n)
    from tensorpack.dataflow import DataFlow
    from tensorpack.dataflow.remote import send_dataflow_zmq

    class Source(DataFlow):
        def __len__(self) -> int:
            return count

        def __iter__(self) -> Iterator[list[Any]]:
            return datapoints(workload, count)

    send_dataflow_zmq(Source(), addr)  # never returns: stopped by the receiver's side


# --- contenders ------------------------------------------------------------------------------


def _timed(it: Iterator[Any], warmup: int, count: int) -> tuple[int, float]:
    for _ in range(warmup):
        next(it)
    t0 = time.perf_counter()
    for _ in range(count):
        next(it)
    return count, time.perf_counter() - t0


def _start(sender: str, *args: Any, quiet: bool = False) -> subprocess.Popen[bytes]:
    """Run ``sender(*args)`` of this module (as strings) in a new Python process (a plain
    subprocess: no multiprocessing helper processes outlive the round)."""
    code = (
        f"import sys; sys.path.insert(0, {ROOT!r}); "
        f"from benchmarks.remote import {sender}; {sender}(*sys.argv[1:])"
    )
    out = subprocess.DEVNULL if quiet else None  # tensorpack's progress bar and log lines
    return subprocess.Popen([sys.executable, "-c", code, *map(str, args)], stdout=out, stderr=out)


def _stop(proc: subprocess.Popen[bytes], wait: float | None) -> None:
    """Wait ``wait`` s for the sender to finish (``None``: do not wait), then kill it."""
    if wait is not None:
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            note(f"a sender (pid {proc.pid}) did not finish within {wait:g} s; killing it")
    proc.kill()
    proc.wait()


def ours(workload: str, curve: bool = False) -> TimedContender:
    from dataflow.parallel._remote import RemoteDataZMQ, generate_curve_keypair

    spec = WORKLOADS[workload]
    server, client = generate_curve_keypair(), generate_curve_keypair()
    receiver_keys = {"curve_keypair": server, "curve_authorized_keys": [client[0]]} if curve else {}
    sender_keys = [k.decode("ascii") for k in (*client, server[0])] if curve else []

    def run() -> tuple[int, float]:
        addr = free_addr()
        with RemoteDataZMQ(addr, timeout=60, **receiver_keys) as df:
            df.reset_state()
            proc = _start("_send_ours", workload, spec["warmup"] + spec["count"], addr, *sender_keys)
            try:
                it = iter(df)
                result = _timed(it, spec["warmup"], spec["count"])
                rest = sum(1 for _ in it)  # up to the end marker
                if rest:
                    note(f"dataflow: {rest} datapoints more than were sent")
            finally:
                _stop(proc, 60)
        return result

    return TimedContender("dataflow + CURVE" if curve else "dataflow", run)


def tensorpack(workload: str) -> TimedContender | None:
    try:
        with quiet_stdout():
            from tensorpack.dataflow.remote import RemoteDataZMQ
    except ImportError as e:
        note(f"{TP} not importable ({e}; pip install tensorpack==0.11): skipping it")
        return None
    import logging

    logging.getLogger("tensorpack").setLevel(logging.WARNING)
    spec = WORKLOADS[workload]

    def run() -> tuple[int, float]:
        addr = free_addr()
        df = RemoteDataZMQ(addr)  # binds when iterated
        df.reset_state()
        proc = _start("_send_tensorpack", workload, spec["warmup"] + spec["count"], addr, quiet=True)
        it = iter(df)
        try:
            return _timed(it, spec["warmup"], spec["count"])
        finally:
            it.close()  # its generator destroys the context
            _stop(proc, None)  # it never returns by itself

    return TimedContender(TP, run)


def main() -> None:
    parser = argparse.ArgumentParser(description="remote pipeline throughput over tcp loopback")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", choices=sorted(WORKLOADS), help="run one workload only")
    parser.add_argument(
        "--max-foreign", type=float, default=0.2, help="redo a run when other processes used more cores"
    )
    parser.add_argument("--scale", type=float, default=1.0, help="scale the datapoints per round")
    args = parser.parse_args()
    for spec in WORKLOADS.values():
        spec["count"] = max(1, round(spec["count"] * args.scale))
        spec["warmup"] = max(1, round(spec["warmup"] * args.scale))
    print(
        f"remote: send_dataflow_zmq (separate process) -> RemoteDataZMQ over tcp loopback, hwm=50; "
        f"{args.rounds} rounds, medians; {machine_line()}\n"
    )
    for workload in [args.only] if args.only else list(WORKLOADS):
        spec = WORKLOADS[workload]
        made = [ours(workload), ours(workload, curve=True), tensorpack(workload)]
        contenders = [c for c in made if c is not None]
        results, quiet = run_timed_rounds(contenders, rounds=args.rounds, max_foreign=args.max_foreign)
        refs = [c.name for c in contenders if c.name in ("dataflow", TP)]
        print(
            f"### {workload}: {spec['what']}, {spec['bytes']:,} payload bytes each; {spec['count']:,} "
            f"timed after {spec['warmup']:,} warm-up datapoints per round; {quiet.line()}\n"
        )
        print(markdown_table(results, refs, unit="items/s"))
        scale, unit = (1e3, "kB/s") if spec["bytes"] < 100_000 else (1e6, "MB/s")
        volume = [Result(r.name, [x * spec["bytes"] / scale for x in r.rates]) for r in results]
        print()
        print(markdown_table(volume, refs, unit=unit))
        print()


if __name__ == "__main__":
    main()
