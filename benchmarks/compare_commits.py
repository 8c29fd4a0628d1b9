"""Our contenders of one scenario under several checkouts: did a change make anything slower?

    python benchmarks/compare_commits.py SCENARIO CHECKOUT[:ROUNDS]... [--rounds 5]
        [--max-load 1.5] [--max-foreign 99] -- SCRIPT ARGS

``SCENARIO`` is a name of ``python -m benchmarks list`` (it names the script and which rows
are ours); each ``CHECKOUT`` is a directory holding the repository at some commit (e.g. a
``git worktree add --detach DIR COMMIT``). Rounds interleave the checkouts (A B C A B C ...);
each round runs that checkout's copy of the script in a fresh interpreter, with the
checkout as working directory and ``PYTHONPATH``, so it imports that checkout's ``dataflow``
and harness. ``SCRIPT ARGS`` should ask for one round (``--rounds 1``) and, where the script
can, for our contenders only. A checkout's ``:ROUNDS`` overrides ``--rounds`` for it; a
checkout without the script is left out, with a note.

Before the first round it waits (up to 10 min) until the 1-minute load average is under
``--max-load``. Every checkout's harness measures under whatever load there is (its
``run_timed_rounds`` redoes a run only if other processes used more than ``--max-foreign``
cores, 99 by default: never), so all of them, older harnesses included, keep the same runs.
Prints, per row of ours, the median (and min-max) per checkout and its ratio to the first
checkout's median; the ratio is of the printed metric (for a time, above 1.00x is slower).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._all import SCENARIOS, Scenario  # noqa: E402
from benchmarks._report import _metric, _number, parse_tables  # noqa: E402

# Run in each subprocess: the checkout's harness keeps every run (see the module docstring).
BOOT = """import runpy, sys
from benchmarks import _harness as h
run, limit = h.run_timed_rounds, float(sys.argv.pop(1))
h.run_timed_rounds = lambda *a, **k: run(*a, **{**k, "max_foreign": limit})
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""
FOREIGN = re.compile(r"other processes used (\d+\.\d+) cores")


def wait_load(max_load: float, poll: float = 20.0, give_up: float = 600.0) -> str:
    t0 = time.monotonic()
    while os.getloadavg()[0] >= max_load and time.monotonic() - t0 < give_up:
        time.sleep(poll)
    load = os.getloadavg()[0]
    waited = time.monotonic() - t0
    gave_up = " (gave up waiting)" if load >= max_load else ""
    return f"load average {load:.2f} at the start after {waited:.0f} s of waiting{gave_up}"


def one_round(s: Scenario, checkout: str, args: list[str], max_foreign: float) -> tuple[dict, list[float]]:
    """Run the script once under ``checkout``: :func:`our_rows` of its output, and the
    foreign cores it reported."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENBLAS_")}
    env.update(PYTHONPATH=checkout, TQDM_DISABLE="1", PYTHONWARNINGS="ignore")
    cmd = [sys.executable, "-c", BOOT, str(max_foreign), os.path.join("benchmarks", s.script), *args]
    done = subprocess.run(cmd, cwd=checkout, env=env, capture_output=True, text=True, timeout=10 * s.timeout)
    if done.returncode:
        tail = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
        print(f"  {checkout}: exit code {done.returncode}: {tail[:300]}", file=sys.stderr)
    return our_rows(s, done.stdout), [float(x) for x in FOREIGN.findall(done.stdout)]


def our_rows(s: Scenario, stdout: str) -> dict:
    """``{(section, row): (value, lower_is_better)}``: the median of each of our rows, and
    the ratio the script printed of it against each reference that is not ours (a peer, the
    serial map...; ``row`` is then ``"ours / reference"``): measured in the same subprocess,
    that ratio is less disturbed by the machine's load than the median alone."""
    values: dict = {}
    for t in parse_tables(stdout):
        metric = _metric(t.header)
        for r in t.rows:
            label = s.section(t.section)
            if not metric or not s.ours(r[0]) or (label, r[0]) in values or len(r) <= metric[0]:
                continue
            values[(label, r[0])] = (_number(r[metric[0]]), metric[1])
            for h, cell in zip(t.header, r):
                if h.startswith("vs ") and not s.ours(h[3:]) and cell.endswith("x"):
                    values[(label, f"{r[0]} / {h[3:]}")] = (_number(cell), False)
    return values


def _fmt(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", choices=[s.name for s in SCENARIOS])
    parser.add_argument("checkouts", nargs="+", help="directories, each with an optional :ROUNDS")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--max-load", type=float, default=1.5)
    parser.add_argument("--max-foreign", type=float, default=99.0)
    argv = sys.argv[1:]
    script_args = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    s = next(x for x in SCENARIOS if x.name == args.scenario)
    plan = {}
    for spec in args.checkouts:
        path, _, n = spec.partition(":")
        path = os.path.abspath(path)
        if not os.path.exists(os.path.join(path, "benchmarks", s.script)):
            print(f"{path}: no benchmarks/{s.script}, left out", file=sys.stderr)
            continue
        commit = subprocess.run(["git", "-C", path, "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
        plan[path] = (commit or os.path.basename(path), int(n) if n else args.rounds)
    print(f"{s.name}: {wait_load(args.max_load)}", file=sys.stderr, flush=True)
    t0 = time.monotonic()
    got: dict = defaultdict(lambda: defaultdict(list))
    lower: dict = {}
    foreign: dict = defaultdict(list)
    for i in range(max(n for _, n in plan.values())):
        for path, (commit, n) in plan.items():
            if i < n:
                values, cores = one_round(s, path, script_args, args.max_foreign)
                shown = " ".join(f"{v:.4g}" for v, _ in values.values() if v is not None)
                print(f"  round {i + 1} {commit}: {shown}", file=sys.stderr, flush=True)
                foreign[commit] += cores
                for key, (v, low) in values.items():
                    if v is not None:
                        got[key][commit].append(v)
                        lower[key] = low
    commits = [c for c, _ in plan.values()]
    load = os.getloadavg()[0]
    others = ", ".join(f"{c} {statistics.median(foreign[c]):.2f}" for c in commits if foreign[c])
    print(f"{s.name}: `{s.script} {' '.join(script_args)}`, medians of the rounds, ratio to "
          f"{commits[0]}; {time.monotonic() - t0:.0f} s, load average {load:.2f} at the end"
          + (f"; others' cores (median per checkout): {others}" if others else "") + "\n")
    print("| row | metric | " + " | ".join(f"{c} | vs {commits[0]}" for c in commits) + " |")
    print("|" + "---|" * (2 + 2 * len(commits)))
    for (section, name), per in got.items():
        ref = statistics.median(per[commits[0]]) if per.get(commits[0]) else None
        cells = []
        for c in commits:
            vals = per.get(c, [])
            med = statistics.median(vals) if vals else None
            cells.append(f"{_fmt(med)} ({_fmt(min(vals))}–{_fmt(max(vals))}, n={len(vals)})" if vals else "")
            cells.append(f"{med / ref:.2f}x" if med and ref else "")
        unit = "s (lower is better)" if lower[(section, name)] else "ratio" if " / " in name else "rate"
        print(f"| {f'{section}: ' if section else ''}{name} | {unit} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
