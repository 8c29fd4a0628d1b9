"""Object stores: one epoch of a sharded TFRecord dataset read from a local S3 API server.

Data: ``--shards`` files of ``--shard-mb`` MB each (MB = 2**20 bytes; default 256 x 4 MB),
of TFRecord records of about 100 KB of random bytes (framed with
``TFRecordSerializer.frame``, with their index files from ``TFRecordSerializer.write_index``),
generated once in a temporary directory and uploaded to ``s3://dataflow-bench/``: a moto
server (``moto[server]``'s ``ThreadedMotoServer``: the real S3 API over HTTP on 127.0.0.1) that
this script starts in a child process, so the server's work does not share this process's
interpreter. A WSGI middleware in front of moto counts the requests and the bytes it serves
and, for the ``+latency`` contenders, sleeps ``--latency`` ms before each request (a remote
store's round trip; every request has its own server thread, so concurrent requests wait
concurrently). Contenders, interleaved round by round (``--rounds``, medians):

- ``dataflow S3``: ``TFRecordData("s3://dataflow-bench/train-*.tfrecord", decode="raw",
  storage_options=...)`` with its defaults (``prefetch_shards=2``), built, reset and read for
  one epoch. The clock starts before the flow is built (which lists the bucket);
- ``dataflow S3, +latency``: the same, with ``--latency`` ms added to every request;
- ``dataflow S3, +latency, prefetch_shards=8``: the same with more fetches in flight;
- ``s3fs cat_file loop`` (the peer): ``fs.glob(...)``, then ``fs.cat_file(key)`` for each
  object in order, what a hand-written loop does (s3fs asks for the object's size first: a
  HEAD, then a GET); with and without the added latency;
- ``dataflow local disk``: ``TFRecordData("<tmp>/train-*.tfrecord", decode="raw")`` over the
  generated files (in the page cache): what reading over HTTP costs against a local disk.

Before each run the listing cache of the (shared, per-process) s3fs filesystem is cleared,
so every run lists the bucket as a new process would. MB/s counts the objects' bytes over the
whole run. A second table gives the time to the first datapoint, from building the flow (for
the s3fs loop: its listing and first object). A third gives the requests per epoch, counted
by the client (``flow.io_stats()``; for s3fs: listing + HEAD + GET per object) and by the
server, and the bytes fetched over the dataset's size: for one reader, and for 2 processes
(the ranks of a job, or the 2 workers of a rank) each reading ``.shard(2, r)`` of the flow,
with ``equal=True`` (the default: counts from the index files) and ``equal=False``; their
first datapoint includes each new process's first S3 client (its imports are loaded before).

One untimed s3fs epoch warms the connections and the page cache first. Runs are not redone
on a busy machine (the server is a child process, whose CPU the harness's quiet-machine
check would count as foreign); the header gives the load average instead.

Hugging Face ``datasets`` streaming is not compared: it has no TFRecord reader (its
comparison belongs to a Parquet dataset); it is named as skipped, with the reason.

    pip install "moto[server]" s3fs          # needed; fsspec comes with s3fs
    python benchmarks/object_store.py [--shards 256] [--shard-mb 4] [--rounds 3] [--latency 50]
        [--only s3,latency,s3fs,local,ranks]

Under ``DATAFLOW_BENCH_QUICK=1`` the defaults are 16 shards x 0.25 MB and 1 round.

Targets (issue 25): ``dataflow S3`` >= 0.9x the s3fs loop; ``+latency`` >= 0.9x of ``dataflow
S3``; first datapoint < 0.5 s for 256 shards; requests per epoch <= shards + listing; bytes
fetched 1.0x the dataset size, for one reader and for 2 processes.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._harness import QUICK, Result, machine_line, markdown_table, note  # noqa: E402

os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")  # no probe of a cloud metadata server

BUCKET = "dataflow-bench"
MB = 1 << 20
RECORD = 100_000  # bytes of payload per record, about
GROUPS = ("s3", "latency", "s3fs", "local", "ranks")
S3FS = "s3fs cat_file loop"
OURS = "dataflow S3"
LOCAL = "dataflow local disk"
# the server's counters: requests, bytes served of shards (.tfrecord), of other objects
REQUESTS, SHARD_BYTES, OTHER_BYTES = range(3)


# -- the server (child process) ------------------------------------------------------------


class _Middleware:
    """WSGI middleware in front of moto: counts requests and bytes served, and sleeps
    ``latency`` seconds (a shared value the benchmark sets) before each request."""

    def __init__(self, app: Callable, latency: Any, counts: Any) -> None:
        self.app, self.latency, self.counts = app, latency, counts

    def __call__(self, environ: dict, start_response: Callable) -> Iterator[bytes]:
        with self.counts.get_lock():
            self.counts[REQUESTS] += 1
        delay = self.latency.value
        if delay > 0:
            time.sleep(delay)
        slot = SHARD_BYTES if environ.get("PATH_INFO", "").endswith(".tfrecord") else OTHER_BYTES
        return self._counted(self.app(environ, start_response), slot)

    def _counted(self, body: Any, slot: int) -> Iterator[bytes]:
        try:
            for chunk in body:
                with self.counts.get_lock():
                    self.counts[slot] += len(chunk)
                yield chunk
        finally:
            close = getattr(body, "close", None)
            if close is not None:
                close()


def _serve(ready: Any, latency: Any, counts: Any) -> None:
    """The server process: moto's ``ThreadedMotoServer`` (its own werkzeug server, threaded)
    with :class:`_Middleware` around its app, on a free port of 127.0.0.1, until killed."""
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from moto.server import ThreadedMotoServer
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request on stderr

    class Server(ThreadedMotoServer):
        def _server_entry(self) -> None:  # ThreadedMotoServer's own, with the middleware
            app = _Middleware(DomainDispatcherApplication(create_backend_app), latency, counts)
            self._server = make_server(
                self._ip_address, self._port, app, True, request_handler=MotoRequestHandler
            )
            self._server_ready_event.set()
            self._server.serve_forever()

    server = Server(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    ready.send(server.get_host_and_port()[1])
    ready.close()
    while True:
        time.sleep(3600)


class S3Server:
    """The moto server in a child process, its latency switch and its counters."""

    def __init__(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.latency = ctx.Value("d", 0.0)
        self.counts = ctx.Array("q", 3)
        here, there = ctx.Pipe(duplex=False)
        self.process = ctx.Process(target=_serve, args=(there, self.latency, self.counts), daemon=True)
        self.process.start()
        there.close()
        if not here.poll(60):
            raise RuntimeError("the moto server did not start within 60 s")
        self.port = here.recv()
        self.options = {
            "key": "testing",  # moto accepts any credentials
            "secret": "testing",
            "client_kwargs": {"endpoint_url": f"http://127.0.0.1:{self.port}", "region_name": "us-east-1"},
        }

    def snapshot(self) -> list[int]:
        with self.counts.get_lock():
            return list(self.counts)

    def close(self) -> None:
        self.process.terminate()
        self.process.join(10)


# -- the dataset -----------------------------------------------------------------------------


def make_dataset(tmp: str, shards: int, shard_bytes: int) -> tuple[list[str], int]:
    """Write ``shards`` TFRecord files of exactly ``shard_bytes`` bytes each (records of
    about :data:`RECORD` bytes of random data) and their index files; returns the shard
    paths and the number of records."""
    from dataflow import TFRecordSerializer

    per = max(1, round(shard_bytes / RECORD))
    sizes = [(shard_bytes - 16 * per) // per] * per
    sizes[-1] += shard_bytes - 16 * per - sum(sizes)
    if min(sizes) < 0:
        raise SystemExit(f"--shard-mb is too small for a record: {shard_bytes} bytes")
    pool = np.random.default_rng(0).bytes(max(sizes) + 8 * MB)
    paths = []
    for s in range(shards):
        path = os.path.join(tmp, f"train-{s:05d}.tfrecord")
        with open(path, "wb") as f:
            for i, size in enumerate(sizes):
                start = (s * 7919 + i * 104_729) % (len(pool) - size + 1)
                f.write(TFRecordSerializer.frame(pool[start : start + size]))
        TFRecordSerializer.write_index(path)
        paths.append(path)
    return paths, shards * per


def upload(server: S3Server, paths: list[str]) -> None:
    import s3fs

    fs = s3fs.S3FileSystem(**server.options)
    fs.call_s3("create_bucket", Bucket=BUCKET)
    files = [p for path in paths for p in (path, path + ".index")]
    fs.put(files, [f"{BUCKET}/{os.path.basename(p)}" for p in files])


# -- contenders ------------------------------------------------------------------------------


@dataclass
class Epoch:
    """What one run measured."""

    seconds: float
    first: float  # seconds to the first datapoint (or object)
    nbytes: int  # payload bytes read (records, or objects)
    requests: int | None  # counted by the client
    server: list[int]  # the server's counters during the run


@dataclass
class Contender:
    name: str
    run: Callable[[], Epoch]
    epochs: list[Epoch] = field(default_factory=list)


def _count_server(
    server: S3Server, latency: float, body: Callable[[], tuple[float, int, int | None]]
) -> Epoch:
    _clear_listings(server)
    server.latency.value = latency
    before = server.snapshot()
    t0 = time.perf_counter()
    try:
        first, nbytes, requests = body()
    finally:
        seconds = time.perf_counter() - t0
        server.latency.value = 0.0
    after = server.snapshot()
    return Epoch(seconds, first - t0, nbytes, requests, [a - b for a, b in zip(after, before)])


def _clear_listings(server: S3Server) -> None:
    """Forget the bucket listing that s3fs keeps in its (per-process, shared) filesystem."""
    import s3fs

    s3fs.S3FileSystem(**server.options).invalidate_cache()


def dataflow_epoch(
    server: S3Server, pattern: str, latency: float = 0.0, **kwargs: Any
) -> Callable[[], Epoch]:
    from dataflow import TFRecordData

    remote = "://" in pattern

    def body() -> tuple[float, int, int | None]:
        options = {"storage_options": server.options} if remote else {}
        df = TFRecordData(pattern, decode="raw", **options, **kwargs)
        df.reset_state()
        it = iter(df)
        nbytes = len(next(it))
        first = time.perf_counter()
        for record in it:
            nbytes += len(record)
        return first, nbytes, df.io_stats()["requests"] if remote else None

    return lambda: _count_server(server, latency, body)


def s3fs_epoch(server: S3Server, pattern: str, latency: float = 0.0) -> Callable[[], Epoch]:
    import s3fs

    def body() -> tuple[float, int, int | None]:
        fs = s3fs.S3FileSystem(**server.options)
        keys = sorted(fs.glob(pattern))
        nbytes, first = 0, 0.0
        for key in keys:
            nbytes += len(fs.cat_file(key))
            first = first or time.perf_counter()
        return first, nbytes, 1 + 2 * len(keys)  # listing, then HEAD + GET per object

    return lambda: _count_server(server, latency, body)


def _rank(args: tuple[str, dict, int, bool]) -> tuple[int, int, dict[str, int], float]:
    """One rank (process) of the 2-process check: its records, their bytes, its
    ``io_stats()`` and the seconds from building its flow to its first datapoint."""
    pattern, options, rank, equal = args
    import s3fs  # noqa: F401  (imported before the clock, as in the parent process)

    from dataflow import TFRecordData

    t0 = time.perf_counter()
    df = TFRecordData(pattern, decode="raw", storage_options=options)
    flow = df.shard(2, rank, equal=equal)
    flow.reset_state()
    n = nbytes = 0
    first = 0.0
    for record in flow:
        first = first or time.perf_counter()
        n += 1
        nbytes += len(record)
    return n, nbytes, df.io_stats(), first - t0


def two_ranks(server: S3Server, pattern: str, equal: bool) -> tuple[Contender, int]:
    """Two spawned processes each reading ``.shard(2, r, equal=equal)`` for one epoch: the
    summed epoch (its first datapoint: the slower rank's) and the number of records read."""
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        pool.map(abs, [0, 0])  # the processes start before the clock
        _clear_listings(server)
        before = server.snapshot()
        t0 = time.perf_counter()
        parts = pool.map(_rank, [(pattern, server.options, r, equal) for r in (0, 1)])
        seconds = time.perf_counter() - t0
    after = server.snapshot()
    requests = sum(p[2]["requests"] for p in parts)
    server_counts = [a - b for a, b in zip(after, before)]
    epoch = Epoch(seconds, max(p[3] for p in parts), sum(p[1] for p in parts), requests, server_counts)
    name = f"{OURS}, 2 processes .shard(2, r, equal={equal})"
    return Contender(name, lambda: epoch, [epoch]), sum(p[0] for p in parts)


# -- report ----------------------------------------------------------------------------------


def _seconds_table(contenders: list[Contender]) -> str:
    """Medians of the time to the first datapoint; the ratio is the s3fs loop's time over
    the contender's (above 1.00x: sooner than the peer)."""
    peer = next((c for c in contenders if c.name == S3FS), None)
    theirs = statistics.median(e.first for e in peer.epochs) if peer else None
    vs = f" vs {S3FS} |" if peer else ""
    rows = [f"| contender | median s | min–max s |{vs}", "|---|---|---|" + ("---|" if peer else "")]
    for c in contenders:
        firsts = [e.first for e in c.epochs]
        mine = statistics.median(firsts)
        ratio = f" {theirs / mine:.2f}x |" if theirs is not None else ""
        rows.append(f"| {c.name} | {mine:.3f} | {min(firsts):.3f}–{max(firsts):.3f} |{ratio}")
    return "\n".join(rows)


def _requests_row(name: str, e: Epoch, dataset: int) -> str:
    client = "" if e.requests is None else f"{e.requests:,}"
    fetched = f"{e.server[SHARD_BYTES] / dataset:.3f}x"
    return f"| {name} | {client} | {e.server[REQUESTS]:,} | {fetched} | {e.server[OTHER_BYTES]:,} |"


def contenders_for(
    only: set[str], server: S3Server, remote: str, local: str, latency: float
) -> list[Contender]:
    out = []
    if "s3" in only:
        out.append(Contender(OURS, dataflow_epoch(server, remote)))
    if "latency" in only:
        out.append(Contender(f"{OURS}, +latency", dataflow_epoch(server, remote, latency)))
        out.append(
            Contender(
                f"{OURS}, +latency, prefetch_shards=8",
                dataflow_epoch(server, remote, latency, prefetch_shards=8),
            )
        )
    if "s3fs" in only:
        out.append(Contender(S3FS, s3fs_epoch(server, remote)))
        if "latency" in only:
            out.append(Contender(f"{S3FS}, +latency", s3fs_epoch(server, remote, latency)))
    if "local" in only:
        out.append(Contender(LOCAL, dataflow_epoch(server, local)))
    return out


def report(
    contenders: list[Contender], ranks: list[tuple[Contender, int]], records: int, dataset: int
) -> None:
    if contenders:
        results = [Result(c.name, [e.nbytes / MB / e.seconds for e in c.epochs]) for c in contenders]
        names = [c.name for c in contenders]
        reference = [n for n in (S3FS, OURS, LOCAL) if n in names]
        print("### one epoch (from building the flow to its last record)\n")
        print(markdown_table(results, reference, unit="MB/s") + "\n")
    if contenders or ranks:
        print(
            "### first datapoint (from building the flow; s3fs: listing + first object; "
            "2 processes: the slower)\n"
        )
        print(_seconds_table(contenders + [c for c, _ in ranks]) + "\n")
    print("### requests and bytes per epoch (the last round)\n")
    print(
        "| contender | requests (client) | requests (server) | shard bytes served / dataset "
        "| listing + index bytes served |\n|---|---|---|---|---|"
    )
    for c in contenders:
        print(_requests_row(c.name, c.epochs[-1], dataset))
    for c, n in ranks:
        print(_requests_row(f"{c.name}, {n:,}/{records:,} records", c.epochs[-1], dataset))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shards", type=int, default=16 if QUICK else 256)
    p.add_argument(
        "--shard-mb", type=float, default=0.25 if QUICK else 4.0, help="MB (2**20 bytes) per shard"
    )
    p.add_argument("--rounds", type=int, default=1 if QUICK else 3)
    p.add_argument("--latency", type=float, default=50.0, help="ms added to every request (+latency rows)")
    p.add_argument("--only", default=",".join(GROUPS), help=f"comma-separated, of: {', '.join(GROUPS)}")
    args = p.parse_args()
    only = {g.strip() for g in args.only.split(",") if g.strip()}
    if only - set(GROUPS):
        p.error(f"--only: unknown {sorted(only - set(GROUPS))}; choose from {', '.join(GROUPS)}")
    missing = [m for m in ("moto", "s3fs", "werkzeug") if importlib.util.find_spec(m) is None]
    if missing:
        note(f"object_store: {', '.join(missing)} not installed (pip install 'moto[server]' s3fs); skipping")
        return
    hf = "" if importlib.util.find_spec("datasets") else " (and is not installed)"
    note(f"Hugging Face datasets streaming: skipping: it has no TFRecord reader{hf}")
    shard_bytes = int(args.shard_mb * MB)
    dataset = args.shards * shard_bytes
    load = os.getloadavg()[0]

    tmp = tempfile.mkdtemp(prefix="dataflow-object-store-")
    server = S3Server()
    try:
        t0 = time.perf_counter()
        paths, records = make_dataset(tmp, args.shards, shard_bytes)
        t1 = time.perf_counter()
        upload(server, paths)
        note(
            f"generated {dataset / MB:,.0f} MB in {t1 - t0:.1f} s, "
            f"uploaded in {time.perf_counter() - t1:.1f} s"
        )
        remote = f"s3://{BUCKET}/train-*.tfrecord"
        contenders = contenders_for(
            only, server, remote, os.path.join(tmp, "train-*.tfrecord"), args.latency / 1000
        )
        s3fs_epoch(server, remote)()  # warm-up: connections, imports, the page cache of the files
        for _ in range(args.rounds):
            for c in contenders:
                c.epochs.append(c.run())
        ranks = [two_ranks(server, remote, equal) for equal in (True, False)] if "ranks" in only else []
    finally:
        server.close()
        shutil.rmtree(tmp, ignore_errors=True)

    print(
        f"object_store: {args.shards} shards x {args.shard_mb:g} MB = {dataset / MB:,.0f} MB of TFRecord "
        f"({records:,} records of ~{dataset // records // 1000} KB) in a moto S3 server on 127.0.0.1 "
        f"(another process); +latency: {args.latency:g} ms per request; {args.rounds} rounds, medians; "
        f"{machine_line()}; "
        f"load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end\n"
    )
    report(contenders, ranks, records, dataset)


if __name__ == "__main__":
    main()
