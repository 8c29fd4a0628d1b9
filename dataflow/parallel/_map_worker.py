"""What runs in a process map's worker: :func:`map_worker` serves tasks until it is
stopped, mapping each chunk with :func:`apply_map` (also used by the thread and Ray maps)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .. import _seeding as seeding
from . import _messages as msg
from ._map_base import RngKey
from ._options import WorkerOptions
from ._slot_batch import send_batch
from ._worker_link import worker_link

__all__ = ["apply_map", "map_worker"]


def apply_map(map_func: Callable[..., Any], chunk: list[Any], rng_key: RngKey) -> list[Any]:
    """``map_func`` over a chunk, ``None`` results dropped; with an item RNG key, each
    datapoint also gets its generator."""
    if rng_key is None:
        return [r for r in map(map_func, chunk) if r is not None]
    base, epoch, first = rng_key
    out = (map_func(dp, seeding.item_rng(base, epoch, first + j)) for j, dp in enumerate(chunk))
    return [r for r in out if r is not None]


def map_worker(
    parent: tuple[int, bool],
    endpoint: str,
    ring_path: str | None,
    index: int,
    map_func: Callable[..., Any],
    options: WorkerOptions,
    seed: int | None,
    batch_size: int,
) -> None:
    """Serve tasks forever: map each chunk, batch full chunks when ``batch_size`` is set.
    Never raises: every exception, a task that cannot be decoded included, goes back as an
    ERROR result."""
    link = worker_link(parent, endpoint, ring_path, index, options, (index,), seed)
    map_func = link.rebuild(map_func)
    where = f"map_func in worker {index} (pid {link.pid})"
    stage = options.stage
    clock = time.perf_counter
    while True:
        task_id = None
        try:
            _, _, (task_id, chunk, rng_key) = msg.recv(link.sock)
            t0 = clock()
            out = apply_map(map_func, chunk, rng_key)
            busy = clock() - t0  # the consumer's chunk tuning sizes later tasks from it (t0: traces)
            if batch_size and len(out) == batch_size:
                send_batch(link, stage, (task_id, out, busy, t0))
            else:
                link.send(msg.DATA, (task_id, out, busy, t0))
        except BaseException as e:
            link.send(msg.ERROR, (task_id, msg.capture_error(e, where)))
