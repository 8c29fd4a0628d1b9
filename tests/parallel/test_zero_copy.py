"""Zero-copy transport of large arrays through MultiProcessRunnerZMQ,
MultiProcessMapDataZMQ and MultiProcessMapAndBatchDataZMQ (dataflow/parallel/_shm.py,
_messages.py, _pool.py): integrity, lifetime, copy=, shm_bytes=, leaks, /dev/shm hygiene
on close, worker death and parent death, and the fallback when /dev/shm is too small.

Workers compute a checksum of every array they produce and send it alongside; the
consumer recomputes it. Everything a worker runs is defined at module level (fork)."""

from __future__ import annotations

import gc
import hashlib
import mmap
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from dataflow import MultiProcessMapAndBatchDataZMQ, MultiProcessMapDataZMQ, WorkerDied
from dataflow.base import DataFlow
from dataflow.parallel import _pool, _shm
from dataflow.parallel._runners import MultiProcessRunnerZMQ
from tests._leaks import assert_no_leaks, our_shm, pid_alive, snapshot, wait_until
from tests.parallel._util import Range, leaves

pytestmark = pytest.mark.timeout(60)

KiB = 1024
MiB = 1024 * KiB
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DTYPES = [np.uint8, np.int16, np.float32, np.float64, np.complex64, np.bool_]
LAYOUTS = ["C", "C", "C", "F", "T", "step"]


# --- data made in the workers --------------------------------------------------------------


def digest(arr: np.ndarray) -> str:
    """dtype, shape and the bytes in C order: equal digests mean equal arrays."""
    return f"{arr.dtype.str}{arr.shape}{hashlib.sha1(arr.tobytes()).hexdigest()}"


