"""Packaging-level checks: the examples run, ``import dataflow`` stays light, the export list
is complete, and the README's set-up commands are the ones CI runs."""

from __future__ import annotations

import configparser
import importlib
import inspect
import json
import os
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import dataflow

ROOT = Path(__file__).resolve().parents[1]
FRAMEWORKS = ("torch", "tensorflow", "jax", "jaxlib", "keras", "flax", "ray", "cv2", "albumentations")
TEST_COMMAND = 'pip install -e ".[test]" && python -m pytest'


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def _public_modules() -> list[str]:
    """The public modules whose classes users import: dataflow.base, dataflow.errors and every
    public module of dataflow.sources / .ops / .tools / .parallel / .formats (adapters, which
    import frameworks, are left out)."""
    names = ["dataflow.base", "dataflow.errors"]
    packages = ("dataflow.sources", "dataflow.ops", "dataflow.tools", "dataflow.parallel", "dataflow.formats")
    packages += ("dataflow.on_ray",)  # imports Ray only when a Ray flow starts
    packages += ("dataflow.image",)  # imports OpenCV only when a flow reads or augments an image
    for pkg_name in packages:
        pkg = importlib.import_module(pkg_name)
        names.append(pkg_name)
        for info in pkgutil.walk_packages(pkg.__path__, prefix=f"{pkg_name}."):
            if not any(part.startswith("_") for part in info.name.split(".")):
                names.append(info.name)
    return names


# --- examples ------------------------------------------------------------------------------


@pytest.mark.timeout(180)
def test_quickstart_example_runs() -> None:
    proc = _run(["examples/quickstart.py"], timeout=170)
    assert proc.returncode == 0, f"examples/quickstart.py failed:\n{proc.stdout}\n{proc.stderr}"
    assert proc.stdout.strip(), "examples/quickstart.py printed nothing"


@pytest.mark.timeout(180)
def test_numpy_training_example_reduces_loss() -> None:
    proc = _run(["examples/numpy_training_loop.py"], timeout=170)
    assert proc.returncode == 0, f"examples/numpy_training_loop.py failed:\n{proc.stdout}\n{proc.stderr}"
    match = re.search(r"^initial_loss=(\S+) final_loss=(\S+)$", proc.stdout, re.MULTILINE)
    assert match, f"no 'initial_loss=... final_loss=...' line in:\n{proc.stdout}"
    initial, final = float(match.group(1)), float(match.group(2))
    assert final < initial, f"training did not reduce the loss: {initial} -> {final}"


# --- import hygiene ------------------------------------------------------------------------


def test_import_dataflow_imports_no_ml_framework() -> None:
    code = (
        "import json, sys; import dataflow; "
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {FRAMEWORKS!r})))"
    )
    proc = _run(["-c", code], timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []


def test_all_is_sorted_and_unique() -> None:
    names = list(dataflow.__all__)
    assert names == sorted(names), "dataflow.__all__ must be sorted"
    duplicates = sorted({n for n in names if names.count(n) > 1})
    assert not duplicates, f"duplicates in dataflow.__all__: {duplicates}"


def test_every_name_in_all_is_importable() -> None:
    missing = [name for name in dataflow.__all__ if not hasattr(dataflow, name)]
    assert not missing, f"in dataflow.__all__ but not importable from dataflow: {missing}"
    namespace: dict[str, object] = {}
    exec("from dataflow import *", namespace)  # the star import users would write
    assert set(dataflow.__all__) <= set(namespace)


@pytest.mark.parametrize("modname", _public_modules())
def test_public_classes_are_exported(modname: str) -> None:
    module = importlib.import_module(modname)
    classes = [
        name
        for name, obj in vars(module).items()
        if inspect.isclass(obj) and not name.startswith("_") and obj.__module__ == modname
    ]
    missing = [name for name in classes if name not in dataflow.__all__]
    assert not missing, f"public classes of {modname} missing from dataflow.__all__: {missing}"
    for name in classes:
        assert getattr(dataflow, name) is getattr(module, name), f"dataflow.{name} is not {modname}.{name}"


# --- packaging metadata and the README's commands ------------------------------------------


def test_every_package_directory_has_an_init() -> None:
    """setup.cfg uses ``packages = find:``, which skips directories without ``__init__.py``:
    their modules would be missing from the installed package."""
    pkg_root = Path(dataflow.__file__).parent
    missing = sorted(
        str(d.relative_to(pkg_root.parent))
        for d in [pkg_root, *pkg_root.rglob("*")]
        if d.is_dir() and d.name != "__pycache__" and any(d.glob("*.py"))
        and not (d / "__init__.py").is_file()
    )
    assert not missing, f"add an __init__.py to {missing}, or they are left out of the wheel"


def test_setup_cfg_metadata() -> None:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    assert cfg["metadata"]["name"] == "dataflow-ml"
    assert cfg["options"]["python_requires"] == ">=3.10"
    extras = cfg["options.extras_require"]
    for extra in ("test", "lmdb", "hdf5", "tf", "torch", "jax", "image", "all"):
        assert extra in extras, f"setup.cfg lacks the {extra!r} extra"
    assert cfg["metadata"]["version"] == "attr: dataflow._version.__version__"  # one source of truth
    assert isinstance(dataflow.__version__, str) and dataflow.__version__


def test_readme_opens_with_the_two_commands_and_ci_runs_the_test_one() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first_block = re.search(r"```(?:bash|sh)?\n(.*?)```", readme, re.DOTALL)
    assert first_block, "README.md has no code block"
    assert readme.index("```") < readme.index("\n## "), "the commands must come before any section"
    lines = [ln.strip() for ln in first_block.group(1).splitlines() if ln.strip() and not ln.startswith("#")]
    assert any("pip install ." in ln and ln.endswith("python -m dataflow bench") for ln in lines), lines
    assert any(ln.endswith(TEST_COMMAND) for ln in lines), lines
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert TEST_COMMAND in ci, ".ci/run must run exactly the README's test command"
    assert os.access(ROOT / ".ci" / "run", os.X_OK), ".ci/run must be executable"
