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
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from dataflow import codec, seeding
from tests.checkpoint._harness import cut_and_save, run_epochs
from tests.checkpoint._spec_pipelines import build

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EPOCHS = 2


@st.composite
def specs(draw: Any) -> dict[str, Any]:
    n = draw(st.integers(1, 40))
    world = draw(st.sampled_from([0, 2, 3]))
    return {
        "n": n,
        "shuffle": draw(st.booleans()),
        "aug": draw(st.booleans()),
        "buffer": draw(st.sampled_from([0, 2, 5])),
        "parallel": draw(st.sampled_from(["none", "thread", "fork", "spawn"])),
        "workers": draw(st.integers(2, 3)),
        "batch": draw(st.sampled_from([0, 1, 4])),
        "remainder": draw(st.booleans()),
        "shard": [world, draw(st.integers(0, world - 1))] if world else 0,
    }


def _in_child(spec: dict[str, Any], state: dict[str, Any], workers: int, tmp: str) -> list[Any]:
    paths = [os.path.join(tmp, name) for name in ("spec.json", "state.bin", "out.bin")]
    with open(paths[0], "w") as f:
        json.dump(spec, f)
    with open(paths[1], "wb") as f:
        f.write(codec.dumps(state))
    cmd = [sys.executable, "-m", "tests.checkpoint._resume_child", *paths, str(EPOCHS), str(workers)]
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, f"resume child failed:\n{proc.stderr[-3000:]}"
    with open(paths[2], "rb") as f:
        return codec.loads(f.read())


def _canon_plain(epochs: list[list[Any]]) -> list[Any]:
    """The reference in the child's plain form (tuples as lists)."""
    return codec.loads(codec.dumps([[list(map(_plain, ep))] for ep in epochs]))


def _plain(x: Any) -> Any:
    return [_plain(v) for v in x] if isinstance(x, tuple) else x


@pytest.mark.timeout(600)  # every example starts a child interpreter: minutes on a busy machine
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=specs(), data=st.data())
def test_resume_in_a_new_process_equals_the_uninterrupted_stream(
    spec: dict[str, Any], data: Any, tmp_path_factory: Any
) -> None:
    """Cut anywhere in two epochs (inside an epoch or between epochs), resume in a new process
    (an ordered parallel map at a drawn worker count, possibly another than when saved)."""
    seeding.set_seed(1)
    try:
        ref = build(spec)
    except ValueError:  # a batch larger than a shard without remainder: refused, rightly
        reject()
    ref.reset_state()
    reference = run_epochs(ref, EPOCHS + 1)
    ref.close()
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
