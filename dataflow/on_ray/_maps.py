"""A parallel map whose workers are Ray actors: :class:`RayMapData`.

The upstream is read **in this process**, as for :class:`~dataflow.MultiProcessMapDataZMQ`;
chunks of ``chunk`` datapoints go to ``num_actors`` Ray actors, anywhere in the cluster,
each call to the actor with the fewest chunks in flight. At most ``buffer_size`` datapoints
are in flight (backpressure: the upstream is not read further until results come back).
Arguments and results travel through Ray's object store: numpy arrays of 100 KiB and more
are not copied into the messages, and the arrays a consumer on the same node receives are
read-only views of the store, with no copy on receive (``copy=True`` gives owned, writable
copies instead).

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

import os
from collections import deque
from collections.abc import Callable
from typing import Any

from .. import _seeding as seeding
from .._checks import check_int
from .._errors import DataFlowNotReset, WorkerDied
from ..base import DataFlow
from ..parallel import _messages as msg
from ..parallel._map_base import ParallelMapBase, RngKey, TaskId, apply_map
from ._connect import actor_options, connected_ray, ray_module
from ._owned import owned
from ._wire import Packed, pack, unpack

__all__ = ["RayMapData"]


class _MapActor:
    """The body of a map actor (made a Ray actor class at start, so importing this module
    needs no Ray). Its methods never raise for the user's errors: they return records."""

    def __init__(self, map_func: Callable[..., Any], index: int, seed: int | None) -> None:
        seeding.enter_worker((index,), seed)
        self.map_func = map_func
        self.where = f"map_func in Ray actor {index} (pid {os.getpid()})"

    def pid(self) -> int:
        return os.getpid()

    def apply(self, task_id: TaskId, chunk: Packed, rng_key: RngKey) -> tuple[TaskId, bytes, Any]:
        """The chunk's results, or an error record (chunk and results packed: see :mod:`._wire`)."""
        try:
            return task_id, msg.DATA, pack(apply_map(self.map_func, unpack(chunk), rng_key))
        except BaseException as e:
            return task_id, msg.ERROR, msg.capture_error(e, self.where)


class RayMapData(ParallelMapBase):
    """Apply ``map_func`` to every datapoint in ``num_actors`` Ray actors.

    Args:
        ds: the upstream, read (and reset) in this process.
        num_actors: number of Ray actors (each reserves one CPU unless ``ray_remote_args``
            says otherwise).
        map_func: ``dp -> dp``; a ``None`` result drops the datapoint. Serialised by Ray
            (cloudpickle), so closures and lambdas work.
        buffer_size: datapoints in flight (bounds memory and the reorder buffer).
        strict: one exact pass per ``__iter__``; default ``False`` as for
            :class:`~dataflow.MultiProcessMapDataZMQ`: the upstream repeats and each epoch
            yields ``len(ds)`` results.
        ordered: yield results in input order (default ``True``).
        item_rng, seed: as for :class:`~dataflow.MultiProcessMapDataZMQ`; ``seed`` also
            seeds the actors apart (actor *i* gets child *i*).
        timeout: seconds without any result before ``TimeoutError`` (``None``: no limit).
        chunk: datapoints per actor call: Ray's per-call cost (about a millisecond) is
            shared by a chunk, so small datapoints need chunks (default 16).
        ray_remote_args: Ray actor options (``num_cpus``, ``num_gpus``, ``resources``,
            ``scheduling_strategy``, ``runtime_env``, ...) to place the actors.
        max_restarts: how many times Ray restarts a dead actor (its chunks are retried);
            beyond, :class:`~dataflow._errors.WorkerDied`.
        copy: ``True`` gives owned, writable arrays; by default arrays of 100 KiB and more
            are read-only views of Ray's object store (zero-copy on receive).

    ``len`` is ``len(ds)``. Not reentrant. Close it (or use ``with``) to kill the actors.
    When Ray is not initialised, ``reset_state`` starts a local Ray.
    """

    def __init__(
        self,
        ds: DataFlow[Any],
        num_actors: int,
        map_func: Callable[..., Any],
        buffer_size: int = 200,
        strict: bool = False,
        *,
        ordered: bool = True,
        item_rng: bool = False,
        seed: int | None = None,
        timeout: float | None = None,
        chunk: int = 16,
        ray_remote_args: dict[str, Any] | None = None,
        max_restarts: int = 3,
        copy: bool = False,
    ) -> None:
        stage = type(self).__name__
        chunk = check_int(stage, "chunk", chunk)
        super().__init__(ds, map_func, buffer_size, strict, ordered, timeout, chunk, item_rng, seed)
        self.num_actors = check_int(stage, "num_actors", num_actors)
        self.seed = seeding.check_seed(stage, seed)
        self.max_restarts = check_int(stage, "max_restarts", max_restarts, minimum=0)
        self._options = actor_options(
            stage, ray_remote_args, max_restarts=self.max_restarts, max_task_retries=-1
        )
        self.ray_remote_args = dict(ray_remote_args or {})
        self.copy = bool(copy)
        self._actors: list[Any] = []
        self._pids: list[int] = []
        self._refs: dict[Any, int] = {}  # object ref of a call -> its actor
        self._load: list[int] = []
        self._done: deque[tuple[TaskId | None, bytes, Any]] = deque()
        self._func_ref: Any = None

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
        self._actors = [cls.remote(func_ref, i, seed) for i in range(self.num_actors)]
        self._load = [0] * self.num_actors
        self._refs, self._done = {}, deque()
        try:  # every actor placed and constructed before the first task (else: a clear error)
            self._pids = self._get_all([a.pid.remote() for a in self._actors], "to start")
        except BaseException:
            self._stop()
            raise

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
        self._refs[self._actors[actor].apply.remote(task_id, pack(chunk), rng_key)] = actor
        load[actor] += 1

    def _receive(self) -> tuple[TaskId | None, bytes, Any]:
        if not self._done:
            self._collect()
        return self._done.popleft()

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
        for ref in ready:
            self._load[self._refs.pop(ref)] -= 1
        for tid, kind, out in results:
            if kind == msg.DATA:
                out = owned(unpack(out)) if self.copy else unpack(out)
            self._done.append((tid, kind, out))

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
        self._func_ref = None
        if not actors:
            return
        ray = ray_module(type(self).__name__)
        if not ray.is_initialized():  # Ray was shut down first: its actors are gone with it
            return
        for actor in actors:
            ray.kill(actor, no_restart=True)
