"""What it takes to rebuild a dead :class:`~dataflow.on_ray.RayRunner` worker exactly where
it stood for the consumer (no Ray here: pure bookkeeping, kept by the consumer).

A worker's copy of the flow lives only in its actor, so the consumer keeps, per worker, its
**last snapshot** (the :data:`~._flow_actor.Start` it could be rebuilt from: at first the one
it was built from, later one a pull brought back) and the **log** of the pulls received
since then. A new actor built from the snapshot replays the logged pulls (dropping their
datapoints) and then stands where the dead one stood; the pulls that were in flight when it
died are sent again. Nothing is lost or repeated, provided the flow is deterministic from its
seed and state (the checkpoint contract); the replay checks that every pull gives the same
number of datapoints and fails clearly when not.

Snapshots bound the replay: every ``snapshot_every``-th pull asks the worker for one, taken
right after serving it and sent back with its datapoints. A flow that cannot save its state
there (a generator source mid-epoch) keeps the older snapshot and a longer log.
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
    """One worker's last snapshot, the pulls received since, the pulls sent and its restart
    count."""

    start: Start
    log: list[Run] = field(default_factory=list)
    sent: int = 0  #: pulls sent to this worker
    snapshots: bool = True  #: False once the flow could not save its state
    restarts: int = 0

    def record(self, gen: int, n: int, count: int, ended: bool) -> None:
        """A pull ``(gen, n)`` came back with ``count`` datapoints and this end flag."""
        last = self.log[-1] if self.log else None
        if last is not None and last[:4] == [gen, n, count, ended]:
            last[4] += 1
        else:
            self.log.append([gen, n, count, ended, 1])

    def adopt(self, start: Start | None) -> None:
        """A snapshot taken right after the last pull recorded: the new start (``None``: the
        flow could not save its state; keep the old one, and ask no more)."""
        if start is None:
            self.snapshots = False
        else:
            self.start, self.log = start, []

    def replay(self) -> list[tuple[int, int, int, bool, int]]:
        """The pulls a new actor built from :attr:`start` must serve again."""
        return [(int(g), int(n), int(c), bool(e), int(r)) for g, n, c, e, r in self.log]
