"""docs/logging.rst tells the truth: every logger dataflow creates is listed there, and what
is documented at INFO reaches the ``"dataflow"`` logger."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from dataflow import DataFromList, PrintData

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "logging.rst").read_text(encoding="utf-8")


def _logger_names() -> set[str]:
    names = set()
    for path in (ROOT / "dataflow").rglob("*.py"):
        names.update(re.findall(r"""getLogger\(\s*["']([\w.]+)["']\s*\)""", path.read_text("utf-8")))
    return names


def test_every_logger_is_documented() -> None:
    names = _logger_names()
    assert names, "no logging.getLogger(...) found: the pattern above went stale"
    for name in names:
        assert f'``"{name}"``' in DOC, f'logger "{name}" is not listed in docs/logging.rst'


def test_every_log_call_site_is_documented() -> None:
    """Each module that logs is named in the table (its messages are described there)."""
    for path in (ROOT / "dataflow").rglob("*.py"):
        text = path.read_text("utf-8")
        loggers = re.findall(r"^(\w+) = logging\.getLogger\(", text, re.MULTILINE) + ["logger"]
        calls = rf"\b({'|'.join(loggers)})\.(debug|info|warning|error|exception|log)\("
        if re.search(calls, text):
            rel = path.relative_to(ROOT).as_posix()
            assert rel in DOC, f"{rel} logs but docs/logging.rst does not say what"


def test_print_data_logs_at_info(caplog: pytest.LogCaptureFixture) -> None:
    flow = PrintData(DataFromList([[1, 2]], shuffle=False), num=1, name="docs")
    with caplog.at_level(logging.INFO, logger="dataflow"):
        assert list(flow) == [[1, 2]]
    records = [r for r in caplog.records if r.name == "dataflow"]
    assert len(records) == 1 and records[0].levelno == logging.INFO
    assert "PrintData (docs), epoch 0, datapoint 0/1" in records[0].getMessage()
