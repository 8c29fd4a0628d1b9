"""The Ray backend on one machine: RayMapData / RayRunner beside our ZMQ processes and Ray Data.

Four scenarios (``--scenario``): ``map`` (below), ``small`` (below), ``batch``
(``mp_batch``'s work: small datapoints batched by 64 in 2 workers, vs our processes and Ray
Data's ``map_batches``) and ``large`` (``mp_large``'s work: 9.6 MB arrays from 2 workers, vs
memcpy); ``batch`` and ``large`` are described in ``benchmarks/_ray_transport.py``.

``map``: the ``mp_map`` work (a ~4 ms pure-Python function, calibrated here, over 600 datapoints, 2
workers), in one run:

- ``serial map``: a plain loop in this process (the reference);
- ``dataflow processes``: ``parallel_map(f, num_proc=2)`` (``MultiProcessMapDataZMQ``,
  ordered, strict);
- ``dataflow on Ray``: ``parallel_map(f, num_proc=2, backend="ray")`` (``RayMapData``,
  ordered, strict, chunks of ``--chunk`` datapoints per actor call);
- ``Ray Data map``: ``ray.data.from_items(rows).map(f, concurrency=2)``, rows iterated;
- ``Ray Data map_batches``: the same with ``map_batches(batch_size=--chunk)``.

``small``: a trivial map (a new list with the same items) over ``--small-items`` (100k)
small datapoints ``[i, float32[10]]``, 2 workers, every contender with its defaults:

- ``dataflow processes``: ``parallel_map(f, num_proc=2)`` (ordered, strict);
- ``dataflow on Ray``: ``RayMapData(ds, 2, f, strict=True)`` (ordered; ``chunk`` and
  ``buffer_size`` "auto");
- ``dataflow on Ray, chunk 16, buffer 200``: the same with the former defaults;
- ``dataflow on Ray, parallel_map``: ``parallel_map(f, num_proc=2, backend="ray")`` (its
  ``buffer_size=200`` bounds the automatic chunk to 50);
- ``Ray Data map``: ``ray.data.from_items(rows).map(g)`` with Ray Data's defaults, rows
  ``{"i": int, "x": float32[10]}`` iterated with ``iter_rows()``.

Each round builds the pipeline, runs an untimed pass (actors and workers up), then times a
second pass. A local Ray with ``--cpus`` CPUs is started once (Ray's start-up is not timed).

    pip install "dataflow-ml[ray]"
    python benchmarks/ray_scale.py [--items 600] [--ms 4] [--rounds 5] [--chunk 8]
    python benchmarks/ray_scale.py --scenario small [--small-items 100000] [--rounds 3]
    python benchmarks/ray_scale.py --scenario batch [--seconds 2] [--warmup 1] [--batch-chunk 1024 64 ...]
    python benchmarks/ray_scale.py --scenario large [--seconds 3] [--warmup 1] [--chunk-mb 32 ...]

Targets (issue 14): the Ray backend >= 0.8x our ZMQ processes and >= 1.5x Ray Data on small
items; large arrays >= 0.5x memcpy. Issue 28: ``small`` with the defaults >= 1.5x Ray Data
``map``.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import statistics
import sys
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._harness import (  # noqa: E402
    Result,
    TimedContender,
    machine_line,
    markdown_table,
)
from benchmarks.mp_map import _passes, calibrate, make_data, ours, serial, work  # noqa: E402

NUM_PROC = 2
SERIAL = "serial map"
OURS = "dataflow processes"
RAY = "dataflow on Ray"


def flow_contender(name: str, data: list, build: Callable[[Any], Any]) -> TimedContender:
    """``build(DataFromList(data))`` timed over passes (see :func:`_passes`), closed after."""
    from dataflow import DataFromList

    def make() -> Any:
        df = build(DataFromList(data, shuffle=False))
        df.reset_state()
        return df

    def run() -> tuple[int, float]:
        n, seconds, df = _passes(make, False, len(data))
        df.close()
        return n, seconds

    return TimedContender(name, run)


def on_ray(data: list, f: Callable, chunk: int) -> TimedContender:
    return flow_contender(
        RAY, data, lambda src: src.parallel_map(f, num_proc=NUM_PROC, backend="ray", chunk=chunk)
    )


def _row_work(f: Callable, row: dict) -> dict:
    out = f([row["i"], row["x"]])
    return {"i": out[0], "x": out[1]}


def _batch_work(f: Callable, batch: dict) -> dict:
    import numpy as np

    outs = [f([i, x]) for i, x in zip(batch["i"], batch["x"])]
    return {"i": np.array([o[0] for o in outs]), "x": np.stack([np.asarray(o[1]) for o in outs])}


def ray_data(data: list, f: Callable, batches: int | None) -> TimedContender:
    import ray

    rows = [{"i": dp[0], "x": dp[1]} for dp in data]

    def make() -> Any:
        ds = ray.data.from_items(rows)
        pool = ray.data.TaskPoolStrategy(size=NUM_PROC)
        if batches is None:
            return ds.map(functools.partial(_row_work, f), compute=pool)
        return ds.map_batches(functools.partial(_batch_work, f), batch_size=batches, compute=pool)

    def run() -> tuple[int, float]:
        import time

        ds = make()
        sum(1 for _ in ds.iter_rows())  # untimed: Ray Data's workers up
        t0 = time.perf_counter()
        n = sum(1 for _ in ds.iter_rows())
        return n, time.perf_counter() - t0

    return TimedContender("Ray Data map" if batches is None else "Ray Data map_batches", run)


# -- small ------------------------------------------------------------------------------------


def trivial(dp: list) -> list:
    """The ``small`` scenario's map: a new datapoint with the same items."""
    return [dp[0], dp[1]]


