"""RayMapData actors on the consumer's node return large arrays through a shared-memory ring
(one memcpy) instead of Ray's object store; the results equal the store path's; close()
leaves no ring behind."""

from __future__ import annotations

import gc
import os

import pytest

from dataflow.on_ray import RayMapData
from tests._leaks import ring_mappings

from . import _funcs
from .test_maps import _mapped_file, _run, _src

ray = pytest.importorskip("ray")

pytestmark = pytest.mark.timeout(180)


def test_large_results_from_this_node_are_views_of_a_ring_and_equal_the_store_path() -> None:
    def run(**kw) -> list:
        return _run(RayMapData(_src(8), 2, _funcs.big_array, strict=True, **kw), 1)[0]

    ring, store, owned = run(), run(shm_bytes=0), run(copy=True)
    assert [dp[0] for dp in ring] == [dp[0] for dp in store] == [dp[0] for dp in owned] == list(range(8))
    for (i, view), (_, stored), (_, mine) in zip(ring, store, owned):
        assert (view == i).all() and (stored == i).all() and (mine == i).all()
        assert not view.flags.owndata  # a view of the ring: no copy on receive
        assert "/dev/shm/dataflow-" in (_mapped_file(view) or ""), _mapped_file(view)
        assert "plasma" in (_mapped_file(stored) or "")  # shm_bytes=0: Ray's object store
        private = _mapped_file(mine) or ""  # copy=True: the process's own memory
        assert mine.flags.writeable and "dataflow-" not in private and "plasma" not in private
    assert [n for n in os.listdir("/dev/shm") if n.startswith(f"dataflow-{os.getpid()}-")] == []
    del ring, view
    gc.collect()
    assert not [m for m in ring_mappings() if f"dataflow-{os.getpid()}-" in m]
