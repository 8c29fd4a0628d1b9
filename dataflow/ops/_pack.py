"""Sequence packing: :class:`PackData` (the ``pack(seq_len)`` counterpart)."""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from itertools import compress, count
from typing import Any

import numpy as np

from .._checks import check_int
from .._errors import LengthUnknownError, StateError
from .._state_fields import decode_items, encode_items, field, int_field
from ..base import DataFlow, ProxyDataFlow
from ._components import describe_kind, get_component

__all__ = ["PackData"]

_METHODS = ("first_fit", "best_fit", "concat")
_OVERLONG = ("truncate", "split", "error")
_ID_BITS = 40  # best_fit orders open rows by ``free << _ID_BITS | id``: by free space, then age
_END = object()


class PackData(ProxyDataFlow):
    """Pack variable-length integer sequences into rows of exactly ``seq_len`` tokens.

    Input datapoints hold a 1-D integer array (or list of ints) under each of ``keys`` (dict
    keys, or indices of list datapoints); the arrays of one datapoint must have the same
    length (a ``ValueError`` names the datapoint otherwise). Other components are dropped.
    Each output datapoint is a dict with, for every key ``k`` (Grain's layout):

    - ``k``: the packed tokens, ``seq_len`` long, padded with 0 (the dtype of the inputs);
    - ``k + "_segment_ids"``: ``int32``, 1, 2, ... for the sequences of the row in order, 0
      for padding;
    - ``k + "_positions"``: ``int32``, the position within its segment (0 at each segment's
      start), 0 for padding.

    Methods:

    - ``"first_fit"``: ``num_bins`` rows are kept open; each sequence goes into the first
      (oldest) open row it fits in; ``"best_fit"``: into the open row with the least free space
      that fits it. A row is produced as soon as it is full. When a sequence fits no open row
      and ``num_bins`` rows are open, the fullest open row (the oldest among equally full ones)
      is produced to make room. At the end of an epoch the open rows are produced, oldest
      first. A sequence is never split across rows (except by ``overlong="split"``).
    - ``"concat"``: sequences are concatenated and cut every ``seq_len`` tokens: no padding
      except in the last row of an epoch, but **a sequence may be split across two rows**; the
      segment ids restart at 1 in each row and the part continuing in a new row starts at
      position 0 there.

    A sequence longer than ``seq_len`` is cut to its first ``seq_len`` tokens
    (``overlong="truncate"``), split into pieces of ``seq_len`` tokens packed as separate
    sequences (``"split"``), or raises ``ValueError`` (``"error"``). Empty sequences are
    skipped. Each epoch starts with no open row; nothing is carried into the next epoch.

    Its checkpoint state holds the open rows and the rows ready but not yet produced
    (codec-encoded, at most ``num_bins`` rows), so resuming continues the exact stream.
    :meth:`stats` reports the padding fraction of the epoch so far. ``len`` is unknown.
    """

    def __init__(
        self,
        ds: DataFlow[Any],
        seq_len: int,
        keys: Sequence[str | int] = ("tokens",),
        method: str = "first_fit",
        num_bins: int = 16,
        overlong: str = "truncate",
    ) -> None:
        super().__init__(ds)
        stage = type(self).__name__
        self.seq_len = check_int(stage, "seq_len", seq_len)
        if isinstance(keys, (str, int)) or not isinstance(keys, Sequence):
            raise TypeError(f"{stage}: keys must be a sequence of keys like ('tokens',), got {keys!r}")
        self.keys = tuple(keys)
        if not self.keys or len(set(self.keys)) != len(self.keys):
            raise ValueError(f"{stage}: keys must be non-empty and distinct, got {keys!r}")
        for k in self.keys:
            if isinstance(k, bool) or not isinstance(k, (str, int)):
                raise TypeError(f"{stage}: each key must be a str or int, got {k!r}")
        if method not in _METHODS:
            raise ValueError(f"{stage}: method must be one of {_METHODS}, got {method!r}")
        if overlong not in _OVERLONG:
            raise ValueError(f"{stage}: overlong must be one of {_OVERLONG}, got {overlong!r}")
        self.method = method
        self.overlong = overlong
        self.num_bins = 1 if method == "concat" else check_int(stage, "num_bins", num_bins)
        self._names = [(f"{k}", f"{k}_segment_ids", f"{k}_positions") for k in self.keys]
        self._st: _Epoch | None = None

    def __len__(self) -> int:
        raise LengthUnknownError(f"{type(self).__name__}: the number of rows depends on the sequence lengths")

    def stats(self) -> dict[str, float]:
        """Counts of the epoch so far (the current one, or the last one once it ended):
        ``rows`` produced, ``tokens`` in them, ``padding`` (the fraction of their positions
        that is padding), ``sequences`` read and ``dropped`` tokens (cut by ``"truncate"``)."""
        st = self._st
        rows, tokens = (st.rows_out, st.tokens_out) if st else (0, 0)
        return {
            "rows": rows,
            "tokens": tokens,
            "padding": 1.0 - tokens / (rows * self.seq_len) if rows else 0.0,
            "sequences": st.taken if st else 0,
            "dropped": st.dropped if st else 0,
        }

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        st = self.__dict__.pop("_resume", None) or _Epoch()
        self._st = st
        return self._packed(iter(self.ds), st)

    # -- the epoch -----------------------------------------------------------------------
    def _packed(self, itr: Iterator[Any], st: _Epoch) -> Iterator[dict[str, np.ndarray]]:
        ready = st.ready
        place = self._concat if self.method == "concat" else self._fit
        while True:
            while ready:
                row = ready.popleft()  # before the yield: the state no longer holds it
                st.rows_out += 1
                st.tokens_out += row.fill
                yield self._emit(row)
            dp = next(itr, _END)
            if dp is _END:
                break
            st.taken += 1
            for chunk, n in self._chunks(dp, st):
                place(chunk, n, st)
        while st.open or ready:  # the end of the epoch: flush, oldest first
            ready.extend(st.open.values())
            st.open.clear()
            st.order.clear()
            st.frees.clear()
            st.ids.clear()
            while ready:
                row = ready.popleft()
                st.rows_out += 1
                st.tokens_out += row.fill
                yield self._emit(row)

    def _chunks(self, dp: Any, st: _Epoch) -> list[tuple[tuple[np.ndarray, ...], int]]:
        """The sequences (one array per key, and their length) datapoint ``dp`` gives."""
        stage = type(self).__name__
        arrays = []
        for k in self.keys:
            a = get_component(stage, dp, k)
            if type(a) is not np.ndarray:
                a = np.asarray(a)
            if a.ndim != 1 or (a.dtype.kind not in "iu" and a.size):
                raise TypeError(
                    f"{stage}: {k!r} of datapoint {st.taken - 1} of the epoch must be a 1-D integer "
                    f"array, got {a.dtype} of shape {a.shape}"
                )
            arrays.append(a)
        n = len(arrays[0])
        if len(arrays) > 1 and any(len(a) != n for a in arrays):
            lens = {k: len(a) for k, a in zip(self.keys, arrays)}
            raise ValueError(
                f"{stage}: the keys of datapoint {st.taken - 1} of the epoch have different lengths "
                f"{lens}; every key is packed alike, so they must be equal ({describe_kind(dp)})"
            )
        if n == 0:
            return []
        L = self.seq_len
        if n <= L:
            return [(tuple(arrays), n)]
        if self.overlong == "error":
            raise ValueError(
                f"{stage}: datapoint {st.taken - 1} of the epoch has a sequence of {n} tokens, longer "
                f"than seq_len={L}; use overlong='truncate' or 'split', or filter it out"
            )
        if self.overlong == "truncate":
            st.dropped += n - L
            return [(tuple(a[:L] for a in arrays), L)]
        return [(tuple(a[s : s + L] for a in arrays), min(L, n - s)) for s in range(0, n, L)]

    def _fit(self, chunk: tuple[np.ndarray, ...], n: int, st: _Epoch) -> None:
        """first_fit/best_fit: put one sequence into an open row (see the class docstring)."""
        L, rows, order = self.seq_len, st.open, st.order
        if self.method == "best_fit":
            i = bisect_left(order, n << _ID_BITS)
            if i < len(order):
                key = order.pop(i)
                rid = key & _MASK
                row = rows[rid]
                row.add(chunk, n)
                if row.fill == L:
                    del rows[rid]
                    st.ready.append(row)
                else:
                    insort(order, (L - row.fill) << _ID_BITS | rid)
                return
            if len(rows) >= self.num_bins:  # evict the fullest (the oldest among equals)
                rid = order.pop(0) & _MASK
                st.ready.append(rows.pop(rid))
        else:
            frees, ids = st.frees, st.ids  # of the open rows, oldest first
            i = next(compress(count(), map(n.__le__, frees)), -1)  # the first that fits (a C loop)
            if i >= 0:
                rid = ids[i]
                row = rows[rid]
                row.add(chunk, n)
                if row.fill == L:
                    del rows[rid], frees[i], ids[i]
                    st.ready.append(row)
                else:
                    frees[i] -= n
                return
            if len(rows) >= self.num_bins:  # evict the fullest (the oldest among equals)
                i = frees.index(min(frees))
                del frees[i]
                st.ready.append(rows.pop(ids.pop(i)))
        row = _Row()
        row.add(chunk, n)
        if n == L:
            st.ready.append(row)
            return
        rid = st.next_id
        st.next_id += 1
        rows[rid] = row
        if self.method == "best_fit":
            insort(order, (L - n) << _ID_BITS | rid)
        else:
            st.frees.append(L - n)
            st.ids.append(rid)

    def _concat(self, chunk: tuple[np.ndarray, ...], n: int, st: _Epoch) -> None:
        """concat: append to the one open row, cutting the sequence where the row is full."""
        L, rows = self.seq_len, st.open
        start = 0
        while start < n:
            row = rows.get(0)
            if row is None:
                row = rows[0] = _Row()
            take = min(n - start, L - row.fill)
            row.add(chunk if take == n else tuple(a[start : start + take] for a in chunk), take)
            start += take
            if row.fill == L:
                st.ready.append(rows.pop(0))

    def _emit(self, row: _Row) -> dict[str, np.ndarray]:
        L, fill, lens = self.seq_len, row.fill, row.lens
        seg = np.zeros(L, np.int32)
        pos = np.zeros(L, np.int32)
        if len(lens) == 1:
            seg[:fill] = 1
            pos[:fill] = np.arange(fill, dtype=np.int32)
        else:
            counts = np.asarray(lens)
            seg[:fill] = np.repeat(np.arange(1, len(lens) + 1, dtype=np.int32), counts)
            starts = np.cumsum(counts) - counts
            pos[:fill] = np.arange(fill, dtype=np.int32) - np.repeat(starts, counts)
        out: dict[str, np.ndarray] = {}
        for i, (name, seg_name, pos_name) in enumerate(self._names):
            parts = [p[i] for p in row.pieces]
            data = parts[0] if len(parts) == 1 else np.concatenate(parts)
            tokens = np.zeros(L, data.dtype)
            tokens[:fill] = data
            out[name] = tokens
            out[seg_name] = seg if i == 0 else seg.copy()
            out[pos_name] = pos if i == 0 else pos.copy()
        return out

    # -- checkpoint state ----------------------------------------------------------------
    def _get_state(self, live: bool) -> dict[str, Any]:
        st = self.__dict__.get("_st") if live else None
        stage = type(self).__name__
        state: dict[str, Any] = {"open": None, "open_lens": [], "ready": None, "ready_lens": []}
        if st is None:
            return state
        for name, rows in (("open", list(st.open.values())), ("ready", list(st.ready))):
            if rows:
                state[name] = encode_items(stage, [list(r.joined()) for r in rows], f"{name} rows")
                state[name + "_lens"] = [list(r.lens) for r in rows]
        state.update(taken=st.taken, rows=st.rows_out, tokens=st.tokens_out, dropped=st.dropped)
        return state

    def _set_state(self, state: Mapping[str, Any], live: bool) -> None:
        stage = type(self).__name__
        loaded: dict[str, list[_Row]] = {}
        for name in ("open", "ready"):
            lens = field(stage, state, name + "_lens", list)
            data = decode_items(stage, state, name) if state.get(name) is not None else []
            if len(data) != len(lens):
                raise StateError(f"{stage}: the saved {name} rows are corrupted")
            rows = []
            for arrays, ls in zip(data, lens):
                if (
                    not isinstance(ls, list)
                    or not ls
                    or not all(type(x) is int and x > 0 for x in ls)
                    or sum(ls) > self.seq_len
                    or len(arrays) != len(self.keys)
                    or any(len(a) != sum(ls) for a in arrays)
                ):
                    raise StateError(
                        f"{stage}: a saved row does not fit seq_len={self.seq_len} and keys={self.keys}"
                    )
                rows.append(_Row.restored(tuple(arrays), ls))
            loaded[name] = rows
        if len(loaded["open"]) > self.num_bins:
            raise StateError(f"{stage}: the state holds more open rows than num_bins={self.num_bins}")
        if not live:
            return
        st = _Epoch()
        for row in loaded["open"]:
            rid = st.next_id
            st.next_id += 1
            st.open[rid] = row
            if self.method == "best_fit":
                st.order.append((self.seq_len - row.fill) << _ID_BITS | rid)
            elif self.method == "first_fit":
                st.frees.append(self.seq_len - row.fill)
                st.ids.append(rid)
        st.order.sort()
        st.ready.extend(loaded["ready"])
        st.taken = int_field(stage, state, "taken")
        st.rows_out = int_field(stage, state, "rows")
        st.tokens_out = int_field(stage, state, "tokens")
        st.dropped = int_field(stage, state, "dropped")
        self._resume = st


