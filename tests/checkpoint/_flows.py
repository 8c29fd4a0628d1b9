"""One small, finite instance of every DataFlow class that ``dataflow`` exports, built the way
that asks the most of its checkpoint (shuffled, seeded, random where the class can be), and
what its state promises:

- ``exact``: resumed from a state saved at any cut, a freshly built copy yields exactly the
  uninterrupted stream (the rest of the epoch, then the later epochs);
- ``per_worker``: runners whose workers run their own copies of a flow: the order in which the
  consumer receives the workers' datapoints is the scheduler's, so the promise is per worker:
  each worker's stream (datapoints tagged by :func:`tag_worker`) goes on exactly where the
  consumer stopped taking from it, and every epoch keeps its length;
- ``refuses``: ``state_dict()`` raises ``StateUnsupportedError`` naming the class and saying why.

Builders take a folder holding the files :func:`write_files` wrote (the file readers' data).
:data:`EXCLUDED` names the exported DataFlow classes not built here, each with the reason;
``test_every_exported_flow_is_covered`` fails when a new export is in neither.
"""

from __future__ import annotations

import io
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import dataflow as D
from dataflow import _seeding as seeding

__all__ = ["EXCLUDED", "FLOWS", "Flow", "tag_thread", "tag_worker", "write_files"]


@dataclass(frozen=True)
class Flow:
    build: Callable[[Path], D.DataFlow]
    promise: str = "exact"  # "exact" | "per_worker" | "refuses"
    workers: bool = False  # starts processes or threads: fewer cuts, a timeout
    refusal: str = ""  # for "refuses": a regex the error message matches (besides the class name)
    take: int = 1  # for "refuses": datapoints taken before state_dict() is asked


#: Exported DataFlow classes without an entry in FLOWS, each with the reason.
EXCLUDED: dict[str, str] = {
    "DataFlow": "abstract base: has no __iter__ of its own (user subclasses: test_user_flows_*)",
    "ProxyDataFlow": "base class: only forwards to its upstream (user subclasses: test_user_flows_*)",
    "RNGDataFlow": "abstract base: has no __iter__ of its own (user subclasses: test_user_flows_*)",
    **{
        name: "needs a Ray cluster (one per session, tests/ray/conftest.py, ~10 s to start): its "
        "resume is checked with this harness's check_resume in tests/ray/test_checkpoint.py"
        for name in ("DataFromRay", "RayMapData", "RayRunner")
    },
}


def tag_worker(dp: list[Any]) -> list[Any]:
    """``[value, worker]``: which runner process produced the datapoint (module level: spawn)."""
    return [dp[0], seeding._worker_key[-1] if seeding._worker_key else -1]


def tag_thread(dp: list[Any]) -> list[Any]:
    return [dp[0], threading.current_thread().name]


def double(dp: list[Any]) -> list[Any]:
    return [dp[0] * 2, dp[1]]


def drop_some(dp: list[Any]) -> list[Any] | None:
    return None if dp[0] % 4 == 1 else [dp[0] * 2, dp[1]]


def _items(n: int) -> list[list[Any]]:
    return [[i, np.full(2, i, np.int16)] for i in range(n)]


def _lst(n: int = 9, shuffle: bool = True, seed: int = 3) -> D.DataFlow:
    return D.DataFromList(_items(n), shuffle=shuffle, seed=seed)


def _sized(dp: list[Any]) -> list[Any]:
    return [dp[0], np.arange(dp[0] % 3 + 1, dtype=np.int16)]


def _sized_len(dp: list[Any]) -> int:
    return len(dp[1])
def _tokens(dp: list[Any]) -> dict[str, Any]:
    """``{"tokens": ...}`` of a length from the datapoint (packing input)."""
    return {"tokens": np.arange(dp[0] % 9 + 1) + dp[0]}