def make_array(
    i: int, salt: int = 0, layout: str | None = None, dtype: Any = None, shape: Any = None
) -> np.ndarray:
    """Array number ``i``: 64 KiB to 400 KiB of random bytes, a dtype, shape and memory
    layout (C, Fortran, transpose, strided slice) chosen from ``i``."""
    rng = np.random.default_rng([i, salt])
    dtype = np.dtype(DTYPES[i % len(DTYPES)] if dtype is None else dtype)
    if shape is None:
        n = int(rng.integers(64 * KiB, 400 * KiB)) // dtype.itemsize
        ndim = 1 + i % 3
        head = [int(rng.integers(2, 9)) for _ in range(ndim - 1)]
        shape = (*head, max(1, n // int(np.prod(head))))
    layout = LAYOUTS[(i // len(DTYPES)) % len(LAYOUTS)] if layout is None else layout
    full = (*shape[:-1], shape[-1] * 2) if layout == "step" else tuple(shape)
    size = int(np.prod(full))
    if dtype == np.bool_:
        a = rng.integers(0, 2, size, dtype=np.uint8).astype(bool)
    else:
        a = rng.integers(0, 256, size * dtype.itemsize, dtype=np.uint8).view(dtype)
    a = a.reshape(full)
    if layout == "F":
        return np.asfortranarray(a)
    if layout == "T":
        return a.reshape(full[::-1]).T
    if layout == "step":
        return a[..., ::2]
    return a


def make_datapoint(i: int, salt: int = 0) -> list[Any]:
    """``[i, payload, digests]``: a large array alone, or (one in four) nested with small,
    zero-size and 0-d arrays; one in ten datapoints is small (so some travel in groups)."""
    if i % 10 == 9:
        payload: Any = [np.full(100, i, np.int64)]
    elif i % 4 == 2:
        payload = {
            "img": make_array(i, salt),
            "aux": (np.zeros((0, 3), np.float32), np.array(i, np.int16), [make_array(i + 1, salt)]),
        }
    else:
        payload = make_array(i, salt)
    return [i, payload, [digest(a) for a in leaves(payload)]]


class BigFlow(DataFlow):
    """``make_datapoint(i)`` for ``i`` in ``range(n)``, each worker with its own salt (its
    pid); ``n=None``: forever, without a length."""

    def __init__(self, n: int | None = None) -> None:
        self.n = n

    def __len__(self) -> int:
        if self.n is None:
            raise TypeError("no length")
        return self.n

    def __iter__(self) -> Iterator[list[Any]]:
        i = 0
        while self.n is None or i < self.n:
            yield make_datapoint(i, os.getpid())
            i += 1


def map_big(dp: list[int]) -> list[Any]:
    return make_datapoint(dp[0])


BATCH = 4


def map_for_batch(dp: list[int]) -> list[Any]:
    """Same dtype, shape and layout within a batch of :data:`BATCH` consecutive indices."""
    i = dp[0]
    g = i // BATCH
    shape = (2 + g % 3, 16 * KiB + 8 * g)
    a = make_array(g, salt=i, dtype=DTYPES[g % len(DTYPES)], shape=shape, layout=["C", "F", "step"][g % 3])
    return [i, a, digest(a)]


# --- checks --------------------------------------------------------------------------------


def views_shm(arr: np.ndarray) -> bool:
    while isinstance(arr.base, np.ndarray):
        arr = arr.base
    base = arr.base
    return isinstance(base, mmap.mmap) or (isinstance(base, memoryview) and isinstance(base.obj, mmap.mmap))


def check_datapoint(dp: list[Any]) -> list[np.ndarray]:
    """Verify a ``make_datapoint`` datapoint; its large arrays."""
    i, payload, expected = dp
    arrays = list(leaves(payload))
    assert [digest(a) for a in arrays] == expected, f"datapoint {i} differs from what the worker made"
    for a in arrays:
        assert a.flags.writeable, f"datapoint {i}: received array is read-only"
        if a.size:
            a.flat[0] = a.flat[0]
    return [a for a in arrays if a.nbytes >= 64 * KiB]


    return True


def endless(df: DataFlow) -> Iterator[Any]:
    while True:
        yield from df


class Holder:
    """Keeps a random subset of what the consumer received for a random number of further
    datapoints (some to the end), verifying each when it is released and at the end."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.held: list[tuple[int, list[Any]]] = []
        self.verified = 0

    def offer(self, n: int, dp: list[Any], check: Callable[[list[Any]], Any]) -> None:
        if self.rng.random() < 0.15:
            self.held.append((n + int(self.rng.integers(1, 40)), dp))
        due = [h for h in self.held if h[0] <= n]
        for h in due:
            check(h[1])
            self.held.remove(h)
            self.verified += 1

    def finish(self, check: Callable[[list[Any]], Any]) -> None:
        for _, dp in self.held:
            check(dp)
            self.verified += 1
        self.held.clear()


CONFIGS = [
    pytest.param(dict(shm_bytes=24 * MiB), id="shm"),
    pytest.param(dict(shm_bytes=24 * MiB, copy=True), id="shm-copy"),
    pytest.param(dict(shm_bytes=0), id="zmq-only"),
]


def check_transport(kw: dict[str, Any], in_shm_flags: list[bool]) -> None:
    """Which path the large arrays took (``views_shm`` of each when it arrived): views of
    shared memory (most of them; some may fall back to ZMQ) with the default, never with
    ``copy=True`` or ``shm_bytes=0``."""
    in_shm = sum(in_shm_flags)
    if kw.get("shm_bytes") and not kw.get("copy"):
        n = len(in_shm_flags)
        assert in_shm >= n // 2, f"only {in_shm} of {n} large arrays came through shared memory"
    else:
        assert in_shm == 0


# --- integrity -----------------------------------------------------------------------------


@pytest.mark.parametrize("kw", CONFIGS)
def test_runner_delivers_intact_writable_arrays(kw: dict[str, Any]) -> None:
    before = our_shm()
    holder = Holder(1)
    big: list[bool] = []  # each large array: did it arrive as a view of shared memory?
    with MultiProcessRunnerZMQ(BigFlow(), num_proc=2, **kw) as df:
        df.reset_state()
        for n, dp in zip(range(400), df):
            big.extend(map(views_shm, check_datapoint(dp)))
            holder.offer(n, dp, check_datapoint)
            if n == 20:  # the workers unlink their rings as soon as they map them
                assert wait_until(lambda: our_shm() == before, 5), our_shm()
        holder.finish(check_datapoint)
        check_transport(kw, big)
    assert holder.verified > 40
    assert our_shm() == before


@pytest.mark.parametrize("kw", CONFIGS)
def test_map_delivers_intact_writable_arrays_in_order(kw: dict[str, Any]) -> None:
    before = our_shm()
    holder = Holder(2)
    big: list[bool] = []  # each large array: did it arrive as a view of shared memory?
    indices = []
    with MultiProcessMapDataZMQ(Range(150), 2, map_big, strict=True, ordered=True, **kw) as df:
        df.reset_state()
        for _ in range(2):  # two strict passes
            for dp in df:
                big.extend(map(views_shm, check_datapoint(dp)))
                assert dp[2] == make_datapoint(dp[0])[2]  # the same results in every configuration
                holder.offer(len(indices), dp, check_datapoint)
                indices.append(dp[0])
        holder.finish(check_datapoint)
        check_transport(kw, big)
    assert indices == list(range(150)) * 2
    assert our_shm() == before


def check_batch(batch: list[Any]) -> np.ndarray:
    idx, arrays, digests = batch
    assert len(idx) == BATCH and list(idx) == list(range(idx[0], idx[0] + BATCH))
    assert arrays.shape[0] == BATCH and arrays.flags.writeable
    assert [digest(a) for a in arrays] == list(digests)
    assert list(digests) == [map_for_batch([int(i)])[2] for i in idx]  # the same in every configuration
    return arrays


@pytest.mark.parametrize("kw", CONFIGS)
def test_map_and_batch_delivers_intact_batches(kw: dict[str, Any]) -> None:
    before = our_shm()
    holder = Holder(3)
    big: list[bool] = []  # each large array: did it arrive as a view of shared memory?
    starts = []
    with MultiProcessMapAndBatchDataZMQ(
        Range(160), 2, map_for_batch, BATCH, strict=True, ordered=True, **kw
    ) as df:
        df.reset_state()
        assert len(df) == 40
        for _ in range(3):
            for batch in df:
                big.append(views_shm(check_batch(batch)))
                holder.offer(len(starts), batch, check_batch)
                starts.append(int(batch[0][0]))
        holder.finish(check_batch)
        check_transport(kw, big)
    assert starts == list(range(0, 160, BATCH)) * 3
    assert our_shm() == before


def test_consumer_held_arrays_survive_close_and_restart() -> None:
    before = our_shm()
    df = MultiProcessRunnerZMQ(BigFlow(), num_proc=2, shm_bytes=8 * MiB)
    df.reset_state()
    kept = [dp for _, dp in zip(range(10), df)]
    assert any(views_shm(a) for dp in kept for a in leaves(dp[1]))
    df.reset_state()  # restart: new workers, new rings
    last: deque[list[Any]] = deque(maxlen=10)
    last.extend(dp for _, dp in zip(range(300), df))
    kept += last
    del last
    df.close()
    assert our_shm() == before
    for dp in kept:  # still mapped, intact and writable after close
        for a in check_datapoint(dp):
            a[...] = 0
    del kept, dp, a
    gc.collect()


# --- leaks ---------------------------------------------------------------------------------


@pytest.mark.slow  # a soak: 1000 messages, RSS and fds flat after the rings cycled
@pytest.mark.parametrize("which", ["runner", "map"])
def test_no_leaks_over_1000_messages(which: str) -> None:
    gc.collect()
    before = snapshot()
    if which == "runner":
        df: DataFlow = MultiProcessRunnerZMQ(BigFlow(), num_proc=2, shm_bytes=16 * MiB)
    else:
        df = MultiProcessMapDataZMQ(Range(1000), 2, map_big, shm_bytes=16 * MiB)
    df.reset_state()
    stream = endless(df)
    for n in range(1000):
        dp = next(stream)
        check_datapoint(dp)
        if n == 300:  # each ring has cycled a few times: what is mapped is mapped
            gc.collect()
            warm = snapshot()
    gc.collect()
    end = snapshot()
    assert len(end.fds) <= len(warm.fds) + 2, (warm.fds, end.fds)
    assert end.rss - warm.rss < 48 * MiB, f"RSS grew by {(end.rss - warm.rss) / MiB:.0f} MiB in 700 messages"
    assert end.shm == before.shm
    del dp, stream
    df.close()
    gc.collect()
    assert_no_leaks(before)


# --- worker death --------------------------------------------------------------------------


_FAST = np.arange(256 * KiB, dtype=np.uint8)  # made once: the workers produce at full speed


class FastFlow(DataFlow):
    """``[i, the same 256 KiB array]`` forever: a producer that never lets the consumer wait."""

    def __iter__(self) -> Iterator[list[Any]]:
        i = 0
        while True:
            yield [i, _FAST]
            i += 1


def fast_map(dp: list[int]) -> list[Any]:
    return [dp[0], _FAST]


def _make_fast(which: str) -> DataFlow:
    if which == "runner":
        return MultiProcessRunnerZMQ(FastFlow(), num_proc=2, shm_bytes=16 * MiB)
    if which == "map":
        return MultiProcessMapDataZMQ(Range(100), 2, fast_map, shm_bytes=16 * MiB)
    return MultiProcessMapAndBatchDataZMQ(Range(100), 2, fast_map, BATCH, shm_bytes=16 * MiB)


@pytest.mark.parametrize("which", ["runner", "map", "map_and_batch"])
def test_worker_killed_raises_worker_died_and_close_leaves_nothing(which: str) -> None:
    """SIGKILL of one of two workers while the other keeps producing at full speed: the
    consumer must notice (WorkerDied), even though datapoints keep arriving from the
    survivor (the deadline is generous: liveness is checked about every 0.1 s)."""
    before = our_shm()
    df = _make_fast(which)
    df.reset_state()
    stream = endless(df)
    for _ in range(20):  # (nothing held: a held array would slow the survivor down)
        next(stream)
    pid = df.worker_pids[0]  # type: ignore[attr-defined]
    os.kill(pid, signal.SIGKILL)
    received = 0
    deadline = time.monotonic() + 5
    try:
        with pytest.raises(WorkerDied) as info:
            while time.monotonic() < deadline:
                next(stream)
                received += 1
    finally:
        df.close()
    assert str(pid) in str(info.value)
    assert our_shm() == before
    assert not pid_alive(pid)
    del stream


# --- parent death --------------------------------------------------------------------------

PARENT_SCRIPT = """
import os, numpy as np
from dataflow.base import DataFlow
from dataflow import MultiProcessMapAndBatchDataZMQ
from dataflow.parallel._runners import MultiProcessRunnerZMQ

class Big(DataFlow):
    def __len__(self):
        return 64
    def __iter__(self):
        for i in range(64):
            yield [np.full(256 * 1024, i % 256, np.uint8)]

def grow(dp):
    return [np.full((2, 100_000), dp[0][0], np.float32)]

if {which!r} == "runner":
    df = MultiProcessRunnerZMQ(Big(), num_proc=2, shm_bytes=32 << 20)
else:
    df = MultiProcessMapAndBatchDataZMQ(Big(), 2, grow, 4, shm_bytes=32 << 20)
df.reset_state()
held, n = [], 0
while True:
    for dp in df:
        held = (held + [dp])[-20:]
        n += 1
        if n == 20:
            print("READY", os.getpid(), *df.worker_pids, flush=True)
"""


@pytest.mark.parametrize("which", ["runner", "map_and_batch"])
def test_parent_sigkill_leaves_no_shm_and_no_worker(which: str) -> None:
    env = dict(os.environ, PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(
        [sys.executable, "-c", PARENT_SCRIPT.format(which=which)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO_ROOT,
    )
    assert proc.stdout is not None and proc.stderr is not None
    out, err = proc.stdout, proc.stderr
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(out.readline()), daemon=True)
    reader.start()
    reader.join(30)
    try:
        if not (line and line[0].startswith("READY")):
            proc.kill()
            raise AssertionError(f"the script did not start; stderr:\n{err.read()}")
        pid, *workers = map(int, line[0].split()[1:])
        assert pid == proc.pid and len(workers) == 2
        assert all(pid_alive(w) for w in workers)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    assert wait_until(lambda: not our_shm(proc.pid), 5), our_shm(proc.pid)
    assert wait_until(lambda: not any(pid_alive(w) for w in workers), 5), [w for w in workers if pid_alive(w)]
    out.close()
    err.close()


# --- too little shared memory ----------------------------------------------------------------


@pytest.mark.parametrize("which", ["runner", "map", "map_and_batch"])
def test_shm_too_big_for_dev_shm_warns_once_and_falls_back_to_zmq(
    which: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_shm, "_warned", set())  # warnings are once per stage per process
    before = our_shm()
    with pytest.warns(RuntimeWarning, match="shm_bytes") as rec:
        if which == "runner":
            df: DataFlow = MultiProcessRunnerZMQ(BigFlow(), num_proc=2, shm_bytes=2**50)
        elif which == "map":
            df = MultiProcessMapDataZMQ(Range(100), 2, map_big, shm_bytes=2**50)
        else:
            df = MultiProcessMapAndBatchDataZMQ(Range(100), 2, map_for_batch, BATCH, shm_bytes=2**50)
        with df:
            for _ in range(2):  # a restart does not warn again
                df.reset_state()
                stream = endless(df)
                for _ in range(60):
                    out = next(stream)
                    arrays = check_batch(out) if which == "map_and_batch" else check_datapoint(out)
                    assert not any(map(views_shm, arrays))
                del stream
    warned = [w for w in rec if issubclass(w.category, RuntimeWarning) and "shared memory" in str(w.message)]
    assert len(warned) == 1, [str(w.message) for w in warned]
    assert type(df).__name__ in str(warned[0].message)
    assert our_shm() == before


def test_tiny_dev_shm_gives_automatic_size_zero_with_one_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_shm, "_warned", set())
    real = os.statvfs

    class Tiny:
        f_bavail, f_frsize = 4, 4096

    monkeypatch.setattr(_pool.os, "statvfs", lambda p: Tiny() if p == "/dev/shm" else real(p))
    with pytest.warns(RuntimeWarning, match="shm_bytes") as rec:
        assert _pool.resolve_shm_bytes("TinyShm", None) == 0
        with MultiProcessRunnerZMQ(BigFlow(), num_proc=1) as df:  # shm_bytes=None: automatic
            df.reset_state()
            for _, dp in zip(range(20), df):
                assert not any(map(views_shm, check_datapoint(dp)))
    ours = [w for w in rec if issubclass(w.category, RuntimeWarning) and "shared memory" in str(w.message)]
    assert len(ours) == 2  # one per stage


def test_resolve_shm_bytes() -> None:
    auto = _pool.resolve_shm_bytes("T", None)
    assert 0 < auto <= _pool.DEFAULT_SHM_BYTES  # this machine has a usable /dev/shm
    assert _pool.resolve_shm_bytes("T", 0) == 0
    assert _pool.resolve_shm_bytes("T", 5 * MiB) == 5 * MiB
    with pytest.raises((ValueError, TypeError), match="shm_bytes"):
        _pool.resolve_shm_bytes("T", -1)
    with pytest.raises((ValueError, TypeError), match="shm_bytes"):
        _pool.resolve_shm_bytes("T", 1.5)  # type: ignore[arg-type]
