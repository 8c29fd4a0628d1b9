"""Remote pipelines (dataflow/parallel/_remote.py): ``send_dataflow_zmq`` -> ``RemoteDataZMQ``
over tcp loopback.

Senders run in threads and in spawned processes (module-level helpers below, so ``spawn``
can import them). Only 127.0.0.1 is used; ports come from :func:`tcp_addr`. Every receiver
that the test expects data on has a ``timeout=``, so a bug shows as a ``TimeoutError``
rather than a hang.
"""

from __future__ import annotations

import multiprocessing as mp
import pickle
import socket
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zmq

from dataflow import DataFlowNotReset, DataFlowReentrantError, DataFromList, LengthUnknownError
from dataflow.base import DataFlow
from dataflow.codec import CodecError, dumps_frames
from dataflow.parallel._remote import RemoteDataZMQ, generate_curve_keypair, send_dataflow_zmq
from tests.helpers import ListFlow

pytestmark = pytest.mark.timeout(60)

RECV_TIMEOUT = 20.0  # seconds a receiver waits for the next message where data is expected


def tcp_addr() -> str:
    """A loopback address on a port that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{s.getsockname()[1]}"


# --- datapoints and senders (module level: spawn imports them) -------------------------


def make_dp(sid: int, i: int) -> list[Any]:
    """Datapoint ``i`` of sender ``sid``: ints, an array, a tuple and a dict with an int key."""
    arr = np.arange(12, dtype=np.float32).reshape(3, 4) + i + 1000 * sid
    return [sid, i, arr, (i, f"s{sid}"), {"k": i, 7: b"x" * (i % 5)}]


def check_dp(dp: Any) -> tuple[int, int]:
    """Assert ``dp`` equals what :func:`make_dp` made (types included); ``(sid, i)``."""
    assert type(dp) is list and len(dp) == 5
    sid, i, arr, tup, dct = dp
    expected = make_dp(sid, i)
    assert type(arr) is np.ndarray and arr.dtype == np.float32 and arr.shape == (3, 4)
    np.testing.assert_array_equal(arr, expected[2])
    assert arr.flags.writeable
    arr += 1  # really writable
    assert type(tup) is tuple and tup == expected[3]
    assert type(dct) is dict and dct == expected[4]
    return sid, i


def sender_flow(sid: int, n: int) -> DataFlow:
    return DataFromList([make_dp(sid, i) for i in range(n)], shuffle=False)


class _NotifyAtEnd(DataFlow):
    """Sender ``sid``'s ``n`` datapoints; sets ``done`` once the last one has been sent
    (the sender asks for the next datapoint only after sending the previous one)."""

    def __init__(self, sid: int, n: int, done: Any) -> None:
        self.sid, self.n, self.done = sid, n, done

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[Any]:
        for i in range(self.n):
            yield make_dp(self.sid, i)
        self.done.set()


def _send_in_process(sid: int, n: int, addr: str, results: Any, done: Any, curve: dict[str, Any]) -> None:
    count = send_dataflow_zmq(_NotifyAtEnd(sid, n, done), addr, progress=False, **curve)
    results.put((sid, count))


def start_process_sender(
    sid: int, n: int, addr: str, **curve: Any
) -> tuple[mp.process.BaseProcess, Any, Any]:
    ctx = mp.get_context("spawn")
    results, done = ctx.Queue(), ctx.Event()
    proc = ctx.Process(target=_send_in_process, args=(sid, n, addr, results, done, curve), daemon=True)
    proc.start()
    return proc, results, done


class SenderThread(threading.Thread):
    """Runs ``send_dataflow_zmq(flow, addr, **kwargs)``; keeps its return value or error."""

    def __init__(self, flow: DataFlow, addr: str, **kwargs: Any) -> None:
        super().__init__(daemon=True)
        self.flow, self.addr, self.kwargs = flow, addr, kwargs
        self.result: int | None = None
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            self.result = send_dataflow_zmq(self.flow, self.addr, progress=False, **self.kwargs)
        except BaseException as e:  # noqa: BLE001 - reported by finish()
            self.error = e

    def finish(self) -> int | None:
        self.join(RECV_TIMEOUT)
        assert not self.is_alive(), "send_dataflow_zmq did not return"
        if self.error is not None:
            raise self.error
        return self.result


def raw_push(addr: str, messages: list[list[bytes]]) -> None:
    """Send ``messages`` (lists of frames) as they are, like a hostile peer would."""
    ctx = zmq.Context()
    sock = ctx.socket(zmq.PUSH)
    sock.setsockopt(zmq.LINGER, 10_000)
    sock.connect(addr)
    for frames in messages:
        sock.send_multipart(frames)
    sock.close()
    ctx.term()


def by_sender(dps: list[Any]) -> dict[int, list[int]]:
    seen: dict[int, list[int]] = {}
    for dp in dps:
        sid, i = check_dp(dp)
        seen.setdefault(sid, []).append(i)
    return seen


@pytest.fixture
def addr() -> str:
    return tcp_addr()


# --- the pipeline ---------------------------------------------------------------------------


def test_several_thread_and_process_senders(addr: str) -> None:
    counts = {0: 300, 1: 150, 2: 1, 3: 120}  # senders 0-2 in threads, 3 in a process
    with RemoteDataZMQ(addr, num_senders=4, timeout=RECV_TIMEOUT) as df:
        df.reset_state()
        threads = [SenderThread(sender_flow(sid, counts[sid]), addr) for sid in (0, 1, 2)]
        proc, results, _ = start_process_sender(3, counts[3], addr)
        received = list(df)  # ends after the 4 end-of-stream markers
        assert [t.finish() for t in threads] == [counts[0], counts[1], counts[2]]
        assert results.get(timeout=RECV_TIMEOUT) == (3, counts[3])
        proc.join(RECV_TIMEOUT)
        assert proc.exitcode == 0
        assert df.malformed == 0
    # every datapoint of every sender exactly once, in per-sender order
    assert by_sender(received) == {sid: list(range(n)) for sid, n in counts.items()}


def test_epoch_ends_only_after_num_senders_end_markers(addr: str) -> None:
    with RemoteDataZMQ(addr, num_senders=2, timeout=RECV_TIMEOUT) as df:
        df.reset_state()
        for epoch in range(2):  # the receiver serves one epoch after the other
            first = SenderThread(sender_flow(0, 5), addr)
            assert first.finish() == 5  # all of sender 0, its end marker included, is out
            it = iter(df)
            head = [next(it) for _ in range(5)]
            assert by_sender(head) == {0: list(range(5))}, f"epoch {epoch}"
            # sender 0's end marker is next in line; one marker of two must not end the epoch
            second = SenderThread(sender_flow(1, 3), addr)  # starts only now
            assert by_sender(list(it)) == {1: list(range(3))}, f"epoch {epoch}"
            assert second.finish() == 3


def test_receiver_connects_to_a_binding_sender(addr: str) -> None:
    sender = SenderThread(sender_flow(0, 50), addr, bind=True)
    with RemoteDataZMQ(addr, bind=False, timeout=RECV_TIMEOUT) as df:
        df.reset_state()
        received = list(df)
    assert sender.finish() == 50
    assert by_sender(received) == {0: list(range(50))}


def test_two_listening_addresses(addr: str) -> None:
    addr2 = tcp_addr()
    with RemoteDataZMQ(addr, addr2, num_senders=2, timeout=RECV_TIMEOUT) as df:
        df.reset_state()
        senders = [SenderThread(sender_flow(0, 40), addr), SenderThread(sender_flow(1, 60), addr2)]
        received = list(df)
    assert [s.finish() for s in senders] == [40, 60]
    assert by_sender(received) == {0: list(range(40)), 1: list(range(60))}


def test_large_zero_size_and_non_contiguous_arrays(addr: str) -> None:
    big = np.arange(2000 * 3000, dtype=np.float32).reshape(2000, 3000)  # 24 MB
    dps = [
        [big, big[::3, ::-2], big.T, np.zeros((0, 5), np.int16), np.float16(1.5), np.uint64(2**64 - 1)],
        (np.ones((64, 224, 224, 3), np.uint8), None, True, 2**64 - 1, -(2**63), 1.5 + 2j),
    ]
    sender = SenderThread(DataFromList(dps, shuffle=False), addr)
    with RemoteDataZMQ(addr, timeout=RECV_TIMEOUT) as df:
        df.reset_state()
        received = list(df)
    assert sender.finish() == 2
    assert len(received) == 2
    first, second = received
    assert type(first) is list and type(second) is tuple
    for got, want in zip(first[:4], dps[0][:4]):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
        assert got.flags.writeable
    assert type(first[4]) is np.float16 and first[4] == 1.5
    assert type(first[5]) is np.uint64 and first[5] == 2**64 - 1
    np.testing.assert_array_equal(second[0], dps[1][0])
    assert second[0].flags.writeable
    assert second[1:] == (None, True, 2**64 - 1, -(2**63), 1.5 + 2j)


# --- malformed and hostile messages --------------------------------------------------------


class _CreatesFile:
    """Unpickling this creates ``path`` (what a hostile pickle payload could do)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.path, "w"))


