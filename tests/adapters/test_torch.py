"""dataflow.adapters.torch: to_torch / DataFlowDataset (with and without DataLoader workers),
to_tensors and DevicePrefetcher (on "cpu" here; the CUDA path is marked ``gpu``)."""

from __future__ import annotations

import os
import warnings
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch.utils.data import DataLoader  # noqa: E402

from dataflow import DataFromList  # noqa: E402
from dataflow._errors import LengthUnknownError  # noqa: E402
from dataflow.adapters.torch import DataFlowDataset, DevicePrefetcher, to_tensors, to_torch  # noqa: E402
from dataflow.base import DataFlow  # noqa: E402
from dataflow.sources._indexed import IndexedSource  # noqa: E402
from tests.helpers import ListFlow  # noqa: E402

from ._util import CountingIterable, FailingFlow, documented_example_tests, final_losses  # noqa: E402


def _items(n: int) -> list[list[Any]]:
    return [[np.full(3, i, dtype=np.float32), np.int64(i)] for i in range(n)]


# DataLoader workers start by forkserver, not fork: the test process may already run TensorFlow's
# or JAX's threads (CI installs all three), and forking a multithreaded process can deadlock.
# It also checks that the dataset pickles, as it must with spawn (macOS) and forkserver.
MP_CONTEXT = "forkserver"


def _ids(datapoints: list[Any]) -> list[int]:
    return [int(dp[1]) for dp in datapoints]


class SameArrayFlow(DataFlow):
    """Yields the same (writeable) array object ``n`` times."""

    def __init__(self, array: np.ndarray, n: int = 3) -> None:
        self.array = array
        self.n = n

    def __iter__(self):  # type: ignore[no-untyped-def]
        for i in range(self.n):
            yield [self.array, i]


# -- to_tensors / to_torch -------------------------------------------------------------------


def test_tensors_share_memory_with_the_flows_arrays() -> None:
    array = np.zeros(4, dtype=np.float32)
    ds = to_torch(SameArrayFlow(array))
    tensor, label = next(iter(ds))
    assert isinstance(tensor, torch.Tensor) and tensor.dtype == torch.float32
    assert label == 0 and isinstance(label, int)  # Python scalars are left alone
    array[0] = 7.0  # the flow's array changes -> the tensor sees it
    assert tensor[0].item() == 7.0
    tensor[1] = 3.0  # and the other way round
    assert array[1] == 3.0
    assert tensor.data_ptr() == array.ctypes.data


def test_to_tensors_converts_nested_numeric_numpy_and_leaves_the_rest() -> None:
    dp = {
        "image": np.ones((2, 2), dtype=np.uint8),
        "pair": (np.float64(1.5), [np.array([True, False])]),
        "name": "cat",
        "raw": b"\x00",
        "strings": np.array(["a", "b"]),
        "count": 3,
    }
    out = to_tensors(dp)
    assert out["image"].dtype == torch.uint8 and out["image"].shape == (2, 2)
    assert isinstance(out["pair"], tuple) and isinstance(out["pair"][1], list)
    assert out["pair"][0].dtype == torch.float64 and out["pair"][0].item() == 1.5
    assert out["pair"][1][0].dtype == torch.bool and out["pair"][1][0].tolist() == [True, False]
    assert out["name"] == "cat" and out["raw"] == b"\x00" and out["count"] == 3
    assert out["strings"] is dp["strings"]  # no tensor for strings: passed through


