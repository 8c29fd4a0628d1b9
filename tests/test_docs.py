"""The Sphinx docs build with warnings as errors (the API pages are generated from docstrings)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Pages whose Python examples are complete programs (migration.rst imports tensorpack, and
# parallel.rst shows fragments, so they are not run).
RUNNABLE_PAGES = ("README.md", "docs/index.rst", "docs/getting_started.rst", "docs/checkpointing.rst")


def _python_examples(page: str) -> list[str]:
    text = (ROOT / page).read_text(encoding="utf-8")
    if page.endswith(".md"):
        return re.findall(r"^```python\n(.*?)^```", text, re.DOTALL | re.MULTILINE)
    blocks = re.findall(r"^\.\. code-block:: python\n\n((?:(?:[ ]{3,}.*)?\n)+)", text, re.MULTILINE)
    return [textwrap.dedent(b) for b in blocks]


_EXAMPLES = [(page, i, code) for page in RUNNABLE_PAGES for i, code in enumerate(_python_examples(page))]


@pytest.mark.timeout(180)
@pytest.mark.parametrize(("page", "index", "code"), _EXAMPLES, ids=[f"{p}#{i}" for p, i, _ in _EXAMPLES])
def test_documented_example_runs(page: str, index: int, code: str) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=170
    )
    assert proc.returncode == 0, f"example {index} of {page} failed:\n{code}\n{proc.stderr}"


def test_runnable_pages_have_examples() -> None:
    for page in RUNNABLE_PAGES:
        assert _python_examples(page), f"no Python example found in {page}"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_docs_build_without_warnings(tmp_path: Path) -> None:
    cmd = [
        sys.executable, "-m", "sphinx",
        "-W", "--keep-going",             # every warning fails the build; report all of them
        "-b", "html",
        "-d", str(tmp_path / "doctrees"),
        "-q",
        str(ROOT / "docs"), str(tmp_path / "html"),
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, (
        f"sphinx-build failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    )
    # (any other .rst page must be in the toctree too: sphinx warns otherwise, and -W fails)
    pages = ("index", "getting_started", "concepts", "parallel", "zero_copy", "formats", "remote",
             "adapters", "adapters_tf", "adapters_torch", "adapters_jax", "migration_inputsources",
             "migration", "api", "performance", "logging")
    for page in pages:
        assert (tmp_path / "html" / f"{page}.html").is_file(), f"docs page {page!r} was not built"
    # the benchmarks' Markdown tables render as HTML tables, not as raw text
    md_tables = len(re.findall(r"^\|[-: |]*---", (ROOT / "docs" / "performance.md").read_text("utf-8"), re.M))
    html = (tmp_path / "html" / "performance.html").read_text("utf-8")
    assert md_tables and html.count("<table") >= md_tables, (md_tables, html.count("<table"))
    assert "|---|" not in html


def test_api_page_documents_every_public_module_and_no_private_one() -> None:
    """docs/api.rst documents each public module (private ones are an implementation detail:
    their names are documented where users import them, see test_package.py)."""
    import dataflow

    api = (ROOT / "docs" / "api.rst").read_text(encoding="utf-8")
    pkg_dir = Path(dataflow.__file__).parent
    modules = ["dataflow"]
    for path in sorted(pkg_dir.rglob("*.py")):
        parts = path.relative_to(pkg_dir.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if any(p.startswith("_") for p in parts):
            continue
        modules.append(".".join(parts))
    missing = [m for m in sorted(set(modules)) if f".. automodule:: {m}\n" not in api]
    assert not missing, f"missing from docs/api.rst: {missing}"
    private = re.findall(r"^\.\. auto\w+:: (\S*\._\w+\S*)", api, re.M)
    assert private == ["dataflow._fluent.FluentMixin"], f"docs/api.rst documents private paths: {private}"

