"""Small datapoints travel in groups between ``send_dataflow_zmq`` and ``RemoteDataZMQ``:
same datapoints, same per-sender order, large ones still alone; bad groups are skipped."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zmq

from dataflow import DataFromList, codec
from dataflow.parallel import _remote
from dataflow.parallel._remote import RemoteDataZMQ
from tests.parallel.test_remote import (
    RECV_TIMEOUT,
    SenderThread,
    _pickle_bomb,
    by_sender,
    make_dp,
    raw_push,
    tcp_addr,
)

pytestmark = pytest.mark.timeout(60)


class _Counting:
    """Wraps a PUSH socket's ``send_multipart`` to record the frames of each message."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.messages: list[list[Any]] = []
        original = zmq.Socket.send_multipart

        def spy(sock: zmq.Socket, frames: Any, *args: Any, **kwargs: Any) -> Any:
            if sock.type == zmq.PUSH:
                self.messages.append([bytes(memoryview(f)) for f in frames])
            return original(sock, frames, *args, **kwargs)

        monkeypatch.setattr(zmq.Socket, "send_multipart", spy)


def test_small_datapoints_arrive_in_order_in_fewer_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    spy = _Counting(monkeypatch)
    monkeypatch.setattr(_remote, "GROUP_PERIOD", 3600.0)  # only the count bound closes a group
    addr, n = tcp_addr(), 1000
    with RemoteDataZMQ(addr, timeout=RECV_TIMEOUT) as df:
        df.reset_state()
        sender = SenderThread(DataFromList([make_dp(0, i) for i in range(n)], shuffle=False), addr)
        received = list(df)
        assert sender.finish() == n
        assert df.malformed == 0
    assert by_sender(received) == {0: list(range(n))}
    groups = [m for m in spy.messages if m[0] == b"DF-GROUP"]
    assert len(groups) == -(-n // _remote.GROUP_MAX)  # 1000 datapoints: 4 messages
    assert len(spy.messages) == len(groups) + 1  # + the end marker


def test_large_datapoints_go_alone_between_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    spy = _Counting(monkeypatch)
    monkeypatch.setattr(_remote, "GROUP_PERIOD", 3600.0)
    big = np.arange(_remote.GROUP_ITEM_BYTES // 4, dtype=np.float32)  # exactly the limit: alone
    dps: list[Any] = [[i, np.float32(i)] for i in range(5)] + [[5, big]]
    dps += [[i, np.float32(i)] for i in (6, 7)]
    addr = tcp_addr()
    with RemoteDataZMQ(addr, timeout=RECV_TIMEOUT) as df:
        df.reset_state()
        sender = SenderThread(DataFromList(dps, shuffle=False), addr)
        received = list(df)
        assert sender.finish() == 8
    assert [int(dp[0]) for dp in received] == list(range(8))
    np.testing.assert_array_equal(received[5][1], big)
    kinds = [m[0] == b"DF-GROUP" for m in spy.messages]
    assert kinds == [True, False, True, False]  # group, the large one, group, end marker
    assert len(spy.messages[1]) == 2  # the large one as header + its array frame (no copy)


def test_a_lone_datapoint_is_not_held_back(monkeypatch: pytest.MonkeyPatch) -> None:
    spy = _Counting(monkeypatch)
    monkeypatch.setattr(_remote, "GROUP_PERIOD", 0.0)  # every datapoint's period is over at once
    addr = tcp_addr()
    with RemoteDataZMQ(addr, timeout=RECV_TIMEOUT) as df:
        df.reset_state()
        sender = SenderThread(DataFromList([make_dp(0, i) for i in range(5)], shuffle=False), addr)
        assert by_sender(list(df)) == {0: list(range(5))}
        sender.finish()
    assert not any(m[0] == b"DF-GROUP" for m in spy.messages)  # each went as itself


def test_malformed_groups_are_skipped(tmp_path: Path) -> None:
    target = tmp_path / "pwned"
    addr = tcp_addr()
    good = codec.dumps([make_dp(0, 0), make_dp(0, 1)])
    bad = [
        [b"DF-GROUP", _pickle_bomb(target)],
        [b"DF-GROUP", good[:-3]],  # cut short
        [b"DF-GROUP", codec.dumps({"not": "a list"})],
    ]
    with RemoteDataZMQ(addr, timeout=RECV_TIMEOUT) as df:
        df.reset_state()
        raw_push(addr, [*bad, [b"DF-GROUP", good], [b"DF-END"]])
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            received = list(df)
        assert df.malformed == len(bad)
        assert sum(issubclass(w.category, RuntimeWarning) for w in record) == 1  # the rest counted
    assert by_sender(received) == {0: [0, 1]}
    assert not target.exists()
