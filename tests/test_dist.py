"""What ``pip install`` and ``pip download`` give users: the wheel ships ``py.typed`` (so type
checkers read dataflow's annotations), the sdist carries the whole test suite, the docs, the
benchmarks and the examples. Both are built from a copy of the checkout with setuptools'
own PEP 517 backend (no network, no build isolation)."""

from __future__ import annotations

import configparser
import os
import re
import shutil
import subprocess
import sys
import tarfile
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


@pytest.mark.timeout(180)
def test_wheel_ships_py_typed(dists: dict[str, Path]) -> None:
    names = zipfile.ZipFile(dists["wheel"]).namelist()
    assert "dataflow/py.typed" in names, f"dataflow/py.typed is not in the wheel: {sorted(names)}"
    assert "dataflow/base.py" in names


def _tracked(pattern: str) -> set[str]:
    return {p.relative_to(ROOT).as_posix() for p in ROOT.glob(pattern) if "__pycache__" not in p.parts}


@pytest.mark.timeout(180)
def test_sdist_carries_tests_docs_benchmarks_and_examples(dists: dict[str, Path]) -> None:
    with tarfile.open(dists["sdist"]) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    wanted = set()
    patterns = ("tests/**/*.py", "docs/*.rst", "docs/*.md", "docs/conf.py", "benchmarks/*", "examples/*.py")
    for pattern in patterns:
        wanted |= _tracked(pattern)
    wanted |= {"README.md", "LICENSE", "CHANGELOG.md", "setup.cfg", "pyproject.toml", "tox.ini"}
    wanted.add("dataflow/py.typed")
    assert len([w for w in wanted if w.startswith("tests/")]) > 20, "the glob above went stale"
    missing = sorted(w for w in wanted if (ROOT / w).is_file() and w not in names)
    assert not missing, f"the sdist lacks {len(missing)} files: {missing}"
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


# --- dependencies ----------------------------------------------------------------------------

_IMPORT_NAMES = {"pyzmq": "zmq"}


def test_every_core_dependency_is_used_and_documented() -> None:
    """No dependency is installed for nothing: the library imports each one, and the
    Dependencies section of the getting-started page says why it is there."""
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    requires = [re.split(r"[<>=!~ ;\[]", r.strip())[0] for r in cfg["options"]["install_requires"].split()]
    sources = "\n".join(p.read_text("utf-8") for p in (ROOT / "dataflow").rglob("*.py"))
    page = (ROOT / "docs" / "getting_started.rst").read_text("utf-8")
    section = page[page.index("\nDependencies\n") :]
    for req in requires:
        module = _IMPORT_NAMES.get(req, req.replace("-", "_"))
        assert re.search(rf"^\s*(import|from) {module}\b", sources, re.MULTILINE), f"{req} is never imported"
        assert f"**{req}**" in section, f"docs/getting_started.rst does not say why {req} is a dependency"
