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
  datapoint that comes alone within the period (a slow stream is not delayed). The sender
  lives in :mod:`._remote_send`, with what both sides share; this module re-exports it.
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
from .._warn import warn
from ..base import DataFlow, ReentrancyGuard
from ._interrupts import blocked_signals, deferred_sigint
from ._messages import recv_parts
from ._remote_send import _END, _GROUP, _POLL_MS, KeyPair, _check_keypair, send_dataflow_zmq

__all__ = [
    "RemoteDataZMQ",
    "generate_curve_keypair",
    "send_dataflow_zmq",
]

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
            self._drop_cut_messages()
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

    def _drop_cut_messages(self) -> None:
        """Drop the rest of a message whose first parts were received when a Ctrl-C ended
        the last epoch: read as a message of its own it would be malformed."""
        for sock in self._socks:
            while sock.getsockopt(zmq.RCVMORE):
                sock.recv(zmq.NOBLOCK)

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
