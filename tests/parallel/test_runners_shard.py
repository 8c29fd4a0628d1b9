"""MultiProcessRunnerZMQ(shard=True): the workers split the flow (worker i runs
``ds.shard(num_proc, i, equal=False)``), an epoch yields each datapoint of ``ds`` once, each
worker reads only its own part (of a rank's part too), and a state resumes with the same
workers only."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import dataflow as D
from dataflow._errors import StateError
from dataflow.formats._storage import ShardStorage
from dataflow.parallel._runners import MultiProcessRunner, MultiProcessRunnerZMQ

pytestmark = pytest.mark.timeout(90)


def _rank(total: int = 50, ranks: int = 2, rank: int = 0) -> D.DataFlow[Any]:
    return D.DataFromList(list(range(total)), shuffle=True, seed=1).shard(ranks, rank, equal=False)


def _reference_epochs(flow: D.DataFlow[Any], n: int) -> list[list[Any]]:
    flow.reset_state()
    return [sorted(flow) for _ in range(n)]


@pytest.mark.parametrize("num_proc", [1, 3])
def test_an_epoch_is_each_datapoint_of_the_flow_once(num_proc: int) -> None:
    expected = _reference_epochs(_rank(), 4)
    with MultiProcessRunnerZMQ(_rank(), num_proc, shard=True) as runner:
        assert len(runner) == len(_rank())
        runner.reset_state()
        for ep in range(4):
            assert sorted(runner) == expected[ep]


def test_a_flow_that_cannot_be_split_is_sharded_by_position() -> None:
    flow = D.DataFromList([[i] for i in range(30)], shuffle=False).batch(3)
    with MultiProcessRunner(flow, 4, 2, shard=True) as runner:
        runner.reset_state()
        for _ in range(2):
            got = [int(v) for (b,) in runner for v in b]
            assert sorted(got) == list(range(30))


@pytest.mark.parametrize("cut", [0, 1, 7, 24, 25])
def test_resume_with_the_same_workers_goes_on_exactly(cut: int) -> None:
    expected = _reference_epochs(_rank(), 3)
    with MultiProcessRunnerZMQ(_rank(), 3, shard=True) as runner:
        runner.reset_state()
        assert sorted(runner) == expected[0]
        it = iter(runner)
        head = [next(it) for _ in range(cut)]
        state = runner.state_dict()
        rest = list(it)
    assert sorted(head + rest) == expected[1]
    with MultiProcessRunnerZMQ(_rank(), 3, shard=True) as again:
        again.load_state_dict(state)
        again.reset_state()
        resumed = list(again)
        assert Counter(resumed) == Counter(rest)
        assert sorted(again) == expected[2]


def test_a_state_needs_the_same_workers_and_mode() -> None:
    with MultiProcessRunnerZMQ(_rank(), 2, shard=True) as runner:
        runner.reset_state()
        it = iter(runner)
        next(it)
        state = runner.state_dict()
    with pytest.raises(StateError, match="num_proc"):
        MultiProcessRunnerZMQ(_rank(), 3, shard=True).load_state_dict(state)
    with pytest.raises(StateError, match="shard=True"):
        MultiProcessRunnerZMQ(_rank(), 2).load_state_dict(state)


def test_an_unseeded_shuffled_source_still_partitions() -> None:
    """Every worker shares one seed in shard mode, so an unseeded shuffle draws one order."""
    flow = D.DataFromList(list(range(40)), shuffle=True)
    with MultiProcessRunnerZMQ(flow, 4, shard=True) as runner:
        runner.reset_state()
        for _ in range(2):
            assert sorted(runner) == list(range(40))


@pytest.fixture
def opened_by(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A log of ``pid file`` lines, one per file any reader opens (in any forked process)."""
    log = tmp_path / "opened.log"
    real_open = ShardStorage.open

    def open_(self: ShardStorage, index: int, *args: Any, **kwargs: Any) -> Any:
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, f"{os.getpid()} {Path(self.urls[index]).name}\n".encode())
        finally:
            os.close(fd)
        return real_open(self, index, *args, **kwargs)

    monkeypatch.setattr(ShardStorage, "open", open_)
    return log


def test_each_worker_reads_only_its_files_of_the_rank(tmp_path: Path, opened_by: Path) -> None:
    for k in range(12):
        D.TFRecordSerializer.save(
            D.DataFromList([[k, i] for i in range(3 + k % 4)], shuffle=False),
            str(tmp_path / f"part-{k:02d}.tfrecord"),
            progress=False,
        )
    glob = str(tmp_path / "part-*.tfrecord")
    for equal in (False, True):
        rank = D.TFRecordData(glob).shard(2, 1, equal=equal)
        rank.reset_state()
        expected = sorted(map(tuple, rank))
        opened_by.unlink(missing_ok=True)
        with MultiProcessRunnerZMQ(D.TFRecordData(glob).shard(2, 1, equal=equal), 3, shard=True) as runner:
            runner.reset_state()
            assert sorted(map(tuple, runner)) == expected
            pids = set(runner.worker_pids)
        readers: dict[str, set[str]] = {}
        for line in opened_by.read_text().splitlines():
            pid, name = line.split()
            readers.setdefault(name, set()).add(pid)
        assert {int(p) for ps in readers.values() for p in ps} <= pids  # nothing read in the consumer
        assert all(len(ps) == 1 for ps in readers.values()), f"a file read by two workers: {readers}"
        assert {int(k) for n in readers for k in [n[5:7]]} == {k for k, _ in expected}