def _three(dp: list[Any]) -> D.DataFlow:
    return D.DataFromList([[int(dp[0]), k] for k in range(dp[0] % 3 + 1)], shuffle=False)


def _pictures(n: int = 7, shuffle: bool = True) -> D.DataFlow:
    items = []
    for i in range(n):
        img = (np.arange(6 * 7 * 3).reshape(6, 7, 3) * (i + 1) % 251).astype(np.uint8)
        coords = np.array([[1.0 + i, 2.0], [3.0, 4.0 + i]], np.float32)
        items.append([img, (img[..., 0] // 2).copy(), coords])
    return D.DataFromList(items, shuffle=shuffle, seed=4)


def _augs() -> list[Any]:
    """Random augmentors: the state must carry their RNGs."""
    return [D.imgaug.RandomCrop((4, 5)), D.imgaug.Flip(horiz=True, prob=0.5)]


def write_files(tmp: Path) -> None:
    """The data files the file readers of :data:`FLOWS` read (written once per module)."""
    import cv2

    src = D.DataFromList(_items(8), shuffle=False)
    D.LMDBSerializer.save(src, str(tmp / "d.lmdb"))
    D.HDF5Serializer.save(src, str(tmp / "d.h5"), ["a", "b"])
    D.TFRecordSerializer.save(src, str(tmp / "d.tfrecord"))
    rows = D.DataFromList([{"i": i, "v": np.full(2, i, np.float32)} for i in range(9)], shuffle=False)
    D.ParquetSerializer.save(rows, str(tmp / "d.parquet"), rows_per_group=4)
    samples = [{"__key__": f"k{i}", "npy": np.full(2, i, np.int32), "cls": i} for i in range(8)]
    D.WebDatasetSerializer.save(D.DataFromList(samples, shuffle=False), str(tmp / "wds-%d.tar"), maxcount=3)
    (tmp / "d.svm").write_text("".join(f"{i % 2} 1:{i} 3:{i * 2}\n" for i in range(9)))
    for k in range(3):
        (tmp / f"t{k}.txt").write_text("".join(f"line {k}-{i}\n" for i in range(3 + k)))
    for i in range(6):
        cv2.imwrite(str(tmp / f"img{i}.png"), np.full((4 + i, 5, 3), 10 * i, np.uint8))


def _queue(_: Path) -> D.DataFlow:
    q: queue.Queue[Any] = queue.Queue()
    for _epoch in range(2):
        for i in range(5):
            q.put([i])
        q.put("END")
    return D.DataFromQueue(q, end_token="END")


def _gen(_: Path) -> D.DataFlow:
    return D.DataFromGenerator(lambda: ([i, i * i] for i in range(7)))


def _thread_flow() -> D.DataFlow:
    return D.DataFromList([[i] for i in range(8)], shuffle=True, seed=5).map(tag_thread)


def _runner_flow() -> D.DataFlow:
    return D.DataFromList([[i] for i in range(8)], shuffle=True, seed=5).map(tag_worker)


def _lmdb(tmp: Path) -> D.DataFlow:
    return D.LMDBData(str(tmp / "d.lmdb"), shuffle=True, seed=2)


def _hf_rows(n: int) -> Any:
    import datasets

    return datasets.Dataset.from_dict({"i": np.arange(n), "v": [list(range(i % 3)) for i in range(n)]})


FLOWS: dict[str, Flow] = {
    # sources
    "DataFromList": Flow(lambda _: _lst()),
    "DataFromArrays": Flow(lambda _: D.DataFromArrays([np.arange(9), np.arange(9) * 2], True, seed=1)),
    "DataFromIterable": Flow(lambda _: D.DataFromIterable([[i] for i in range(7)])),
    "DataFromGenerator": Flow(_gen, "refuses", refusal="allow_fast_forward"),
    "DataFromQueue": Flow(_queue, "refuses"),
    "FakeData": Flow(lambda _: D.FakeData([[2], [3]], size=7, seed=4)),
    "TextLineData": Flow(lambda t: D.TextLineData([str(t / f"t{k}.txt") for k in range(3)], shuffle=True,
                                                  seed=2)),
    # per-datapoint transforms
    "MapData": Flow(lambda _: D.MapData(_lst(), drop_some)),
    "MapDataComponent": Flow(lambda _: D.MapDataComponent(_lst(), lambda c: c + 1, 1)),
    "FilterData": Flow(lambda _: D.FilterData(_lst(), lambda dp: dp[0] % 3 != 1)),
    "SelectComponent": Flow(lambda _: D.SelectComponent(_lst(), [1, 0])),
    # images
    "ImageFromFile": Flow(lambda t: D.ImageFromFile([str(t / f"img{i}.png") for i in range(6)], shuffle=True,
                                                    seed=3)),
    "AugmentImageComponent": Flow(lambda _: D.AugmentImageComponent(_pictures(), _augs(), seed=6)),
    "AugmentImageComponents": Flow(lambda _: D.AugmentImageComponents(_pictures(), _augs(), (0, 1), (2,),
                                                                      seed=6)),
    "AugmentImageCoordinates": Flow(lambda _: D.AugmentImageCoordinates(_pictures(), _augs(), 0, 2, seed=6)),
    # batching
    "BatchData": Flow(lambda _: D.BatchData(_lst(11), 3, remainder=True)),
    "BatchDataByShape": Flow(lambda _: D.BatchDataByShape(_lst(12).map(_sized), 2, 1, remainder=True)),
    "PaddedBatchData": Flow(lambda _: D.PaddedBatchData(_lst(10).map(_sized), 3, remainder=True)),
    "BucketByLengthData": Flow(lambda _: D.BucketByLengthData(_lst(12).map(_sized), _sized_len, [2], [2, 3])),
    "PackData": Flow(lambda _: D.PackData(_lst(12).map(_tokens), 7, num_bins=2, overlong="split")),
    # epoch size
    "FixedSizeData": Flow(lambda _: D.FixedSizeData(_lst(5), 7)),
    "RepeatedData": Flow(lambda _: D.RepeatedData(_lst(4), 2)),
    "RepeatedDataPoint": Flow(lambda _: D.RepeatedDataPoint(_lst(4), 2)),
    "TakeData": Flow(lambda _: D.TakeData(D.RepeatedData(_lst(4), -1), 6)),
    # shuffling, caching
    "LocallyShuffleData": Flow(lambda _: D.LocallyShuffleData(_lst(12), 4, num_reuse=2, seed=2)),
    "CacheData": Flow(lambda _: D.CacheData(_lst(7).map(double), shuffle=True, seed=6)),
    # several upstreams
    "ConcatData": Flow(lambda _: D.ConcatData([_lst(3), _lst(4, seed=8)])),
    "JoinData": Flow(lambda _: D.JoinData([_lst(5, shuffle=False), _lst(5, seed=8)])),
    "RandomChooseData": Flow(lambda _: D.TakeData(D.RandomChooseData([_lst(4), _lst(5, seed=8)], seed=5), 8)),
    "RandomMixData": Flow(lambda _: D.RandomMixData([_lst(3), _lst(5, seed=8)], seed=5)),
    "WeightedMixData": Flow(lambda _: D.mix([_lst(3), _lst(5, seed=8)], [2, 1], seed=5, stop="all")),
    "InterleaveData": Flow(lambda _: D.InterleaveData(_lst(6), _three, cycle_length=2, block_length=2)),
    # data-parallel sharding
    "ShardData": Flow(lambda _: D.ShardData(_lst(11), 3, 1, pad=True)),
    # parallel: 2 workers each (the CI machine has 2 cores)
    "MultiProcessMapDataZMQ": Flow(lambda _: D.MultiProcessMapDataZMQ(
        _lst(10), 2, drop_some, strict=True, ordered=True, timeout=60), workers=True),
    "MultiProcessMapData": Flow(lambda _: D.MultiProcessMapData(
        _lst(10), 2, double, ordered=True, timeout=60), workers=True),  # tensorpack's default: not strict
    "MultiProcessMapAndBatchDataZMQ": Flow(lambda _: D.MultiProcessMapAndBatchDataZMQ(
        _lst(10), 2, drop_some, 3, strict=True, ordered=True, remainder=True, timeout=60), workers=True),
    "MultiProcessMapAndBatchData": Flow(lambda _: D.MultiProcessMapAndBatchData(
        _lst(10), 2, double, 3, strict=True, ordered=True, remainder=True, timeout=60), workers=True),
    "MultiThreadMapData": Flow(lambda _: D.MultiThreadMapData(
        _lst(10), 2, drop_some, strict=True, ordered=True, timeout=60), workers=True),
    "ThreadPrefetchData": Flow(lambda _: D.ThreadPrefetchData(D.LocallyShuffleData(_lst(10), 3, seed=1), 2,
                                                              timeout=60), workers=True),
    "MultiProcessRunnerZMQ": Flow(lambda _: D.MultiProcessRunnerZMQ(_runner_flow(), num_proc=2, timeout=60),
                                  "per_worker", workers=True),
    "PrefetchDataZMQ": Flow(lambda _: D.PrefetchDataZMQ(_runner_flow(), num_proc=2), "per_worker",
                            workers=True),
    "MultiProcessRunner": Flow(lambda _: D.MultiProcessRunner(_runner_flow(), 4, 2, timeout=60),
                               "per_worker", workers=True),
    "MultiProcessPrefetchData": Flow(lambda _: D.MultiProcessPrefetchData(_runner_flow(), 4, 2),
                                     "per_worker", workers=True),
    "PrefetchData": Flow(lambda _: D.PrefetchData(_runner_flow(), 4, 2), "per_worker", workers=True),
    "MultiThreadRunner": Flow(lambda _: D.MultiThreadRunner(_thread_flow, 4, 2, timeout=60),
                              "per_worker", workers=True),
    "MultiThreadPrefetchData": Flow(lambda _: D.MultiThreadPrefetchData(_thread_flow, 4, 2),
                                    "per_worker", workers=True),
    "RemoteDataZMQ": Flow(lambda t: D.RemoteDataZMQ(f"ipc://{t}/remote.sock", timeout=5), "refuses",
                          refusal="sender", take=0),  # no sender: nothing to take
    # file formats
    "LMDBData": Flow(_lmdb),
    "LMDBDataDecoder": Flow(lambda t: D.LMDBDataDecoder(_lmdb(t), lambda k, v: [k, len(v)])),
    "HDF5Data": Flow(lambda t: D.HDF5Data(str(t / "d.h5"), ["a", "b"], shuffle=True, seed=2)),
    "TFRecordData": Flow(lambda t: D.TFRecordData(str(t / "d.tfrecord"), shuffle=True, seed=2)),
    "ParquetData": Flow(lambda t: D.ParquetData(str(t / "d.parquet"), shuffle=True, seed=2)),
    "SVMLightData": Flow(lambda t: D.SVMLightData(str(t / "d.svm"), shuffle=True, seed=2)),
    "DataFromHF": Flow(lambda _: D.DataFromHF(_hf_rows(8), shuffle=True, seed=2)),
    "DataFromHFIterable": Flow(lambda _: D.from_hf(_hf_rows(8).to_iterable_dataset(num_shards=3))),
    "WebDatasetData": Flow(lambda t: D.WebDatasetData(str(t / "wds-*.tar"), shuffle=True, seed=2)),
    # tools
    "PrintData": Flow(lambda _: D.PrintData(_lst(6), num=2, file=io.StringIO())),
    "TestDataSpeed": Flow(lambda _: D.TestDataSpeed(_lst(6), size=3, progress=False)),
}
