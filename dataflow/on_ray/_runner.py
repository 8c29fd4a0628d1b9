"""Run copies of a whole flow on Ray workers: :class:`RayRunner`.

Each of ``num_workers`` Ray actors builds its own copy of the flow (from the flow, pickled,
or from a zero-argument builder called on the worker, for flows that open local files),
seeded apart (worker *i* is :func:`dataflow._seeding.enter_worker` ``(i,)``; in ``shard``
mode all share one seed instead, so a shuffle before the shard has the same order on every
worker and the shards partition it), and resets it there. The consumer pulls ``chunk``
datapoints at a time (fewer when they are large: about ``chunk_bytes`` per pull), keeping
``prefetch`` pulls in flight per worker so the workers never wait for it, and merges the
chunks **round-robin**, worker by worker: the merged order is deterministic (a function of
the flows alone), which is what makes runs repeatable and checkpoints exact.

- Without ``shard`` (like :class:`~dataflow.MultiProcessRunnerZMQ`): every worker runs the
  whole flow, pass after pass; one ``__iter__`` yields ``len(flow)`` datapoints (endless
  without a length), and what was received but not yielded comes first in the next epoch.
  Without per-worker randomness the copies repeat each other.
- With ``shard=True``: worker *i* runs ``flow.shard(num_workers, i)``; one ``__iter__`` is
  one pass over the data (every worker's share once), then it ends.

Checkpoints hold each worker's flow state (taken after the pulls already sent, so nothing is
lost or repeated), the chunks received but not yielded, and the round-robin position; a
resumed runner needs the same ``num_workers`` and ``shard``.

A worker that dies (its process killed, its node lost) is replaced, up to ``max_restarts``
times per worker: the new actor starts from the dead one's last snapshot (its flow state,
taken every ``snapshot_every`` pulls) and replays the pulls received since, so it stands
exactly where the dead one stood for the consumer; the pulls in flight are sent again. In
both modes nothing is lost or repeated, if the flow is deterministic from its seed and
state (else the replay fails with a clear error). Beyond the limit:
:class:`~dataflow._errors.WorkerDied`. See :mod:`._restart`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from .. import _seeding as seeding
from .._checks import check_int, check_timeout
from .._errors import DataFlowNotReset, LengthUnknownError, StateError
from .._state import checking_only
from .._state_fields import decode_items, encode_items, field, int_field
from ..base import DataFlow, ReentrancyGuard
from ..parallel import _messages as msg
from ..parallel._pool import resolve_shm_bytes
from ._connect import actor_options, connected_ray
from ._flow_actor import FlowActor, Start
from ._workers import Workers

__all__ = ["RayRunner"]


class RayRunner(DataFlow[Any]):
    """Run ``num_workers`` copies of a flow on Ray workers and merge them (see
    :mod:`dataflow.on_ray._runner`: order, checkpoints, failures).

    Args:
        flow: a DataFlow (pickled to the workers) or a zero-argument function that builds
            one on each worker.
        num_workers: number of Ray actors.
        shard: worker *i* runs ``flow.shard(num_workers, i)``; an epoch is one pass.
        chunk: datapoints per pull at most (shares Ray's per-call cost, about a
            millisecond or more: small datapoints need large chunks).
        chunk_bytes: about how many bytes one pull may carry: a pull whose first datapoint
            is large takes fewer datapoints (at least one), estimated from that datapoint so
            the merge stays deterministic (``None``: always ``chunk``). The default, 32 MiB,
            shares a pull's cost among a few large arrays; with ``prefetch`` pulls in
            flight, a worker on this node needs ``prefetch`` times that of its ring
            (``shm_bytes / num_workers`` of them) before arrays go through Ray's store.
        prefetch: pulls in flight per worker (bounds memory: ``prefetch`` pulls each).
        seed: base seed of the workers (default: :func:`~dataflow.set_seed`'s).
        timeout: seconds to wait for a worker's chunk before ``TimeoutError``.
        ray_remote_args: Ray actor options (``num_cpus``, ``resources``,
            ``scheduling_strategy``, ...) to place the workers.
        max_restarts: how many times a dead worker is replaced (resuming where it stood);
            beyond, :class:`~dataflow._errors.WorkerDied`.
        snapshot_every: pulls between two snapshots of a worker's flow state, which bound
            the replay of a replaced worker (``None``: never; it replays from its start).
            Each is a ``state_dict()`` sent to the consumer: raise it when that is large
            (big shuffle buffers).
        copy: ``True`` gives owned, writable arrays; by default arrays of 100 KiB and more
            are views (no copy on receive): read-only views of Ray's object store, or, from
            a worker on this node, writable views of its shared-memory ring.
        shm_bytes: shared memory for the workers that run on the consumer's node, split
            between them (``None``: 256 MiB, at most half of what ``/dev/shm`` has free;
            ``0``: none). Their large arrays are copied there once instead of going through
            Ray's object store. An array you keep holds its part of the ring; when a ring is
            full, arrays go through Ray's store again. Workers on other nodes always use the
            object store.
    """

    _resume: int  # set only by a live load (_set_state); the next __iter__ takes it

    def __init__(
        self,
        flow: DataFlow[Any] | Callable[[], DataFlow[Any]],
        num_workers: int,
        *,
        shard: bool = False,
        chunk: int = 1024,
        chunk_bytes: int | None = 32 << 20,
        prefetch: int = 2,
        seed: int | None = None,
        timeout: float | None = None,
        ray_remote_args: dict[str, Any] | None = None,
        max_restarts: int = 3,
        snapshot_every: int | None = 32,
        copy: bool = False,
        shm_bytes: int | None = None,
    ) -> None:
        stage = type(self).__name__
        if not isinstance(flow, DataFlow) and not callable(flow):
            raise TypeError(
                f"{stage}: flow must be a DataFlow or a zero-argument function building one, "
                f"got {type(flow).__name__} ({flow!r:.60})"
            )
        self.flow = flow
        self.num_workers = check_int(stage, "num_workers", num_workers)
        self.sharded = bool(shard)
        self.chunk = check_int(stage, "chunk", chunk)
        self.chunk_bytes = None if chunk_bytes is None else check_int(stage, "chunk_bytes", chunk_bytes)
        self.pulls_ahead = check_int(stage, "prefetch", prefetch)
        self.seed = seeding.check_seed(stage, seed)
        self.timeout = check_timeout(stage, timeout)
        self.max_restarts = check_int(stage, "max_restarts", max_restarts, minimum=0)
        self.snapshot_every = (
            None if snapshot_every is None else check_int(stage, "snapshot_every", snapshot_every)
        )
        self.copy = bool(copy)
        # the runner replaces dead workers itself (Ray would restart one from scratch)
        self._options = actor_options(stage, ray_remote_args, max_restarts=0)
        self.ray_remote_args = dict(ray_remote_args or {})
        self._guard = ReentrancyGuard(stage)
        self._workers = Workers(
            stage,
            self.num_workers,
            self.chunk,
            self.timeout,
            self.max_restarts,
            self.snapshot_every,
            copy,
            resolve_shm_bytes(stage, shm_bytes),
        )
        self._length: int | None = None
        self._fresh_state()

    def _fresh_state(self) -> None:
        n = self.num_workers
        self._queues: list[deque[tuple[list[Any], bool]]] = [deque() for _ in range(n)]
        self._current: deque[Any] = deque()
        self._turn = 0
        self._pass = 0
        self._ended = [True] * n  # shard mode: no pass begun yet
        self._yielded = 0  # datapoints yielded in this epoch
        self._loaded: list[Any] | None = None  # worker states to start from

    @property
    def actors(self) -> list[Any]:
        """The Ray actor handles (empty before ``reset_state``/after ``close``)."""
        return list(self._workers.actors)

    @property
    def worker_pids(self) -> list[int]:
        """The workers' process ids (on their nodes; a replaced worker's is the new one)."""
        return list(self._workers.pids)

    # -- lifecycle ------------------------------------------------------------------------
    def reset_state(self) -> None:
        """Start the workers (each builds and resets its own copy of the flow)."""
        self._workers.stop()
        ray = connected_ray(type(self).__name__)
        if self._loaded is None:
            self._fresh_state()
        states, self._loaded = self._loaded or [None] * self.num_workers, None
        cls = ray.remote(FlowActor).options(**self._options)
        source = ray.put(self.flow)
        seed = seeding.resolve_seed(self.seed)
        n = self.num_workers
        # a worker whose pass had ended (the consumer may not have reached that chunk yet)
        # waits for the next pass instead of starting one on its next pull
        waiting = [self.sharded and (self._ended[i] or any(e for _, e in self._queues[i])) for i in range(n)]
        starts: list[Start] = [(self._pass, waiting[i], states[i]) for i in range(n)]

        def make(i: int, start: Start) -> Any:
            return cls.remote(source, i, n, self.sharded, seed, start, self.chunk_bytes)

        workers = self._workers
        try:
            workers.start(make, starts)
            asked = range(n) if self.sharded else range(1)  # every shard, or one copy of the flow
            lengths = [workers.get(i, workers.actors[i].length.remote(), "len()") for i in asked]
            for answer in lengths:
                if isinstance(answer, msg.ErrorRecord):
                    raise msg.error_for(type(self).__name__, answer)
            self._length = None if any(x is None for x in lengths) else sum(lengths)
        except BaseException:
            workers.stop()
            raise
        for w in range(n):
            self._top_up(w)

    def __len__(self) -> int:
        if self._length is not None:
            return self._length
        if self._workers.actors or not isinstance(self.flow, DataFlow):
            raise LengthUnknownError(
                f"{type(self).__name__}: the length is known once reset_state() asked the workers"
                if not self._workers.actors
                else f"{type(self).__name__}: the flow has no length"
            )
        return (
            len(self.flow)
            if not self.sharded
            else sum(len(self.flow.shard(self.num_workers, i)) for i in range(self.num_workers))
        )

    def close(self) -> None:
        """Kill the workers. Idempotent; ``reset_state`` starts them again."""
        self._workers.stop()

    # -- pulling --------------------------------------------------------------------------
    def _top_up(self, w: int) -> None:
        if self.sharded and self._ended[w]:
            return
        while len(self._workers.inflight[w]) < self.pulls_ahead:
            self._workers.pull(w, self._pass)

    def _receive(self, w: int) -> None:
        """Receive worker ``w``'s oldest pull into its queue (stale passes dropped; nothing
        when the worker had died and was replaced: its pulls are in flight again)."""
        got = self._workers.receive(w)
        if got is not None:
            gen, items, ended = got
            if not self.sharded or gen == self._pass:
                self._queues[w].append((items, ended))

    def _next_chunk(self) -> list[Any] | None:
        """The next chunk in round-robin order; ``None`` when a sharded pass is over."""
        n = self.num_workers
        for _ in range(n):
            w = self._turn
            self._turn = (w + 1) % n
            if self.sharded and self._ended[w]:
                continue
            queue = self._queues[w]
            while not queue:
                self._receive(w)
                self._top_up(w)
            items, ended = queue.popleft()
            if self.sharded and ended:
                self._ended[w] = True
            return items
        return None

    # -- epochs ---------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Any]:
        if not self._workers.actors:
            raise DataFlowNotReset(
                f"{type(self).__name__} was iterated before reset_state() (or after close()); "
                f"call reset_state() once in the process that iterates"
            )
        resume = self.__dict__.pop("_resume", None)
        if self.sharded and resume is None:  # a new pass on every worker
            self._pass += 1
            self._ended = [False] * self.num_workers
            self._queues = [deque() for _ in range(self.num_workers)]
            self._current.clear()
            self._turn = 0
            for w in range(self.num_workers):
                self._top_up(w)
        self._yielded = resume or 0
        return self._track(self._epoch())

    def _epoch(self) -> Iterator[Any]:
        with self._guard:
            size = None if self.sharded else self._length
            current = self._current
            while size is None or self._yielded < size:
                while not current:
                    chunk = self._next_chunk()
                    if chunk is None:
                        return
                    current.extend(chunk)
                self._yielded += 1
                yield current.popleft()

    # -- checkpoints (the state: see the module docstring) ---------------------------------
    def _snapshot(self) -> list[Any]:
        """Every worker's flow state right after the pulls already sent (whose chunks are
        received into the queues meanwhile)."""
        workers = self._workers
        asked = [(actor, actor.state.remote()) for actor in workers.actors]
        for w in range(self.num_workers):
            self._drain(w)
        states = [workers.state(w, actor, ref, self._drain) for w, (actor, ref) in enumerate(asked)]
        for state in states:
            if isinstance(state, msg.ErrorRecord):
                raise msg.error_for(type(self).__name__, state)
        for w in range(self.num_workers):
            self._top_up(w)
        return states

    def _drain(self, w: int) -> None:
        """Receive worker ``w``'s pulls in flight into its queue."""
        while self._workers.inflight[w]:
            self._receive(w)

    def _get_state(self, live: bool) -> dict[str, Any]:
        stage = type(self).__name__
        states = self._snapshot() if self._workers.actors else self._loaded or [None] * self.num_workers
        queues = [
            [
                {"items": encode_items(stage, items, "datapoints received") if items else None, "ended": e}
                for items, e in queue
            ]
            for queue in self._queues
        ]
        current = list(self._current)
        return {
            "num_workers": self.num_workers,
            "shard": self.sharded,
            "workers": states,
            "queues": queues,
            "current": encode_items(stage, current, "datapoints received") if current else None,
            "turn": self._turn,
            "pass": self._pass,
            "ended": list(self._ended),
            "yielded": self._yielded if live else 0,
        }

    def _set_state(self, state: Mapping[str, Any], live: bool) -> None:
        stage = type(self).__name__
        num = int_field(stage, state, "num_workers", 1)
        if num != self.num_workers or bool(state.get("shard")) != self.sharded:
            raise StateError(
                f"{stage}: the state was saved with num_workers={num}, shard={bool(state.get('shard'))}; "
                f"this runner has num_workers={self.num_workers}, shard={self.sharded}: each worker "
                f"resumes its own copy, so resume with the same ones"
            )
        workers = field(stage, state, "workers", list)
        queues, ended = field(stage, state, "queues", list), field(stage, state, "ended", list)
        if len(workers) != num or len(queues) != num or len(ended) != num:
            raise StateError(f"{stage}: the saved worker states are corrupted")
        self._queues = [deque((_items(stage, c, "items"), bool(c["ended"])) for c in q) for q in queues]
        self._current = deque(_items(stage, state, "current"))
        self._turn, self._pass = int_field(stage, state, "turn", 0), int_field(stage, state, "pass", 0)
        self._ended = [bool(e) for e in ended]
        self.__dict__.pop("_resume", None)
        if live:  # else the next __iter__ begins an epoch (a new pass, in shard mode)
            self._resume = int_field(stage, state, "yielded", 0)
        was_running = bool(self._workers.actors)
        self._loaded = workers
        if was_running and not checking_only():  # started: start the workers again from it
            self.reset_state()


def _items(stage: str, state: Mapping[str, Any], key: str) -> list[Any]:
    """The datapoints encoded under ``state[key]`` (none if it is ``None``)."""
    return decode_items(stage, state, key) if state.get(key) is not None else []
