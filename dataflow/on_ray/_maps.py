"""A parallel map whose workers are Ray actors: :class:`RayMapData`.

The upstream is read **in this process**, as for :class:`~dataflow.MultiProcessMapDataZMQ`;
chunks of datapoints go to ``num_actors`` Ray actors, anywhere in the cluster, each call to
the actor with the fewest chunks in flight. At most ``buffer_size`` datapoints are in flight
(backpressure: the upstream is not read further until results come back).

**Chunk size.** A Ray call costs the consumer about a millisecond of CPU (submit, wait,
get), whatever it carries. With ``chunk="auto"`` (the default) the actors time the map and
each call carries about :data:`CALL_SECONDS` of map work (more with over
:data:`ACTORS_PER_CALL_SECONDS` actors, in proportion, so that the consumer keeps up): one
datapoint for a map of that cost or more, up to :data:`MAX_CHUNK` for a cheap one (never
more than half of ``buffer_size`` per actor, so each actor has two calls in flight). Until
the first result has measured the map, calls carry one datapoint. Decisions are logged at
debug level on ``dataflow.autotune``. With ``buffer_size="auto"`` (the default)
:data:`CALLS_PER_ACTOR` chunks per actor may be in flight, fewer when the inputs and results
measured so far would take more than :data:`BUFFER_BYTES`.

**Transport.** Arguments and results are pickled by us (see :mod:`._wire`); numpy arrays of
100 KiB and more are not copied into the messages. An actor on the consumer's node writes
them into a shared-memory ring of its own (``shm_bytes``, split between the actors; one
memcpy); other actors, and any buffer that finds no room, go through Ray's object store.
Either way the arrays the consumer receives are read-only views (of the ring or of the
store), with no copy on receive (``copy=True`` gives owned, writable copies instead).

Epochs, ``strict``, ``ordered``, ``item_rng`` and checkpoints are those of every parallel
map (see :mod:`dataflow.parallel._map_base`): a checkpoint holds the upstream's state and
the inputs not yet delivered, so it resumes on processes, threads or Ray alike.

Faults: an exception in ``map_func`` is raised here as the same exception type, with the
actor's traceback as its cause. An actor that dies (its process killed, its node lost) is
restarted by Ray up to ``max_restarts`` times and the chunks it held are run again, so an
ordered map loses and duplicates nothing; past that limit :class:`~dataflow._errors.WorkerDied`
says which actor died and why.
"""

from __future__ import annotations

import logging
import os
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from .. import _seeding as seeding
from .._checks import check_int
from .._errors import DataFlowNotReset, WorkerDied
from ..base import DataFlow
from ..parallel import _messages as msg
from ..parallel._map_base import ParallelMapBase, RngKey, TaskId, apply_map
from ..parallel._pool import resolve_shm_bytes
from ..parallel._shm import RingReader
from ._connect import actor_options, connected_ray
from ._node_ring import RingActor, node_ring, release
from ._wire import Packed, owned, pack, unpack

__all__ = [
    "ACTORS_PER_CALL_SECONDS",
    "BUFFER_BYTES",
    "CALLS_PER_ACTOR",
    "CALL_SECONDS",
    "MAX_CHUNK",
    "RayMapData",
]

logger = logging.getLogger("dataflow.autotune")

#: ``chunk="auto"``: the map work one Ray call should carry. A call costs the consumer about
#: a millisecond of CPU, so this keeps that cost to a few percent of the map's; and the last
#: call of a pass keeps the other actors waiting at most about this long
CALL_SECONDS = 0.02
#: ... with up to this many actors; beyond, proportionally more, so that the consumer's ~1 ms
#: per call stays about half of its time however many actors finish calls
ACTORS_PER_CALL_SECONDS = 10
#: ``chunk="auto"``: datapoints per call at most (the map's results of a call are held whole)
MAX_CHUNK = 1024
#: ``buffer_size="auto"``: full chunks in flight per actor, so that an actor has its next
#: call queued while the consumer takes the last one's results ...
CALLS_PER_ACTOR = 4
#: ... unless the inputs and results in flight would take more than this many bytes
#: (estimated per datapoint from those measured so far)
BUFFER_BYTES = 256 << 20


