"""Round-robin over sub-flows: :class:`InterleaveData` (the ``interleave`` counterpart)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from .._checks import check_callable, check_int
from .._errors import LengthUnknownError, StateError
from .._state import load_subtree, save_subtree
from .._state_fields import decode_items, encode_items, field, int_field
from ..base import DataFlow, ProxyDataFlow, close_iterator

__all__ = ["InterleaveData"]


class InterleaveData(ProxyDataFlow):
    """Map each upstream element to a sub-flow and interleave ``cycle_length`` of them.

    ``func(dp)`` returns a DataFlow (it is ``reset_state()``-ed here) or any iterable of
    datapoints. Up to ``cycle_length`` sub-flows are open at once; ``block_length``
    datapoints are taken from each in turn, round-robin. When a sub-flow ends, the next
    upstream element opens a new one in its slot. The order is deterministic (as tf.data's
    ``interleave`` with ``deterministic=True``). Typical use: one upstream element per file,
    ``func`` reads the file, and records of several files are mixed.

    ``len`` is unknown. Reentrant when the upstream is; sub-flows are closed when their
    iterator ends or this flow's iterator is closed.

    Checkpoints hold, for each open sub-flow, the upstream element that opened it
    (codec-encoded; ``func`` opens it again on resume) and the sub-flow's own state; an
    iterable that is not a DataFlow is read through :class:`~dataflow.DataFromIterable`, so a
    list resumes by position and a generator only with ``allow_fast_forward=True``.
    """

    def __init__(
        self,
        ds: DataFlow[Any],
        func: Callable[[Any], Any],
        cycle_length: int = 2,
        block_length: int = 1,
    ) -> None:
        super().__init__(ds)
        stage = type(self).__name__
        check_callable(stage, "func", func)
        self.func = func
        self.cycle_length = check_int(stage, "cycle_length", cycle_length)
        self.block_length = check_int(stage, "block_length", block_length)

    def __len__(self) -> int:
        raise LengthUnknownError("InterleaveData: the total length depends on the sub-flows")

    def _open(self, dp: Any, node: Any = None) -> _Slot:
        sub = self.func(dp)
        if not isinstance(sub, DataFlow):
            try:
                iter(sub)
            except TypeError:
                raise TypeError(
                    f"InterleaveData: func must return a DataFlow or an iterable, got "
                    f"{type(sub).__name__} for element {dp!r}"
                ) from None
            from ..sources._iterables import DataFromIterable

            sub = DataFromIterable(sub)
        sub.reset_state()
        if node is not None:
            load_subtree(sub, node, "InterleaveData's sub-flow")
        return _Slot(dp, sub, iter(sub))

    def __iter__(self) -> Iterator[Any]:
        self._reopen()
        st = self.__dict__.pop("_resume", None) or _Epoch()
        self._st = st
        return self._interleave(iter(self.ds), st)

    def _interleave(self, upstream: Iterator[Any], st: _Epoch) -> Iterator[Any]:
        active, block = st.active, self.block_length
        try:
            if not active:
                for dp in upstream:
                    active.append(self._open(dp))
                    if len(active) == self.cycle_length:
                        break
            while active:
                slot = active[0]
                for item in slot.itr:
                    st.taken += 1
                    if st.taken == block:  # the state is the next block's before the yield
                        st.taken = 0
                        active.rotate(-1)
                        yield item
                        break
                    yield item
                else:  # exhausted: the next element opens in the same slot, as in tf.data
                    st.taken = 0
                    slot.close()
                    nxt = next(upstream, _END)
                    if nxt is _END:
                        active.popleft()
                    else:
                        active[0] = self._open(nxt)
                        active.rotate(-1)
        finally:
            for slot in active:
                slot.close()
            close_iterator(upstream)

    def _get_state(self, live: bool) -> dict[str, Any]:
        st: _Epoch | None = self.__dict__.get("_st")
        if not live or st is None:
            return {"taken": 0, "elements": None, "subs": []}
        elements = encode_items("InterleaveData", [s.element for s in st.active], "upstream elements")
        subs = [save_subtree(s.sub, True) for s in st.active]
        return {"taken": st.taken, "elements": elements, "subs": subs}

    def _set_state(self, state: Mapping[str, Any], live: bool) -> None:
        taken = int_field("InterleaveData", state, "taken", 0, self.block_length - 1)
        subs = field("InterleaveData", state, "subs", list)
        if not live:
            return
        elements = decode_items("InterleaveData", state, "elements")
        if len(elements) != len(subs) or len(subs) > self.cycle_length:
            raise StateError("InterleaveData: the state's open sub-flows are corrupted")
        st = _Epoch()
        st.taken = taken
        self._pending = (st, list(zip(elements, subs)))
        self._resume = st

    def _reopen(self) -> None:
        """Open the sub-flows of a loaded state (after ``reset_state``: they are reset here)."""
        pending = self.__dict__.pop("_pending", None)
        if pending is not None:
            st, slots = pending
            st.active.extend(self._open(dp, node) for dp, node in slots)


class _Slot:
    """One open sub-flow: the upstream element that opened it, the flow and its iterator."""

    __slots__ = ("element", "itr", "sub")

    def __init__(self, element: Any, sub: DataFlow[Any], itr: Iterator[Any]) -> None:
        self.element, self.sub, self.itr = element, sub, itr

    def close(self) -> None:
        close_iterator(self.itr)
        self.sub.close()


class _Epoch:
    """One epoch of :class:`InterleaveData`: the open sub-flows in turn order, and how many
    datapoints the first has given in its current block."""

    __slots__ = ("active", "taken")

    def __init__(self) -> None:
        self.active: deque[_Slot] = deque()
        self.taken = 0


_END = object()
