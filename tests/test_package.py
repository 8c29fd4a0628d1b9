"""Packaging-level checks: the examples run, ``import dataflow`` stays light, the export list
is complete, and the README's set-up commands are the ones CI runs."""

from __future__ import annotations

import configparser
import importlib
import inspect
import json
import os
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


#: Where users import public names from: each name has exactly one of these as its home.
HOMES = (
    "dataflow",
    "dataflow.tools",
    "dataflow.codec",
    "dataflow.checkpoint",
    "dataflow.on_ray",
    "dataflow.imgaug",
    "dataflow.dataset",
)
#: tensorpack's module paths, kept so that migrated imports work: each re-exports names whose
#: home is above (``tensorpack.dataflow.common`` -> ``dataflow.common``, ...).
TENSORPACK_PATHS = (
    "dataflow.base",
    "dataflow.common",
    "dataflow.format",
    "dataflow.image",
    "dataflow.parallel",
    "dataflow.parallel_map",
    "dataflow.raw",
    "dataflow.remote",
    "dataflow.serialize",
)
#: Packages that only group private modules and export nothing.
GROUPS = ("dataflow.formats", "dataflow.ops", "dataflow.sources", "dataflow.adapters")
ADAPTERS = ("dataflow.adapters.jax", "dataflow.adapters.tf", "dataflow.adapters.torch")  # import frameworks


def _home_of(obj: object) -> list[str]:
    return sorted({
        home
        for home in HOMES
        for name in importlib.import_module(home).__all__
        if getattr(importlib.import_module(home), name) is obj
    })


#: Flow classes users never build by name: bases of the public flows, and the class a public
#: constructor returns (``TFRecordData(shuffle=True)``, ``LMDBSerializer.load``).
INTERNAL_FLOWS = {
    "dataflow.dataset._images.DecodedImages",
    "dataflow.formats._file_reader.FileReader",
    "dataflow.formats._lmdb_decoded.SerializedLMDB",
    "dataflow.formats._tfrecord.ShuffledTFRecordData",
    "dataflow.parallel._map_base.ParallelMapBase",
    "dataflow.parallel._runner_part.RunnerPart",  # what a shard=True runner's worker runs
    "dataflow.sources._indexed.IndexedSource",
}


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


@pytest.mark.timeout(300)
def test_language_model_example_resumes_with_new_weights(tmp_path: Path) -> None:
    """The issue-27 recipe: stopped at step 4 and resumed with other weights, the run gives the
    same batches up to the stop, each corpus goes on from its saved count, and the corpus
    weighted up gives the most documents afterwards."""
    pytest.importorskip("torch")
    script, ckpt = "examples/train_language_model.py", str(tmp_path / "lm.pt")

    def steps(*args: str) -> list[tuple[int, str, list[int]]]:
        proc = _run([script, "--steps", "8", *args], timeout=280)
        assert proc.returncode == 0, f"{script} {args} failed:\n{proc.stdout}\n{proc.stderr}"
        found = re.findall(r"^step (\d+) loss (\S+) counts \[(.*)\]$", proc.stdout, re.MULTILINE)
        return [(int(n), loss, [int(c) for c in counts.split(",")]) for n, loss, counts in found]

    whole = steps()
    before = steps("--stop-at", "4", "--ckpt", ckpt)
    after = steps("--resume", ckpt, "--weights", "0.1,0.1,0.8")
    assert [s[:2] for s in before] == [s[:2] for s in whole[:4]]
    assert [s[0] for s in after] == [5, 6, 7, 8]
    saved, last = before[-1][2], after[-1][2]
    assert all(a >= b for a, b in zip(last, saved)), (saved, last)  # every corpus continued
    grown = [a - b for a, b in zip(last, saved)]
    assert grown[2] > grown[0] and grown[2] > grown[1], grown  # books, weighted 0.8, gave the most


# --- import hygiene ------------------------------------------------------------------------


def test_import_dataflow_imports_no_ml_framework() -> None:
    code = (
        "import json, sys; import dataflow; "
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {FRAMEWORKS!r})))"
    )
    proc = _run(["-c", code], timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []


def test_import_dataflow_does_not_import_hugging_face_datasets() -> None:
    """DataFromHF and to_hf import ``datasets`` (the hf extra) when a dataset is given."""
    code = "import json, sys; import dataflow; print(json.dumps('datasets' in sys.modules))"
    proc = _run(["-c", code], timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) is False


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


def test_every_module_is_private_or_a_known_public_one() -> None:
    """Implementation modules are private (``_name.py``): a new public module must be a home,
    a tensorpack path, an adapter, or part of the tensorpack-named image and dataset APIs."""
    public = set(HOMES + TENSORPACK_PATHS + GROUPS + ADAPTERS)
    pkg_dir = Path(dataflow.__file__).parent
    unknown = []
    for path in sorted(pkg_dir.rglob("*.py")):
        parts = path.relative_to(pkg_dir.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        name = ".".join(parts)
        if any(p.startswith("_") for p in parts) or name in public:
            continue
        if name.startswith(("dataflow.imgaug.", "dataflow.dataset.")):  # tensorpack's paths
            continue
        unknown.append(name)
    assert not unknown, f"public modules that are neither a home nor a tensorpack path: {unknown}"


def test_each_public_name_has_exactly_one_home() -> None:
    twice = {}
    for home in HOMES:
        module = importlib.import_module(home)
        for name in module.__all__:
            homes = _home_of(getattr(module, name))
            if len(homes) > 1 and not inspect.ismodule(getattr(module, name)):
                twice[name] = homes
    assert not twice, f"names exported by more than one home: {twice}"


@pytest.mark.parametrize("modname", TENSORPACK_PATHS)
def test_tensorpack_paths_only_re_export_names_of_a_home(modname: str) -> None:
    module = importlib.import_module(modname)
    names = getattr(module, "__all__", [])
    assert names, f"{modname} must list what it re-exports in __all__"
    homeless = [n for n in names if not _home_of(getattr(module, n))]
    assert not homeless, f"{modname} exports names that have no home in {HOMES}: {homeless}"


def test_every_flow_class_defined_privately_has_a_home() -> None:
    """A DataFlow class users can build is importable from its home, not only from the
    private module that defines it."""
    pkg_dir = Path(dataflow.__file__).parent
    missing = []
    for path in sorted(pkg_dir.rglob("_*.py")):
        parts = path.relative_to(pkg_dir.parent).with_suffix("").parts
        if "adapters" in parts or path.name == "__init__.py":
            continue
        module = importlib.import_module(".".join(parts))
        for name, obj in vars(module).items():
            if (
                inspect.isclass(obj) and issubclass(obj, dataflow.DataFlow) and not name.startswith("_")
                and obj.__module__ == module.__name__ and not _home_of(obj)
                and f"{module.__name__}.{name}" not in INTERNAL_FLOWS
            ):
                missing.append(f"{module.__name__}.{name}")
    assert not missing, f"flow classes without a public home: {missing}"


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
