"""Every benchmark scenario in one run: ``python -m benchmarks all [--quick]``.

Each scenario is its own script (``benchmarks/<script>.py``), run here in a subprocess (a
fresh interpreter per scenario: imports, forks and thread pools of one never disturb the
next), with short settings under ``--quick``. Their tables are read back
(:mod:`benchmarks._report`) into one table of ratios against the peers measured in the same
subprocess. A peer that is not installed is skipped by its script, with a note, which is
collected here; a scenario that fails or runs past its time limit is reported as such, and
the rest still runs.
"""

from __future__ import annotations

import os
import platform
import re
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from benchmarks._report import Row, parse_tables, rows_for

__all__ = ["SCENARIOS", "Scenario", "run_all"]

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _dataflow(name: str) -> bool:
    return name.startswith("dataflow")


def _before(*seps: str) -> Callable[[str], str]:
    """A section label: the heading up to the first of ``seps``."""

    def label(heading: str) -> str:
        cut = min([heading.find(s) for s in seps if s in heading] or [len(heading)])
        return heading[:cut].strip()

    return label


def _adapters_section(heading: str) -> str:
    m = re.match(r"(\S+).*flow: (\w+)", heading)
    return f"{m.group(1)}, {m.group(2)}" if m else heading


_ADAPTERS_OURS = (
    "to_torch", "DevicePrefetcher", "dataflow_to_dataset", "prefetch_to_device", "StagingIterator"
)


@dataclass
class Scenario:
    name: str
    script: str
    quick: list[str]
    full: list[str] = field(default_factory=list)
    ours: Callable[[str], bool] = _dataflow
    section: Callable[[str], str] = _before(" (", ":", ";")
    pairs: dict[str, str] = field(default_factory=dict)
    timeout: float = 240.0  # seconds, quick or not (the full runs get 10x)


SCENARIOS = [
    Scenario("in_process", "in_process.py", ["--size", "20000", "--rounds", "3"]),
    Scenario("mp_small", "mp_small.py", ["--seconds", "0.3", "--warmup", "0.2", "--rounds", "3"]),
    Scenario("mp_batch", "mp_batch.py", ["--seconds", "0.3", "--warmup", "0.2", "--rounds", "3"]),
    Scenario("mp_map", "mp_map.py", ["--items", "40", "--rounds", "3"]),
    Scenario("mp_map_cheap", "mp_map.py", ["--cheap", "--items", "5000", "--rounds", "3"], ["--cheap"]),
    Scenario(
        "mp_large",
        "mp_large.py",
        ["--seconds", "0.3", "--warmup", "0.2", "--rounds", "2", "--retries", "0", "--warmup-items", "8",
         "--no-variants", "--max-foreign", "99"],  # its own wait for a quiet machine: not in quick runs
    ),
    Scenario("ttfb", "ttfb.py", ["--rounds", "3"]),
    Scenario("cow_memory", "cow_memory.py", ["--items", "20000", "--rounds", "1"]),
    Scenario("remote", "remote.py", ["--rounds", "2", "--scale", "0.1"]),
    Scenario("formats_read", "formats_read.py", ["--size", "500", "--rounds", "3"]),
    Scenario("formats_save", "formats_save.py", ["--size", "50", "--rounds", "2"]),
    Scenario("parquet_read", "parquet_read.py", ["--rows", "20000", "--rounds", "1", "--no-peers"]),
    Scenario("webdataset_read", "webdataset_read.py", ["--samples", "2000", "--rounds", "2"]),
    Scenario("packing", "packing.py", ["--size", "20000", "--rounds", "2"]),
    Scenario(
        "adapters",
        "adapters.py",
        ["--batches", "100", "--rounds", "2", "--flows", "batch"],
        ours=lambda n: n.startswith(_ADAPTERS_OURS),
        section=_adapters_section,
    ),
    Scenario("checkpoint", "checkpoint.py", ["--only", "latency", "--rounds", "3", "--steps", "10500"]),
    Scenario(
        "autotune",
        "autotune.py",
        ["--rounds", "1", "--only", "mp_map", "--items", "60"],
        ours=lambda n: n == "auto",
    ),
    Scenario(
        "memory_budget",
        "memory_budget.py",
        ["--rounds", "1", "--items", "60", "--warmup", "10", "--mb", "1", "--budgets", "1GiB"],
    ),
    Scenario("ray_scale", "ray_scale.py", ["--items", "60", "--rounds", "1"]),
    Scenario("tensorpack_migration", "tensorpack_migration.py", ["--rounds", "1", "--only", "cifar"]),
    Scenario(
        "object_store",
        "object_store.py",
        ["--shards", "16", "--shard-mb", "0.25", "--rounds", "1"],
        # one row per reader, from the epoch table (the later tables repeat its rows); the
        # 2-process check has no rate to compare
        ours=lambda n: n.startswith("dataflow") and "2 processes" not in n,
        section=lambda heading: "",
    ),
]


