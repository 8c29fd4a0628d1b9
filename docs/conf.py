"""Sphinx configuration for the dataflow docs.

Build: ``python -m sphinx -W -b html docs docs/_build/html`` (warnings are errors; the
test suite runs this in tests/test_docs.py). Only the stdlib theme (alabaster) and
built-in extensions and myst-parser (for the benchmarks' Markdown) are used, so
``pip install -e ".[docs]"`` is all it needs.
"""

from __future__ import annotations

import os
import sys

DOCS_DIR = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(DOCS_DIR)
sys.path.insert(0, ROOT)  # document the working tree, installed or not

project = "dataflow"
author = "The dataflow authors"
copyright = "The dataflow authors; Apache-2.0"
import dataflow  # noqa: E402 -- importable only after the sys.path change above

release = dataflow.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
    "myst_parser",  # docs/performance.md (written by the benchmarks) is included as Markdown
]

# docs/performance.md is markdown written by the benchmarks; it is not a page of its own:
# performance.rst includes it, parsed by myst_parser, so its tables render as tables.
exclude_patterns = ["_build", "performance.md", "Thumbs.db", ".DS_Store"]
# its "##" sections sit under the title of performance.rst, which is what is wanted there
suppress_warnings = ["myst.header"]
root_doc = "index"

autodoc_member_order = "bysource"
autodoc_default_options = {"show-inheritance": True}
autodoc_typehints = "signature"
napoleon_google_docstring = True
napoleon_numpy_docstring = True
napoleon_use_ivar = True  # "Attributes:" as fields, so no duplicate attribute entries

html_theme = "alabaster"
html_theme_options = {
    "description": "Fast, framework-agnostic data loading for ML training",
    "fixed_sidebar": True,
}
html_static_path: list[str] = []


def _canonical_name(target: str) -> str | None:
    """``dataflow.set_seed`` or ``BatchData`` -> where it is documented
    (``dataflow.seeding.set_seed``, ``dataflow.ops.batch.BatchData``); else ``None``.

    Docstrings and pages refer to objects by their public spelling (``dataflow.X``); the API
    page documents them in the modules that define them.
    """
    name = target.removeprefix("dataflow.")
    obj: object = dataflow
    owner, rest = None, []
    for i, part in enumerate(name.split(".")):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            return None
        if hasattr(obj, "__qualname__") and hasattr(obj, "__module__"):
            owner, rest = obj, name.split(".")[i + 1:]
    if owner is None or not str(getattr(owner, "__module__", "")).startswith("dataflow"):
        return None
    canonical = ".".join([owner.__module__, owner.__qualname__, *rest])  # type: ignore[attr-defined]
    return None if canonical == target else canonical


def _resolve_public_alias(app, env, node, contnode):  # type: ignore[no-untyped-def]
    if node.get("refdomain") != "py":
        return None
    canonical = _canonical_name(node["reftarget"])
    if canonical is None:
        return None
    py = env.get_domain("py")
    return py.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], canonical, node, contnode)


def setup(app):  # type: ignore[no-untyped-def]
    app.connect("missing-reference", _resolve_public_alias)
    return {"parallel_read_safe": True}

# the adapters import their framework at import time; the docs build needs none of them
autodoc_mock_imports = ["tensorflow", "torch", "jax"]
