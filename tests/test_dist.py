"""What ``pip install`` and ``pip download`` give users: the wheel ships ``py.typed`` (so type
checkers read dataflow's annotations), the sdist carries the whole test suite, the docs, the
benchmarks and the examples. Both are built from a copy of the checkout with setuptools'
own PEP 517 backend (no network, no build isolation)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_SKIP = shutil.ignore_patterns(
    ".git", ".venv", "venv", ".tox", "build", "dist", "*.egg-info", "__pycache__", "_build",
    ".mypy_cache", ".ruff_cache", ".pytest_cache", ".hypothesis",
)
_BUILD = """
import sys
from setuptools import build_meta
kind, out = sys.argv[1], sys.argv[2]
name = build_meta.build_sdist(out) if kind == "sdist" else build_meta.build_wheel(out)
print(name)
"""


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sdist and the wheel of this checkout, built in a scratch copy of it."""
    base = tmp_path_factory.mktemp("dist")
    src = base / "src"
    shutil.copytree(ROOT, src, ignore=_SKIP)
    out: dict[str, Path] = {}
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    for kind in ("sdist", "wheel"):
        proc = subprocess.run(
            [sys.executable, "-c", _BUILD, kind, str(base / "out")],
            cwd=src, env=env, capture_output=True, text=True, timeout=170,
        )
        assert proc.returncode == 0, f"building the {kind} failed:\n{proc.stdout}\n{proc.stderr}"
        out[kind] = base / "out" / proc.stdout.strip().splitlines()[-1]
    return out


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_wheel_ships_py_typed(dists: dict[str, Path]) -> None:
    names = zipfile.ZipFile(dists["wheel"]).namelist()
    assert "dataflow/py.typed" in names, f"dataflow/py.typed is not in the wheel: {sorted(names)}"
    assert "dataflow/base.py" in names
