"""The image layer needs OpenCV only when it runs: ``import dataflow`` and building augmentors or
flows never import it, and a missing OpenCV is an ImportError naming the extra to install.
Each check runs in a subprocess with a clean ``sys.modules``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str) -> str:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert proc.returncode == 0, f"subprocess failed:\n{code}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout.strip()


def test_imports_and_construction_load_no_opencv() -> None:
    out = _run(
        """
        import sys
        import dataflow
        from dataflow import imgaug, ImageFromFile, AugmentImageComponent, AugmentImageComponents
        from dataflow import AugmentImageCoordinates
        from dataflow.imgaug import Flip, Rotation, GoogleNetRandomCropAndResize
        augs = [Flip(horiz=True), Rotation(10), GoogleNetRandomCropAndResize(), imgaug.Resize(8)]
        ds = AugmentImageComponent(ImageFromFile(["a.png"]), augs)
        print(sorted(m for m in ("cv2", "albumentations") if m in sys.modules))
        """
    )
    assert out == "[]"


def test_missing_opencv_is_an_import_error_naming_the_extra() -> None:
    out = _run(
        """
        import sys
        sys.modules["cv2"] = None  # as if OpenCV were not installed
        import numpy as np
        from dataflow import imgaug, DataFromList, AugmentImageComponent
        aug = imgaug.Resize(8)  # building works
        try:
            aug.augment(np.zeros((4, 4, 3), np.uint8))
        except ImportError as e:
            print("augment:", e)
        ds = AugmentImageComponent(DataFromList([[np.zeros((4, 4), np.uint8)]]), [aug])
        ds.reset_state()
        try:
            list(ds)
        except ImportError as e:
            print("flow:", e)
        """
    )
    lines = out.splitlines()
    assert len(lines) == 2, out
    for line in lines:
        assert 'pip install "dataflow-ml[image]"' in line, line
