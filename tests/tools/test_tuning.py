"""``tune`` / ``python -m dataflow tune``: every configuration is tried on a fresh pipeline,
the best is named, and the pipeline's other stages are kept."""

from __future__ import annotations

import sys
import types

import pytest

import dataflow as D
from dataflow.__main__ import main
from dataflow.tools._tuning import configured, tune

pytestmark = pytest.mark.timeout(240)


def inc(dp: list[int]) -> list[int]:
    return [dp[0] + 1]


def make_flow() -> D.DataFlow:
    src = D.DataFromList([[i] for i in range(50)], shuffle=False)
    return src.parallel_map(inc, num_proc=1, buffer_size=10, timeout=60).batch(5)


def test_configured_rebuilds_the_process_maps_and_keeps_the_rest() -> None:
    df, n = configured(make_flow, 2, 40)
    assert n == 1
    assert isinstance(df, D.BatchData)
    stage = df.ds
    assert isinstance(stage, D.MultiProcessMapDataZMQ)
    assert (stage.num_proc, stage.buffer_size, stage.ordered, stage.strict) == (2, 40, True, True)
    with df:
        df.reset_state()
        assert [int(v) for b in df for v in b[0]] == list(range(1, 51))


def test_tune_tries_every_configuration_and_names_the_best() -> None:
    result = tune(make_flow, size=20, warmup=5)
    configs = [c for c, _ in result.rates]
    assert configs[0] == ("auto", "auto")
    assert (1, 50) in configs and (1, 800) in configs
    assert all(rate > 0 for _, rate in result.rates)
    assert result.best in configs
    assert result.profile is not None
    text = str(result)
    assert "best: num_proc=" in text and "MultiProcessMapDataZMQ" in text


def test_tune_without_process_maps_says_so() -> None:
    result = tune(lambda: D.DataFromList([[1]], shuffle=False).map(inc), size=5, warmup=0)
    assert result.rates == [] and "nothing to tune" in str(result)


def test_cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    mod = types.ModuleType("tune_target_mod")
    mod.make_flow = make_flow  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tune_target_mod", mod)
    assert main(["tune", "--pipeline", "tune_target_mod:make_flow", "--size", "10", "--warmup", "2"]) == 0
    assert "best: num_proc=" in capsys.readouterr().out
    assert main(["tune", "--pipeline", "no_such_module_xyz:f"]) == 2


def test_cli_tunes_within_a_ram_budget(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    mod = types.ModuleType("tune_budget_mod")
    mod.make_flow = make_flow  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tune_budget_mod", mod)
    argv = ["tune", "--pipeline", "tune_budget_mod:make_flow", "--size", "10", "--warmup", "2"]
    assert main([*argv, "--ram-budget", "64GiB"]) == 0
    out = capsys.readouterr().out
    assert "ram_budget: 65,536 MiB" in out and "peak memory (MiB)" in out
    with pytest.raises(SystemExit) as info:
        main([*argv, "--ram-budget", "lots"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "--ram-budget" in err and "'lots'" in err
