"""Checkpointing through the torch adapter: ``to_torch(...)`` iterated directly, in torchdata's
``StatefulDataLoader`` (one state per worker), and the example training script stopped and
resumed in a fresh process."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dataflow as D

torch = pytest.importorskip("torch")
from dataflow.adapters.torch import to_torch  # noqa: E402

from ._util import ROOT  # noqa: E402

pytestmark = pytest.mark.framework


def _flow() -> D.DataFlow:
    return D.DataFromList(list(range(40)), shuffle=True, seed=1).map(lambda x: x * 10)


def _epochs(loader: Any, n: int) -> list[list[Any]]:
    return [[b.tolist() if hasattr(b, "tolist") else b for b in loader] for _ in range(n)]


@pytest.mark.parametrize("cut", [0, 7, 39, 40])
def test_iterating_the_dataset_directly_resumes_exactly(cut: int) -> None:
    """The state taken after ``cut`` datapoints continues the same epoch, then the next."""
    full = _epochs(to_torch(_flow()), 2)
    ds = to_torch(_flow())
    it = iter(ds)
    head = [int(next(it)) for _ in range(cut)]
    state = ds.state_dict()
    resumed = to_torch(_flow())
    resumed.load_state_dict(state)
    rest = _epochs(resumed, 2)
    assert head + rest[0] == full[0]
    assert rest[1] == full[1]


def _stateful(num_workers: int) -> Any:
    stateful = pytest.importorskip("torchdata.stateful_dataloader")
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torchdata's own deprecation noise
        return stateful.StatefulDataLoader(
            to_torch(_flow()), batch_size=4, num_workers=num_workers, persistent_workers=num_workers > 0
        )


@pytest.mark.timeout(120)
@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("cut", [3, 9, 10])  # 10 batches an epoch: 10 is right after the last one
def test_stateful_dataloader_resumes_exactly(num_workers: int, cut: int) -> None:
    """StatefulDataLoader saves one dataflow state per worker; the resumed loader yields the
    rest of the epoch and the following epochs exactly (persistent workers)."""
    full = _epochs(_stateful(num_workers), 3)
    loader = _stateful(num_workers)
    it = iter(loader)
    head = [next(it).tolist() for _ in range(cut)]
    state = loader.state_dict()
    del it
    resumed = _stateful(num_workers)
    resumed.load_state_dict(state)
    rest = _epochs(resumed, 2)
    assert head + rest[0] == full[0]
    assert rest[1] == full[1]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_stateful_dataloader_saved_after_the_epoch_resumes_at_the_next(num_workers: int) -> None:
    """A loader saved once its epoch loop ended resumes with the next epoch."""
    full = _epochs(_stateful(num_workers), 3)
    loader = _stateful(num_workers)
    first = _epochs(loader, 1)
    state = loader.state_dict()
    resumed = _stateful(num_workers)
    resumed.load_state_dict(state)
    assert first + _epochs(resumed, 2) == full


_EXAMPLE = ROOT / "examples" / "checkpoint_resume_torch.py"


def _losses(*args: str, cwd: Path) -> list[str]:
    """The lines the example prints, run in a fresh process."""
    out = subprocess.run(
        [sys.executable, str(_EXAMPLE), *args],
        cwd=cwd, capture_output=True, text=True, timeout=240, check=True,
    )
    return out.stdout.splitlines()


def _losses_here(loader: str, stop_at: int | None = None, ckpt: str | None = None) -> list[str]:
    """The lines the example's ``train`` prints, run in this process (the uninterrupted run
    and the run that stops need no fresh process: only the resume does)."""
    spec = importlib.util.spec_from_file_location("checkpoint_resume_torch", _EXAMPLE)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    with torch.random.fork_rng(devices=[]):  # train() seeds torch's global generator
        losses = example.train(loader, stop_at, ckpt, None)
    return [f"{step} {loss:.10f}" for step, loss in losses]


@pytest.mark.slow
@pytest.mark.timeout(480)
@pytest.mark.parametrize(("loader", "stops"), [("direct", [40]), ("stateful", [37])])
def test_example_stopped_and_resumed_gives_the_same_loss_curve(
    loader: str, stops: list[int], tmp_path: Path
) -> None:
    """The example training script stopped mid-epoch and resumed from its torch.save
    checkpoint in a fresh process prints the uninterrupted run's losses, step for step. (A
    StatefulDataLoader saved right after an epoch's last batch resumes exactly too:
    test_stateful_dataloader_resumes_exactly[10-2], in-process.)"""
    if loader == "stateful":
        pytest.importorskip("torchdata.stateful_dataloader")
    full = _losses_here(loader)
    assert len(full) > max(stops)
    for stop in stops:
        ckpt = str(tmp_path / f"run{stop}.pt")
        head = _losses_here(loader, stop, ckpt)
        tail = _losses("--loader", loader, "--resume", ckpt, cwd=tmp_path)
        assert head + tail == full, f"stopped at step {stop}"


def test_state_goes_into_a_weights_only_torch_checkpoint(tmp_path: Path) -> None:
    """A pipeline state with buffered datapoints and RNG states survives torch.save and
    torch.load(weights_only=True) inside a model checkpoint."""
    flow = D.DataFromList([[i, np.full(3, i)] for i in range(50)], shuffle=True, seed=3).shuffle(10, seed=4)
    flow.reset_state()
    it = iter(flow)
    for _ in range(17):
        next(it)
    state = flow.state_dict()
    torch.save({"model": torch.nn.Linear(2, 2).state_dict(), "data": state}, tmp_path / "c.pt")
    loaded = torch.load(tmp_path / "c.pt", weights_only=True)["data"]
    assert loaded == state
    again = D.DataFromList([[i, np.full(3, i)] for i in range(50)], shuffle=True, seed=3).shuffle(10, seed=4)
    again.load_state_dict(loaded)
    again.reset_state()
    assert [dp[0] for dp in again] == [dp[0] for dp in it]


def _rank_loader(ranks: int, rank: int, workers: int) -> Any:
    """Rank ``rank``'s loader: ``to_torch`` of its shard in a StatefulDataLoader (torch seeded
    apart on each rank: the workers of every rank still draw one order)."""
    stateful = pytest.importorskip("torchdata.stateful_dataloader")
    torch.manual_seed(10 * ranks + rank)
    flow = D.DataFromList(list(range(90)), shuffle=True, seed=6).shard(ranks, rank).map(lambda x: [x])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return stateful.StatefulDataLoader(
            to_torch(flow), batch_size=2, num_workers=workers, multiprocessing_context="fork"
        )


@pytest.mark.timeout(180)
@pytest.mark.parametrize(("old", "new"), [((3, 2), (2, 3)), ((2, 1), (4, 2))])
def test_reshard_loader_resumes_the_epoch_on_other_ranks_and_workers(
    old: tuple[int, int], new: tuple[int, int]
) -> None:
    """Every rank's StatefulDataLoader (ranks x workers) saved after 4 batches, merged by
    ``reshard_loader``, resumed by loaders of another number of ranks and workers: the
    epoch is each datapoint once, less at most the rows the equal splits drop."""
    from dataflow.adapters.torch import reshard_loader

    seen: list[int] = []
    states = []
    for rank in range(old[0]):
        loader = _rank_loader(old[0], rank, old[1])
        it = iter(loader)
        seen += [int(v) for _ in range(4) for v in next(it)[0]]
        states.append(loader.state_dict())
        del it
    merged = reshard_loader(states, new[0], num_workers=new[1])
    counts = []
    for rank in range(new[0]):
        loader = _rank_loader(new[0], rank, new[1])
        loader.load_state_dict(merged)
        part = [int(v) for batch in loader for v in batch[0]]
        counts.append(len(part))
        seen += part
    assert len(seen) == len(set(seen)), "a datapoint was seen twice in the epoch"
    assert len(set(counts)) == 1
    assert 90 - len(seen) <= old[0] - 1 + new[0] - 1


def test_reshard_loader_refuses_what_it_cannot_merge_exactly() -> None:
    from dataflow._errors import StateError
    from dataflow.adapters.torch import reshard_loader

    with pytest.raises(StateError, match="not the state_dict.. of a StatefulDataLoader with worker"):
        reshard_loader([{"dataset_state": {}, "_iterator_finished": False}], 2)
    loader = _rank_loader(1, 0, 1)
    it = iter(loader)
    next(it)
    state = loader.state_dict()
    del it
    with pytest.raises(StateError, match="snapshot_every_n_steps=1"):
        reshard_loader([{**state, "_steps_since_snapshot": 3}], 2)
