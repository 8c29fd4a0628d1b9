"""Shared benchmark harness: run contenders in rounds, report medians and ratios.

Benchmarks never assert; they print a markdown table of medians over several rounds, with
ratios against a named reference measured in the same run (the machines are shared and
noisy, so only same-run ratios mean anything).
"""

from __future__ import annotations

import platform
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

__all__ = ["Contender", "Result", "machine_line", "markdown_table", "run_rounds"]


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