def _pickle_bomb(path: Path) -> bytes:
    return pickle.dumps(_CreatesFile(str(path)), protocol=2)


def test_the_pickle_payload_is_live(tmp_path: Path) -> None:
    """Control for the next test: unpickling the payload really creates its file."""
    control = tmp_path / "control"
    pickle.loads(_pickle_bomb(control)).close()
    assert control.exists()


def test_pickle_payload_is_never_unpickled_and_malformed_messages_are_skipped(
    addr: str, tmp_path: Path
) -> None:
    target = tmp_path / "pwned"
    bomb = _pickle_bomb(target)
    header, *arrays = dumps_frames(make_dp(0, 1))
    malformed = [
        [bomb],  # tensorpack's default wire format: a raw pickle
        [b"DFC\x01" + bomb],  # the pickle behind our header
        [bytes(header), bytes(arrays[0])[:-4]],  # an array frame cut short
        [bytes(header)],  # the array frame missing
        [b""],
        [b"DFC\x09" + bytes(header)[4:]],  # a codec version from the future
        [b"DF-END", b"extra"],  # not an end marker: one frame only
    ]
    valid_before = [bytes(f) for f in dumps_frames(make_dp(0, 0))]
    valid_after = [bytes(header), *(bytes(a) for a in arrays)]
    with RemoteDataZMQ(addr, timeout=RECV_TIMEOUT) as df:
        df.reset_state()
        raw_push(addr, [valid_before, *malformed, valid_after, [b"DF-END"]])
        with pytest.warns(RuntimeWarning, match="RemoteDataZMQ.*malformed") as record:
            received = list(df)
        assert df.malformed == len(malformed)
        assert len([w for w in record if issubclass(w.category, RuntimeWarning)]) == 1  # then counted
        # the receiver kept working: the valid datapoints around the bad ones arrived
        assert by_sender(received) == {0: [0, 1]}
        # ... and it still works for the next epoch
        raw_push(addr, [[bytes(f) for f in dumps_frames(make_dp(0, 2))], [b"DF-END"]])
        assert by_sender(list(df)) == {0: [2]}
    assert not target.exists(), "the pickle payload was executed"


