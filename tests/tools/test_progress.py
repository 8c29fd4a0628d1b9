"""One progress control for every long operation (dataflow/_progress.py): ``progress=True``
draws a tqdm bar counting "dp" on stderr, ``progress=False`` draws nothing, tqdm's
``TQDM_DISABLE`` hides every bar, and anything but a bool is refused naming the stage."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dataflow import DataFromList, HDF5Serializer, LMDBSerializer, NumpySerializer, TFRecordSerializer
from dataflow.parallel._remote import RemoteDataZMQ, send_dataflow_zmq
from dataflow.tools._profiling import profile
from dataflow.tools._speed import TestDataSpeed


def _flow() -> DataFromList[list[Any]]:
    return DataFromList([[np.full(3, i, np.float32), i] for i in range(40)], shuffle=False)


def _send(progress: Any, tmp_path: Path) -> None:
    addr = f"ipc://{tmp_path}/progress.sock"
    recv = RemoteDataZMQ(addr, timeout=60)  # small datapoints may arrive grouped: count datapoints
    recv.reset_state()
    got: list[Any] = []
    thread = threading.Thread(target=lambda: got.extend(recv))
    thread.start()
    try:
        try:
            assert send_dataflow_zmq(_flow(), addr, progress=progress) == 40
        except BaseException:  # refused before sending: end the receiver's stream, not wait 60 s
            send_dataflow_zmq(DataFromList([[None, -1]]), addr, progress=False)
            raise
    finally:
        thread.join(timeout=90)
        recv.close()
    assert not thread.is_alive()
    assert [dp[1] for dp in got] == list(range(40))


OPERATIONS: dict[str, Callable[[Any, Path], Any]] = {
    "LMDBSerializer.save": lambda p, d: LMDBSerializer.save(_flow(), str(d / "a.lmdb"), progress=p),
    "NumpySerializer.save": lambda p, d: NumpySerializer.save(_flow(), str(d / "a.npz"), progress=p),
    "TFRecordSerializer.save": lambda p, d: TFRecordSerializer.save(_flow(), str(d / "a.tfr"), progress=p),
    "HDF5Serializer.save": lambda p, d: HDF5Serializer.save(_flow(), str(d / "a.h5"), ["x", "y"], progress=p),
    "TestDataSpeed": lambda p, d: TestDataSpeed(_flow(), size=30, warmup=5, progress=p).start(),
    "speed_test": lambda p, d: _flow().speed_test(size=30, progress=p),
    "profile": lambda p, d: profile(_flow(), size=30, warmup=5, progress=p),
    "send_dataflow_zmq": _send,
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_progress_true_draws_a_dp_bar_on_stderr(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    OPERATIONS[name](True, tmp_path)
    err = capsys.readouterr().err
    assert "dp/s" in err or " dp" in err, f"{name}: no bar on stderr: {err!r}"
    assert "it/s" not in err, f"{name}: a bar counts in another unit: {err!r}"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_progress_false_draws_nothing(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    OPERATIONS[name](False, tmp_path)
    assert capsys.readouterr().err == ""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_tqdm_disable_hides_every_bar(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TQDM_DISABLE", "1")
    OPERATIONS[name](True, tmp_path)
    assert capsys.readouterr().err == ""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_progress_must_be_a_bool(name: str, tmp_path: Path) -> None:
    stage = "TestDataSpeed" if name == "speed_test" else name
    with pytest.raises(TypeError, match=rf"{stage}: progress must be True or False, got str"):
        OPERATIONS[name]("yes", tmp_path)
