"""A memory budget (``ram_budget=``): peak memory against the budget, throughput against the
same pipeline without one (issue 28 item 5).

The pipeline: ``MultiProcessMapDataZMQ(DataFromList(range(n)), num_proc="auto", f,
strict=True)`` with the class's default ``buffer_size`` (200), where ``f`` makes an
``--mb`` MB float64 array; the consumer reads each array (a strided sum) and then sleeps
``--step-ms`` to stand for a training step, so the workers run ahead and the buffer fills,
as it does in training when the loader is faster than the step. Contenders:

- ``dataflow, no budget``: as above;
- ``dataflow, ram_budget=B`` for each ``--budgets`` entry: the same with ``ram_budget=B``.

Every run is a fresh interpreter (a run's heap must not inflate the next one's), rounds are
interleaved, and medians are reported. Peak memory: this process's RSS plus every child
process's USS (its private pages), sampled every 50 ms by
:class:`dataflow.tools.MemorySampler` from just before ``reset_state()`` to the end of the
run: what ``ram_budget`` bounds. Throughput: datapoints per second over ``--items``
datapoints after ``--warmup`` (250: the unbudgeted buffer of 200 is full by then), in the
middle of a longer pass (the run stops before the end of the upstream, so no contender's
rate counts datapoints produced ahead of the timed window, or draining a full buffer).

Targets (issue 28 item 5): peak at most 1.10x the budget; throughput at least 0.90x the
unbudgeted run where the budget leaves room for the buffer the step needs.

    python benchmarks/memory_budget.py [--rounds 3] [--items 500] [--warmup 250] [--mb 4] [--step-ms 4]
        [--budgets 256MiB,160MiB]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._harness import machine_line  # noqa: E402

QUICK = os.environ.get("DATAFLOW_BENCH_QUICK") == "1"
NONE = "none"


def _one(args: argparse.Namespace) -> dict[str, float]:
    """One run, in this (fresh) process."""
    import numpy as np

    import dataflow as D
    from dataflow.tools import MemorySampler

    n = args.mb * 2**20 // 8

    def make(i: int) -> np.ndarray:
        a = np.empty(n)
        a.fill(float(i))
        return a

    budget = None if args.one == NONE else args.one
    df = D.MultiProcessMapDataZMQ(
        D.DataFromList(list(range(10**6)), shuffle=False), "auto", make, strict=True, ram_budget=budget
    )
    step = args.step_ms / 1000
    total = 0.0
    # 50 ms: a sample walks the page tables of every process (about 2.4 ms of CPU with 2
    # workers holding 4 MB arrays), which at 10 ms took a quarter of a core from the workers
    with MemorySampler(0.05) as sampler, df:
        df.reset_state()
        it = iter(df)
        t0 = time.perf_counter()
        for k, dp in enumerate(it):
            total += float(dp[:: 4096].sum())
            time.sleep(step)
            if k + 1 == args.warmup:
                t0 = time.perf_counter()
            elif k + 1 == args.warmup + args.items:
                break
        seconds = time.perf_counter() - t0
        del dp
        buffer = df.buffer_size
        close = getattr(it, "close", None)
        if close is not None:
            close()
    return {
        "rate": args.items / seconds, "peak": sampler.peak, "buffer": buffer,
        "workers": df._workers, "check": total,
    }


def _spawn(args: argparse.Namespace, budget: str) -> dict[str, float]:
    cmd = [
        sys.executable, os.path.abspath(__file__), "--one", budget, "--items", str(args.items),
        "--mb", str(args.mb), "--step-ms", str(args.step_ms), "--warmup", str(args.warmup),
    ]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _bytes(text: str) -> int:
    from dataflow.parallel._budget import parse_bytes

    return parse_bytes("memory_budget.py", "--budgets", text)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=1 if QUICK else 3)
    p.add_argument("--items", type=int, default=60 if QUICK else 500)
    p.add_argument("--warmup", type=int, default=10 if QUICK else 250)
    p.add_argument("--mb", type=int, default=4)
    p.add_argument("--step-ms", type=float, default=4.0)
    p.add_argument("--budgets", default="256MiB,160MiB")
    p.add_argument("--one", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one is not None:
        print(json.dumps(_one(args)))
        return
    names = [NONE, *args.budgets.split(",")]
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    for _ in range(args.rounds):
        for name in names:
            runs[name].append(_spawn(args, name))
    label = {n: "dataflow, no budget" if n == NONE else f"dataflow, ram_budget={n}" for n in names}
    base = statistics.median(r["rate"] for r in runs[NONE])
    print(
        f"### memory_budget: {args.items} datapoints of {args.mb} MB timed after {args.warmup}, "
        f"num_proc=\"auto\", a {args.step_ms:g} ms step per datapoint; {args.rounds} round(s), medians\n"
    )
    print(f"{machine_line()}; load average {os.getloadavg()[0]:.2f} at the end\n")
    print("| contender | median datapoints/s | min–max | vs no budget | workers | buffer_size at the end |")
    print("|---|---|---|---|---|---|")
    for name in names:
        rates = [r["rate"] for r in runs[name]]
        med = statistics.median(rates)
        last = runs[name][-1]
        print(
            f"| {label[name]} | {med:,.1f} | {min(rates):,.1f}–{max(rates):,.1f} | {med / base:.2f}x | "
            f"{int(last['workers'])} | {int(last['buffer'])} |"
        )
    print("\n| contender | peak memory, MiB (median) | max | budget, MiB | median peak / budget |")
    print("|---|---|---|---|---|")
    for name in names:
        peaks = [r["peak"] / 2**20 for r in runs[name]]
        if name == NONE:
            print(f"| {label[name]} | {statistics.median(peaks):,.0f} | {max(peaks):,.0f} | — | — |")
            continue
        budget = _bytes(name) / 2**20
        print(
            f"| {label[name]} | {statistics.median(peaks):,.0f} | {max(peaks):,.0f} | {budget:,.0f} | "
            f"{statistics.median(peaks) / budget:.2f}x |"
        )


if __name__ == "__main__":
    main()
