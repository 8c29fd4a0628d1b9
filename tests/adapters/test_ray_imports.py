"""The Ray backend is optional: ``import dataflow`` (and building a Ray flow) imports no Ray,
and a missing Ray is an ImportError naming the extra when a Ray flow starts. Each check runs
in a subprocess with a clean ``sys.modules``, so it runs whether Ray is installed or not."""

from __future__ import annotations

import textwrap

from ._util import run_python


def _run(code: str) -> str:
    proc = run_python(["-c", textwrap.dedent(code)], timeout=110)
    assert proc.returncode == 0, f"subprocess failed:\n{code}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_building_ray_flows_imports_no_ray() -> None:
    out = _run(
        """
        import sys
        import dataflow
        from dataflow.on_ray import RayMapData
        df = RayMapData(dataflow.DataFromList([[1]]), 2, lambda dp: dp)
        print("ray loaded:", "ray" in sys.modules)
        """
    )
    assert out.strip() == "ray loaded: False", out


def test_missing_ray_is_an_import_error_naming_the_extra() -> None:
    out = _run(
        """
        import sys
        sys.modules["ray"] = None  # as if Ray were not installed
        import dataflow
        import dataflow.on_ray
        df = dataflow.on_ray.RayMapData(dataflow.DataFromList([[1]]), 2, lambda dp: dp)
        try:
            df.reset_state()
        except ImportError as e:
            print("ImportError:", e)
            print("cause:", type(e.__cause__).__name__)
        else:
            print("started without ray")
        """
    )
    lines = out.splitlines()
    assert lines[0].startswith("ImportError: RayMapData needs ray"), out
    assert 'pip install "dataflow-ml[ray]"' in lines[0], out
    assert lines[1] == "cause: ModuleNotFoundError", out
