"""Chrome traces: ``profile(trace=)``, ``trace()``, ``python -m dataflow profile/tune --trace``.
The file is valid trace-event JSON with a track per stage and per worker, and its spans nest
and order as the pipeline ran; with tracing off nothing is recorded."""

from __future__ import annotations

import json
import sys
import time
import types
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

import dataflow as D
from dataflow import _trace
from dataflow.__main__ import main
from dataflow.tools import profile, trace
from dataflow.tools._tuning import tune

pytestmark = pytest.mark.timeout(240)


def slow(dp: list[int]) -> list[int]:
    time.sleep(0.002)
    return [dp[0] * 2]


def plus1(dp: list[int]) -> list[int]:
    return [dp[0] + 1]


def make_flow() -> D.DataFlow:
    src = D.DataFromList([[i] for i in range(400)], shuffle=False)
    mapped = D.MultiProcessMapDataZMQ(src.map(plus1), 2, slow, buffer_size=8, strict=True, ordered=True,
                                      timeout=60, chunk=1)
    threads = D.MultiThreadMapData(mapped, 2, plus1, buffer_size=8, strict=True, ordered=True, timeout=60)
    return threads.batch(4)


def load(path: Path) -> tuple[dict[tuple[int, int], str], dict[int, str], list[dict[str, Any]]]:
    """(thread names by (pid, tid), process names by pid, the other events), checking the format."""
    data = json.loads(path.read_text())
    assert data["displayTimeUnit"] == "ms" and isinstance(data["traceEvents"], list)
    threads: dict[tuple[int, int], str] = {}
    procs: dict[int, str] = {}
    events = []
    for e in data["traceEvents"]:
        assert {"name", "ph", "pid", "tid"} <= set(e)
        if e["ph"] == "M":
            if e["name"] == "thread_name":
                threads[(e["pid"], e["tid"])] = e["args"]["name"]
            elif e["name"] == "process_name":
                procs[e["pid"]] = e["args"]["name"]
            continue
        assert e["ph"] in ("X", "i") and isinstance(e["ts"], (int, float)) and e["ts"] >= 0
        if e["ph"] == "X":
            assert e["dur"] >= 0 and e["cat"] in ("busy", "wait", "idle")
            assert (e["pid"], e["tid"]) in threads, f"span on an unnamed track: {e}"
        events.append(e)
    return threads, procs, events


def by_track(events: list[dict[str, Any]]) -> dict[tuple[int, int], list[dict[str, Any]]]:
    tracks: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            tracks[(e["pid"], e["tid"])].append(e)
    return tracks


def within(inner: dict[str, Any], outer: dict[str, Any], slack: float = 1.0) -> bool:
    end, outer_end = inner["ts"] + inner["dur"], outer["ts"] + outer["dur"]
    return outer["ts"] - slack <= inner["ts"] and end <= outer_end + slack


def test_profile_trace_has_a_track_per_stage_and_worker_and_sensible_spans(tmp_path: Path) -> None:
    out = tmp_path / "trace.json"
    df = make_flow()
    try:
        result = profile(df, size=60, warmup=5, trace=out)
    finally:
        df.close()
    assert result.count == 60
    threads, procs, events = load(out)
    names = set(threads.values())
    for label in ("#0 DataFromList", "#1 MapData(plus1)", "#2 MultiProcessMapDataZMQ",
                  "#3 MultiThreadMapData", "#4 BatchData", "MultiThreadMapData thread 0",
                  "MultiThreadMapData thread 1"):
        assert label in names, (label, names)
    workers = [p for p, n in procs.items() if n.startswith("MultiProcessMapDataZMQ worker")]
    assert len(workers) == 2  # one track (a process of its own) per worker
    tracks = by_track(events)
    track_of = {name: key for key, name in threads.items()}
    for label in ("#2 MultiProcessMapDataZMQ", "#3 MultiThreadMapData", "#4 BatchData"):
        spans = tracks[track_of[label]]
        busy = sorted((e for e in spans if e["name"] == label), key=lambda e: e["ts"])
        waits = [e for e in spans if e["cat"] == "wait"]
        assert busy and waits
        for a, b in zip(busy, busy[1:]):  # a stage's next() calls follow one another
            assert a["ts"] + a["dur"] <= b["ts"] + 1.0
        for w in waits:  # every wait is nested in a busy span of the stage that waits
            assert any(within(w, b) for b in busy), w
    batch_waits = [e["name"] for e in tracks[track_of["#4 BatchData"]] if e["cat"] == "wait"]
    assert set(batch_waits) == {"waiting for #3 MultiThreadMapData"}
    map_waits = {e["name"] for e in tracks[track_of["#2 MultiProcessMapDataZMQ"]] if e["cat"] == "wait"}
    assert map_waits == {"waiting for workers", "waiting for #1 MapData(plus1)"}
    for pid in workers:  # a worker's spans: busy tasks and idle gaps, in order, never overlapping
        spans = sorted(tracks[(pid, pid)], key=lambda e: e["ts"])
        assert any(e["cat"] == "busy" and e["dur"] >= 1500 for e in spans)  # the 2 ms map
        for a, b in zip(spans, spans[1:]):
            assert a["ts"] + a["dur"] <= b["ts"] + 1.0
        assert all(a["cat"] != b["cat"] or a["cat"] == "busy" for a, b in zip(spans, spans[1:]))
    assert _trace.current is None


