"""PrintData and describe_datapoint: what is described, where it goes, data passes unchanged."""

from __future__ import annotations

import io
import logging

import numpy as np
import pytest

from dataflow.tools._printing import PrintData, describe_datapoint
from tests.helpers import ListFlow


def _images(n: int) -> list[list[object]]:
    rng = np.random.default_rng(0)
    return [[rng.integers(0, 256, (32, 32, 3), dtype=np.uint8), np.int64(i % 10)] for i in range(n)]


def test_yields_data_unchanged_and_describes_first_num() -> None:
    items = _images(5)
    buf = io.StringIO()
    flow = PrintData(ListFlow(items), num=2, file=buf)
    flow.reset_state()
    out = list(flow)
    assert len(out) == 5 and all(a is b for a, b in zip(out, items))
    text = buf.getvalue()
    assert "datapoint 0/2" in text and "datapoint 1/2" in text and "datapoint 2/2" not in text
    assert "ndarray:uint8 of shape (32, 32, 3) in range [" in text
    assert "int64 with value 0" in text and "int64 with value 1" in text
    assert "list with 2 components" in text


def test_describes_again_each_epoch_with_name() -> None:
    buf = io.StringIO()
    flow = PrintData(ListFlow(_images(3)), num=1, name="train", file=buf)
    flow.reset_state()
    list(flow)
    list(flow)
    text = buf.getvalue()
    assert "PrintData (train), epoch 0, datapoint 0/1" in text
    assert "PrintData (train), epoch 1, datapoint 0/1" in text
    assert text.count("datapoint 0/1") == 2


def test_num_zero_prints_nothing_and_len_is_forwarded() -> None:
    buf = io.StringIO()
    flow = PrintData(ListFlow(_images(4)), num=0, file=buf)
    assert len(flow) == 4
    assert len(list(flow)) == 4
    assert buf.getvalue() == ""


def test_stops_describing_when_flow_is_shorter_than_num() -> None:
    buf = io.StringIO()
    assert len(list(PrintData(ListFlow(_images(2)), num=5, file=buf))) == 2
    assert buf.getvalue().count("datapoint") == 2


def test_default_output_is_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    list(PrintData(ListFlow(_images(2))))
    captured = capsys.readouterr()
    assert "shape (32, 32, 3)" in captured.err and captured.out == ""


def test_goes_to_logging_when_it_is_enabled(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.INFO, logger="dataflow")
    list(PrintData(ListFlow(_images(2))))
    assert any("shape (32, 32, 3)" in r.getMessage() and r.name == "dataflow" for r in caplog.records)
    assert "shape (32, 32, 3)" not in capsys.readouterr().err


def test_dict_datapoints() -> None:
    buf = io.StringIO()
    dp = {"image": np.zeros((2, 3), np.float32), "label": 3, "name": "cat.jpg"}
    assert list(PrintData(ListFlow([dp]), file=buf)) == [dp]
    text = buf.getvalue()
    assert "dict with 3 components" in text
    assert "image: ndarray:float32 of shape (2, 3) in range [0, 0]" in text
    assert "label: int with value 3" in text
    assert "name: str of len 7: 'cat.jpg'" in text


def test_describe_nested_lists_respects_max_list_and_max_depth() -> None:
    dp = [[1, 2, 3, 4, 5], [[[[9]]]]]
    text = describe_datapoint(dp, max_depth=3, max_list=2)
    lines = text.splitlines()
    assert lines[0] == "list with 2 components"
    assert "  0: list of len 5" in lines
    assert "    0: int with value 1" in lines and "    1: int with value 2" in lines
    assert "    2: int with value 3" not in lines
    assert text.count("...") == 2  # one for the cut list, one for the depth limit
    deep = describe_datapoint(dp, max_depth=10, max_list=10)
    assert "int with value 9" in deep and "..." not in deep


def test_describe_arrays_scalars_and_others() -> None:
    text = describe_datapoint(
        [np.arange(6, dtype=np.int32).reshape(2, 3), np.array([1.5, np.nan]), np.array([], np.float32),
         np.float32(0.25), b"abc", None, np.array(["x"])]
    )
    assert "0: ndarray:int32 of shape (2, 3) in range [0, 5]" in text
    assert "1: ndarray:float64 of shape (2,) in range [1.5, 1.5], with NaN" in text
    assert "2: ndarray:float32 of shape (0,)" in text and "(0,) in range" not in text
    assert "3: float32 with value 0.25" in text
    assert "4: bytes of len 3: b'abc'" in text
    assert "5: None" in text
    assert "6: ndarray:<U1 of shape (1,)" in text


def test_describe_non_datapoint() -> None:
    assert describe_datapoint(7) == "not a list/tuple/dict: int with value 7"


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"num": -1}, r"PrintData: num .*got -1"),
        ({"max_depth": 0}, r"PrintData: max_depth .*got 0"),
        ({"max_list": -2}, r"PrintData: max_list .*got -2"),
    ],
)
def test_bad_arguments(kwargs: dict[str, int], pattern: str) -> None:
    with pytest.raises(ValueError, match=pattern):
        PrintData(ListFlow([[1]]), **kwargs)
    with pytest.raises(TypeError, match="PrintData: num must be an int, got str"):
        PrintData(ListFlow([[1]]), num="2")  # type: ignore[arg-type]
