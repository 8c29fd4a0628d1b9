"""Shared helpers of the adapter tests: small recording flows and the example runner.

Nothing here imports a framework, so every adapter test module can use it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dataflow.base import DataFlow

ROOT = Path(__file__).resolve().parents[2]

__all__ = [
    "ROOT",
    "CountingIterable",
    "EndlessFlow",
    "FailingFlow",
    "doc_examples",
    "final_losses",
    "run_python",
    "wait_until",
]


class EndlessFlow(DataFlow):
    """Yields ``[i, float(i)]`` for i = 0, 1, 2, ... forever; counts resets and items made."""

    def __init__(self) -> None:
        self.resets = 0
        self.produced = 0

    def reset_state(self) -> None:
        self.resets += 1

    def __iter__(self) -> Iterator[Any]:
        i = 0
        while True:
            self.produced += 1
            yield [i, float(i)]
            i += 1


class FailingFlow(DataFlow):
    """Yields ``[i]`` for i < ``good`` then raises ``RuntimeError(message)``."""

    def __init__(self, good: int, message: str = "boom in the flow") -> None:
        self.good = good
        self.message = message

    def __iter__(self) -> Iterator[Any]:
        for i in range(self.good):
            yield [i]
        raise RuntimeError(self.message)


class CountingIterable:
    """Re-iterable over ``items``; ``pulled`` counts the items taken from it so far."""

    def __init__(self, items: list[Any]) -> None:
        self.items = items
        self.pulled = 0

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[Any]:
        for item in self.items:
            self.pulled += 1
            yield item


def wait_until(cond: Callable[[], bool], timeout: float = 30.0, what: str = "condition") -> None:
    """Poll ``cond`` until true; fail the test after ``timeout`` s (a guard, not a timing test)."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.01)


def run_python(args: list[str], timeout: float = 170) -> subprocess.CompletedProcess[str]:
    """Run ``sys.executable args`` in the repository root with the working tree importable."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def final_losses(example: str) -> tuple[float, float]:
    """Run ``examples/<example>``; its last line is ``initial_loss=A final_loss=B``."""
    proc = run_python([str(ROOT / "examples" / example)])
    assert proc.returncode == 0, f"{example} failed:\n{proc.stdout}\n{proc.stderr}"
    match = re.search(r"initial_loss=(\S+) final_loss=(\S+)\s*\Z", proc.stdout)
    assert match, f"{example}: no 'initial_loss=... final_loss=...' last line in:\n{proc.stdout}"
    return float(match.group(1)), float(match.group(2))


def doc_examples(page: str) -> list[str]:
    """The ``.. code-block:: python`` blocks of ``docs/<page>``: complete programs (fragments on
    the adapter pages are written as ``::`` literal blocks and are not run)."""
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    blocks = re.findall(r"^\.\. code-block:: python\n\n((?:(?:[ ]{3,}.*)?\n)+)", text, re.MULTILINE)
    return [textwrap.dedent(b) for b in blocks]


_RUN_BLOCKS = """
import json, sys
for i, code in enumerate(json.loads(sys.argv[1])):
    print("EXAMPLE", i, flush=True)
    exec(compile(code, f"<example {i} of docs/{sys.argv[2]}>", "exec"), {"__name__": "__main__"})
"""


def documented_example_tests(page: str) -> tuple[Callable[[], None], Callable[[], None]]:
    """The two tests every framework page gets: each ``.. code-block:: python`` block of
    ``docs/<page>`` runs as a complete program, and the page has at least one. The blocks run
    one after the other in one fresh interpreter, each in a namespace of its own (a
    framework is imported once per page, not once per block)."""
    examples = doc_examples(page)

    @pytest.mark.slow
    @pytest.mark.timeout(240)
    def test_documented_examples_run() -> None:
        proc = run_python(["-c", _RUN_BLOCKS, json.dumps(examples), page], timeout=230)
        started = [line for line in proc.stdout.splitlines() if line.startswith("EXAMPLE ")]
        failed = examples[len(started) - 1] if started else ""
        assert proc.returncode == 0, f"{started[-1:]} of docs/{page} failed:\n{failed}\n{proc.stderr}"

    def test_the_page_has_runnable_examples() -> None:
        assert examples, f"docs/{page} has no runnable example"

    return test_documented_examples_run, test_the_page_has_runnable_examples
