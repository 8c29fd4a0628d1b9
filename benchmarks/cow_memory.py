"""Copy-on-read: the workers' private memory over a pass over a large list of file names.

The scenario of issue 28 item 1: ``--items`` (2M) ``str`` file names in a shuffled list, a
trivial map (``name -> [name]``), batches of 64, 2 forked workers. Contenders, each round in
a fresh process of its own (rounds interleaved), every library imported in each:

- ``dataflow map_and_batch``: ``MultiProcessMapAndBatchDataZMQ(DataFromList(names,
  shuffle=True), 2, f, 64, strict=True)``: the consumer reads the list and sends the names;
- ``torch DataLoader``: ``DataLoader(ds, batch_size=64, shuffle=True, num_workers=2)`` over a
  map-style dataset whose ``__getitem__`` returns ``f(names[i])``: the workers read the list.

Measured per worker process (psutil's ``memory_full_info()``): its unique memory (USS) when
it is first seen (right after the first batch, or as soon as a worker started later appears)
and at the end of the pass (before its last batch, after which torch stops its workers), for
**every worker alive at the end**, including those started after the first batch; growth is
the difference. A worker that another worker forks shares that worker's pages, so the USS of
the forking one can shrink. PSS at the end (pages shared by k processes count 1/k) is shown
beside it: the pages that the consumer copied for itself (reference counts) and that both
workers still share are in neither worker's USS, but in their PSS. Time to first batch is
timed from building the pipeline to holding its first batch.

    python benchmarks/cow_memory.py [--items 2000000] [--rounds 3] [--no-torch]

Target (issue 28): growth of every worker's USS at most 2 MB over the pass; time to first
batch at most half of torch's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._harness import QUICK, machine_line, note  # noqa: E402

OURS = "dataflow map_and_batch"
TORCH = "torch DataLoader"
BATCH = 64
NUM_PROC = 2
MB = 2**20


def make_names(n: int) -> list[str]:
    return [f"/data/train/class_{i % 1000:04d}/image_{i:08d}.JPEG" for i in range(n)]


def trivial(name: str) -> list[str]:
    return [name]


class _Names:
    """torch's map-style dataset over the list (defined at module level: picklable)."""

    def __init__(self, names: list[str]) -> None:
        self.names = names

    def __len__(self) -> int:
        return len(self.names)

    def __getitem__(self, i: int) -> list[str]:
        return trivial(self.names[i])


def _memory(pid: int) -> tuple[float, float] | None:
    import psutil

    try:
        m = psutil.Process(pid).memory_full_info()
    except psutil.Error:
        return None
    return m.uss / MB, m.pss / MB


def _workers() -> set[int]:
    """Every process below this one (a worker started by another worker included)."""
    import psutil

    return {p.pid for p in psutil.Process().children(recursive=True)}


def run_child(contender: str, items: int) -> dict[str, Any]:
    """One pass in this process; returns the measurements."""
    import torch.utils.data as tud

    from dataflow import DataFromList, MultiProcessMapAndBatchDataZMQ

    names = make_names(items)
    before = _workers()
    t0 = time.perf_counter()
    if contender == OURS:
        src = DataFromList(names, shuffle=True, seed=1)
        df = MultiProcessMapAndBatchDataZMQ(src, NUM_PROC, trivial, BATCH, strict=True)
        df.reset_state()
        it = iter(df)
        close, total = df.close, len(df)
    else:
        loader = tud.DataLoader(_Names(names), batch_size=BATCH, shuffle=True, num_workers=NUM_PROC)
        it = iter(loader)
        close, total = it._shutdown_workers, len(loader)  # type: ignore[attr-defined]
    next(it)
    ttfb = time.perf_counter() - t0
    first: dict[int, tuple[float, float]] = {}
    batches = 1
    while batches < total - 1:  # the last batch after measuring: torch stops its workers then
        next(it)
        batches += 1
        if len(first) < NUM_PROC:  # sample each worker as soon as it appears
            for pid in _workers() - before - set(first):
                m = _memory(pid)
                if m is not None:
                    first[pid] = m
    time.sleep(0.2)  # a worker's last writes land
    end = {pid: _memory(pid) for pid in _workers() - before}
    workers = [
        {"pid": pid, "uss0": first[pid][0], "uss1": m[0],
         "pss0": first[pid][1], "pss1": m[1]}
        for pid, m in end.items() if m is not None and pid in first
    ]
    batches += sum(1 for _ in it)
    close()
    return {"ttfb": ttfb, "batches": batches, "workers": workers, "unseen": len(end) - len(workers)}


def _row(name: str, runs: list[dict[str, Any]], ref_ttfb: float | None) -> tuple[str, str]:
    med = statistics.median

    def growth(run: dict[str, Any], key: str) -> float:
        return sum(w[key + "1"] - w[key + "0"] for w in run["workers"])

    ttfb = [r["ttfb"] for r in runs]
    n = med(len(r["workers"]) for r in runs)
    uss = med(growth(r, "uss") for r in runs)
    most = med(max((w["uss1"] - w["uss0"] for w in r["workers"]), default=0.0) for r in runs)
    pss = med(sum(w["pss1"] for w in r["workers"]) for r in runs)
    end = med(sum(w["uss1"] for w in r["workers"]) for r in runs)
    ratio = f"{ref_ttfb / med(ttfb):.2f}x" if ref_ttfb else "—"
    memory = f"| {name} | {n:.0f} | {uss:.1f} | {most:.1f} | {end:.1f} | {pss:.1f} |"
    times = f"| {name} | {med(ttfb):.3f} | {min(ttfb):.3f}–{max(ttfb):.3f} | {ratio} |"
    return memory, times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=20_000 if QUICK else 2_000_000)
    parser.add_argument("--rounds", type=int, default=1 if QUICK else 3)
    parser.add_argument("--no-torch", action="store_true", help="only dataflow")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_child(args.child, args.items)))
        return
    contenders = [OURS]
    if not args.no_torch:
        try:
            import torch  # noqa: F401
        except ImportError:
            note(f"torch not installed (pip install torch): skipping {TORCH}")
        else:
            contenders.append(TORCH)
    runs: dict[str, list[dict[str, Any]]] = {c: [] for c in contenders}
    for _ in range(args.rounds):
        for c in contenders:  # interleaved, each in a fresh process
            cmd = [sys.executable, os.path.abspath(__file__), "--child", c, "--items", str(args.items)]
            done = subprocess.run(cmd, capture_output=True, text=True, check=True)
            runs[c].append(json.loads(done.stdout.strip().splitlines()[-1]))
    ref = statistics.median(r["ttfb"] for r in runs[TORCH]) if TORCH in runs else None
    rows = [_row(c, runs[c], ref) for c in contenders]
    print(
        f"cow_memory: {args.items:,} str file names, shuffled, trivial map, batches of {BATCH}, "
        f"{NUM_PROC} forked workers; one pass per round in a fresh process, {args.rounds} round(s), "
        f"medians; {machine_line()}\n"
    )
    print("### workers' memory over the pass (MB; every worker alive at the end)\n")
    print("| contender | workers | USS growth, all | USS growth, most of one | USS at end, all "
          "| PSS at end, all |")
    print("|---|---|---|---|---|---|")
    for memory, _ in rows:
        print(memory)
    print("\n### time to first batch\n")
    print(f"| contender | median s | min–max s | vs {TORCH} |")
    print("|---|---|---|---|")
    for _, times in rows:
        print(times)
    print("\nTargets (issue 28): USS growth of the workers at most 2 MB; first batch at most half of "
          "torch's.")


if __name__ == "__main__":
    main()