def _trivial_row(row: dict) -> dict:
    return {"i": row["i"], "x": row["x"]}


def small_data(n: int) -> list:
    import numpy as np

    rng = np.random.default_rng(0)
    pool = [rng.random(10, dtype=np.float32) for _ in range(1024)]
    return [[i, pool[i % 1024]] for i in range(n)]


def small_contenders(data: list) -> list[TimedContender]:
    from dataflow.on_ray import RayMapData

    def flow(name: str, build: Callable[[Any], Any]) -> TimedContender:
        return flow_contender(name, data, build)

    return [
        flow(OURS, lambda src: src.parallel_map(trivial, num_proc=NUM_PROC)),
        flow(RAY, lambda src: RayMapData(src, NUM_PROC, trivial, strict=True)),
        flow(
            f"{RAY}, chunk 16, buffer 200",
            lambda src: RayMapData(src, NUM_PROC, trivial, 200, strict=True, chunk=16),
        ),
        flow(f"{RAY}, parallel_map", lambda src: src.parallel_map(trivial, num_proc=NUM_PROC, backend="ray")),
    ]


def ray_data_small(data: list) -> TimedContender:
    import ray

    rows = [{"i": dp[0], "x": dp[1]} for dp in data]

    def run() -> tuple[int, float]:
        import time

        ds = ray.data.from_items(rows).map(_trivial_row)  # Ray Data's defaults
        sum(1 for _ in ds.iter_rows())  # untimed: Ray Data's workers up
        t0 = time.perf_counter()
        n = sum(1 for _ in ds.iter_rows())
        return n, time.perf_counter() - t0

    return TimedContender("Ray Data map", run)


