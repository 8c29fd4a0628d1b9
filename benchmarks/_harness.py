"""Shared benchmark harness: run contenders in rounds, report medians and ratios.

Benchmarks never assert; they print a markdown table of medians over several rounds, with
ratios against a named reference measured in the same run (the machines are shared and
noisy, so only same-run ratios mean anything).
"""

from __future__ import annotations

import contextlib
import gc
import io
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

#: Set by ``python -m benchmarks all --quick`` (environment ``DATAFLOW_BENCH_QUICK=1``): runs
#: are never redone nor delayed because other processes use the machine (ratios within one
#: run stay meaningful; absolute rates are noisier).
QUICK = os.environ.get("DATAFLOW_BENCH_QUICK") == "1"

__all__ = [
    "QUICK",
    "Contender",
    "Result",
    "ForeignCpu",
    "Quiet",
    "TimedContender",
    "drain_for",
    "machine_line",
    "markdown_table",
    "note",
    "quiet_stdout",
    "run_rounds",
    "run_timed_rounds",
    "settle",
    "wait_quiet",
]


@dataclass
class Contender:
    """One way of doing the job: ``run()`` does it once and returns the number of items."""

    name: str
    run: Callable[[], int]


@dataclass
class Result:
    name: str
    rates: list[float] = field(default_factory=list)  # items per second, one per round

    @property
    def median(self) -> float:
        return statistics.median(self.rates)


def run_rounds(contenders: Iterable[Contender], rounds: int = 5, warmup: bool = True) -> list[Result]:
    """Interleave contenders round by round (so drift hits all alike); items/s per round."""
    contenders = list(contenders)
    results = [Result(c.name) for c in contenders]
    if warmup:
        for c in contenders:
            c.run()
    for _ in range(rounds):
        for c, r in zip(contenders, results):
            t0 = time.perf_counter()
            n = c.run()
            r.rates.append(n / (time.perf_counter() - t0))
    return results


def markdown_table(results: list[Result], reference: list[str], unit: str = "items/s") -> str:
    """A table of medians with one ratio column per reference contender."""
    by_name = {r.name: r for r in results}
    head = f"| contender | median {unit} | min–max | " + " | ".join(f"vs {n}" for n in reference) + " |"
    sep = "|" + "---|" * (3 + len(reference))
    rows = [head, sep]
    for r in results:
        ratios = " | ".join(f"{r.median / by_name[n].median:.2f}x" for n in reference)
        rows.append(f"| {r.name} | {r.median:,.0f} | {min(r.rates):,.0f}–{max(r.rates):,.0f} | {ratios} |")
    return "\n".join(rows)


def machine_line() -> str:
    import os

    impl = f"{platform.python_implementation()} {platform.python_version()}"
    return f"{impl}, {os.cpu_count()} cores, {platform.machine()}"


# -- contenders that time themselves (parallel benchmarks) -------------------------------


@dataclass
class TimedContender:
    """One way of doing the job that times itself: ``run()`` builds and starts its pipeline,
    warms it up, times only the measured part and cleans up, returning ``(items, seconds)``.
    This keeps worker start-up and shutdown out of the rate when a benchmark asks for it."""

    name: str
    run: Callable[[], tuple[int, float]]


@dataclass
class Quiet:
    """What :func:`run_timed_rounds` saw of other processes on the machine (shared machines
    run other jobs; a run during which they used more than the limit was done again)."""

    limit: float  # cores
    foreign: list[float] = field(default_factory=list)  # cores used by others, per kept run
    redone: int = 0

    def line(self) -> str:
        if not self.foreign:
            return "other processes' CPU use not measured (no /proc/stat)"
        return (
            f"other processes used {statistics.median(self.foreign):.2f} cores (median; max "
            f"{max(self.foreign):.2f}) during the kept runs; {self.redone} run(s) redone because "
            f"others used more than {self.limit:g} cores"
        )


