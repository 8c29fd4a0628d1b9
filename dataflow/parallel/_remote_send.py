"""The sending side of :mod:`dataflow.parallel._remote`: :func:`send_dataflow_zmq` pushes one
flow's datapoints (small ones in groups, large ones alone as frames) to a receiver, and fails
with ``PermissionError`` when the receiver refuses the CURVE handshake. It also owns what
both sides share: the message markers, the poll period and the CURVE key-pair check, which
the receiver (:mod:`dataflow.parallel._remote`, which re-exports the sender) imports from
here. This module imports nothing of the receiver's."""

from __future__ import annotations

import time
from typing import Any

import zmq

from .. import codec
from .._checks import check_int
from .._progress import check_progress, progress_bar
from ..base import DataFlow

_END = b"DF-END"
_GROUP = b"DF-GROUP"
#: datapoints whose arrays/bytes (top-level components) hold fewer bytes travel in groups
GROUP_ITEM_BYTES = 64 * 1024
#: datapoints per group message at most
GROUP_MAX = 256
#: seconds: the longest a datapoint waits on the sender for others to join its group
GROUP_PERIOD = 0.001
_HANDSHAKE_FAILED = (
    zmq.EVENT_HANDSHAKE_FAILED_AUTH
    | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
    | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
)
_HANDSHAKE_WAIT_S = 0.5  # after the last message: long enough for a refusal to show
_POLL_MS = 100
KeyPair = tuple[bytes, bytes]


def _check_keypair(stage: str, keypair: Any) -> KeyPair:
    if not (
        isinstance(keypair, (tuple, list))
        and len(keypair) == 2
        and all(isinstance(k, bytes) and len(k) == 40 for k in keypair)
    ):
        raise ValueError(
            f"{stage}: curve_keypair must be (public, secret), two 40-byte Z85 keys "
            f"from generate_curve_keypair()"
        )
    return (keypair[0], keypair[1])


def send_dataflow_zmq(
    df: DataFlow[Any],
    addr: str,
    hwm: int = 50,
    format: str | None = None,
    bind: bool = False,
    *,
    curve_keypair: KeyPair | None = None,
    curve_server_key: bytes | None = None,
    progress: bool = True,
    loop: bool = False,
) -> int:
    """Send one epoch of ``df`` to ``addr`` (e.g. ``"tcp://trainer:9999"``), then an
    end-of-stream marker; returns the number of datapoints sent. A receiver that refuses the
    connection (CURVE keys) raises ``PermissionError`` instead of hanging.

    ``df`` is reset here. ``loop=True`` sends epoch after epoch forever, with no end marker
    (tensorpack's behaviour); it returns only by an exception (Ctrl-C), and raises
    ``ValueError`` if an epoch is empty instead of spinning. ``df.repeat()`` is the same.
    ``format`` is accepted for compatibility: only ``None``/``"codec"`` (the safe codec) is
    supported — pickle never crosses machines. With CURVE, pass this sender's
    ``curve_keypair`` and the receiver's public key as ``curve_server_key``. A tqdm bar
    reports the throughput (``progress=False`` or ``TQDM_DISABLE=1`` hide it).
    """
    stage = "send_dataflow_zmq"
    if format not in (None, "codec"):
        raise ValueError(
            f"{stage}: format={format!r} is not supported; only the safe codec (format=None) is sent"
        )
    check_int(stage, "hwm", hwm)
    check_progress(stage, progress)

    ctx = zmq.Context()
    sock = ctx.socket(zmq.PUSH)
    monitor = sock.get_monitor_socket(_HANDSHAKE_FAILED)
    try:
        sock.setsockopt(zmq.SNDHWM, hwm)
        sock.setsockopt(zmq.LINGER, -1)  # deliver everything, the end marker included
        if curve_keypair is not None or curve_server_key is not None:
            if curve_keypair is None or curve_server_key is None:
                raise ValueError(f"{stage}: CURVE needs both curve_keypair and curve_server_key")
            sock.curve_publickey, sock.curve_secretkey = _check_keypair(stage, curve_keypair)
            sock.curve_serverkey = curve_server_key
        (sock.bind if bind else sock.connect)(addr)
        df.reset_state()
        try:
            total = None if loop else len(df)
        except (TypeError, NotImplementedError):
            total = None
        group_max, group_period, item_bytes = GROUP_MAX, GROUP_PERIOD, GROUP_ITEM_BYTES
        n = 0
        pending: list[Any] = []
        clock = time.perf_counter
        last = clock()
        with progress_bar(stage, progress, total=total, desc=stage, smoothing=0.1) as bar:
            while True:
                start = n
                for dp in df:
                    if _small(dp, item_bytes):
                        pending.append(dp)
                        if len(pending) >= group_max or clock() - last >= group_period:
                            _flush(sock, monitor, pending, addr)
                            pending = []
                            last = clock()
                    else:
                        if pending:
                            _flush(sock, monitor, pending, addr)
                            pending = []
                        _send(sock, monitor, codec.dumps_frames(dp), addr)
                        last = clock()
                    n += 1
                    if n % 64 == 0:
                        bar.update(64)
                        _check_refused(monitor, addr)
                if pending:
                    _flush(sock, monitor, pending, addr)
                    pending = []
                if not loop:
                    break
                if n == start:
                    raise ValueError(f"{stage}: loop=True but an epoch of {type(df).__name__} was empty")
            bar.update(n % 64)
        _send(sock, monitor, [_END], addr)
        _check_refused(monitor, addr, wait_s=_HANDSHAKE_WAIT_S)
        return n
    except BaseException:
        sock.setsockopt(zmq.LINGER, 0)  # failed: do not wait for a peer that refused us
        raise
    finally:
        sock.disable_monitor()
        monitor.close(linger=0)
        sock.close()
        ctx.term()