def test_on_malformed_raise(addr: str, tmp_path: Path) -> None:
    target = tmp_path / "pwned"
    with RemoteDataZMQ(addr, on_malformed="raise", timeout=RECV_TIMEOUT) as df:
        df.reset_state()
        valid = [bytes(f) for f in dumps_frames(make_dp(0, 0))]
        raw_push(addr, [[_pickle_bomb(target)], valid, [b"DF-END"]])
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # raise instead of warning
            with pytest.raises(CodecError):
                list(df)
        assert df.malformed == 1
        # the receiver survives the error: the next epoch gets what followed
        assert by_sender(list(df)) == {0: [0]}
    assert not target.exists()


def _receive_in_process(addr: str, results: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with RemoteDataZMQ(addr, timeout=RECV_TIMEOUT) as df:
            df.reset_state()
            got = [(dp[0], dp[1]) for dp in df]
            results.put((got, df.malformed))


def test_deeply_nested_message_does_not_kill_the_receiver(addr: str) -> None:
    """A 940-byte message of tuples nested 200 deep (the codec's tuple extension) must be
    skipped as malformed. The receiver runs in a child process so that a crash (SIGSEGV)
    fails this test instead of killing the test run."""
    import msgpack

    nested: Any = 0
    for _ in range(200):
        nested = msgpack.ExtType(2, msgpack.packb([nested]))
    hostile = b"DFC\x01" + msgpack.packb(nested)
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    proc = ctx.Process(target=_receive_in_process, args=(addr, results), daemon=True)
    proc.start()
    try:
        raw_push(addr, [[hostile], [bytes(f) for f in dumps_frames(make_dp(0, 0))], [b"DF-END"]])
        proc.join(RECV_TIMEOUT)
        assert proc.exitcode == 0, f"the receiver process died (exit code {proc.exitcode})"
        assert results.get(timeout=5) == ([(0, 0)], 1)
    finally:
        proc.terminate()
        proc.join(5)


def test_oversized_frame_is_dropped_and_the_receiver_goes_on(addr: str) -> None:
    """ZeroMQ drops the connection of a peer that sends a frame over ``max_message_bytes``;
    what else was in flight on it (here maybe the small datapoint and the end marker) may be
    lost too. The receiver must never see the big frame and must go on with later senders."""
    small = np.arange(10, dtype=np.uint8)
    with RemoteDataZMQ(addr, max_message_bytes=1000, timeout=RECV_TIMEOUT) as df:
        df.reset_state()
        sender = SenderThread(DataFromList([[np.zeros(10_000, np.uint8)], [small]], shuffle=False), addr)
        assert sender.finish() == 2  # everything it will ever deliver is at the receiver now
        df.timeout = 1.0
        received: list[Any] = []
        try:
            received.extend(df)  # ends with its end marker if that survived
        except TimeoutError:
            pass  # the end marker was lost with the connection
        assert len(received) <= 1
        for dp in received:
            np.testing.assert_array_equal(dp[0], small)
        df.timeout = RECV_TIMEOUT
        later = SenderThread(sender_flow(0, 3), addr)
        assert by_sender(list(df)) == {0: [0, 1, 2]}
        assert later.finish() == 3


# --- CURVE ---------------------------------------------------------------------------------


def test_curve_authorized_sender_gets_through(addr: str) -> None:
    server, client = generate_curve_keypair(), generate_curve_keypair()
    assert all(isinstance(k, bytes) and len(k) == 40 for k in server + client)
    with RemoteDataZMQ(
        addr, curve_keypair=server, curve_authorized_keys=[client[0]], timeout=RECV_TIMEOUT
    ) as df:
        df.reset_state()
        sender = SenderThread(sender_flow(0, 30), addr, curve_keypair=client, curve_server_key=server[0])
        received = list(df)
    assert sender.finish() == 30
    assert by_sender(received) == {0: list(range(30))}


def test_curve_refuses_unknown_and_plain_senders(addr: str) -> None:
    server, client, stranger = (generate_curve_keypair() for _ in range(3))
    with RemoteDataZMQ(addr, curve_keypair=server, curve_authorized_keys=[client[0]], timeout=2.0) as df:
        df.reset_state()
        # a sender with a key pair the receiver does not know, and one without CURVE: both are
        # told by the handshake and raise instead of hanging or claiming their data was sent
        with pytest.raises(PermissionError, match="HANDSHAKE_FAILED"):
            send_dataflow_zmq(sender_flow(1, 5), addr, curve_keypair=stranger, curve_server_key=server[0],
                              progress=False)
        with pytest.raises(PermissionError, match="HANDSHAKE_FAILED"):
            send_dataflow_zmq(sender_flow(2, 5), addr, progress=False)
        received: list[Any] = []
        with pytest.raises(TimeoutError, match="RemoteDataZMQ"):
            for dp in df:
                received.append(dp)
        assert received == [], "a sender that CURVE should refuse got through"
        # the receiver still accepts the authorized sender afterwards
        sender = SenderThread(sender_flow(0, 3), addr, curve_keypair=client, curve_server_key=server[0])
        assert by_sender(list(df)) == {0: [0, 1, 2]}
        assert sender.finish() == 3


# --- life cycle ------------------------------------------------------------------------------


def test_timeout_raises_timeout_error(addr: str) -> None:
    with RemoteDataZMQ(addr, timeout=0.3) as df:
        df.reset_state()
        with pytest.raises(TimeoutError, match="RemoteDataZMQ"):
            next(iter(df))


def test_iterating_before_reset_state_or_after_close_raises(addr: str) -> None:
    df = RemoteDataZMQ(addr)
    with pytest.raises(DataFlowNotReset, match="RemoteDataZMQ"):
        next(iter(df))
    df.reset_state()
    df.close()
    with pytest.raises(DataFlowNotReset, match="RemoteDataZMQ"):
        next(iter(df))


def test_length_unknown_and_not_reentrant(addr: str) -> None:
    with RemoteDataZMQ(addr, timeout=RECV_TIMEOUT) as df:
        with pytest.raises(LengthUnknownError):
            len(df)
        df.reset_state()
        sender = SenderThread(sender_flow(0, 2), addr)
        it = iter(df)
        check_dp(next(it))
        with pytest.raises(DataFlowReentrantError):
            next(iter(df))
        check_dp(next(it))
        assert list(it) == []
        assert sender.finish() == 2


def test_init_does_not_bind_and_close_is_idempotent_and_frees_the_port(addr: str) -> None:
    first, second = RemoteDataZMQ(addr), RemoteDataZMQ(addr, timeout=RECV_TIMEOUT)  # nothing bound yet
    first.close()  # before reset_state: a no-op
    first.reset_state()
    first.close()
    first.close()
    second.reset_state()  # binds the same address: the port was freed
    sender = SenderThread(sender_flow(0, 1), addr)
    assert by_sender(list(second)) == {0: [0]}
    assert sender.finish() == 1
    second.close()
    with RemoteDataZMQ(addr) as third:  # the context manager closes too
        third.reset_state()
    first.reset_state()  # a closed receiver can be opened again
    first.close()


def test_send_returns_the_count_and_resets_the_flow(addr: str) -> None:
    flow = ListFlow([make_dp(0, i) for i in range(7)], has_len=False)
    with RemoteDataZMQ(addr, timeout=RECV_TIMEOUT) as df:
        df.reset_state()
        sender = SenderThread(flow, addr, hwm=1)
        assert by_sender(list(df)) == {0: list(range(7))}
    assert sender.finish() == 7
    assert flow.resets == 1 and flow.finished == 1


def test_send_refuses_pickle_format(addr: str) -> None:
    flow = ListFlow([[1]])
    with pytest.raises(ValueError, match="send_dataflow_zmq.*pickle"):
        send_dataflow_zmq(flow, addr, format="pickle", progress=False)
    assert flow.resets == 0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"num_senders": 0}, "RemoteDataZMQ.*num_senders"),
        ({"hwm": 0}, "RemoteDataZMQ.*hwm"),
        ({"on_malformed": "x"}, "RemoteDataZMQ.*on_malformed.*'x'"),
        ({"curve_keypair": "KEYPAIR"}, "RemoteDataZMQ.*CURVE"),
        ({"curve_authorized_keys": []}, "RemoteDataZMQ.*CURVE"),
        ({"curve_keypair": (b"short", b"keys"), "curve_authorized_keys": []}, "RemoteDataZMQ.*curve_keypair"),
    ],
)
def test_receiver_bad_arguments(addr: str, kwargs: dict[str, Any], match: str) -> None:
    if kwargs.get("curve_keypair") == "KEYPAIR":
        kwargs = {"curve_keypair": generate_curve_keypair()}
    with pytest.raises(ValueError, match=match):
        RemoteDataZMQ(addr, **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"hwm": 0}, "send_dataflow_zmq.*hwm"),
        ({"curve_keypair": "KEYPAIR"}, "send_dataflow_zmq.*CURVE"),
        ({"curve_server_key": b"k" * 40}, "send_dataflow_zmq.*CURVE"),
        (
            {"curve_keypair": (b"short", b"keys"), "curve_server_key": b"k" * 40},
            "send_dataflow_zmq.*curve_keypair",
        ),
    ],
)
def test_sender_bad_arguments(addr: str, kwargs: dict[str, Any], match: str) -> None:
    if kwargs.get("curve_keypair") == "KEYPAIR":
        kwargs = {"curve_keypair": generate_curve_keypair()}
    flow = ListFlow([[1]])
    with pytest.raises(ValueError, match=match):
        send_dataflow_zmq(flow, addr, progress=False, **kwargs)
    assert flow.resets == 0  # refused before touching the flow or the network