@dataclass
class Outcome:
    scenario: Scenario
    rows: list[Row]
    notes: list[str]
    seconds: float
    output: str
    cpu: float = 0.0  # CPU seconds of the script and the processes it waited for


def run_one(s: Scenario, quick: bool, python: str = sys.executable) -> Outcome:
    """Run one scenario's script and read its tables back."""
    cmd = [python, os.path.join(HERE, s.script), *(s.quick if quick else s.full)]
    path = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path, "TQDM_DISABLE": "1", "PYTHONWARNINGS": "ignore"}
    if quick:
        env["DATAFLOW_BENCH_QUICK"] = "1"
    limit = s.timeout if quick else 10 * s.timeout
    t0, cpu0 = time.perf_counter(), _children_cpu()
    try:
        done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        note = f"{s.name}: stopped after its time limit of {limit:.0f} s"
        return Outcome(s, _rows(s, out), [note], time.perf_counter() - t0, out, _children_cpu() - cpu0)
    seconds, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    notes = [f"{s.name}: {line.strip()}" for line in done.stderr.splitlines() if _is_note(line)]
    if done.returncode:
        tail = done.stderr.strip().splitlines()[-1:] or ["(no message)"]
        notes.append(f"{s.name}: failed (exit code {done.returncode}): {tail[0][:200]}")
    rows = _rows(s, done.stdout)
    if not rows and not done.returncode:
        notes.append(f"{s.name}: printed no table with a dataflow contender")
    return Outcome(s, rows, notes, seconds, done.stdout, cpu)


def _children_cpu() -> float:
    """CPU seconds used so far by the child processes waited for (and theirs)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _rows(s: Scenario, stdout: str) -> list[Row]:
    return rows_for(s.name, parse_tables(stdout), s.ours, s.section, s.pairs)


def _is_note(line: str) -> bool:
    """The scripts' remarks worth repeating: peers that are missing or skipped."""
    low = line.lower()
    return ("not installed" in low or "skipping" in low or "does not import" in low) and len(line) < 300


def run_all(
    names: list[str] | None,
    quick: bool,
    progress: Callable[[str], None] = lambda m: None,
    raw: str | None = None,
) -> list[Outcome]:
    """Run the scenarios named (all of them for ``None``), in order; with ``raw``, each
    script's own output is also written to ``raw/<scenario>.md``."""
    chosen = [s for s in SCENARIOS if names is None or s.name in names]
    outcomes = []
    for s in chosen:
        progress(f"{s.name}: running {s.script} {' '.join(s.quick if quick else s.full)}")
        outcome = run_one(s, quick)
        progress(f"{s.name}: {outcome.seconds:.0f} s ({outcome.cpu:.0f} s CPU), {len(outcome.rows)} row(s)")
        if raw:
            os.makedirs(raw, exist_ok=True)
            with open(os.path.join(raw, f"{s.name}.md"), "w", encoding="utf-8") as f:
                f.write(outcome.output)
        outcomes.append(outcome)
    return outcomes


def header(quick: bool, names: list[str] | None, seconds: float, cpu: float) -> str:
    cmd = "python -m benchmarks all" + (" --quick" if quick else "")
    if names:
        cmd += " --only " + ",".join(names)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"Command: `{cmd}` ({time.strftime('%Y-%m-%d')}, {seconds:.0f} s, {cpu:.0f} s of CPU; load "
        f"average {load:.1f} at the end). "
        f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores, "
        f"{platform.machine()}. Ratios: how many times better dataflow is than the peer measured in "
        f"the same run (its rate / theirs, or their time / ours), medians"
        + ("; --quick: short runs, never redone on a busy machine, so noisy" if quick else "")
        + ". An empty cell: that peer is not part of the scenario (or not installed)."
    )
