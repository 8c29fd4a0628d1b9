"""``python -m benchmarks all``: the tables of every script read back into one table of
ratios, the marked section of docs/performance.md rewritten from it, and one real quick run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks._all import SCENARIOS, _adapters_section, _before
from benchmarks._report import END, START, parse_tables, render, replace_section, rows_for

ROOT = Path(__file__).resolve().parent.parent


def _dataflow(name: str) -> bool:
    return name.startswith("dataflow")


TTFB = """ttfb: 2 workers ...

### first batch (other processes used 0.10 cores)

| contender | median s | min–max s | vs tensorpack 0.11 | vs torch DataLoader |
|---|---|---|---|---|
| dataflow runner | 0.050 | 0.040–0.060 | 4.00x | 0.80x |
| tensorpack 0.11 | 0.200 | 0.190–0.210 | 1.00x | 0.20x |
| torch DataLoader | 0.040 | 0.030–0.050 | 5.00x | 1.00x |
"""

MP_LARGE = """mp_large: ...

| contender | median GB/s | min–max GB/s | median items/s | vs memcpy | vs tensorpack 0.11 | CPU |
|---|---|---|---|---|---|---|
| memcpy (np.copyto, 1 thread) | 10.00 | 9–11 | 1,000 | 1.00x | 2.00x | 0.00 |
| dataflow | 12.00 | 11–13 | 1,200 | 1.20x | 2.40x | 0.01 |
| tensorpack 0.11 | 5.00 | 4–6 | 500 | 0.50x | 1.00x | 0.00 |
"""

FORMATS = """| contender | median items/s | median MB/s | min–max items/s | vs tensorpack LMDB, in order |
|---|---|---|---|---|
| dataflow LMDB, in order | 300,000 | 9 | 1–2 | 1.50x |
| dataflow TFRecord | 100,000 | 3 | 1–2 | 0.50x |
| tensorpack LMDB, in order | 200,000 | 6 | 1–2 | 1.00x |
| tensorpack TFRecord | 50,000 | 1 | 1–2 | 0.25x |
"""

REMOTE = """### small: [int, float32[10]], 48 payload bytes each; other processes used 0.1 cores

| contender | median items/s | min–max | vs dataflow | vs tensorpack 0.11 |
|---|---|---|---|---|
| dataflow | 40,000 | 1–2 | 1.00x | 0.33x |
| tensorpack 0.11 | 120,000 | 1–2 | 3.00x | 1.00x |

