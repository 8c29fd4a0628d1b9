"""The ported tensorpack pipelines in examples/tensorpack_migration/ run for a few batches on
synthetic data in the real on-disk formats, and produce what their code promises."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "tensorpack_migration"


def _run(script: str, tmp_path: Path, *args: str) -> list[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env["TQDM_DISABLE"] = "1"
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / script), "--workdir", str(tmp_path), *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=170,
    )  # fmt: skip
    assert proc.returncode == 0, f"{script} failed:\n{proc.stdout}\n{proc.stderr}"
    assert not list(tmp_path.iterdir()), "the example left files behind"
    return proc.stdout.splitlines()


@pytest.mark.timeout(180)
def test_imagenet_lmdb_tutorial_and_imagenet_train_val(tmp_path: Path) -> None:
    pytest.importorskip("cv2")
    pytest.importorskip("lmdb")
    lines = _run("imagenet_lmdb.py", tmp_path, "--batches", "2")
    for flow in ("lmdb train", "imagenet train", "imagenet val"):
        got = [line for line in lines if line.startswith(flow + ":")]
        assert len(got) == 2 and all("images (4, 32, 32, 3)" in line for line in got), lines


@pytest.mark.timeout(180)
def test_cifar_resnet_get_data(tmp_path: Path) -> None:
    pytest.importorskip("cv2")
    lines = _run("cifar_resnet.py", tmp_path, "--batches", "2")
    train = [line for line in lines if line.startswith("cifar train:")]
    test = [line for line in lines if line.startswith("cifar test:")]
    assert len(train) == 2 and all("(16, 32, 32, 3)" in line for line in train), lines
    assert len(test) == 2, lines


@pytest.mark.timeout(180)
def test_detection_boxes_follow_the_image(tmp_path: Path) -> None:
    pytest.importorskip("cv2")
    lines = _run("detection_boxes.py", tmp_path, "--batches", "6")
    assert len([line for line in lines if line.startswith("detection: image")]) == 6, lines
