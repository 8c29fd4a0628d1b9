"""Checkpointing: what state tracking costs when never used, how long ``state_dict()`` takes,
how long resuming deep into an epoch takes; beside torchdata's ``StatefulDataLoader`` and Grain.

Scenarios, each several rounds, medians:

- ``overhead``: the ``inproc`` pipeline (map + batch(64) over 200k ``[int, float32[10]]``, as
  ``in_process.py``), the same with a 1,000-datapoint shuffle buffer, a strict ordered process
  map (2 workers) and a process runner batching in its 2 workers (as ``mp_batch.py``), run by
  this checkout and by the last commit before state tracking (``--baseline``, checked out
  into a temporary git worktree), each in its own subprocess, rounds interleaved. Target:
  under 3% slower (the parallel rows also include the parallel-layer redesign).
- ``latency``: ``state_dict()`` in the middle of an epoch of a pipeline whose shuffle buffer
  holds 10,000 datapoints ``[int, float32[10]]`` (the cost is encoding the buffer), in process
  and with 2 worker processes (a parallel map: its in-flight inputs are saved too). Peers:
  Grain's iterator ``get_state()`` over a global shuffle + map, torchdata's
  ``StatefulDataLoader.state_dict()`` (map-style dataset, shuffled, 2 workers). Target: under
  50 ms.
- ``resume``: from building the pipeline and loading a state at datapoint 10 million of a
  list of 10.5 million to holding the next datapoint; ours with and without shuffling, Grain
  (``set_state``), torchdata (``load_state_dict``; its map-style sampler fast-forwards).
  Target: under 1 s.

    pip install grain torchdata    # optional peers
    python benchmarks/checkpoint.py [--rounds 5] [--only overhead|latency|resume]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks._harness import machine_line, note  # noqa: E402

#: The last commit before state tracking existed: the overhead baseline.
BASELINE_REF = "014219e"

_OVERHEAD_HEAD = """
import sys, time, numpy as np
sys.path.insert(0, {root!r})
import dataflow as D
rng = np.random.default_rng(0)
def f(dp): return [dp[0] + 1, dp[1] * 2.0]
"""

#: Each scenario builds ``df`` (already reset) and ``count(df)`` (items in one measured pass).
_OVERHEAD_SCENARIOS = {
    "inproc (map + batch)": """
data = [[i, rng.random(10, dtype=np.float32)] for i in range(200_000)]
df = D.DataFromList(data, shuffle=False).map(f).batch(64)
def count(df): return sum(len(b[0]) for b in df)
""",
    "inproc + shuffle(1000)": """
data = [[i, rng.random(10, dtype=np.float32)] for i in range(200_000)]
df = D.DataFromList(data, shuffle=False).map(f).shuffle(1000, seed=2).batch(64)
def count(df): return sum(len(b[0]) for b in df)
""",
    "process map, 2 workers (strict, ordered), 50k small": """
data = [[i, rng.random(10, dtype=np.float32)] for i in range(50_000)]
df = D.MultiProcessMapDataZMQ(D.DataFromList(data, shuffle=False), 2, f, strict=True)
def count(df): return sum(1 for _ in df)
""",
    "process runner, 2 workers, batch(64) in workers": """
data = [[i, rng.random(10, dtype=np.float32)] for i in range(64 * 800)]
df = D.MultiProcessRunnerZMQ(D.DataFromList(data, shuffle=False).batch(64), 2)
def count(df): return sum(len(b[0]) for b in df)
""",
}

_OVERHEAD_TAIL = """
df.reset_state()
for _ in range(2): count(df)   # warm up (and start the workers)
best = []
for _ in range(3):
    t = time.perf_counter(); n = count(df); best.append(n / (time.perf_counter() - t))
