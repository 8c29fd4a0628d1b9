"""The promise of a checkpoint across a restart: a random pipeline, cut at a random point,
its state saved to bytes and loaded in a *new Python process* that builds the pipeline again,
yields exactly what the uninterrupted run yields after the cut — the rest of the epoch and the
next one — with thread and process maps (fork and spawn), and with an ordered map resumed at
another worker count (elastic)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, reject, settings
from hypothesis import strategies as st

from dataflow import _seeding as seeding
from dataflow import codec
from tests.checkpoint._harness import Position, advance, cut_and_save, positions, run_epochs
from tests.checkpoint._spec_pipelines import build, specs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EPOCHS = 2


def _in_child(
    spec: dict[str, Any], state: dict[str, Any], workers: int, tmp: str,
    chain: tuple[Position, Position] | None = None,
) -> Any:
    """What the child yields after loading ``state``: the rest of the run, or with ``chain``
    (where the state was cut, where to cut next) what it yields up to that cut and the state
    it saves there."""
    paths = [os.path.join(tmp, name) for name in ("spec.json", "state.bin", "out.bin")]
    with open(paths[0], "w") as f:
        json.dump(spec, f)
    with open(paths[1], "wb") as f:
        f.write(codec.dumps(state))
    cmd = [sys.executable, "-m", "tests.checkpoint._resume_child", *paths, str(EPOCHS), str(workers)]
    if chain is not None:
        cmd += [",".join(str(int(v)) for v in p) for p in chain] + [os.path.join(tmp, "again.bin")]
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, f"resume child failed:\n{proc.stderr[-3000:]}"
    with open(paths[2], "rb") as f:
        got = codec.loads(f.read())
    if chain is None:
        return got
    with open(os.path.join(tmp, "again.bin"), "rb") as f:
        return got, codec.loads(f.read())


def _canon_plain(epochs: list[list[Any]]) -> list[Any]:
    """The reference in the child's plain form (tuples as lists)."""
    return codec.loads(codec.dumps([[list(map(_plain, ep))] for ep in epochs]))


def _plain(x: Any) -> Any:
    return [_plain(v) for v in x] if isinstance(x, tuple) else x


def _reference(spec: dict[str, Any], epochs: int) -> list[list[Any]]:
    """The uninterrupted run of ``spec`` (seeded as the cut runs are); a spec the library
    refuses (a batch larger than a shard without remainder) is rejected, rightly."""
    seeding.set_seed(1)
    try:
        ref = build(spec)
    except ValueError:
        reject()
    ref.reset_state()
    try:
        return run_epochs(ref, epochs)
    finally:
        ref.close()


@pytest.mark.timeout(600)  # every example starts a child interpreter: minutes on a busy machine
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=specs(), data=st.data())
def test_resume_in_a_new_process_equals_the_uninterrupted_stream(
    spec: dict[str, Any], data: Any, tmp_path_factory: Any
) -> None:
    """Cut anywhere in two epochs (inside an epoch or between epochs), resume in a new process
    (an ordered parallel map at a drawn worker count, possibly another than when saved)."""
    reference = _reference(spec, EPOCHS + 1)
    j = data.draw(st.integers(0, EPOCHS - 1), label="epoch")
    between = data.draw(st.booleans(), label="between") and j > 0
    m = 0 if between else data.draw(st.integers(0, len(reference[j])), label="taken")
    resume_workers = data.draw(st.integers(1, 3), label="resume workers") if spec["parallel"] != "none" else 0

    seeding.set_seed(1)
    first = build(spec)
    first.reset_state()
    state, it = cut_and_save(first, j, m, between)
    del it
    first.close()

    expected = reference[j:j + EPOCHS] if between else [reference[j][m:], *reference[j + 1 : j + EPOCHS]]
    got = _in_child(spec, state, resume_workers, str(tmp_path_factory.mktemp("resume")))
    assert got == _canon_plain(expected), f"spec {spec}, cut after {m} of epoch {j}, between={between}"


@pytest.mark.timeout(600)
@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
@given(
    spec=specs(parallel=("none", "fork"), workers=(2,), max_n=20),
    at=st.lists(st.floats(0, 1), min_size=3, max_size=3),
)
@example(  # shuffled, a shuffle buffer, 2 process workers, batches; cut in both epochs
    spec={"n": 13, "shuffle": True, "aug": True, "buffer": 5, "parallel": "fork", "workers": 2,
          "batch": 4, "remainder": True, "shard": 0},
    at=[0.3, 0.7, 0.8],
)
def test_run_preempted_three_times_across_processes_equals_the_uninterrupted_stream(
    spec: dict[str, Any], at: list[float], tmp_path_factory: Any
) -> None:
    """A job preempted three times, restarted in a new process each of the first two times:
    cut 1 here, resumed in a child that runs to cut 2 and saves, resumed in another child
    that runs to cut 3 and saves, resumed here to the end. What the four yielded, together,
    is the uninterrupted stream (cuts anywhere in two epochs, repeats allowed)."""
    reference = _reference(spec, EPOCHS)
    where = positions([len(ep) for ep in reference])
    cuts = [where[int(f * (len(where) - 1))] for f in sorted(at)]  # shares of the run: examples stay valid

    got: list[list[Any]] = [[] for _ in range(EPOCHS)]
    seeding.set_seed(1)
    first = build(spec)
    first.reset_state()
    it = advance(first, (0, 0, False), cuts[0], got)
    state = first.state_dict()
    del it
    first.close()
    mine = _canon_plain(got)
    for k in (0, 1):
        part, state = _in_child(spec, state, spec["workers"], str(tmp_path_factory.mktemp("chain")),
                                chain=(cuts[k], cuts[k + 1]))
        mine = [[mine[e][0] + part[e][0]] for e in range(EPOCHS)]
    seeding.set_seed(3)
    last = build(spec)
    last.load_state_dict(state)
    last.reset_state()
    rest: list[list[Any]] = [[] for _ in range(EPOCHS)]
    advance(last, cuts[2], where[-1], rest)
    last.close()
    mine = [[mine[e][0] + _canon_plain(rest)[e][0]] for e in range(EPOCHS)]
    assert mine == _canon_plain(reference), f"spec {spec}, preempted at {cuts}"
