"""The Ray actors behind a :class:`~dataflow.on_ray.RayRunner`: one
:class:`~._flow_actor.FlowActor` per worker, pulled with a few pulls in flight, and replaced
where it stood when it dies (see :mod:`._restart`). The runner merges what they send.

A worker that runs on the consumer's node gets a shared-memory ring of its own (see
:mod:`._wire`), made when it starts and made anew for a replacement (the old one stays
mapped while arrays the consumer holds view it).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from .._errors import WorkerDied
from ..parallel import _messages as msg
from ..parallel._shm import RingReader
from ._connect import ray_module
from ._flow_actor import Pulled, Start
from ._node_ring import node_ring, release
from ._restart import Lineage
from ._wire import owned, unpack

__all__ = ["Workers"]


class Workers:
    """``num`` flow actors of one runner (``stage`` names it in errors)."""

    def __init__(
        self,
        stage: str,
        num: int,
        chunk: int,
        timeout: float | None,
        max_restarts: int,
        snapshot_every: int | None,
        copy: bool,
        shm_bytes: int = 0,
    ) -> None:
        self.stage, self.num, self.chunk, self.timeout = stage, num, chunk, timeout
        self.max_restarts, self.snapshot_every, self.copy = max_restarts, snapshot_every, copy
        self.ring_bytes = shm_bytes // num  # each local worker's ring (0: none)
        self.rings: list[RingReader | None] = []  # per worker: its ring, if on our node
        self.actors: list[Any] = []
        self.pids: list[int] = []
        self.inflight: list[deque[tuple[int, Any]]] = []  # (pass sent for, ref) per worker
        self.lineage: list[Lineage] = []
        self._make: Callable[[int, Start], Any] | None = None

    def start(self, make: Callable[[int, Start], Any], starts: list[Start]) -> None:
        """Create the actors (``make(i, start)``) and wait until each runs."""
        self._make = make
        self.actors = [make(i, start) for i, start in enumerate(starts)]
        self.lineage = [Lineage(start) for start in starts]
        self.inflight = [deque() for _ in starts]
        self.pids = [self.get(i, a.pid.remote(), "to start") for i, a in enumerate(self.actors)]
        self.rings = [None] * len(self.actors)
        for i, actor in enumerate(self.actors):
            self.rings[i] = self._ring_for(i, actor)

    def _ring_for(self, w: int, actor: Any) -> RingReader | None:
        """A ring for worker ``w`` if it runs on this node (see :func:`._node_ring.node_ring`)."""
        return node_ring(
            self.stage, actor, self.ring_bytes, self.copy, lambda ref, doing: self.get(w, ref, doing)
        )

    def stop(self) -> None:
        """Kill every actor (idempotent)."""
        actors, self.actors, self.inflight, self.pids, self.lineage = self.actors, [], [], [], []
        rings, self.rings = self.rings, []
        self._make = None
        release(self.stage, actors, rings)

    def get(self, w: int, ref: Any, doing: str) -> Any:
        """Worker ``w``'s answer ``ref``; ``TimeoutError`` past the timeout, ``WorkerDied``
        when the actor is gone."""
        ray = ray_module(self.stage)
        try:
            return ray.get(ref, timeout=self.timeout)
        except ray.exceptions.GetTimeoutError:
            raise TimeoutError(
                f"{self.stage}: worker {w} did not answer {doing} within "
                f"timeout={self.timeout}s (resources: {ray.available_resources()})"
            ) from None
        except ray.exceptions.RayActorError as e:
            pid = self.pids[w] if w < len(self.pids) else None
            raise WorkerDied(
                f"{self.stage}: Ray worker {w} (pid {pid}) died; its copy of the flow "
                f"is lost. Ray says: {(str(e).strip().splitlines() or [type(e).__name__])[0]}",
                pid=pid,
            ) from e

    def pull(self, w: int, gen: int) -> None:
        """Send worker ``w`` one more pull, for pass ``gen`` (every ``snapshot_every``-th asks
        for a snapshot too)."""
        lineage, every = self.lineage[w], self.snapshot_every
        lineage.sent += 1
        snapshot = lineage.snapshots and every is not None and lineage.sent % every == 0
        self.inflight[w].append((gen, self.actors[w].pull.remote(gen, self.chunk, snapshot)))

    def receive(self, w: int) -> tuple[int, list[Any], bool] | None:
        """Worker ``w``'s oldest pull: ``(pass, datapoints, pass ended)``; ``None`` when the
        worker had died and was replaced (its lost pulls are in flight again)."""
        sent_gen, ref = self.inflight[w][0]
        try:
            pulled: Pulled = self.get(w, ref, "a pull")
        except WorkerDied as died:
            self.replace(w, died)
            return None
        self.inflight[w].popleft()
        gen, kind, payload, ended, snapshot = pulled
        if kind == msg.ERROR:
            raise msg.error_for(self.stage, payload)
        items = unpack(payload, self.rings[w])
        lineage = self.lineage[w]
        lineage.record(sent_gen, self.chunk, len(items), ended)
        if snapshot is not None:
            lineage.adopt(None if isinstance(snapshot, msg.ErrorRecord) else snapshot)
        return gen, (owned(items) if self.copy else items), ended

    def state(self, w: int, actor: Any, ref: Any, drain: Callable[[int], None]) -> Any:
        """Worker ``w``'s answer to ``state()`` sent to ``actor``; asked again of the new
        worker if ``actor`` died and was replaced. ``drain(w)`` receives the pulls in flight
        first (the state is the one right after them)."""
        while True:
            drain(w)
            if self.actors[w] is actor:
                try:
                    return self.get(w, ref, "state_dict()")
                except WorkerDied as died:
                    self.replace(w, died)
            actor = self.actors[w]
            ref = actor.state.remote()

    def replace(self, w: int, died: WorkerDied) -> None:
        """Replace dead worker ``w`` by one standing where it stood, or raise ``died``."""
        lineage = self.lineage[w]
        while True:
            lineage.restarts += 1
            if lineage.restarts > self.max_restarts or self._make is None:
                raise WorkerDied(
                    f"{died} It was replaced {self.max_restarts} time(s) already "
                    f"(max_restarts={self.max_restarts}); resume from your last checkpoint",
                    pid=died.pid,
                ) from died.__cause__
            ray_module(self.stage).kill(self.actors[w], no_restart=True)
            self.actors[w] = actor = self._make(w, lineage.start)
            try:
                self.pids[w] = self.get(w, actor.pid.remote(), "to start again")
                old, self.rings[w] = self.rings[w], None  # a new writer must not reuse its slots
                if old is not None:
                    old.close()
                self.rings[w] = self._ring_for(w, actor)
                answer = self.get(w, actor.replay.remote(lineage.replay()), "the replay")
            except WorkerDied as again:
                died = again
                continue
            if isinstance(answer, msg.ErrorRecord):
                raise msg.error_for(self.stage, answer)
            break
        inflight = self.inflight[w]
        lost = [gen for gen, _ in inflight]
        inflight.clear()
        for gen in lost:  # sent again, in order, with the pass each was sent for
            self.pull(w, gen)