def small(args: argparse.Namespace) -> None:
    from benchmarks import _ray_transport as rt

    data = small_data(args.small_items)
    contenders = small_contenders(data)
    if not args.no_ray_data:
        contenders.append(ray_data_small(data))
    results = rt.run_timed(contenders, args.rounds)
    print(
        f"ray_scale small: ordered trivial map over {args.small_items} datapoints [int, float32[10]], "
        f"{NUM_PROC} workers (local Ray, {args.cpus} CPUs), each contender with its defaults; "
        f"second pass timed; {args.rounds} rounds interleaved, medians; {machine_line()}\n"
    )
    refs = [OURS] + ([] if args.no_ray_data else ["Ray Data map"])
    print(markdown_table(results, refs, unit="items/s"))
    print("\nTarget (issue 28): dataflow on Ray with its defaults >= 1.5x Ray Data map.")
    ray_module().shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", choices=["map", "small", "batch", "large"], default="map")
    parser.add_argument(
        "--chunk-mb", type=int, nargs="*", default=[], help="large: RayRunner rows with chunk_bytes (MiB)"
    )
    parser.add_argument("--small-items", type=int, default=100_000, help="small: datapoints per pass")
    parser.add_argument("--seconds", type=float, default=None, help="batch/large: timed part of a run")
    parser.add_argument("--warmup", type=float, default=1.0, help="batch/large: untimed receiving first")
    parser.add_argument(
        "--batch-chunk", type=int, nargs="+", default=[1024, 64], help="batch: batches per RayRunner pull"
    )
    parser.add_argument("--items", type=int, default=600)
    parser.add_argument("--ms", type=float, default=4.0, help="target cost of one call")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--chunk", type=int, default=8, help="datapoints per Ray call / batch")
    parser.add_argument("--cpus", type=int, default=NUM_PROC, help="CPUs of the local Ray")
    parser.add_argument("--no-ray-data", action="store_true", help="leave Ray Data out")
    parser.add_argument("--object-store-mb", type=int, default=None, help="Ray's object store size")
    args = parser.parse_args()
    import ray

    logging.getLogger("ray").setLevel(logging.WARNING)
    store = None if args.object_store_mb is None else args.object_store_mb << 20
    ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False, object_store_memory=store)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False
    if args.scenario == "batch":
        return transport_batch(args)
    if args.scenario == "large":
        return transport_large(args)
    if args.scenario == "small":
        return small(args)
    iters, measured = calibrate(args.ms)
    f = functools.partial(work, iters=iters)
    data = make_data(args.items)
    contenders = [serial(data, f, False), ours(data, f, False), on_ray(data, f, args.chunk)]
    contenders[1].name = OURS
    if not args.no_ray_data:
        contenders += [ray_data(data, f, None), ray_data(data, f, args.chunk)]
    # Ray keeps its own processes (raylet, workers) for the whole run, so the harness's
    # "children gone, machine quiet" checks cannot hold: plain interleaved rounds instead
    results = [Result(c.name) for c in contenders]
    for _ in range(args.rounds):
        for c, r in zip(contenders, results):
            n, seconds = c.run()
            r.rates.append(n / seconds)
    print(
        f"ray_scale: ordered parallel map of a {measured:.2f} ms pure-Python function over "
        f"{args.items} datapoints, {NUM_PROC} workers (local Ray, {args.cpus} CPUs), chunk "
        f"{args.chunk}; second pass timed; {args.rounds} rounds, medians; {machine_line()}\n"
    )
    print(markdown_table(results, [SERIAL, OURS], unit="items/s"))
    print("\nTargets: dataflow on Ray >= 0.8x dataflow processes, >= 1.5x Ray Data on small items.")
    ray.shutdown()


def transport_batch(args: argparse.Namespace) -> None:
    from benchmarks import _ray_transport as rt

    seconds = 2.0 if args.seconds is None else args.seconds
    contenders = rt.batch_contenders(args.warmup, seconds, args.batch_chunk, not args.no_ray_data)
    results = rt.run_timed(contenders, args.rounds)
    print(
        f"ray_scale batch: {NUM_PROC} workers, endless batches of {rt.BATCH} x [int, float32[10]] "
        f"made in the workers (local Ray, {args.cpus} CPUs; RayRunner chunk "
        f"{'/'.join(map(str, args.batch_chunk))} batches); items/s received over {seconds:g} s "
        f"after {args.warmup:g} s warm-up "
        f"(start-up excluded); {args.rounds} rounds, medians; {machine_line()}\n"
    )
    print(markdown_table(results, [rt.OURS], unit="items/s"))
    print("\nCPU per item (this process and all its descendants, Ray's included; medians):\n")
    for name, us in rt.CPU_US.items():
        print(f"- {name}: {statistics.median(us):.2f} µs/item")
    print("\nTargets: dataflow on Ray >= 0.8x dataflow processes, >= 1.5x Ray Data.")
    ray_module().shutdown()


def transport_large(args: argparse.Namespace) -> None:
    from benchmarks import _ray_transport as rt

    seconds = 3.0 if args.seconds is None else args.seconds
    contenders = rt.large_contenders(args.warmup, seconds, args.chunk_mb)
    rt.run_large(contenders, args.rounds)
    print(
        f"ray_scale large: {NUM_PROC} workers, each yielding (64, 224, 224, 3) uint8 arrays "
        f"(9.6 MB) forever (local Ray, {args.cpus} CPUs); GB/s received over "
        f"{seconds:g} s after {args.warmup:g} s warm-up (start-up excluded), one byte read per "
        f"datapoint; {args.rounds} rounds interleaved, medians; memcpy: median single-thread "
        f"np.copyto of the array per round; {machine_line()}\n"
    )
    print(rt.large_table(contenders))
    print("\nTarget: dataflow on Ray >= 0.5x memcpy.")
    ray_module().shutdown()


def ray_module() -> Any:
    import ray

    return ray


if __name__ == "__main__":
    main()
