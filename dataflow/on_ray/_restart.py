"""What it takes to rebuild a dead :class:`~dataflow.on_ray.RayRunner` worker exactly where
it stood for the consumer (no Ray here: pure bookkeeping, kept by the consumer).

A worker's copy of the flow lives only in its actor, so the consumer keeps, per worker, its
**last snapshot** (the :data:`~._flow_actor.Start` it could be rebuilt from: at first the one
it was built from, later what :meth:`~._flow_actor.FlowActor.snapshot` returned) and the
**log** of the pulls received since then. A new actor built from the snapshot replays the
logged pulls (dropping their datapoints) and then stands where the dead one stood; the pulls
that were in flight when it died are sent again. Nothing is lost or repeated, provided the
flow is deterministic from its seed and state (the checkpoint contract); the replay checks
that every pull gives the same number of datapoints and fails clearly when not.

Snapshots bound the replay: every ``snapshot_every`` pulls the consumer asks the worker for
one (in the worker's call order, so it is the state right after the pulls sent before it)
and adopts it once a later pull has come back. A flow that cannot save its state there
(a generator source mid-epoch) keeps the older snapshot and a longer log.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._flow_actor import Start

__all__ = ["Lineage"]

#: one run of equal pulls: ``[gen, n, count, ended, repeat]``
Run = list[Any]


@dataclass
class Lineage:
    """One worker's last snapshot, the pulls received since, and its restart count."""

    start: Start
    log: list[Run] = field(default_factory=list)
    received: int = 0  #: pulls in ``log``
    pending: tuple[Any, int] | None = None  #: (snapshot ref, pulls it comes after)
    snapshots: bool = True  #: False once the flow could not save its state
    restarts: int = 0

    def record(self, gen: int, n: int, count: int, ended: bool) -> None:
        """A pull ``(gen, n)`` came back with ``count`` datapoints and this end flag."""
        last = self.log[-1] if self.log else None
        if last is not None and last[:4] == [gen, n, count, ended]:
            last[4] += 1
        else:
            self.log.append([gen, n, count, ended, 1])
        self.received += 1

    def asked(self, ref: Any, inflight: int) -> None:
        """A snapshot was requested with ``inflight`` pulls sent before it not yet back."""
        self.pending = (ref, self.received + inflight)

    def served(self) -> bool:
        """Whether the pending snapshot was surely taken (a later pull came back)."""
        return self.pending is not None and self.received > self.pending[1]

    def adopt(self, start: Start | None) -> None:
        """The pending snapshot's answer: the new start (``None``: the flow could not save
        its state; keep the old one, and ask no more)."""
        if self.pending is None:
            return
        at = self.pending[1]
        self.pending = None
        if start is None:
            self.snapshots = False
            return
        self.start = start
        drop = at
        while drop:
            run = self.log[0]
            if run[4] <= drop:
                drop -= run[4]
                self.log.pop(0)
            else:
                run[4] -= drop
                drop = 0
        self.received -= at

    def replay(self) -> list[tuple[int, int, int, bool, int]]:
        """The pulls a new actor built from :attr:`start` must serve again."""
        return [(int(g), int(n), int(c), bool(e), int(r)) for g, n, c, e, r in self.log]

    def lost(self) -> None:
        """The worker died: a pending snapshot will never be adopted."""
        self.pending = None
