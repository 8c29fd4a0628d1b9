"""``import dataflow`` imports no framework; a missing framework is an ImportError naming the
extra to install. Runs in any Python (each check is a subprocess with a clean ``sys.modules``)."""

from __future__ import annotations

import importlib.util
import textwrap

import pytest

from ._util import run_python

FRAMEWORKS = ("tensorflow", "torch", "jax", "jaxlib", "keras", "flax", "ray")


def _run(code: str) -> str:
    proc = run_python(["-c", textwrap.dedent(code)], timeout=110)
    assert proc.returncode == 0, f"subprocess failed:\n{code}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.mark.parametrize("module", ["dataflow", "dataflow.adapters"])
def test_import_loads_no_framework(module: str) -> None:
    out = _run(
        f"""
        import sys
        import {module}
        loaded = sorted(m for m in {FRAMEWORKS!r} if m in sys.modules)
        print("loaded:", loaded)
        """
    )
    assert out.strip() == "loaded: []", f"import {module} loaded a framework: {out}"


@pytest.mark.parametrize(
    ("adapter", "framework"), [("tf", "tensorflow"), ("torch", "torch"), ("jax", "jax")]
)
def test_adapter_loads_only_its_own_framework(adapter: str, framework: str) -> None:
    """Beyond what ``import <framework>`` loads itself (TensorFlow loads jax when it is
    installed), the adapter imports no other framework."""
    if importlib.util.find_spec(framework) is None:
        pytest.skip(f"{framework} is not installed here")
    out = _run(
        f"""
        import sys
        names = ("tensorflow", "torch", "jax")
        import {framework}
        before = {{m for m in names if m in sys.modules}}
        import dataflow.adapters.{adapter}
        print(sorted({{m for m in names if m in sys.modules}} - before))
        """
    )
    assert out.strip().splitlines()[-1] == "[]", out


@pytest.mark.parametrize(
    ("adapter", "framework", "extra"),
    [("tf", "tensorflow", "tf"), ("torch", "torch", "torch"), ("jax", "jax", "jax")],
)
def test_missing_framework_raises_import_error_naming_the_extra(
    adapter: str, framework: str, extra: str
) -> None:
    # sys.modules[name] = None makes ``import name`` fail as if it were not installed.
    out = _run(
        f"""
        import sys
        sys.modules[{framework!r}] = None
        try:
            import dataflow.adapters.{adapter}
        except ImportError as e:
            print("ImportError:", e)
            print("cause:", type(e.__cause__).__name__)
            print("half-imported:", "dataflow.adapters.{adapter}" in sys.modules)
        else:
            print("imported without {framework}")
        """
    )
    lines = out.splitlines()
    assert lines[0].startswith("ImportError:"), out
    assert f'pip install "dataflow-ml[{extra}]"' in lines[0], out
    assert framework in lines[0] and f"dataflow.adapters.{adapter}" in lines[0], out
    assert lines[1] == "cause: ModuleNotFoundError", out  # chained to the original failure
    assert lines[2] == "half-imported: False", out


def test_require_names_the_extra_and_returns_the_module() -> None:
    from dataflow.adapters._require import require

    assert require("json", "unused", "test").__name__ == "json"
    with pytest.raises(ImportError, match=r'pip install "dataflow-ml\[fancy\]"') as info:
        require("surely_not_an_installed_module_xyz", "fancy", "dataflow.adapters.fancy")
    assert "dataflow.adapters.fancy" in str(info.value)
    assert isinstance(info.value.__cause__, ImportError)
