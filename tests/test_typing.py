"""Users' type checkers see what a flow yields: mypy run on a small user program infers
``DataFlow[T]`` through sources and the fluent API, and flags a flow used as the wrong type."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SNIPPET = textwrap.dedent(
    """
    from dataflow import DataFlow, DataFromGenerator, DataFromList

    def parse(x: int) -> str | None:
        return None if x < 0 else str(x)

    def half(x: int) -> float:
        return x * 0.5

    src = DataFromList([1, 2, 3])
    reveal_type(src)                                    # 1
    reveal_type(src.map(parse))                         # 2
    reveal_type(src.map(half))                          # 3
    reveal_type(src.shuffle(10).take(2).repeat(2))      # 4
    reveal_type(src.filter(lambda x: x > 1))            # 5
    reveal_type(src.batch(2))                           # 6
    reveal_type(DataFromGenerator(lambda: iter([b"a"])))  # 7
    for dp in src.map(parse):
        reveal_type(dp)                                 # 8
    with src as same:
        reveal_type(same)                               # 9
    wrong: DataFlow[str] = src                          # an error: it yields ints
    """
)

EXPECTED = [
    "dataflow.sources._memory.DataFromList[int]",
    "dataflow.base.DataFlow[str]",
    "dataflow.base.DataFlow[float]",
    "dataflow.base.DataFlow[int]",
    "dataflow.base.DataFlow[int]",
    "dataflow.base.DataFlow[Any]",
    "dataflow.sources._iterables.DataFromGenerator[bytes]",
    "str",
    "dataflow.sources._memory.DataFromList[int]",
]


@pytest.mark.timeout(300)
def test_users_see_datapoint_types(tmp_path: Path) -> None:
    """mypy under the project's own configuration (setup.cfg: strict, Python 3.10, missing
    imports ignored), run from the repository root like tests/test_lint.py's ``mypy dataflow``:
    it reuses that run's incremental cache instead of checking dataflow and numpy's stubs
    again from scratch. Strict only adds errors, so what a user's laxer defaults infer is the
    same and the one error below is an error there too."""
    snippet = tmp_path / "user_code.py"
    snippet.write_text(SNIPPET, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "setup.cfg"), str(snippet)],
        cwd=ROOT, capture_output=True, text=True, timeout=290,
    )
    out = proc.stdout + proc.stderr
    revealed = [t.replace("builtins.", "") for t in re.findall(r'Revealed type is "(.*)"', out)]
    assert revealed == EXPECTED, out
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert len(errors) == 1 and "DataFromList[int]" in errors[0] and "DataFlow[str]" in errors[0], out
