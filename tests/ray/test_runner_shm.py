"""RayRunner workers on the consumer's node send large arrays through a shared-memory ring
(one memcpy) instead of Ray's object store; a replaced worker gets a new ring while the
arrays the consumer holds stay intact; close() leaves no ring behind."""

from __future__ import annotations

import gc
import os

import numpy as np
import pytest

from dataflow.on_ray import RayRunner
from tests._leaks import ring_mappings

from . import _funcs
from .test_maps import _mapped_file
from .test_runner import _src, kill, merged

ray = pytest.importorskip("ray")

pytestmark = pytest.mark.timeout(180)


def _our_rings() -> list[str]:
    """This process's ring files still in /dev/shm (named after the consumer's pid)."""
    return [n for n in os.listdir("/dev/shm") if n.startswith(f"dataflow-{os.getpid()}-")]


def test_large_arrays_from_this_node_are_views_of_a_ring_and_equal_the_store_path() -> None:
    def run(**kw) -> list:
        df = RayRunner(_src(6).map(_funcs.big_array), 2, shard=True, chunk=1, **kw)
        df.reset_state()
        try:
            return list(df)
        finally:
            df.close()

    ring, store, owned = run(), run(shm_bytes=0), run(copy=True)
    assert [dp[0] for dp in ring] == [dp[0] for dp in store] == [dp[0] for dp in owned]
    for (i, view), (_, stored), (_, mine) in zip(ring, store, owned):
        assert (view == i).all() and (stored == i).all() and (mine == i).all()
        assert view.flags.writeable and not view.flags.owndata  # a view of the ring: no copy
        assert "/dev/shm/dataflow-" in (_mapped_file(view) or ""), _mapped_file(view)
        assert "plasma" in (_mapped_file(stored) or "")  # shm_bytes=0: Ray's object store
        private = _mapped_file(mine) or ""  # copy=True: the process's own memory
        assert mine.flags.writeable and "dataflow-" not in private and "plasma" not in private
    assert _our_rings() == []  # the workers unlinked them on mapping, close() the rest
    del ring, view
    gc.collect()
    assert not [m for m in ring_mappings() if f"dataflow-{os.getpid()}-" in m]


@pytest.mark.filterwarnings("ignore:ShardData. sharding by position")
def test_a_replaced_worker_gets_a_new_ring_and_held_arrays_stay_intact() -> None:
    flow = _src(24).map(_funcs.big_array)
    local = []
    for i in range(2):  # the reference: each shard read here
        shard = flow.shard(2, i)
        shard.reset_state()
        local.append([int(dp[0]) for dp in shard])
    df = RayRunner(flow, 2, shard=True, chunk=2, snapshot_every=2, timeout=60)
    df.reset_state()
    held = []
    try:
        first_pids = df.worker_pids
        for i, dp in enumerate(df):
            held.append(dp)  # every array stays referenced: its ring slot is never reused
            if i == 5:
                kill(df, 0)
        assert df.worker_pids[0] != first_pids[0]
    finally:
        df.close()
    assert [int(dp[0]) for dp in held] == merged(local, 2)
    assert all(np.all(arr == i) for i, arr in held)  # those from the dead worker's ring too
    assert _our_rings() == []
    del held, dp
    gc.collect()
    assert not [m for m in ring_mappings() if f"dataflow-{os.getpid()}-" in m]


def test_bad_shm_bytes_is_refused_naming_the_stage() -> None:
    with pytest.raises(ValueError, match="RayRunner: shm_bytes must be >= 0"):
        RayRunner(_src(4), 1, shm_bytes=-1)