def test_read_only_arrays_are_copied_without_a_warning() -> None:
    array = np.arange(4, dtype=np.int32)
    array.setflags(write=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch warns on non-writable arrays
        tensor = to_tensors(array)
    assert tensor.tolist() == [0, 1, 2, 3]
    tensor[0] = 9  # writing the tensor cannot touch the read-only array
    assert array[0] == 0


def test_arrays_with_negative_strides_are_converted() -> None:
    """A horizontally flipped image (``img[:, ::-1]``, a common augmentation) must convert:
    copied where a view is impossible ("without copies where possible")."""
    image = np.arange(12, dtype=np.float32).reshape(3, 4)
    flipped = image[:, ::-1]
    assert to_tensors(flipped).tolist() == flipped.tolist()
    out = next(iter(to_torch(ListFlow([[flipped]]))))
    assert out[0].tolist() == flipped.tolist()


def test_arrays_in_non_native_byte_order_are_converted() -> None:
    """Big-endian arrays (read from files written elsewhere) must convert too (copied)."""
    big = np.arange(4, dtype=">f4")
    assert to_tensors(big).tolist() == [0.0, 1.0, 2.0, 3.0]


def test_non_contiguous_arrays_convert_with_their_strides() -> None:
    array = np.arange(20, dtype=np.int64).reshape(4, 5)[:, ::2]
    assert to_tensors(array).tolist() == array.tolist()


def test_convert_false_yields_the_flows_own_objects() -> None:
    array = np.zeros(2)
    out = list(to_torch(SameArrayFlow(array, n=2), convert=False))
    assert all(dp[0] is array for dp in out) and [dp[1] for dp in out] == [0, 1]


def test_each_iteration_is_one_epoch_and_reset_happens_once() -> None:
    df = ListFlow(_items(5))
    ds = to_torch(df)
    assert isinstance(ds, DataFlowDataset) and isinstance(ds, torch.utils.data.IterableDataset)
    assert df.resets == 0  # nothing is done before iterating
    first, second = list(ds), list(ds)
    assert _ids(first) == _ids(second) == [0, 1, 2, 3, 4]
    assert df.resets == 1 and df.epochs == 2 and df.finished == 2
    assert first[0][1].dtype == torch.int64 and first[0][0].tolist() == [0.0, 0.0, 0.0]


def test_len_is_the_flows_and_unknown_length_still_iterates() -> None:
    assert len(to_torch(ListFlow(_items(7)))) == 7
    ds = to_torch(ListFlow(_items(3), has_len=False))
    with pytest.raises(LengthUnknownError):
        len(ds)
    assert _ids(list(ds)) == [0, 1, 2]  # list() copes: LengthUnknownError is a TypeError
    assert _ids(list(DataLoader(ds, batch_size=None))) == [0, 1, 2]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_dataloader_with_shard_gives_each_datapoint_once(num_workers: int) -> None:
    ds = to_torch(ListFlow(_items(11)), shard=True)
    context = MP_CONTEXT if num_workers else None
    loader = DataLoader(  # persistent workers: the second epoch runs in the same processes
        ds, batch_size=None, num_workers=num_workers, multiprocessing_context=context,
        persistent_workers=num_workers > 0,
    )
    for _ in range(2):  # two epochs, each complete
        out = list(loader)
        assert sorted(_ids(out)) == list(range(11))
        # DataLoader takes from its workers in turn, so the flow's order is kept
        assert _ids(out) == list(range(11))
        assert all(isinstance(dp[0], torch.Tensor) for dp in out)


def test_dataloader_without_shard_workers_of_a_seeded_random_flow_differ() -> None:
    """shard=False: every worker runs the whole flow. It is documented for flows that draw
    random samples, "then workers must differ": with ``seed=`` they must still draw different
    (reproducible) streams, not the same one."""
    df = DataFromList(list(range(40)), shuffle=True, seed=0)
    out = [int(x) for x in DataLoader(to_torch(df, shard=False), batch_size=None, num_workers=2,
                                      multiprocessing_context=MP_CONTEXT)]
    worker0, worker1 = out[0::2], out[1::2]  # DataLoader takes from its workers in turn
    assert sorted(worker0) == sorted(worker1) == list(range(40))
    assert worker0 != worker1


def _two_epochs(df: DataFlow, shard: bool, persistent: bool) -> tuple[list[int], list[int]]:
    loader = DataLoader(to_torch(df, shard=shard), batch_size=None, num_workers=2,
                        multiprocessing_context=MP_CONTEXT, persistent_workers=persistent)
    return [int(x) for x in loader], [int(x) for x in loader]


# fresh workers with and without seed= (each epoch's workers start from the flow as pickled);
# persistent workers iterate their own copy again, as a flow does in-process: one seed will do
@pytest.mark.parametrize(
    "seed, persistent", [(None, False), (5, False), (5, True)],
    ids=["fresh-workers", "fresh-seeded", "persistent"],
)
def test_dataloader_workers_shuffle_anew_each_epoch(seed: int | None, persistent: bool) -> None:
    """A shuffled flow gives a new order every epoch, as without workers. The DataLoader starts
    new workers each epoch unless persistent_workers=True: they must not replay the first
    epoch's order. Sharding by position is only right if every worker sees the same order:
    a shuffled flow without ``seed=`` (the default) draws fresh entropy in each worker, and
    the workers must still agree on the permutation, or datapoints are silently duplicated and
    dropped (so each epoch has every datapoint once)."""
    first, second = _two_epochs(DataFromList(list(range(40)), shuffle=True, seed=seed), True, persistent)
    assert sorted(first) == sorted(second) == list(range(40))
    assert first != second


def test_dataloader_collates_batches_from_workers() -> None:
    ds = to_torch(ListFlow(_items(8)))
    loader = DataLoader(ds, batch_size=4, num_workers=2, multiprocessing_context=MP_CONTEXT)
    batches = list(loader)
    assert [b[0].shape for b in batches] == [(4, 3)] * 2
    assert sorted(int(i) for b in batches for i in b[1]) == list(range(8))


def test_over_a_process_runner_tensors_view_the_received_arrays() -> None:
    """dataflow's parallelism with num_workers=0, the recommended set-up: large arrays arrive
    as writable views of shared memory, and the tensors share them (no copy, no warning)."""
    from dataflow.parallel._runners import MultiProcessRunnerZMQ

    items = [[np.full((64, 64), i, dtype=np.float32), i] for i in range(6)]  # 16 KiB: shm path
    with MultiProcessRunnerZMQ(ListFlow(items), num_proc=1, start_method=MP_CONTEXT) as runner:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            out = list(DataLoader(to_torch(runner), batch_size=None, num_workers=0))
        assert sorted(int(dp[1]) for dp in out) == list(range(6))
        for x, i in out:
            assert x.shape == (64, 64) and x.dtype == torch.float32 and bool((x == i).all())
        out[0][0][0, 0] = -1.0  # writable


def test_an_error_in_the_flow_reaches_the_consumer() -> None:
    ds = to_torch(FailingFlow(good=2, message="bad sample"))
    it = iter(ds)
    assert [int(next(it)[0]) for _ in range(2)] == [0, 1]
    with pytest.raises(RuntimeError, match="bad sample"):
        next(it)


# -- DevicePrefetcher ------------------------------------------------------------------------


def test_device_prefetcher_on_cpu_keeps_values_and_order() -> None:
    batches = [
        {"x": np.full((2, 3), i, dtype=np.float32), "y": torch.tensor([i, i]), "name": f"b{i}"}
        for i in range(5)
    ]
    out = list(DevicePrefetcher(batches, device="cpu"))
    assert [b["name"] for b in out] == [f"b{i}" for i in range(5)]
    for i, b in enumerate(out):
        assert isinstance(b["x"], torch.Tensor) and b["x"].device.type == "cpu"
        assert torch.equal(b["x"], torch.full((2, 3), float(i)))
        assert torch.equal(b["y"], torch.tensor([i, i]))


def test_device_prefetcher_over_a_dataflow_and_a_dataloader() -> None:
    df = ListFlow(_items(4))
    prefetcher = DevicePrefetcher(DataLoader(to_torch(df), batch_size=2), device=torch.device("cpu"))
    assert len(prefetcher) == 2
    for _ in range(2):  # two epochs
        out = list(prefetcher)
        assert [b[1].tolist() for b in out] == [[0, 1], [2, 3]]
    assert [int(b[1]) for b in DevicePrefetcher(ListFlow(_items(3)), "cpu")] == [0, 1, 2]


@pytest.mark.parametrize("depth", [0, -1, 1.5, True, "2"])
def test_device_prefetcher_checks_depth(depth: Any) -> None:
    with pytest.raises(ValueError, match="DevicePrefetcher: depth"):
        DevicePrefetcher([], device="cpu", depth=depth)


def test_device_prefetcher_defaults() -> None:
    p = DevicePrefetcher([], device="cpu")
    assert p.depth == 2 and p.pin_memory is False and p.device == torch.device("cpu")
    assert list(p) == []


@pytest.mark.gpu
def test_device_prefetcher_cuda_moves_pinned_batches_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    pinned = []
    original = torch.Tensor.pin_memory

    def spy(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = original(self, *args, **kwargs)
        pinned.append(out)
        return out

    monkeypatch.setattr(torch.Tensor, "pin_memory", spy)
    rng = np.random.default_rng(0)
    batches = [[rng.random((256, 1024), dtype=np.float32), np.int64(i)] for i in range(12)]
    source = CountingIterable(batches)
    prefetcher = DevicePrefetcher(source, device="cuda", depth=3)
    assert prefetcher.pin_memory is True
    it = iter(prefetcher)
    first = next(it)
    assert source.pulled == 4  # the one being used plus `depth` staged
    out = [first, *it]
    assert len(out) == len(batches) and len(pinned) == 2 * len(batches)
    assert all(t.is_pinned() for t in pinned)
    for (x, i), (x_host, i_host) in zip(out, batches):
        assert x.device.type == "cuda" and i.device.type == "cuda"
        # compute on the consumer stream right away: the copy must be complete for it
        assert torch.equal((x * 2).cpu(), torch.from_numpy(x_host * 2))
        assert int(i) == int(i_host)


@pytest.mark.gpu
def test_device_prefetcher_cuda_skips_pinning_when_asked_and_keeps_pinned_tensors() -> None:
    already = torch.arange(6.0).pin_memory()
    out = list(DevicePrefetcher([[already], [np.ones(2)]], device="cuda:0", pin_memory=False))
    assert out[0][0].device.type == "cuda" and out[0][0].tolist() == already.tolist()
    assert out[1][0].tolist() == [1.0, 1.0]


@pytest.mark.gpu
def test_device_prefetcher_cuda_reuses_events_safely_and_restores_the_stream() -> None:
    """Many more batches than events, each used by slow GPU work on the consumer's own stream
    (entered by the user): every batch arrives whole, and the consumer's stream is the current
    one again after every step of the iterator."""
    rng = np.random.default_rng(1)
    batches = [rng.random((512, 512), dtype=np.float32) for _ in range(24)]
    user = torch.cuda.Stream()
    with torch.cuda.stream(user):
        for i, x in enumerate(DevicePrefetcher(batches, device="cuda", depth=2)):
            assert torch.cuda.current_stream() == user
            for _ in range(20):  # keeps the GPU busy while the next copies are staged
                y = x @ x
            assert torch.equal(x.cpu(), torch.from_numpy(batches[i])), i
            assert y.shape == (512, 512)
    torch.cuda.synchronize()


# -- the example -----------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_train_torch_example_reduces_the_loss() -> None:
    initial, final = final_losses("train_torch.py")
    assert final < initial


test_documented_examples_run, test_the_page_has_runnable_examples = documented_example_tests(
    "adapters_torch.rst"
)


class LoggedReads(IndexedSource[Any]):
    """``[i]`` for ``i`` in ``0..n-1`` by index; each read appends ``pid index`` to ``log``."""

    def __init__(self, n: int, log: str) -> None:
        super().__init__(seed=4)
        self.n, self.log, self._shuffle = n, log, False

    def _num_items(self) -> int:
        return self.n

    def _getter(self) -> Any:
        log = self.log

        def get(i: int) -> list[int]:
            fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            try:
                os.write(fd, f"{os.getpid()} {i}\n".encode())
            finally:
                os.close(fd)
            return [i]

        return get


@pytest.mark.timeout(120)
def test_dataloader_workers_of_a_rank_read_only_their_part(tmp_path: Any) -> None:
    """A rank's flow (``.shard()`` then a map) in a DataLoader with 2 workers: each worker
    reads (not only yields) its own part of the rank's indices, each index once."""
    log = str(tmp_path / "reads.log")
    rank = LoggedReads(40, log).shard(2, 1, equal=True).map(lambda dp: [dp[0] * 10])
    expected = [i * 10 for i in range(1, 40, 2)]
    loader = DataLoader(to_torch(rank, convert=False), batch_size=None, num_workers=2,
                        multiprocessing_context="fork")
    got = sorted(dp[0] for dp in loader)
    assert got == expected
    reads: dict[str, list[int]] = {}
    with open(log) as f:
        for line in f:
            pid, i = line.split()
            reads.setdefault(pid, []).append(int(i))
    assert len(reads) == 2, "both workers read"
    every = [i for r in reads.values() for i in r]
    assert sorted(every) == sorted(v // 10 for v in expected), "an index was read twice, or one not yielded"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("persistent", [False, True])
def test_ranks_seeding_torch_apart_still_split_one_order(persistent: bool) -> None:
    """Two ranks whose scripts seed torch differently (``manual_seed(seed + rank)``), each a
    DataLoader with 2 workers over its ``.shard()`` of a shuffled, seeded source: every
    epoch the ranks' parts are disjoint and together the whole data, and epochs differ."""
    from torch.utils.data import DataLoader

    def rank_loader(rank: int) -> Any:
        torch.manual_seed(100 + rank)
        flow = DataFromList(list(range(30)), shuffle=True, seed=6).shard(2, rank, equal=False)
        return DataLoader(to_torch(flow), batch_size=None, num_workers=2, persistent_workers=persistent,
                          multiprocessing_context="fork")

    loaders = [rank_loader(rank) for rank in range(2)]
    epochs = [[int(x) for loader in loaders for x in loader] for _ in range(2)]
    for epoch in epochs:
        assert sorted(epoch) == list(range(30)), "the ranks' parts overlap"
    assert epochs[0] != epochs[1]