| contender | median kB/s | min–max | vs dataflow | vs tensorpack 0.11 |
|---|---|---|---|---|
| dataflow | 1,920 | 1–2 | 1.00x | 0.33x |
| tensorpack 0.11 | 5,760 | 1–2 | 3.00x | 1.00x |
"""

CHECKPOINT = """| pipeline | state_dict() median ms |
|---|---|
| dataflow: shuffle(10k buffer), in process | 2.00 |
| Grain: global shuffle + map, iterator.get_state() | 0.500 |
| torchdata StatefulDataLoader: shuffled, 2 workers | 8.000 |
| dataflow: shuffle(10k buffer), 2 workers | 1000.0 |
"""


def test_ratios_are_how_many_times_better_for_rates_and_for_times() -> None:
    [ttfb] = rows_for("ttfb", parse_tables(TTFB), _dataflow, _before(" (", ":"))
    assert ttfb.scenario == "ttfb first batch" and ttfb.contender == "dataflow runner"
    assert ttfb.peers == {"tensorpack": "4.00x", "torch": "0.80x"}  # times: theirs / ours
    [large] = rows_for("mp_large", parse_tables(MP_LARGE), _dataflow, _before(" ("))
    assert large.peers == {"tensorpack": "2.40x"}  # rates: ours / theirs, from the first median
    assert large.others == ["memcpy 1.20x"]  # a non-peer reference is copied as printed
    state, slow = rows_for("checkpoint", parse_tables(CHECKPOINT), _dataflow, _before(" ("))
    assert slow.peers["grain"].startswith("<0.01x")  # not rounded to a meaningless 0.00x
    assert state.peers == {
        "grain": "0.25x (Grain: global shuffle + map, iterator.get_state())",
        "torch": "4.00x (torchdata StatefulDataLoader: shuffled, 2 workers)",
    }


def test_rows_pair_up_by_what_they_do_and_repeated_tables_count_once() -> None:
    lmdb, tfr = rows_for("formats_read", parse_tables(FORMATS), _dataflow, _before(" ("))
    assert lmdb.peers == {"tensorpack": "1.50x (tensorpack LMDB, in order)"}
    assert tfr.peers == {"tensorpack": "2.00x (tensorpack TFRecord)"}
    rows = rows_for("remote", parse_tables(REMOTE), _dataflow, _before(" (", ":", ";"))
    assert [(r.scenario, r.contender, r.peers) for r in rows] == [
        ("remote small", "dataflow", {"tensorpack": "0.33x"})
    ]
    assert rows[0].others == []  # "vs dataflow" (itself) is not a reference


RAY = """| contender | median items/s | min–max | vs serial map |
|---|---|---|---|
| serial map | 100 | 1–2 | 1.00x |
| dataflow processes | 190 | 1–2 | 1.90x |
| Ray Data map | 50 | 1–2 | 0.50x |
| Ray Data map_batches | 95 | 1–2 | 0.95x |
"""


def test_without_a_same_job_row_the_peers_best_row_is_the_reference() -> None:
    [row] = rows_for("ray_scale", parse_tables(RAY), _dataflow, _before(" ("))
    assert row.peers == {"Ray Data": "2.00x (Ray Data map_batches)"}
    assert row.others == ["serial map 1.90x"]


def test_section_labels() -> None:
    assert _adapters_section("torch 2.13.0+cpu; flow: batch") == "torch, batch"
    assert _before(" (", ":", ";")("small: [int, float32[10]], 48 bytes; other") == "small"
    assert {s.name for s in SCENARIOS} >= {"ttfb", "mp_small", "mp_batch", "mp_large", "mp_map", "remote"}


def test_the_marked_section_is_replaced_and_the_rest_kept() -> None:
    doc = f"# Perf\n\nintro\n\n{START}\nold table\n{END}\n\n## more\ntext\n"
    table = render(rows_for("ttfb", parse_tables(TTFB), _dataflow, _before(" (")), ["a note"])
    new = replace_section(doc, table)
    assert new.startswith("# Perf\n\nintro\n\n" + START) and new.endswith(END + "\n\n## more\ntext\n")
    assert "old table" not in new and "| ttfb first batch | dataflow runner | 4.00x | 0.80x |" in new
    assert "- a note" in new
    assert replace_section(new, table) == new  # idempotent
    appended = replace_section("# Perf\n", "body")
    assert appended == f"# Perf\n\n{START}\nbody\n{END}\n"


def test_the_docs_have_the_marked_section() -> None:
    text = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    assert text.count(START) == 1 and text.count(END) == 1 and text.index(START) < text.index(END)
    section = text.split(START)[1].split(END)[0]
    assert "python -m benchmarks all" in section and "| scenario | dataflow contender |" in section


def _run(*args: str, timeout: float, path: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), path) if p)}
    return subprocess.run(
        [sys.executable, "-m", "benchmarks", *args], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=timeout,
    )


def test_dry_run_prints_every_command() -> None:
    done = _run("all", "--quick", "--dry-run", timeout=60)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == len(SCENARIOS)
    assert "ttfb: python benchmarks/ttfb.py --rounds 3" in done.stdout
    done = _run("all", "--only", "nonsense", timeout=60)
    assert done.returncode == 2 and "unknown scenario" in done.stderr


def test_a_quick_run_of_one_scenario_prints_one_table_and_updates_the_docs(tmp_path: Path) -> None:
    """The whole path on the cheapest scenario, with tensorpack made to look missing (its
    import pulls in TensorFlow, seconds): the run goes on without it and says so."""
    missing = tmp_path / "missing"
    (missing / "tensorpack").mkdir(parents=True)
    (missing / "tensorpack" / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
    doc = tmp_path / "performance.md"
    doc.write_text(f"# Performance\n\n{START}\nold\n{END}\n\nkept\n", encoding="utf-8")
    args = ("all", "--quick", "--only", "in_process", "--update-docs", str(doc))
    done = _run(*args, timeout=110, path=str(missing))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Command: `python -m benchmarks all --quick --only in_process`" in done.stdout
    [row] = [line for line in done.stdout.splitlines() if line.startswith("| in_process |")]
    assert re.search(r"^\| in_process \| dataflow \|( +\|){5} hand-written loop \d+\.\d\dx \|$", row), row
    assert "- in_process: tensorpack not installed" in done.stdout
    written = doc.read_text(encoding="utf-8")
    assert row in written and "old" not in written and written.endswith(f"{END}\n\nkept\n")


def test_docs_command_writes_a_saved_output_into_the_section(tmp_path: Path) -> None:
    from benchmarks.__main__ import main

    doc = tmp_path / "performance.md"
    doc.write_text(f"# Performance\n\n{START}\nold\n{END}\n\nkept\n", encoding="utf-8")
    saved = tmp_path / "all.md"
    table = render(rows_for("ttfb", parse_tables(TTFB), _dataflow, _before(" (")))
    saved.write_text("Command: `python -m benchmarks all --quick`\n\n" + table + "\n", encoding="utf-8")
    assert main(["docs", str(saved), "--doc", str(doc)]) == 0
    written = doc.read_text(encoding="utf-8")
    assert table in written and "old" not in written and written.endswith(f"{END}\n\nkept\n")
    saved.write_text("no table here\n", encoding="utf-8")
    with pytest.raises(SystemExit) as exit_info:
        main(["docs", str(saved), "--doc", str(doc)])
    assert exit_info.value.code == 2
    assert doc.read_text(encoding="utf-8") == written  # untouched


def test_memory_budget_runs_tiny_and_reports_peaks_against_the_budget() -> None:
    """benchmarks/memory_budget.py end to end, tiny: a rate table whose rows parse with a
    ratio against the unbudgeted run, and a peak table naming each budget."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DATAFLOW_BENCH_QUICK": "1"}
    args = ["--rounds", "1", "--items", "30", "--warmup", "5", "--mb", "1", "--budgets", "1GiB"]
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "memory_budget.py"), *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rates, peaks = parse_tables(done.stdout)
    assert [r[0] for r in rates.rows] == ["dataflow, no budget", "dataflow, ram_budget=1GiB"]
    rows = rows_for("memory_budget", [rates], _dataflow, _before(":"))
    assert [r.others for r in rows] == [["no budget 1.00x"], [rows[1].others[0]]]
    assert peaks.rows[1][3] == "1,024" and peaks.rows[1][4].endswith("x")