print(max(best))
import os; os._exit(0)   # runners: skip the atexit teardown, it is not measured
"""


def _rate(root: str, scenario: str) -> float:
    code = _OVERHEAD_HEAD.format(root=root) + _OVERHEAD_SCENARIOS[scenario] + _OVERHEAD_TAIL
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    if out.returncode:
        raise RuntimeError(f"overhead scenario {scenario!r} failed under {root}:\n{out.stderr[-2000:]}")
    return float(out.stdout.strip().splitlines()[-1])


def overhead(rounds: int, baseline: str) -> list[str]:
    tmp = tempfile.mkdtemp(prefix="dataflow-baseline-")
    try:
        subprocess.run(["git", "-C", ROOT, "worktree", "add", "-q", "--detach", tmp, baseline], check=True)
    except (subprocess.CalledProcessError, FileNotFoundError):
        note(f"overhead: cannot check out the baseline {baseline!r} (not a git checkout?): skipped")
        return []
    rows = []
    try:
        for name in _OVERHEAD_SCENARIOS:
            new, old = [], []
            for _ in range(rounds):
                old.append(_rate(tmp, name))
                new.append(_rate(ROOT, name))
            m_new, m_old = statistics.median(new), statistics.median(old)
            rows.append(f"| {name} | {m_old:,.0f} | {m_new:,.0f} | {(1 - m_new / m_old) * 100:+.1f}% |")
    finally:
        subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", tmp], check=False)
    head = f"| pipeline | items/s before state tracking ({baseline}) | with it | overhead |\n"
    head += "|---|---|---|---|"
    return [head, *rows]


def _median_ms(fn: Callable[[], Any], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def _square(dp: list[Any]) -> list[Any]:
    return [dp[0], dp[1] * dp[1]]


def _items(n: int) -> list[list[Any]]:
    import numpy as np

    rng = np.random.default_rng(0)
    return [[i, rng.random(10, dtype=np.float32)] for i in range(n)]


def latency(rounds: int, steps: int = 20_000) -> list[str]:
    import dataflow as D

    data = _items(100_000)
    rows = []
    for label, build in _latency_pipelines(D, data).items():
        df = build()
        df.reset_state()
        it = iter(df)
        for _ in range(steps):
            next(it)
        rows.append(f"| dataflow: {label} | {_median_ms(df.state_dict, rounds):.2f} |")
        df.close()
    rows += _peer_latency(data, rounds, steps)
    return ["| pipeline | state_dict() median ms |\n|---|---|", *rows]


def _latency_pipelines(D: Any, data: list[Any]) -> dict[str, Callable[[], Any]]:
    def shuffled() -> Any:
        return D.DataFromList(data, shuffle=True, seed=1).shuffle(10_000, seed=2)

    return {
        "shuffle(10k buffer), in process": shuffled,
        "shuffle(10k buffer) + process map, 2 workers": lambda: D.MultiProcessMapDataZMQ(
            shuffled(), 2, _square, strict=True
        ),
        "shuffle(10k buffer) + thread map, 2 threads": lambda: D.MultiThreadMapData(
            shuffled(), 2, _square, strict=True
        ),
    }


def _peer_latency(data: list[Any], rounds: int, steps: int) -> list[str]:
    rows = []
    try:
        import grain

        ds = grain.MapDataset.source(data).shuffle(seed=1).map(_square).to_iter_dataset()
        it = iter(ds)
        for _ in range(steps):
            next(it)
        ms = _median_ms(it.get_state, rounds)
        rows.append(f"| Grain: global shuffle + map, iterator.get_state() | {ms:.3f} |")
    except ImportError:
        note("grain not installed: pip install grain to compare")
    try:
        import torch
        from torchdata.stateful_dataloader import StatefulDataLoader

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.manual_seed(0)
            loader = StatefulDataLoader(data, batch_size=None, shuffle=True, num_workers=2)
            it = iter(loader)
            for _ in range(steps):
                next(it)
            ms = _median_ms(loader.state_dict, rounds)
            del it
        rows.append(f"| torchdata StatefulDataLoader: shuffled, 2 workers | {ms:.3f} |")
    except ImportError:
        note("torchdata not installed: pip install torchdata to compare")
    return rows


def resume(rounds: int) -> list[str]:
    import dataflow as D

    n, k = 10_500_000, 10_000_000
    lst = list(range(n))
    rows = []
    for shuffle in (False, True):
        df = D.DataFromList(lst, shuffle=shuffle, seed=0)
        df.reset_state()
        it = iter(df)
        for _ in range(k):
            next(it)
        state = df.state_dict()

        def go(shuffle: bool = shuffle, state: dict = state) -> None:
            again = D.DataFromList(lst, shuffle=shuffle, seed=0)
            again.load_state_dict(state)
            again.reset_state()
            next(iter(again))

        label = "shuffled (draws the epoch's permutation again)" if shuffle else "in order"
        rows.append(f"| dataflow DataFromList, {label} | {_median_ms(go, rounds):.1f} |")
    rows += _peer_resume(lst, k, rounds)
    return ["| resume at datapoint 10,000,000 | median ms to the next datapoint |\n|---|---|", *rows]


def _peer_resume(lst: list[int], k: int, rounds: int) -> list[str]:
    rows = []
    try:
        import grain

        ds = grain.MapDataset.source(lst).to_iter_dataset()

        def grain_go() -> None:
            it = iter(ds)
            it.set_state({"next_index": k})
            next(it)

        rows.append(f"| Grain MapDataset iterator, set_state | {_median_ms(grain_go, rounds):.1f} |")
    except ImportError:
        note("grain not installed")
    try:
        from torchdata.stateful_dataloader import StatefulDataLoader

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loader = StatefulDataLoader(lst, batch_size=None, num_workers=0)
            it = iter(loader)
            next(it)
            state = loader.state_dict()
            state["_sampler_iter_yielded"] = state["_num_yielded"] = k  # as if it had run k steps

            def torch_go() -> None:
                again = StatefulDataLoader(lst, batch_size=None, num_workers=0)
                again.load_state_dict(state)
                next(iter(again))

            rows.append(f"| torchdata StatefulDataLoader, map-style | {_median_ms(torch_go, rounds):.1f} |")
    except ImportError:
        note("torchdata not installed")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline", default=BASELINE_REF, help="git ref before state tracking")
    parser.add_argument("--only", choices=["overhead", "latency", "resume"], default=None)
    parser.add_argument(
        "--steps", type=int, default=20_000, help="latency: datapoints read before state_dict()"
    )
    args = parser.parse_args()
    print(f"checkpoint: {args.rounds} rounds, medians; {machine_line()}\n")
    if args.only in (None, "overhead"):
        print("\n".join(overhead(args.rounds, args.baseline)), end="\n\n")
    if args.only in (None, "latency"):
        print("\n".join(latency(max(args.rounds, 5), args.steps)), end="\n\n")
    if args.only in (None, "resume"):
        print("\n".join(resume(args.rounds)), end="\n\n")


if __name__ == "__main__":
    main()
