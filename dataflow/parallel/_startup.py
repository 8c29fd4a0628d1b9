"""Which worker of a process map gets a task while its workers start.

A process map forks worker 0 in ``reset_state()`` and the others later (``ProcessPool`` with
``lazy=True``): a fork blocks the consumer for as long as it takes (tens of milliseconds in a
process that imported a framework), so forking every worker up front delays the first batch
by that much per worker. Until every worker has said READY, :class:`StartupDispatch` decides:

- a worker not READY yet never gets a message (a ROUTER drops messages to an unknown peer);
  the tasks given to it are held here and sent when it says READY, in order;
- before any result has measured the map, tasks are placed as if every worker were there
  (the first tasks carry one datapoint each), but a worker's held tasks do not start it:
  only the pool's :data:`~._pool.LAZY_START_S` bound does;
- once a result has measured the map (:meth:`rebalance`), the tasks held for workers not
  READY move to READY workers as long as the work queued on each stays within
  :data:`LAZY_BUDGET_S` at the measured time per datapoint, and new tasks are placed the
  same way; a task beyond that goes to the least loaded worker not READY, which the map
  then starts (:meth:`wants_start`).

So a cheap map's first batches come from worker 0 while the others start (they start at the
latest :data:`~._pool.LAZY_START_S` after the pool), and a slow map starts every worker at
once, its tasks spread as if all had been there from the start. Once every worker is READY
the map goes back to giving each task to the worker with the fewest tasks in flight.
"""

from __future__ import annotations

from typing import Any

__all__ = ["LAZY_BUDGET_S", "StartupDispatch"]

#: the map time a READY worker may have queued before tasks go to a worker still starting
LAZY_BUDGET_S = 0.02


class StartupDispatch:
    """Task placement for ``n`` workers while some are not READY (see the module docstring).

    ``items[w]``: datapoints in flight on worker ``w``, kept by the map (:meth:`sent`,
    :meth:`done`). Not thread-safe: the map's consumer thread owns it."""

    __slots__ = ("held", "items", "ready", "starting")

    def __init__(self, n: int) -> None:
        self.ready = [False] * n
        self.held: dict[int, list[Any]] = {}  # worker -> tasks waiting for its READY
        self.items = [0] * n
        self.starting = True  # some worker has not said READY yet

    def choose(self, load: list[int], active: int, size: int, per_item: float | None) -> int:
        """The worker for a task of ``size`` datapoints among the first ``active``
        (``load``: tasks in flight per worker; ``per_item``: measured seconds per datapoint,
        ``None`` before the first result)."""
        room = self._room(load, active, size, per_item)
        if room is not None:
            return room
        # Ties: unmeasured, a READY worker (the first result comes sooner); over the budget,
        # a starting one.
        over = per_item is not None
        return min(range(active), key=lambda w: (load[w], self.ready[w] == over))

    def _room(self, load: list[int], active: int, size: int, per_item: float | None) -> int | None:
        """The least loaded READY worker if ``size`` more datapoints keep its queued work
        within :data:`LAZY_BUDGET_S` (``None``: no such worker, or nothing measured)."""
        if not self.starting or per_item is None:
            return None
        up = [w for w in range(active) if self.ready[w]]
        if not up:
            return None
        best = min(up, key=load.__getitem__)
        return best if (self.items[best] + size) * per_item <= LAZY_BUDGET_S else None

    def rebalance(self, load: list[int], active: int, per_item: float | None) -> list[tuple[int, Any]]:
        """Move held tasks (oldest first) to READY workers that have room within the budget;
        returns ``(worker, task)`` to send now. ``load`` is updated; a task's size is its
        chunk's length (``task[1]``)."""
        if per_item is None or not self.held:
            return []
        moved: list[tuple[int, Any]] = []
        for worker in sorted(self.held):
            tasks = self.held[worker]
            while tasks:
                size = len(tasks[0][1])
                best = self._room(load, active, size, per_item)
                if best is None:
                    break
                task = tasks.pop(0)
                load[worker] -= 1
                load[best] += 1
                self.items[worker] = max(0, self.items[worker] - size)
                self.items[best] += size
                moved.append((best, task))
            if not tasks:
                del self.held[worker]
        return moved

    def hold(self, worker: int, task: Any) -> bool:
        """Keep ``task`` for ``worker`` if it is not READY; True if it was kept."""
        if not self.starting or self.ready[worker]:
            return False
        self.held.setdefault(worker, []).append(task)
        return True

    def wants_start(self, per_item: float | None) -> bool:
        """Measured tasks wait for a worker that has not said READY (start the pool's
        pending workers); before the first measurement only the pool's own bound does."""
        return per_item is not None and bool(self.held)

    def now_ready(self, worker: int) -> list[Any]:
        """``worker`` said READY: the tasks held for it, to send in order."""
        self.ready[worker] = True
        self.starting = not all(self.ready)
        return self.held.pop(worker, [])

    def sent(self, worker: int, size: int) -> None:
        if self.starting:
            self.items[worker] += size

    def done(self, worker: int, size: int) -> None:
        if self.starting:
            self.items[worker] = max(0, self.items[worker] - size)
