"""The body of a :class:`~dataflow.on_ray.RayRunner` worker: one copy of a flow, read in
chunks on request (made a Ray actor class at start, so importing this needs no Ray).

The consumer *pulls*: each ``pull(gen, n)`` returns the next ``n`` datapoints of this copy
(fewer at the end of a pass, and fewer when the pull's first datapoint is large: about
``chunk_bytes`` per pull, estimated from it, so the cut depends on the data alone). Pulls
run one after another in the order the consumer sent them, so a ``state()`` request sent
after some pulls is the flow's state right after them.

``gen`` numbers the consumer's passes in ``shard`` mode: once this copy's pass is over, the
copy waits (pulls return nothing, flagged ended) until a pull of a newer ``gen`` starts the
next pass. Without ``shard`` the copy runs pass after pass by itself. Methods never raise
for the user's errors: they return an :class:`~dataflow.parallel._messages.ErrorRecord`.

Restarts: a pull asked for a snapshot also returns the ``start`` this copy would be rebuilt
from to stand where it is right after that pull (its pass number, whether it waits, its
flow's state); a new actor built from a snapshot and given ``replay(pulls)``, the pulls the
consumer received since that snapshot, stands exactly where the dead one stood for the
consumer (see :mod:`._restart`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from .. import _seeding as seeding
from ..base import DataFlow
from ..parallel import _messages as msg
from ._node_ring import RingActor
from ._wire import approx_size, pack

__all__ = ["FlowActor", "Pulled", "Start"]

#: ``(gen, kind, datapoints (packed) or error record, pass ended, snapshot)``: see ``pull``
Pulled = tuple[int, bytes, Any, bool, Any]
#: ``(pass number, waiting for the next pass, flow state or None)``: where a copy starts
Start = tuple[int, bool, Mapping[str, Any] | None]


class FlowActor(RingActor):
    def __init__(
        self,
        source: DataFlow[Any] | Callable[[], DataFlow[Any]],
        index: int,
        num_workers: int,
        shard: bool,
        seed: int | None,
        start: Start,
        chunk_bytes: int | None = None,
    ) -> None:
        self.source, self.index, self.num_workers = source, index, num_workers
        self.shard, self.seed = shard, seed
        self.gen, self.waiting, self.state_to_load = start
        self.chunk_bytes = chunk_bytes
        self.flow: DataFlow[Any] | None = None
        self.it: Iterator[Any] | None = None
        self.produced = self.state_to_load is not None  # a resumed pass may have nothing left
        self.where = f"worker {index} of RayRunner (pid {os.getpid()})"

    def _setup(self) -> DataFlow[Any]:
        if self.flow is None:
            # copies are seeded apart; shards of one pass share a seed, so that a shuffle
            # before the shard is the same order on every worker and the shards partition it
            seeding.enter_worker(() if self.shard else (self.index,), self.seed)
            flow = self.source if isinstance(self.source, DataFlow) else self.source()
            if not isinstance(flow, DataFlow):
                raise TypeError(f"the builder of RayRunner returned {type(flow).__name__}, not a DataFlow")
            if self.shard:
                flow = flow.shard(self.num_workers, self.index)
            flow.reset_state()
            if self.state_to_load is not None:
                flow.load_state_dict(self.state_to_load)
                root = self.state_to_load.get("root")
                if not isinstance(root, Mapping) or root.get("live"):  # saved inside an epoch: go on
                    self.it = iter(flow)
            self.flow = flow
        return self.flow

    def length(self) -> Any:
        try:
            return len(self._setup())
        except (TypeError, NotImplementedError):
            return None
        except BaseException as e:
            return msg.capture_error(e, f"len() of the flow in {self.where}")

    def pull(self, gen: int, n: int, snapshot: bool = False) -> Pulled:
        """The next ``n`` datapoints (see the module docstring), packed (:func:`~._wire.pack`);
        last, with ``snapshot``, the :data:`Start` that rebuilds this copy right after them
        (an error record if the flow cannot save its state here, e.g. a generator source
        mid-epoch), else ``None``."""
        gen, kind, payload, ended = self._next(gen, n)
        if kind != msg.DATA:
            return gen, kind, payload, ended, None
        start: Any = None
        if snapshot and self.flow is not None:
            try:
                start = (self.gen, self.waiting, self.flow.state_dict())
            except BaseException as e:
                start = msg.capture_error(e, f"state_dict() of the flow in {self.where}")
        return gen, kind, pack(payload, self.ring), ended, start

    def _next(self, gen: int, n: int) -> tuple[int, bytes, Any, bool]:
        try:
            flow = self._setup()
            if self.shard and gen > self.gen:  # the consumer began a new pass
                self.gen, self.waiting, self.it = gen, False, None
            if self.waiting:
                return self.gen, msg.DATA, [], True
            if self.it is None:
                self.it, self.produced = iter(flow), False
            out: list[Any] = []
            for dp in self.it:
                if not out and self.chunk_bytes is not None:
                    n = min(n, max(1, self.chunk_bytes // approx_size(dp)))
                out.append(dp)
                if len(out) >= n:
                    self.produced = True
                    return self.gen, msg.DATA, out, False
            if not (out or self.produced or self.shard):
                raise ValueError(f"the flow {type(flow).__name__} produced an empty epoch")
            self.it, self.waiting = None, self.shard
            return self.gen, msg.DATA, out, True
        except BaseException as e:
            return self.gen, msg.ERROR, msg.capture_error(e, f"the flow in {self.where}"), False

    def state(self) -> Any:
        try:
            return self._setup().state_dict()
        except BaseException as e:
            return msg.capture_error(e, f"state_dict() of the flow in {self.where}")

    def replay(self, pulls: list[tuple[int, int, int, bool, int]]) -> Any:
        """Serve again, dropping the datapoints, the pulls the consumer received from the
        dead copy since its snapshot (runs of ``repeat`` pulls ``(gen, n, count, ended,
        repeat)``): ``None`` when each gave the same number of datapoints and end flag as
        before, else an error record."""
        for gen, n, count, ended, repeat in pulls:
            for _ in range(repeat):
                _, kind, payload, now_ended = self._next(gen, n)
                if kind == msg.ERROR:
                    return payload
                if (len(payload), now_ended) != (count, ended):
                    e = RuntimeError(
                        f"replaying the lost worker's stream gave {len(payload)} datapoints "
                        f"(ended={now_ended}) where it had given {count} (ended={ended}): the flow is "
                        f"not deterministic from its seed and state, so it cannot be resumed exactly"
                    )
                    return msg.capture_error(e, f"the restarted {self.where}")
        return None