class _MapActor(RingActor):
    """The body of a map actor (made a Ray actor class at start, so importing this module
    needs no Ray). Its methods never raise for the user's errors: they return records."""

    def __init__(self, map_func: Callable[..., Any], index: int, seed: int | None) -> None:
        seeding.enter_worker((index,), seed)
        self.map_func = map_func
        self.where = f"map_func in Ray actor {index} (pid {os.getpid()})"

    def apply(self, task_id: TaskId, chunk: Packed, rng_key: RngKey) -> tuple[TaskId, bytes, Any, float]:
        """The chunk's results, or an error record (chunk and results packed: see
        :mod:`._wire`), and the seconds the map took."""
        try:
            inputs = unpack(chunk)
            t0 = time.perf_counter()
            out = apply_map(self.map_func, inputs, rng_key)
            busy = time.perf_counter() - t0
            return task_id, msg.DATA, pack(out, self.ring), busy
        except BaseException as e:
            return task_id, msg.ERROR, msg.capture_error(e, self.where), -1.0


def _nbytes(packed: Packed) -> int:
    """The bytes a packed chunk moves: its pickle and its large buffers (in Ray's store, or
    descriptors of a ring whose last field is the size)."""
    body, buffers = packed
    return len(body) + sum(int(b[-1] if isinstance(b, tuple) else b.nbytes) for b in buffers)