def run_timed_rounds(
    contenders: Iterable[TimedContender], rounds: int = 5, max_foreign: float = 0.2, retries: int = 4
) -> tuple[list[Result], Quiet]:
    """Interleave self-timing contenders round by round; items/s per round.

    After every run, :func:`settle` waits for the contender's worker processes to be gone, so
    nothing left over competes for the cores with the next one. A run during which other
    processes (not this one or its children) used more than ``max_foreign`` cores on average
    is discarded and done again after :func:`wait_quiet`, at most ``retries`` times per run
    (never under :data:`QUICK`).

    On a machine that is never quiet (shared by other jobs), ``BENCH_MAX_FOREIGN=<cores>`` in
    the environment overrides ``max_foreign`` (e.g. ``BENCH_MAX_FOREIGN=99``: measure under
    whatever load there is; the table's header still says how much the others used)."""
    if QUICK:
        retries = 0
    override = os.environ.get("BENCH_MAX_FOREIGN")
    if override:
        max_foreign = float(override)
    contenders = list(contenders)
    results = [Result(c.name) for c in contenders]
    quiet = Quiet(max_foreign)
    wait_quiet(max_foreign)
    for _ in range(rounds):
        for c, r in zip(contenders, results):
            for attempt in range(retries + 1):
                meter = ForeignCpu()
                n, seconds = c.run()
                settle(c.name)
                foreign = meter.cores()
                if foreign is None or foreign <= max_foreign or attempt == retries:
                    break
                quiet.redone += 1
                note(f"{c.name}: other processes used {foreign:.2f} cores during the run; doing it again")
                wait_quiet(max_foreign)
            if foreign is not None:
                quiet.foreign.append(foreign)
            r.rates.append(n / seconds)
    return results, quiet


class ForeignCpu:
    """Cores used, on average since creation, by processes other than this one and its
    reaped children: busy time in ``/proc/stat`` minus our own (``os.times``). Linux only;
    :meth:`cores` returns ``None`` elsewhere."""

    def __init__(self) -> None:
        self._t0 = time.monotonic()
        self._busy0 = _machine_busy()
        self._own0 = _own_cpu()

    def cores(self) -> float | None:
        busy = _machine_busy()
        if busy is None or self._busy0 is None:
            return None
        elapsed = time.monotonic() - self._t0
        foreign = (busy - self._busy0) - (_own_cpu() - self._own0)
        return max(0.0, foreign / elapsed) if elapsed > 0 else 0.0


def wait_quiet(max_foreign: float = 0.2, window: float = 1.0, timeout: float = 120.0) -> None:
    """Wait (up to ``timeout`` s) for a ``window`` during which other processes use at most
    ``max_foreign`` cores; say so on stderr when it had to wait or gave up. Returns at
    once under :data:`QUICK`."""
    if QUICK:
        return
    deadline = time.monotonic() + timeout
    waited = False
    while True:
        meter = ForeignCpu()
        time.sleep(window)
        cores = meter.cores()
        if cores is None or cores <= max_foreign:
            break
        if time.monotonic() > deadline:
            note(f"the machine is busy (others use {cores:.2f} cores); measuring anyway")
            return
        if not waited:
            note(f"waiting for other processes to quieten down (they use {cores:.2f} cores)")
            waited = True


def _machine_busy() -> float | None:
    """CPU seconds spent busy by the whole machine since boot (``None`` without procfs)."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq = fields[:7]
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def _own_cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def drain_for(it: Iterator[Any], seconds: float, weight: int = 1, every: int = 64) -> tuple[int, float]:
    """Consume ``it`` for about ``seconds``: ``(items, elapsed)``, each element counting as
    ``weight`` items (a batch of 64 counts 64). The clock is read every ``every`` elements,
    so the consumer does almost nothing but receive; the elapsed time is exact."""
    n = 0
    t0 = time.perf_counter()
    deadline = t0 + seconds
    for _ in it:
        n += 1
        if n % every == 0 and time.perf_counter() >= deadline:
            break
    return n * weight, time.perf_counter() - t0


def settle(name: str = "", timeout: float = 10.0) -> None:
    """Collect garbage and wait (up to ``timeout`` s) until this process has no live child
    process left; warn on stderr about any that remain."""
    gc.collect()
    try:
        import psutil
    except ImportError:  # pragma: no cover - psutil is a dev dependency
        time.sleep(0.2)
        return
    me = psutil.Process(os.getpid())
    deadline = time.monotonic() + timeout
    while True:
        alive = [p for p in me.children(recursive=True) if _running(p)]
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    if alive:
        note(f"{name}: {len(alive)} child process(es) still alive after clean-up: {[p.pid for p in alive]}")


def _running(proc: Any) -> bool:
    import psutil

    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def note(message: str) -> None:
    """A remark for the person running the benchmark, on stderr (the table is on stdout)."""
    print(message, file=sys.stderr, flush=True)


@contextlib.contextmanager
def quiet_stdout() -> Iterator[None]:
    """Swallow what peers print on stdout (tensorpack's clean-up messages), keeping the
    table clean."""
    with contextlib.redirect_stdout(io.StringIO()):
        yield