def test_object_store_runs_against_its_own_s3_server_and_reads_each_shard_once() -> None:
    """benchmarks/object_store.py end to end on a tiny dataset (its moto server, every
    contender, the 2-process check): its tables parse into rows against the s3fs loop, and
    every reader fetched each shard once, in one request each plus the listing."""
    pytest.importorskip("moto.server")
    pytest.importorskip("s3fs")
    from benchmarks.object_store import main as _  # noqa: F401  (the script imports cleanly)

    [scenario] = [s for s in SCENARIOS if s.name == "object_store"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DATAFLOW_BENCH_QUICK": "1"}
    args = ["--shards", "4", "--shard-mb", "0.1", "--rounds", "1", "--latency", "5"]
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "object_store.py"), *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = rows_for("object_store", parse_tables(done.stdout), scenario.ours, scenario.section)
    assert [r.contender for r in rows] == [
        "dataflow S3",
        "dataflow S3, +latency",
        "dataflow S3, +latency, prefetch_shards=8",
        "dataflow local disk",
    ]
    assert all(any(o.startswith("s3fs cat_file loop ") for o in r.others) for r in rows)
    requests = [t for t in parse_tables(done.stdout) if "requests (server)" in t.header][0]
    by_name = {r[0]: r for r in requests.rows}
    assert by_name["dataflow S3"][1:4] == ["5", "5", "1.000x"]  # the listing + one GET per shard
    ranks = [r for name, r in by_name.items() if "2 processes" in name]
    assert len(ranks) == 2 and all(r[3] == "1.000x" and r[0].endswith(", 4/4 records") for r in ranks)
    assert "Hugging Face datasets streaming: skipping" in done.stderr


def test_cow_memory_runs_tiny_and_measures_every_worker_alive_at_the_end() -> None:
    """benchmarks/cow_memory.py end to end on a small list: both contenders' rounds run in
    their own processes, every worker (ours started late included) is measured, and the time
    to first batch parses into a row against torch. 40k names: a longer order than a list
    holds (the array path), and a pass longer than the 0.1 s within which a process map starts
    its late workers, so that both are alive at the end however fast the machine."""
    pytest.importorskip("torch")
    pytest.importorskip("psutil")
    [scenario] = [s for s in SCENARIOS if s.name == "cow_memory"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DATAFLOW_BENCH_QUICK": "1"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "cow_memory.py"), "--items", "40000", "--rounds", "1"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=170,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    tables = parse_tables(done.stdout)
    [memory] = [t for t in tables if t.section.startswith("workers' memory")]
    workers = {r[0]: r[1] for r in memory.rows}
    assert workers == {"dataflow map_and_batch": "2", "torch DataLoader": "2"}
    rows = {r.scenario: r for r in rows_for("cow_memory", tables, scenario.ours, scenario.section)}
    assert set(rows) == {"cow_memory workers' memory over the pass", "cow_memory time to first batch"}
    row = rows["cow_memory time to first batch"]
    assert row.contender == "dataflow map_and_batch" and row.peers["torch"].endswith("x")