def _small(dp: Any, limit: int) -> bool:
    """Whether ``dp``'s top-level arrays, bytes and strings hold under ``limit`` bytes
    (:data:`GROUP_ITEM_BYTES`; a cheap estimate, nested containers are not walked)."""
    parts = dp.values() if isinstance(dp, dict) else dp if isinstance(dp, (list, tuple)) else (dp,)
    size = 0
    for c in parts:
        nbytes = getattr(c, "nbytes", None)
        if nbytes is None and isinstance(c, (bytes, bytearray, str)):
            nbytes = len(c)
        if nbytes is not None:
            size += nbytes
    return size < limit


def _flush(sock: zmq.Socket[Any], monitor: zmq.Socket[Any], pending: list[Any], addr: str) -> None:
    """Send what gathered: one datapoint as itself, several as one group message."""
    if len(pending) == 1:
        _send(sock, monitor, codec.dumps_frames(pending[0]), addr)
    else:
        _send(sock, monitor, [_GROUP, codec.dumps(pending)], addr)


def _send(sock: zmq.Socket[Any], monitor: zmq.Socket[Any], frames: list[Any], addr: str) -> None:
    """Send without blocking forever on a peer that refused the handshake."""
    while True:
        try:
            sock.send_multipart(frames, flags=zmq.NOBLOCK, copy=False)
            return
        except zmq.Again:
            _check_refused(monitor, addr)
            sock.poll(_POLL_MS, zmq.POLLOUT)


def _check_refused(monitor: zmq.Socket[Any], addr: str, wait_s: float = 0.0) -> None:
    if monitor.poll(int(wait_s * 1000)):
        from zmq.utils.monitor import recv_monitor_message  # imports asyncio and ssl: only here

        event = recv_monitor_message(monitor)["event"]
        raise PermissionError(
            f"send_dataflow_zmq: {addr} refused the connection ({zmq.Event(event).name}): with "
            f"CURVE, the receiver must list this sender's public key and the sender must use the "
            f"receiver's public key; without CURVE on this side, a CURVE receiver refuses it"
        )
