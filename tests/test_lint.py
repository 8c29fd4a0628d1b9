"""CI enforces the linters: ``ruff check`` and ``mypy dataflow`` (both pinned in the test
extra and configured in ruff.toml / setup.cfg) must pass, like any other test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.timeout(120)
def test_ruff_is_clean() -> None:
    proc = _run(["ruff", "check", "dataflow", "tests", "benchmarks", "examples"], timeout=110)
    assert proc.returncode == 0, f"ruff check found problems:\n{proc.stdout}\n{proc.stderr}"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_mypy_is_clean() -> None:
    proc = _run(["mypy", "dataflow"], timeout=290)
    assert proc.returncode == 0, f"mypy dataflow found problems:\n{proc.stdout}\n{proc.stderr}"