class RayMapData(ParallelMapBase):
    """Apply ``map_func`` to every datapoint in ``num_actors`` Ray actors (see
    :mod:`dataflow.on_ray._maps`: chunks, buffers, checkpoints, failures).

    Args:
        ds: the upstream, read (and reset) in this process.
        num_actors: number of Ray actors (each reserves one CPU unless ``ray_remote_args``
            says otherwise).
        map_func: ``dp -> dp``; a ``None`` result drops the datapoint. Serialised by Ray
            (cloudpickle), so closures and lambdas work.
        buffer_size: datapoints in flight (bounds memory and the reorder buffer); ``"auto"``
            (default): :data:`CALLS_PER_ACTOR` chunks per actor, within :data:`BUFFER_BYTES`
            of inputs and results (see :mod:`dataflow.on_ray._maps`).
        strict: one exact pass per ``__iter__``; default ``False`` as for
            :class:`~dataflow.MultiProcessMapDataZMQ`: the upstream repeats and each epoch
            yields ``len(ds)`` results.
        ordered: yield results in input order (default ``True``).
        item_rng, seed: as for :class:`~dataflow.MultiProcessMapDataZMQ`; ``seed`` also
            seeds the actors apart (actor *i* gets child *i*).
        timeout: seconds without any result before ``TimeoutError`` (``None``: no limit).
        chunk: datapoints per actor call; ``"auto"`` (default) sizes it from the map time
            the actors measure (see :mod:`dataflow.on_ray._maps`). Chunk sizes change neither the
            results, their order, nor the checkpoints.
        ray_remote_args: Ray actor options (``num_cpus``, ``num_gpus``, ``resources``,
            ``scheduling_strategy``, ``runtime_env``, ...) to place the actors.
        max_restarts: how many times Ray restarts a dead actor (its chunks are retried);
            beyond, :class:`~dataflow._errors.WorkerDied`.
        copy: ``True`` gives owned, writable arrays; by default arrays of 100 KiB and more
            are read-only views of shared memory (zero-copy on receive).
        shm_bytes: shared memory for the rings of the actors on the consumer's node, split
            between the actors (``None``: the process maps' default, capped to half of the
            free ``/dev/shm``; 0: none, everything through Ray's object store).

    ``len`` is ``len(ds)``. Not reentrant. Close it (or use ``with``) to kill the actors.
    When Ray is not initialised, ``reset_state`` starts a local Ray.
    """

    def __init__(
        self,
        ds: DataFlow[Any],
        num_actors: int,
        map_func: Callable[..., Any],
        buffer_size: int | str = "auto",
        strict: bool = False,
        *,
        ordered: bool = True,
        item_rng: bool = False,
        seed: int | None = None,
        timeout: float | None = None,
        chunk: int | str = "auto",
        ray_remote_args: dict[str, Any] | None = None,
        max_restarts: int = 3,
        copy: bool = False,
        shm_bytes: int | None = None,
    ) -> None:
        stage = type(self).__name__
        actors = check_int(stage, "num_actors", num_actors)
        if chunk != "auto":
            chunk = check_int(stage, "chunk", chunk)
        if buffer_size == "auto":
            self._buffer_most = CALLS_PER_ACTOR * actors * (MAX_CHUNK if chunk == "auto" else int(chunk))
        elif isinstance(buffer_size, str):
            raise ValueError(f'{stage}: buffer_size must be an int >= 1 or "auto", got {buffer_size!r}')
        else:
            self._buffer_most = check_int(stage, "buffer_size", buffer_size)
        self._auto_buffer = buffer_size == "auto"
        # the base only measures the map (a fixed chunk of 1 until _observe sizes it here)
        fixed = 1 if chunk == "auto" else int(chunk)
        super().__init__(ds, map_func, self._buffer_most, strict, ordered, timeout, fixed, item_rng, seed)
        self.chunk = chunk
        self._auto_chunk = chunk == "auto"
        self.num_actors = actors
        self.seed = seeding.check_seed(stage, seed)
        self.max_restarts = check_int(stage, "max_restarts", max_restarts, minimum=0)
        self._options = actor_options(
            stage, ray_remote_args, max_restarts=self.max_restarts, max_task_retries=-1
        )
        self.ray_remote_args = dict(ray_remote_args or {})
        self.copy = bool(copy)
        self.shm_bytes = resolve_shm_bytes(stage, shm_bytes)
        self._actors: list[Any] = []
        self._pids: list[int] = []
        self._rings: list[RingReader | None] = []  # per actor: its ring, if on our node
        self._refs: dict[Any, int] = {}  # object ref of a call -> its actor
        self._load: list[int] = []
        self._done: deque[tuple[TaskId | None, bytes, Any, float]] = deque()
        self._func_ref: Any = None
        self._bytes_per_item: float | None = None  # inputs and results, per datapoint (estimate)
        self._most = self._buffer_most  # buffer_size="auto": its bound (by bytes, once measured)
        self._sent_bytes: dict[TaskId, int] = {}  # calls in flight: their inputs' bytes
        self._moved = 0  # bytes of the task _receive returned last (inputs and results)

    @property
    def actors(self) -> list[Any]:
        """The Ray actor handles (empty before ``reset_state``/after ``close``)."""
        return list(self._actors)

    @property
    def worker_pids(self) -> list[int]:
        """The actors' process ids when they started (on their nodes)."""
        return list(self._pids)

    def _start(self) -> None:
        ray = connected_ray(type(self).__name__)
        cls = ray.remote(_MapActor).options(**self._options)
        # held until _stop: Ray re-runs a restarted actor's constructor with this argument
        self._func_ref = func_ref = ray.put(self.map_func)
        seed = seeding.resolve_seed(self.seed)
        n = self.num_actors
        self._actors = [cls.remote(func_ref, i, seed) for i in range(n)]
        self._load = [0] * n
        self._refs, self._done, self._sent_bytes = {}, deque(), {}
        self._rings = [None] * n
        self._chunk_cap = max(1, min(MAX_CHUNK, self._most // (2 * n)))
        self._fit_buffer()
        self._probe = 2 * n if self._per_item is None else 0  # see ParallelMapBase.__init__
        try:  # every actor placed and constructed before the first task (else: a clear error)
            self._pids = self._get_all([a.pid.remote() for a in self._actors], "to start")
            ring_bytes = self.shm_bytes // n
            for i, actor in enumerate(self._actors):
                self._rings[i] = node_ring(type(self).__name__, actor, ring_bytes, self.copy, self._ask)
        except BaseException:
            self._stop()
            raise

    def _ask(self, ref: Any, doing: str) -> Any:
        return self._get_all([ref], doing)[0]

    def _get_all(self, refs: list[Any], doing: str) -> list[Any]:
        ray = connected_ray(type(self).__name__)
        _, pending = ray.wait(refs, num_returns=len(refs), timeout=self.timeout)
        if pending:
            raise TimeoutError(
                f"{type(self).__name__}: {len(pending)} of {len(refs)} Ray actors did not answer "
                f"{doing} within timeout={self.timeout}s (not enough free resources for "
                f"{self._options}? available: {ray.available_resources()})"
            )
        return ray.get(list(refs))  # type: ignore[no-any-return]

    def _submit(self, task_id: TaskId, chunk: list[Any], rng_key: RngKey) -> None:
        if not self._actors:
            raise DataFlowNotReset(f"{type(self).__name__}: the actors are not running; call reset_state()")
        load = self._load
        actor = load.index(min(load))
        packed = pack(chunk)
        self._refs[self._actors[actor].apply.remote(task_id, packed, rng_key)] = actor
        self._sent_bytes[task_id] = _nbytes(packed)
        load[actor] += 1

    def _receive(self) -> tuple[TaskId | None, bytes, Any]:
        if not self._done:
            self._collect()
        task_id, kind, out, busy = self._done.popleft()
        if busy >= 0:
            self._busy = busy
        return task_id, kind, out

    def _collect(self) -> None:
        """Wait for at least one call to finish; take every finished one (one ``ray.get``)."""
        ray = connected_ray(type(self).__name__)
        if not self._refs:
            raise RuntimeError(f"{type(self).__name__}: waiting for a result with nothing in flight")
        refs = list(self._refs)
        ready, _ = ray.wait(refs, num_returns=1, timeout=self.timeout)
        if not ready:
            raise TimeoutError(
                f"{type(self).__name__}: no result from {self.num_actors} Ray actors in "
                f"timeout={self.timeout}s ({len(refs)} calls in flight)"
            )
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        try:
            results = ray.get(ready)
        except ray.exceptions.RayActorError:
            results = [self._get_one(ray, ref) for ref in ready]
        actors = []
        for ref in ready:
            actors.append(actor := self._refs.pop(ref))
            self._load[actor] -= 1
        for actor, (tid, kind, out, busy) in zip(actors, results):
            if kind == msg.DATA:
                moved = self._sent_bytes.pop(tid, 0) + _nbytes(out)
                out = unpack(out, self._rings[actor] if actor < len(self._rings) else None)
                if self.copy:
                    out = owned(out)
                self._measure_bytes(moved, len(out))
            self._done.append((tid, kind, out, busy))

    def _measure_bytes(self, nbytes: int, items: int) -> None:
        """``buffer_size="auto"``: a call of ``items`` results moved ``nbytes`` (inputs and
        results); bound the datapoints in flight to :data:`BUFFER_BYTES` of them."""
        if not self._auto_buffer or items <= 0:
            return
        sample = nbytes / items
        est = self._bytes_per_item
        self._bytes_per_item = est = sample if est is None else est + 0.25 * (sample - est)
        n = self.num_actors
        most = max(2 * n, min(self._buffer_most, int(BUFFER_BYTES / max(est, 1.0))))
        if most != self._most and abs(most - self._most) >= 0.25 * self._most:
            logger.debug(
                "%s: at most %d datapoints in flight (%.0f bytes per datapoint, inputs and results)",
                type(self).__name__,
                most,
                est,
            )
            self._most = most
            self._chunk_cap = max(1, min(MAX_CHUNK, most // (2 * n)))
            if self._auto_chunk and self._chunk > self._chunk_cap:
                self._chunk = self._chunk_cap
            self._fit_buffer()

    def _fit_buffer(self) -> None:
        """``buffer_size="auto"``: room for :data:`CALLS_PER_ACTOR` calls of the current chunk
        per actor, within the bound of :meth:`_measure_bytes` (more calls only queue behind an
        actor, and at the end of a pass the others wait for its queue)."""
        if self._auto_buffer:
            n = self.num_actors
            self.buffer_size = max(2 * n, min(self._most, CALLS_PER_ACTOR * n * self._chunk))

    def _observe(self, items: int, busy: float) -> None:
        """The base's running estimate of the map's time per datapoint; with
        ``chunk="auto"``, chunks of about :data:`CALL_SECONDS` of map work, within
        ``[1, _chunk_cap]`` (more beyond :data:`ACTORS_PER_CALL_SECONDS` actors; a change
        under 2x is ignored unless it reaches a bound)."""
        super()._observe(items, busy)
        est = self._per_item
        if not self._auto_chunk or est is None:
            return
        cap = self._chunk_cap
        target = CALL_SECONDS * max(1.0, self.num_actors / ACTORS_PER_CALL_SECONDS)
        want = cap if est * cap <= target else max(1, min(cap, int(target / est)))
        old = self._chunk
        if want != old and (want >= 2 * old or 2 * want <= old or want in (1, cap)):
            self._chunk = want
            self._fit_buffer()
            logger.debug(
                "%s: %d datapoint(s) per Ray call (map takes %.1f us per datapoint; was %d)",
                type(self).__name__,
                want,
                est * 1e6,
                old,
            )

    def _get_one(self, ray: Any, ref: Any) -> Any:
        try:
            return ray.get(ref)
        except ray.exceptions.RayActorError as e:
            actor = self._refs[ref]
            pid = self._pids[actor] if actor < len(self._pids) else None
            raise WorkerDied(
                f"{type(self).__name__}: Ray actor {actor} (first pid {pid}) died and its chunk could "
                f"not be retried: Ray restarted it at most max_restarts={self.max_restarts} times. "
                f"Ray says: {str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}",
                pid=pid,
            ) from e

    def _stop(self) -> None:
        actors, self._actors = self._actors, []
        self._refs, self._done, self._load, self._pids = {}, deque(), [], []
        self._sent_bytes = {}
        rings, self._rings = self._rings, []
        self._func_ref = None
        release(type(self).__name__, actors, rings)
