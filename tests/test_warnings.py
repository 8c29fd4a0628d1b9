"""Warnings point at the user's line (dataflow/_warn.py), not at an internal one like
``_pool.py``: for each warning the library gives, the file it names is this test file,
whichever spelling (class or fluent) and however deep inside the library it was raised."""

from __future__ import annotations

import os
import socket
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import zmq

from dataflow import DataFromIterable, DataFromList, ShardData
from dataflow.codec import dumps_frames
from dataflow.parallel import _shm
from dataflow.parallel._maps import MultiProcessMapDataZMQ
from dataflow.parallel._remote import RemoteDataZMQ


def _caught(action: Callable[[], Any], match: str) -> list[warnings.WarningMessage]:
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        action()
    found = [w for w in record if match in str(w.message)]
    assert found, f"no warning matching {match!r}: {[str(w.message) for w in record]}"
    return found


def _assert_points_here(found: list[warnings.WarningMessage]) -> None:
    for w in found:
        where = f"{w.filename}:{w.lineno}"
        assert os.path.samefile(w.filename, __file__), f"{w.category.__name__} points at {where}"


def _double(dp: Any) -> Any:
    return dp


def test_shard_warning_points_at_the_shard_call_in_both_spellings() -> None:
    src = DataFromList([[i] for i in range(10)], shuffle=False)
    _assert_points_here(_caught(lambda: src.map(_double).shard(2, 0), "sharding by position"))
    _assert_points_here(_caught(lambda: ShardData(src.map(_double), 2, 0), "sharding by position"))


def test_resume_by_fast_forward_warning_points_at_the_loop() -> None:
    flow = DataFromIterable(range(10))
    flow.reset_state()
    it = iter(flow)
    next(it), next(it)
    state = flow.state_dict(allow_fast_forward=True)
    again = DataFromIterable(range(10))
    again.load_state_dict(state)
    again.reset_state()
    found = _caught(lambda: list(again), "resuming by running the iterable again")
    _assert_points_here(found)


@pytest.mark.timeout(120)
def test_no_shared_memory_warning_points_at_reset_state(monkeypatch: pytest.MonkeyPatch) -> None:
    class _Tiny:
        f_bavail, f_frsize = 1, 4096  # 4 KiB free in /dev/shm

    monkeypatch.setattr(os, "statvfs", lambda path: _Tiny())
    monkeypatch.setattr(_shm, "_warned", set())
    flow = MultiProcessMapDataZMQ(DataFromList([[1], [2]], shuffle=False), 1, _double)
    try:
        _assert_points_here(_caught(flow.reset_state, "no shared memory for large arrays"))
    finally:
        flow.close()


@pytest.mark.timeout(120)
def test_malformed_message_warning_points_at_the_loop() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        addr = f"tcp://127.0.0.1:{s.getsockname()[1]}"
    with RemoteDataZMQ(addr, timeout=60) as flow:
        flow.reset_state()
        ctx = zmq.Context()
        push = ctx.socket(zmq.PUSH)
        push.setsockopt(zmq.LINGER, 10_000)
        push.connect(addr)
        for frames in ([b"garbage"], [bytes(f) for f in dumps_frames([1])], [b"DF-END"]):
            push.send_multipart(frames)
        push.close()
        ctx.term()
        _assert_points_here(_caught(lambda: list(flow), "malformed message"))
