"""A simulated two-node Ray cluster on this machine (``ray.cluster_utils.Cluster``): the same
pipeline gives the serial map's (and the process map's) results with actors on both nodes,
``ray_remote_args`` pins actors to the node that has a resource, and killed workers on the
other node are replaced with nothing lost or repeated."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dataflow import DataFromList
from dataflow.on_ray import RayMapData, RayRunner

from . import _funcs
from .test_maps import assert_actors_gone
from .test_runner import merged

ray = pytest.importorskip("ray")
cluster_utils = pytest.importorskip("ray.cluster_utils")

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def two_nodes() -> Iterator[dict[str, str]]:
    """Node ids by name: ``head`` (1 CPU) and ``data`` (2 CPUs and the resource ``data_node``)."""
    if ray.is_initialized():
        ray.shutdown()  # the local Ray of the other tests; conftest starts it again afterwards
    cluster = cluster_utils.Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False}
    )
    try:
        cluster.add_node(num_cpus=2, resources={"data_node": 2})
        ray.init(address=cluster.address, log_to_driver=False)
        cluster.wait_for_nodes()
        nodes = {"head": "", "data": ""}
        for node in ray.nodes():
            if node["Alive"]:
                nodes["data" if "data_node" in node["Resources"] else "head"] = node["NodeID"]
        assert all(nodes.values()), ray.nodes()
        yield nodes
    finally:
        ray.shutdown()
        cluster.shutdown()


def _src(n: int = 40) -> DataFromList:
    return DataFromList([[i] for i in range(n)], shuffle=False)


def _run(df) -> list:
    df.reset_state()
    try:
        return list(df)
    finally:
        df.close()


def test_map_over_two_nodes_equals_the_serial_map(two_nodes: dict[str, str]) -> None:
    got = _run(RayMapData(_src(), 3, _funcs.with_node, strict=True, chunk=2, buffer_size=12, timeout=120))
    assert [dp[0] for dp in got] == [2 * i for i in range(40)]
    assert {dp[1] for dp in got} == set(two_nodes.values())  # 1 CPU each: actors on both nodes


def test_ray_remote_args_pin_the_actors_to_a_node(two_nodes: dict[str, str]) -> None:
    df = RayMapData(
        _src(),
        2,
        _funcs.with_node,
        strict=True,
        chunk=2,
        timeout=120,
        ray_remote_args={"resources": {"data_node": 1}},
    )
    got = _run(df)
    assert [dp[0] for dp in got] == [2 * i for i in range(40)]
    assert {dp[1] for dp in got} == {two_nodes["data"]}


def test_sharded_runner_across_nodes_is_one_pass(two_nodes: dict[str, str]) -> None:
    df = RayRunner(_src().map(_funcs.with_node), 3, shard=True, chunk=4, timeout=120)
    got = _run(df)
    assert sorted(dp[0] for dp in got) == [2 * i for i in range(39)]  # 3 equal shares of 13
    assert {dp[1] for dp in got} == set(two_nodes.values())


def test_the_same_pipeline_gives_identical_results_on_processes_and_the_cluster(
    two_nodes: dict[str, str],
) -> None:
    on_procs = _funcs.two_epochs(_funcs.same_pipeline("processes"))
    on_cluster = _funcs.two_epochs(_funcs.same_pipeline("ray"))
    assert on_cluster == on_procs and on_procs[0] != on_procs[1]


def test_ray_remote_args_place_runner_workers_by_node_affinity(two_nodes: dict[str, str]) -> None:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    strategy = NodeAffinitySchedulingStrategy(two_nodes["data"], soft=False)
    df = RayRunner(
        _src(12).map(_funcs.with_node),
        2,
        shard=True,
        chunk=3,
        timeout=120,
        ray_remote_args={"scheduling_strategy": strategy},
    )
    got = _run(df)
    assert sorted(dp[0] for dp in got) == [2 * i for i in range(12)]
    assert {dp[1] for dp in got} == {two_nodes["data"]}


@pytest.mark.filterwarnings("ignore:ShardData. sharding by position")
def test_killed_runner_worker_on_the_other_node_resumes_its_shard(two_nodes: dict[str, str]) -> None:
    chunk, n = 3, 3
    shards = [[dp[0] for dp in _run(_src(36).map(_funcs.double).shard(n, w))] for w in range(n)]
    expected = merged(shards, chunk)
    assert sorted(expected) == [2 * i for i in range(36)]
    df = RayRunner(_src(36).map(_funcs.with_node), n, shard=True, chunk=chunk, snapshot_every=1, timeout=120)
    df.reset_state()
    try:
        first = (df.actors, df.worker_pids)
        got = []
        for i, dp in enumerate(df):
            got.append(dp)
            if i == chunk * n + 1:  # each worker's first chunk is in: kill one on the data node
                nodes = [got[w * chunk][1] for w in range(n)]
                victim = nodes.index(two_nodes["data"])
                ray.kill(df.actors[victim])
        assert [dp[0] for dp in got] == expected
        assert df.worker_pids[victim] != first[1][victim]
        actors, pids = first[0] + df.actors, first[1] + df.worker_pids
    finally:
        df.close()
    assert_actors_gone(actors, pids)


def test_killed_map_actor_on_the_cluster_is_restarted(two_nodes: dict[str, str]) -> None:
    df = RayMapData(_src(), 3, _funcs.with_node, strict=True, chunk=2, buffer_size=12, timeout=120)
    df.reset_state()
    try:
        got = []
        for i, dp in enumerate(df):
            got.append(dp[0])
            if i == 8:
                ray.kill(df.actors[1], no_restart=False)
        assert got == [2 * i for i in range(40)]
    finally:
        df.close()
