"""The order of a long epoch (more than ``LIST_ORDER_MAX`` indices) is an int64 array in
memory that forked processes do not inherit (dataflow/sources/_indexed.py): the stream, its
resume and its shards are those of the list-held order, and a process forked mid-epoch does
not end up owning a private copy of the order."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from typing import Any

import numpy as np
import psutil
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dataflow as D
from dataflow.sources import _indexed
from tests.checkpoint._harness import check_resume


def _flows(n: int, shuffle: bool, shards: int, index: int, equal: bool) -> dict[str, Any]:
    def lst() -> D.DataFlow:
        df: D.DataFlow = D.DataFromList([[i] for i in range(n)], shuffle=shuffle, seed=7)
        return df.shard(shards, index, equal=equal) if shards > 1 else df

    def arrays() -> D.DataFlow:
        df: D.DataFlow = D.DataFromArrays([np.arange(n), np.arange(n) * 2], shuffle=shuffle, seed=7)
        return df.shard(shards, index, equal=equal) if shards > 1 else df

    return {"list": lst, "arrays": arrays}


def _epochs(build: Any, epochs: int = 2) -> list[list[Any]]:
    df = build()
    df.reset_state()
    out = [[[int(v) for v in dp] for dp in df] for _ in range(epochs)]
    df.close()
    return out


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 60),
    shuffle=st.booleans(),
    shards=st.integers(1, 3),
    index=st.integers(0, 2),
    equal=st.booleans(),
)
def test_an_array_held_order_gives_the_list_held_stream(
    n: int, shuffle: bool, shards: int, index: int, equal: bool
) -> None:
    """The same flows with every order held as an array (``LIST_ORDER_MAX = 0``) and as a
    list give the same epochs, shard by shard."""
    index %= shards
    for build in _flows(n, shuffle, shards, index, equal).values():
        as_list = _epochs(build)
        previous = _indexed.LIST_ORDER_MAX
        _indexed.LIST_ORDER_MAX = 0
        try:
            as_array = _epochs(build)
        finally:
            _indexed.LIST_ORDER_MAX = previous
        assert as_array == as_list


@pytest.mark.parametrize("kind", ["list", "arrays"])
@pytest.mark.parametrize("shards", [1, 2])
def test_an_array_held_order_resumes_at_every_cut(
    monkeypatch: pytest.MonkeyPatch, kind: str, shards: int
) -> None:
    monkeypatch.setattr(_indexed, "LIST_ORDER_MAX", 0)
    check_resume(_flows(13, True, shards, shards - 1, False)[kind], epochs=2)


def _fork_waiting() -> tuple[int, int]:
    """A child that waits, touching nothing, until its pipe is written: ``(pid, write_fd)``."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(write_fd)
        os.read(read_fd, 1)
        os._exit(0)
    os.close(read_fd)
    return pid, write_fd


def _release(pid: int, write_fd: int) -> None:
    os.write(write_fd, b"x")
    os.close(write_fd)
    os.waitpid(pid, 0)


def late_child_growth(n: int) -> int:
    """Bytes that a child forked after the first 64 datapoints of a shuffled epoch of ``n``
    comes to own while the parent finishes the epoch, with an early child (a process map's
    worker 0) forked before the epoch began, sharing what the two were both given."""
    df = D.DataFromList([[i] for i in range(n)], shuffle=True, seed=3)
    df.reset_state()
    gc.collect()
    early = _fork_waiting()
    try:
        it = iter(df)
        first = [next(it) for _ in range(64)]
        late = _fork_waiting()
        try:
            before = psutil.Process(late[0]).memory_full_info().uss
            rest = list(it)  # the parent walks the order, then frees it
            del it
            gc.collect()
            grown = int(psutil.Process(late[0]).memory_full_info().uss - before)
        finally:
            _release(*late)
    finally:
        _release(*early)
    assert sorted(dp[0] for dp in first + rest) == list(range(n))
    return grown


_MEASURE = """
import sys
from dataflow.sources import _indexed
from tests.test_epoch_order import late_child_growth
if sys.argv[1] == "list":
    _indexed.LIST_ORDER_MAX = 10**9
print(late_child_growth(int(sys.argv[2])))
"""


def _growth_in_a_fresh_process(held: str, n: int) -> int:
    """:func:`late_child_growth` in a new interpreter: no heap left over from other tests,
    whose reuse by the parent would leave the late child other pages of its own."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, held, str(n)],
        capture_output=True, text=True, env=env, cwd=root, timeout=50,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return int(done.stdout.split()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="MADV_DONTFORK is Linux's")
@pytest.mark.timeout(120)
def test_a_process_forked_mid_epoch_keeps_no_private_copy_of_the_order() -> None:
    """A process map forks its late workers after the first batch, when the epoch's order
    exists; the consumer then walks and frees it. Held as 400k Python ints (~15 MB), the
    order would be left to the late worker as pages only it maps; held as an array it never
    inherits, it leaves it nothing of that size."""
    n = 400_000
    grown = _growth_in_a_fresh_process("array", n)
    assert grown < 3 * 2**20, f"the late child came to own {grown / 2**20:.1f} MB of the parent's pages"
    as_list = _growth_in_a_fresh_process("list", n)  # the same measure can fail
    assert as_list > 8 * 2**20, f"held as a list, the order left the late child only {as_list / 2**20:.1f} MB"


_CHILD_FREES = """
import gc, os, sys
import numpy as np
import dataflow as D
df = D.DataFromList([[i] for i in range(100_000)], shuffle=True, seed=1)
df.reset_state()
it = iter(df)
next(it)
from dataflow.sources._unforked import _live
[held] = list(_live.values())
address = held.ctypes.data
pid = os.fork()
if pid == 0:
    code = 3
    try:
        maps = open("/proc/self/maps").read().splitlines()
        spans = [line.split()[:2] for line in maps]
        here = [perm for span, perm in spans if int(span.split("-")[0], 16) == address]
        code = 4 if here != ["---p"] else 5
        del it, held, df  # the child frees the inherited order: only the placeholder goes
        gc.collect()
        big = [np.ones(2**20) for _ in range(16)]  # new mappings; none lands on freed memory
        code = 0 if all(b.sum() == 2**20 for b in big) else 6
    finally:
        os._exit(code)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status), sum(1 for _ in it) + 1)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="MADV_DONTFORK is Linux's")
@pytest.mark.timeout(60)
def test_a_child_that_frees_an_inherited_order_unmaps_only_a_placeholder() -> None:
    """The child of a fork mid-epoch finds an inaccessible placeholder where the order was
    (no other mapping can land there), frees the inherited order and allocates without
    harm; the parent's epoch goes on whole."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run(
        [sys.executable, "-c", _CHILD_FREES], capture_output=True, text=True, env=env, cwd=root, timeout=50
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["0", "100000"], done.stdout