def test_trace_context_manager_restores_the_chain_and_writes_on_error(tmp_path: Path) -> None:
    src = D.DataFromList([[i] for i in range(30)], shuffle=False)
    top = src.map(plus1).batch(3)
    mid = top.ds
    out = tmp_path / "t.json"
    with pytest.raises(KeyError):
        with trace(out, top) as t:
            top.reset_state()
            assert next(iter(t.flow))[0].tolist() == [1, 2, 3]
            assert top.ds is not mid  # traced while the block runs
            raise KeyError("stop")
    assert top.ds is mid and mid.ds is src  # put back
    threads, _, events = load(out)
    assert {"#0 DataFromList", "#1 MapData(plus1)", "#2 BatchData"} <= set(threads.values())
    assert any(e["name"] == "#2 BatchData" for e in events)


def test_autotune_decisions_are_instant_events(tmp_path: Path) -> None:
    src = D.DataFromList([[i] for i in range(3000)], shuffle=False)
    out = tmp_path / "a.json"
    with trace(out):  # built inside: the worker count is decided at construction
        df = src.parallel_map(plus1, num_proc="auto", buffer_size="auto", timeout=60)
        df.reset_state()
        assert sum(1 for _ in df) == 3000
    df.close()
    threads, _, events = load(out)
    decisions = [e for e in events if e["ph"] == "i"]
    assert any("num_proc='auto' uses" in e["name"] for e in decisions)
    assert any("per task" in e["name"] for e in decisions)
    assert all(threads[(e["pid"], e["tid"])] == "autotune decisions" for e in decisions)
    assert any(e["name"] == "waiting for workers" for e in events)


def test_one_trace_at_a_time(tmp_path: Path) -> None:
    with trace(None):
        with pytest.raises(RuntimeError, match="already recording"):
            with trace(tmp_path / "x.json"):
                pass
    assert _trace.current is None


def test_nothing_is_recorded_with_tracing_off(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: Any, **kw: Any) -> None:
        raise AssertionError("recorded while tracing is off")

    for name in ("span", "worker_span", "instant", "stage_track"):
        monkeypatch.setattr(_trace.Tracer, name, boom)
    df = make_flow()
    with df:
        df.reset_state()
        assert sum(len(b[0]) for b in df) == 400


def test_max_events_bounds_the_trace(tmp_path: Path) -> None:
    src = D.DataFromList([[i] for i in range(500)], shuffle=False).map(plus1)
    out = tmp_path / "m.json"
    with trace(out, src, max_events=50) as t:
        src.reset_state()
        assert sum(1 for _ in t.flow) == 500
    data = json.loads(out.read_text())
    assert len([e for e in data["traceEvents"] if e["ph"] != "M"]) == 50
    assert data["otherData"]["dropped_events"] > 0


def small_flow() -> D.DataFlow:
    src = D.DataFromList([[i] for i in range(40)], shuffle=False)
    return src.parallel_map(plus1, num_proc=1, buffer_size=10, timeout=60)


def test_cli_profile_and_tune_write_traces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    mod = types.ModuleType("trace_target_mod")
    mod.small_flow = small_flow  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "trace_target_mod", mod)
    out = tmp_path / "p.json"
    argv = ["profile", "--pipeline", "trace_target_mod:small_flow", "--size", "20", "--warmup", "2",
            "--no-progress", "--trace", str(out)]
    assert main(argv) == 0
    assert "trace written to" in capsys.readouterr().out
    threads, procs, _ = load(out)
    assert "#1 MultiProcessMapDataZMQ" in threads.values()
    assert any("worker 0" in n for n in procs.values())
    out2 = tmp_path / "t.json"
    argv = ["tune", "--pipeline", "trace_target_mod:small_flow", "--size", "10", "--warmup", "2",
            "--trace", str(out2)]
    assert main(argv) == 0
    threads, _, events = load(out2)
    assert "#1 MultiProcessMapDataZMQ" in threads.values() and events
    assert main(["profile", "--pipeline", "no_such_module_xyz:f"]) == 2


def test_tune_trace_api(tmp_path: Path) -> None:
    out = tmp_path / "tt.json"
    result = tune(small_flow, size=10, warmup=2, trace=out)
    assert result.profile is not None
    load(out)
