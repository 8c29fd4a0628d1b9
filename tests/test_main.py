"""The CLI ``python -m dataflow bench`` and the pipelines it loads (dataflow/tools/_demo.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from dataflow.__main__ import main
from dataflow.ops._batch import BatchData
from dataflow.tools._demo import demo_pipeline, load_pipeline

ROOT = Path(__file__).resolve().parents[1]

PIPELINES = """
from dataflow.ops._map import MapData
from dataflow import DataFromList


def small():
    return MapData(DataFromList([[i] for i in range(100)], shuffle=False), lambda dp: [dp[0] * 2])


def needs_args(n):
    return small()


def not_a_flow():
    return [[1], [2]]


FLOW = small()
"""


def _run(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return subprocess.run(
        [sys.executable, "-m", "dataflow", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=100,
    )


@pytest.fixture
def pipelines_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A module ``cli_pipelines_for_test`` in tmp_path, importable here and by subprocesses."""
    (tmp_path / "cli_pipelines_for_test.py").write_text(textwrap.dedent(PIPELINES), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "cli_pipelines_for_test", raising=False)
    return "cli_pipelines_for_test"


# --- subprocess: the real command ------------------------------------------------------------


@pytest.mark.timeout(120)
def test_bench_default_pipeline(tmp_path: Path) -> None:
    proc = _run(["bench", "--size", "500", "--no-progress"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "500 dp in" in proc.stdout and "dp/s" in proc.stdout
    assert "dataflow.tools._demo:demo_pipeline" in proc.stdout
    assert "%|" not in proc.stderr  # --no-progress: no tqdm bar


@pytest.mark.timeout(120)
def test_version(tmp_path: Path) -> None:
    import dataflow

    proc = _run(["--version"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    python = sys.version.split()[0]
    assert proc.stdout.startswith(f"dataflow-ml {dataflow.__version__} (python {python}, numpy ")


@pytest.mark.timeout(120)
def test_bench_profile_prints_table(tmp_path: Path) -> None:
    proc = _run(["bench", "--size", "50", "--warmup", "2", "--profile", "--no-progress"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    for stage in ("FakeData", "MapData(_FlipAndNormalize)", "BatchData", "slowest: #"):
        assert stage in proc.stdout


@pytest.mark.timeout(120)
def test_bench_user_pipeline(tmp_path: Path, pipelines_module: str) -> None:
    args = ["bench", "--pipeline", f"{pipelines_module}:small", "--size", "250", "--no-progress"]
    proc = _run(args, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "-> MapData" in proc.stdout
    assert "250 dp in" in proc.stdout and "3 epochs" in proc.stdout


BAD_PIPELINES = [
    ("no_such_module_xyz:flow", "no module named 'no_such_module_xyz'"),
    ("cli_pipelines_for_test:missing", "has no attribute 'missing'"),
    ("cli_pipelines_for_test:not_a_flow", "must return a DataFlow"),
    ("cli_pipelines_for_test", "must look like 'package.module:function'"),
]


@pytest.mark.timeout(120)
def test_bench_bad_pipeline_exits_2(tmp_path: Path, pipelines_module: str) -> None:
    """The command's exit status; every bad spec's message: test_bad_pipeline_returns_2."""
    spec, message = BAD_PIPELINES[0]
    proc = _run(["bench", "--pipeline", spec, "--no-progress"], tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert message in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.timeout(120)
def test_no_arguments_prints_help(tmp_path: Path) -> None:
    proc = _run([], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "usage: python -m dataflow" in proc.stdout and "bench" in proc.stdout


# --- in-process: argument handling and pipeline loading ---------------------------------------


@pytest.mark.parametrize(
    "args", [["bench", "--size", "0"], ["bench", "--warmup", "-1"], ["bench", "--size", "x"]]
)
def test_bad_numbers_exit_2(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(args)
    assert info.value.code == 2
    assert "error: argument" in capsys.readouterr().err


def test_main_in_process(pipelines_module: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "--pipeline", f"{pipelines_module}:FLOW", "--size", "20", "--warmup", "0",
                 "--no-progress", "--profile"])
    assert code == 0
    out = capsys.readouterr().out
    assert "20 dp in" in out and "slowest: #" in out and "DataFromList" in out


@pytest.mark.parametrize(("spec", "message"), BAD_PIPELINES)
def test_bad_pipeline_returns_2(
    pipelines_module: str, capsys: pytest.CaptureFixture[str], spec: str, message: str
) -> None:
    assert main(["bench", "--pipeline", spec, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_main_function_needing_arguments_exits_2(
    pipelines_module: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", "--pipeline", f"{pipelines_module}:needs_args"]) == 2
    assert "callable with no arguments" in capsys.readouterr().err


def test_load_pipeline_calls_function_or_returns_object(pipelines_module: str) -> None:
    flow = load_pipeline(f"{pipelines_module}:small")
    flow.reset_state()
    assert [dp[0] for dp in flow][:3] == [0, 2, 4]
    module = sys.modules[pipelines_module]
    assert load_pipeline(f"{pipelines_module}:FLOW") is module.FLOW


def test_load_pipeline_errors_propagate_from_user_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "cli_broken_for_test.py").write_text("import no_such_dependency_xyz\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="no_such_dependency_xyz"):
        load_pipeline("cli_broken_for_test:flow")


def test_demo_pipeline_shapes() -> None:
    df = demo_pipeline(size=200, seed=0)
    assert isinstance(df, BatchData) and len(df) == 3
    df.reset_state()
    batches = list(df)
    assert len(batches) == 3
    images, labels = batches[0]
    assert images.shape == (64, 32, 32, 3) and images.dtype == np.float32
    assert labels.shape == (64,) and labels.dtype == np.int64
    assert images.min() >= -1.0 and images.max() <= 1.0
    assert labels.min() >= 0 and labels.max() < 10


def test_demo_pipeline_seed_is_reproducible() -> None:
    first, second = demo_pipeline(size=64, seed=3), demo_pipeline(size=64, seed=3)
    first.reset_state()
    second.reset_state()
    a, b = next(iter(first)), next(iter(second))
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
