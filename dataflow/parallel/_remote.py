"""Streaming datapoints between machines over ZeroMQ: :func:`send_dataflow_zmq` on the
producers, :class:`RemoteDataZMQ` on the trainer.

- **Safe:** only the safe codec (:mod:`dataflow.codec`) crosses the network; nothing received
  is ever unpickled, so a hostile peer cannot run code. A malformed message is counted, warned
  about and skipped (or raised with ``on_malformed="raise"``); it never kills the receiver.
- **Finite streams end:** a sender that finishes its flow sends an end-of-stream marker; the
  receiver's epoch ends once ``num_senders`` of them arrived.
- **Optional CURVE** authentication and encryption: the receiver holds a key pair and the
  public keys of the senders it accepts; each sender holds its own pair and the receiver's
  public key (:func:`generate_curve_keypair`). Unknown senders are refused by the handshake.
- Arrays are sent as separate frames without copying (:func:`dataflow.codec.dumps_frames`)
  and received as writable views of the frames.
- **Small datapoints travel in groups:** the sender gathers datapoints under 64 KiB into one
  message (``[GROUP, codec.dumps(list)]``) of up to 256 of them, or what came within 1 ms:
  one message and one codec call per group instead of per datapoint. A large datapoint still
  goes alone, as frames, after the group before it (per-sender order is kept); so does a
  datapoint that comes alone within the period (a slow stream is not delayed).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import zmq
import zmq.utils.z85

from .. import codec
from .._checks import check_int, check_timeout
from .._errors import DataFlowNotReset, FormatError, StateUnsupportedError
from .._progress import check_progress, progress_bar
from .._warn import warn
from ..base import DataFlow, ReentrancyGuard
from ._interrupts import blocked_signals, deferred_sigint
from ._messages import recv_parts

__all__ = [
    "RemoteDataZMQ",
    "generate_curve_keypair",
    "send_dataflow_zmq",
]

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
_SKIPPED = object()  # a message that was counted as malformed, not a datapoint


def generate_curve_keypair() -> KeyPair:
    """A new CURVE ``(public, secret)`` key pair (Z85 bytes). Give the public key to peers;
    keep the secret one on its machine."""
    return zmq.curve_keypair()


class RemoteDataZMQ(DataFlow[Any]):
    """Receive datapoints sent by :func:`send_dataflow_zmq` from one or more machines.

    Args:
        addr1, addr2: one or two addresses to listen on (``"tcp://0.0.0.0:9999"``); with
            ``bind=False`` they are connected to instead.
        hwm: receive high-water mark in messages.
        num_senders: end-of-stream markers that end an epoch (one per finite sender).
        timeout: seconds without a message before ``TimeoutError`` (``None``: wait forever).
        on_malformed: ``"warn"`` (skip and count in :attr:`malformed`, with one warning at the
            first such message of this receiver, not one per message) or ``"raise"``.
        allow_pickle: also accept messages from tensorpack's ``send_dataflow_zmq`` (one frame
            per datapoint, pickled by default, or msgpack): only for senders you trust, since
            unpickling runs code named by the data (see
            :mod:`dataflow.formats._tensorpack_decode`). Without it they count as malformed.
        curve_keypair, curve_authorized_keys: enable CURVE; only senders whose public key is
            in ``curve_authorized_keys`` get through.
        max_message_bytes: larger messages are dropped by ZeroMQ (guards memory).

    Order: per sender, the send order; senders interleave. ``len`` is unknown. Not reentrant.
    Sockets are opened in ``reset_state()`` and released by ``close()``.
    """

    def __init__(
        self,
        addr1: str,
        addr2: str | None = None,
        hwm: int = 50,
        bind: bool = True,
        *,
        num_senders: int = 1,
        timeout: float | None = None,
        on_malformed: str = "warn",
        curve_keypair: KeyPair | None = None,
        curve_authorized_keys: Sequence[bytes] | None = None,
        max_message_bytes: int = 2**31,
        allow_pickle: bool = False,
    ) -> None:
        stage = type(self).__name__
        self.addrs = [a for a in (addr1, addr2) if a is not None]
        self.hwm = check_int(stage, "hwm", hwm)
        self.bind = bool(bind)
        self.num_senders = check_int(stage, "num_senders", num_senders)
        if on_malformed not in ("warn", "raise"):
            raise ValueError(f"{stage}: on_malformed must be 'warn' or 'raise', got {on_malformed!r}")
        self.on_malformed = on_malformed
        self.timeout = check_timeout(stage, timeout)
        if (curve_keypair is None) != (curve_authorized_keys is None):
            raise ValueError(f"{stage}: CURVE needs both curve_keypair and curve_authorized_keys")
        self.curve_keypair = None if curve_keypair is None else _check_keypair(stage, curve_keypair)
        if isinstance(curve_authorized_keys, (bytes, str)):
            raise TypeError(f"{stage}: curve_authorized_keys must be a list of public keys, got one key")
        self.curve_authorized_keys = None if curve_authorized_keys is None else list(curve_authorized_keys)
        self.max_message_bytes = check_int(stage, "max_message_bytes", max_message_bytes)
        self.allow_pickle = bool(allow_pickle)
        self.malformed = 0
        self._ctx: zmq.Context[Any] | None = None
        self._socks: list[zmq.Socket[Any]] = []
        self._auth: Any = None
        self._guard = ReentrancyGuard(stage)

    def reset_state(self) -> None:
        """Open the sockets (and the CURVE authenticator)."""
        self.close()
        with deferred_sigint():  # once made, the context must be ours to close
            self._ctx = zmq.Context()
        if self.curve_keypair is not None:
            from zmq.auth.thread import ThreadAuthenticator

            self._auth = ThreadAuthenticator(self._ctx)
            self._auth.start()
            self._auth.configure_curve_callback(
                "*", credentials_provider=_AllowList(self.curve_authorized_keys or [])
            )
        for addr in self.addrs:
            sock = self._ctx.socket(zmq.PULL)
            sock.setsockopt(zmq.RCVHWM, self.hwm)
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.MAXMSGSIZE, self.max_message_bytes)
            if self.curve_keypair is not None:
                sock.curve_server = True
                sock.curve_publickey, sock.curve_secretkey = self.curve_keypair
            (sock.bind if self.bind else sock.connect)(addr)
            self._socks.append(sock)
        self._poller = zmq.Poller()
        for sock in self._socks:
            self._poller.register(sock, zmq.POLLIN)

    def _recv(self) -> list[Any]:
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        while True:
            for sock, _ in self._poller.poll(_POLL_MS):
                return recv_parts(sock, 0, header_parts=1)
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"{type(self).__name__}: no message on {self.addrs} for {self.timeout} s")

    def _get_state(self, live: bool) -> dict[str, Any]:
        raise StateUnsupportedError(
            "RemoteDataZMQ: cannot save a position: what was received from another machine cannot "
            "be received again. Checkpoint the sender's flow instead (its state_dict()), and "
            "resume it there"
        )

    def _set_state(self, state: Mapping[str, Any], live: bool) -> None:
        raise StateUnsupportedError("RemoteDataZMQ: a remote stream has no state to load")

    def __iter__(self) -> Iterator[Any]:
        if self._ctx is None:
            raise DataFlowNotReset(
                f"{type(self).__name__} was iterated before reset_state() or after close()"
            )
        with self._guard:
            for sock in self._socks:  # the rest of a message a Ctrl-C cut in the last epoch
                while sock.getsockopt(zmq.RCVMORE):
                    sock.recv(zmq.NOBLOCK)
            ended = 0
            while ended < self.num_senders:
                frames = self._recv()
                if len(frames) == 1 and frames[0] == _END:
                    ended += 1
                    continue
                if len(frames) == 2 and frames[0] == _GROUP:
                    yield from self._group(frames[1])
                    continue
                try:
                    dp = codec.loads_frames([f if isinstance(f, bytes) else f.buffer for f in frames])
                except codec.CodecError as e:
                    if len(frames) == 1 and self.allow_pickle:
                        dp = self._tensorpack(frames[0], e)
                        if dp is _SKIPPED:
                            continue
                    else:
                        self._bad(e)
                        continue
                yield dp

    def _group(self, frame: Any) -> list[Any]:
        """The datapoints of a group message (none, counted as malformed, if it is not one)."""
        try:
            dps = codec.loads(frame if isinstance(frame, bytes) else frame.buffer)
        except codec.CodecError as e:
            self._bad(e)
            return []
        if not isinstance(dps, list):
            self._bad(codec.CodecError(f"a group message holds a {type(dps).__name__}, not a list"))
            return []
        return dps

    def _tensorpack(self, frame: Any, ours: codec.CodecError) -> Any:
        """A one-frame message from tensorpack's sender (pickle or msgpack), or ``_SKIPPED``."""
        from ..formats._tensorpack_decode import loads_tensorpack

        try:
            return loads_tensorpack(frame, allow_pickle=True, where=f"{type(self).__name__}: {self.addrs}")
        except FormatError as e:
            self._bad(codec.CodecError(f"{ours}; {e}"))
            return _SKIPPED

    def _bad(self, err: codec.CodecError) -> None:
        self.malformed += 1
        if self.on_malformed == "raise":
            raise err
        if self.malformed == 1:  # one warning per receiver; the rest are counted
            hint = ""
            if not self.allow_pickle:
                hint = (
                    " (if the sender is tensorpack's send_dataflow_zmq and you trust it, pass "
                    "allow_pickle=True)"
                )
            warn(
                f"{type(self).__name__}: skipped a malformed message: {err}{hint}; further ones "
                f"are skipped without a warning and counted in .malformed",
                RuntimeWarning,
            )

    def close(self) -> None:
        """Close the sockets, the authenticator and the context. Idempotent; a Ctrl-C or an
        error in one step does not skip the others."""
        with deferred_sigint():
            socks, self._socks = self._socks, []
            auth, self._auth = self._auth, None
            ctx, self._ctx = self._ctx, None
            try:
                for sock in socks:
                    sock.close(linger=0)
            finally:
                try:
                    if auth is not None:
                        auth.stop()
                finally:
                    if ctx is not None:
                        with blocked_signals():  # a signal inside libzmq's term leaves it half done
                            ctx.destroy(linger=0)  # closes a socket whose close() failed, then terms


class _AllowList:
    """CURVE credentials provider: accept exactly the given public keys."""

    def __init__(self, keys: Sequence[bytes]) -> None:
        self.keys = {bytes(k) for k in keys}

    def callback(self, domain: str, key: bytes) -> bool:
        return zmq.utils.z85.encode(key) in self.keys or key in self.keys


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
