"""How a parallel flow runs its workers: one validated :class:`WorkerOptions`, built once by
each flow from its keyword arguments and handed, whole, to the pool and the workers."""

from __future__ import annotations

from dataclasses import dataclass

from .. import _seeding as seeding
from .._checks import check_int, check_timeout
from ._process import check_start_method

__all__ = ["WorkerOptions"]


@dataclass(frozen=True)
class WorkerOptions:
    """Checked settings of one parallel flow's workers.

    Attributes:
        stage: the flow's name, for messages.
        start_method: ``fork``/``forkserver``/``spawn``, or ``None`` (fork on Linux).
        seed: base seed of the workers' RNGs (worker *i* gets child *i*); ``None``:
            :func:`dataflow.set_seed`'s, else fresh entropy.
        timeout: seconds without a message before ``TimeoutError``; ``None``: no limit.
        shm_bytes: shared memory for large arrays (``None``: automatic, ``0``: off).
        copy: give the consumer owned arrays instead of views of shared memory.
        hwm: ZMQ high-water mark, in messages.
    """

    stage: str
    start_method: str | None = None
    seed: int | None = None
    timeout: float | None = None
    shm_bytes: int | None = None
    copy: bool = False
    hwm: int = 50

    def __post_init__(self) -> None:
        stage = self.stage
        check_start_method(stage, self.start_method)
        object.__setattr__(self, "seed", seeding.check_seed(stage, self.seed))
        object.__setattr__(self, "timeout", check_timeout(stage, self.timeout))
        if self.shm_bytes is not None:
            object.__setattr__(self, "shm_bytes", check_int(stage, "shm_bytes", self.shm_bytes, minimum=0))
        object.__setattr__(self, "copy", bool(self.copy))
        object.__setattr__(self, "hwm", check_int(stage, "hwm", self.hwm, minimum=0))

    def worker_seed(self) -> int | None:
        """The seed the workers get: resolved here because spawn/forkserver workers do not
        inherit :func:`dataflow.set_seed`'s module state."""
        return seeding.resolve_seed(self.seed)