_MASK = (1 << _ID_BITS) - 1


class _Row:
    """A row being filled: the sequences' pieces (one array per key) and their lengths."""

    __slots__ = ("fill", "lens", "pieces")

    def __init__(self) -> None:
        self.pieces: list[tuple[np.ndarray, ...]] = []
        self.lens: list[int] = []
        self.fill = 0

    def add(self, chunk: tuple[np.ndarray, ...], n: int) -> None:
        self.pieces.append(chunk)
        self.lens.append(n)
        self.fill += n

    def joined(self) -> tuple[np.ndarray, ...]:
        """One array per key: the row's tokens so far."""
        if len(self.pieces) == 1:
            return self.pieces[0]
        return tuple(np.concatenate(parts) for parts in zip(*self.pieces))

    @classmethod
    def restored(cls, arrays: tuple[np.ndarray, ...], lens: list[int]) -> _Row:
        row = cls()
        row.pieces = [tuple(np.asarray(a) for a in arrays)]
        row.lens = list(lens)
        row.fill = sum(lens)
        return row


class _Epoch:
    """What one epoch of :class:`PackData` holds (read by ``_get_state``)."""

    __slots__ = (
        "dropped", "frees", "ids", "next_id", "open", "order", "ready", "rows_out", "taken", "tokens_out"
    )

    def __init__(self) -> None:
        self.open: dict[int, _Row] = {}  # open rows by id, oldest first
        self.order: list[int] = []  # best_fit: ``free << _ID_BITS | id`` of each open row, sorted
        self.frees: list[int] = []  # first_fit: the free space of each open row, oldest first
        self.ids: list[int] = []  # first_fit: their ids
        self.ready: deque[_Row] = deque()  # full or evicted rows not produced yet
        self.next_id = 0
        self.taken = 0  # datapoints read from the upstream this epoch
        self.rows_out = 0
        self.tokens_out = 0
        self.dropped = 0
