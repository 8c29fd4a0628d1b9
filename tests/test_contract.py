"""One contract every DataFlow exported by ``dataflow`` passes.

Each exported DataFlow class has an entry in :data:`FACTORIES` that builds a small finite
instance from in-memory data (infinite ones are built finite or wrapped in ``TakeData``).
Every entry is then checked the same way:

- ``reset_state()`` once, then two epochs: both non-empty; equal in order for flows whose
  output order is fixed (``"exact"``), equal as multisets for shuffling flows
  (``"multiset"``), only well-formed for flows whose content is random (``"random"``);
- every datapoint is a list, tuple or dict;
- ``list(df)`` works whether ``len()`` is known or not (the second epoch is taken so);
- ``len()``, when it does not raise ``LengthUnknownError``, equals the number of datapoints
  of each epoch (or bounds it from above, for classes documented to give an upper bound);
- ``close()`` works and the flow is a context manager that returns itself; neither leaves
  anything behind that :func:`tests._leaks.assert_no_leaks` checks (processes, threads,
  descriptors, shared memory, sockets); ``close()`` also works without ``reset_state()``.

A class exported without an entry fails :func:`test_every_exported_dataflow_has_a_factory`.
"""

from __future__ import annotations

import inspect
import io
import queue
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dataflow
from dataflow import DataFlow, LengthUnknownError
from tests._leaks import assert_no_leaks, snapshot

#: Exported DataFlow subclasses that are not checked, each with the reason.
EXCLUDED: dict[str, str] = {
    "DataFlow": "abstract base: has no __iter__ of its own",
    "ProxyDataFlow": "base class: only forwards to its upstream (covered by every transform)",
    "RNGDataFlow": "abstract base: has no __iter__ of its own",
    "RemoteDataZMQ": "needs a live sender per epoch; its epochs, close and errors are covered in "
    "tests/parallel/test_remote.py",
    **{
        name: "needs a Ray cluster (started once per session in tests/ray/conftest.py); its "
        "epochs, reset, close, errors and checkpoints are covered in tests/ray/"
        for name in ("DataFromRay", "RayMapData", "RayRunner")
    },
    **{
        old: f"tensorpack's old name, a subclass of {new} that only warns (covered by {new} and "
        f"tests/migration/test_names.py)"
        for old, new in (
            ("MultiProcessMapAndBatchData", "MultiProcessMapAndBatchDataZMQ"),
            ("MultiProcessPrefetchData", "MultiProcessRunner"),
            ("MultiThreadPrefetchData", "MultiThreadRunner"),
            ("PrefetchData", "MultiProcessRunner"),
            ("PrefetchDataZMQ", "MultiProcessRunnerZMQ"),
        )
    },
}


@dataclass(frozen=True)
class Case:
    build: Callable[[Path], DataFlow]
    order: str = "exact"  # "exact" | "multiset" | "random"
    len_upper_bound: bool = False  # len() is documented as an upper bound
    native_pool: bool = False  # calls OpenCV, which starts its thread pool once per process


def _lst(n: int = 10) -> DataFlow:
    return dataflow.DataFromList([[i, f"s{i}"] for i in range(n)], shuffle=False)


def _queue_source(_: Path) -> DataFlow:
    q: queue.Queue = queue.Queue()
    for _epoch in range(3):  # two epochs for the contract, one spare for the context manager check
        for i in range(5):
            q.put([i])
        q.put("END")
    return dataflow.DataFromQueue(q, end_token="END")


def _text(tmp: Path) -> DataFlow:
    path = tmp / "lines.txt"
    path.write_text("first line\nsecond\n\nlast, without newline", encoding="utf-8")
    return dataflow.TextLineData(str(path))


def _by_shape(_: Path) -> DataFlow:
    items = [[np.zeros(2 + i % 2), i] for i in range(9)]
    return dataflow.BatchDataByShape(dataflow.DataFromList(items, shuffle=False), 2, 0)


def _padded(_: Path) -> DataFlow:
    items = [[np.arange(i % 4 + 1), i] for i in range(9)]
    return dataflow.PaddedBatchData(dataflow.DataFromList(items, shuffle=False), 4, remainder=True)


def _bucketed(_: Path) -> DataFlow:
    items = [[np.arange(i % 5), i] for i in range(11)]
    src = dataflow.DataFromList(items, shuffle=False)
    return dataflow.BucketByLengthData(src, lambda dp: len(dp[0]), [2], [2, 3])


def _join(_: Path) -> DataFlow:
    return dataflow.JoinData([_lst(5), dataflow.DataFromIterable([[-i] for i in range(6)])])


def _saved(tmp: Path, save: Callable[..., None], name: str, *args: Any) -> str:
    path = str(tmp / f"{len(list(tmp.iterdir()))}-{name}")  # a factory may be built twice per test
    save(dataflow.DataFromList([[i, np.full(3, i, np.int16)] for i in range(6)], shuffle=False), path, *args)
    return path


def _lmdb(tmp: Path) -> DataFlow:
    return dataflow.LMDBData(_saved(tmp, dataflow.LMDBSerializer.save, "c.lmdb"), shuffle=False)


def _lmdb_decoder(tmp: Path) -> DataFlow:
    return dataflow.LMDBDataDecoder(_lmdb(tmp), lambda k, v: [k, len(v)])


def _hdf5(tmp: Path) -> DataFlow:
    path = _saved(tmp, dataflow.HDF5Serializer.save, "c.h5", ["a", "b"])
    return dataflow.HDF5Data(path, ["a", "b"], shuffle=True)


def _tfrecord(tmp: Path) -> DataFlow:
    return dataflow.TFRecordData(_saved(tmp, dataflow.TFRecordSerializer.save, "c.tfrecord"))


def _parquet(tmp: Path) -> DataFlow:
    path = str(tmp / f"{len(list(tmp.iterdir()))}-c.parquet")
    rows = [{"i": i, "v": np.full(3, i, np.int16)} for i in range(6)]
    dataflow.ParquetSerializer.save(dataflow.DataFromList(rows, shuffle=False), path, rows_per_group=4)
    return dataflow.ParquetData(path)
def _webdataset(tmp: Path) -> DataFlow:
    folder = tmp / f"{len(list(tmp.iterdir()))}-wds"  # a factory may be built twice per test
    folder.mkdir()
    items = [{"__key__": f"k{i}", "cls": i, "npy": np.full(3, i, np.int16)} for i in range(7)]
    dataflow.WebDatasetSerializer.save(
        dataflow.DataFromList(items, shuffle=False), str(folder / "s-%02d.tar"), maxcount=3, progress=False
    )
    return dataflow.WebDatasetData(str(folder / "s-*.tar"), shuffle=True, seed=0)


def _svmlight(tmp: Path) -> DataFlow:
    path = tmp / "c.svm"
    path.write_text("".join(f"{i} 1:{i} 3:{i * 2}\n" for i in range(10)))
    return dataflow.SVMLightData(str(path), shuffle=False)


def _hf_rows(n: int) -> Any:
    import datasets

    ds = datasets.Dataset.from_dict({"i": np.arange(n), "x": np.ones((n, 3), np.float32), "s": ["a"] * n})
    ds.with_format("numpy")[:1]  # datasets' formatting starts tqdm's monitor thread once per process
    return ds


def _hf(_: Path) -> DataFlow:
    return dataflow.DataFromHF(_hf_rows(8), shuffle=True, seed=1)


def _hf_stream(_: Path) -> DataFlow:
    return dataflow.from_hf(_hf_rows(8).to_iterable_dataset(num_shards=3))


def _pictures(n: int = 6) -> DataFlow:
    pic = [np.full((6, 7, 3), 1, np.uint8), np.full((6, 7), 2, np.uint8), np.array([[1.0, 2.0]])]
    items = [[p * i for p in pic] for i in range(n)]
    return dataflow.DataFromList(items, shuffle=False)


def _image_files(tmp: Path) -> DataFlow:
    import cv2

    paths = []
    for i in range(5):
        paths.append(str(tmp / f"{len(list(tmp.iterdir()))}-{i}.png"))
        cv2.imwrite(paths[-1], np.full((4 + i, 5, 3), 10 * i, np.uint8))
    return dataflow.ImageFromFile(paths)


def _augs() -> list:
    return [dataflow.imgaug.CenterCrop((4, 5)), dataflow.imgaug.Flip(horiz=True, prob=1.0)]


def _three(dp: list) -> list:
    return [[dp[0], k] for k in range(3)]


def _none_for_odd(dp: list) -> list | None:
    return None if dp[0] % 2 else [dp[0] * 2]


def _double(dp: list) -> list:
    return [dp[0] * 2, dp[1]]


def _six() -> DataFlow:
    return _lst(6)


FACTORIES: dict[str, Case] = {
    # sources
    "DataFromList": Case(lambda _: dataflow.DataFromList([[i, f"s{i}"] for i in range(10)], shuffle=True),
                         order="multiset"),
    "DataFromGenerator": Case(lambda _: dataflow.DataFromGenerator(lambda: ([i, i * i] for i in range(7)))),
    "DataFromIterable": Case(lambda _: dataflow.DataFromIterable([[i] for i in range(6)])),
    "DataFromQueue": Case(_queue_source),
    "FakeData": Case(lambda _: dataflow.FakeData([[2, 3]], size=10), order="random"),
    "DataFromArrays": Case(lambda _: dataflow.DataFromArrays([np.arange(10), np.arange(10) * 2])),
    "TextLineData": Case(_text),
    # per-datapoint transforms
    "MapData": Case(lambda _: dataflow.MapData(_lst(), _none_for_odd), len_upper_bound=True),
    "MapDataComponent": Case(lambda _: dataflow.MapDataComponent(_lst(), str.upper, 1)),
    "FilterData": Case(lambda _: dataflow.FilterData(_lst(), lambda dp: dp[0] % 3 == 0),
                       len_upper_bound=True),
    "SelectComponent": Case(lambda _: dataflow.SelectComponent(_lst(), [1, 0, 1])),
    # images
    "ImageFromFile": Case(_image_files, native_pool=True),
    "AugmentImageComponent": Case(lambda _: dataflow.AugmentImageComponent(_pictures(), _augs()),
                                  native_pool=True),
    "AugmentImageComponents": Case(
        lambda _: dataflow.AugmentImageComponents(_pictures(), _augs(), (0, 1), (2,)), native_pool=True
    ),
    "AugmentImageCoordinates": Case(lambda _: dataflow.AugmentImageCoordinates(_pictures(), _augs(), 0, 2),
                                    native_pool=True),
    # batching
    "BatchData": Case(lambda _: dataflow.BatchData(_lst(), 3)),
    "BatchDataByShape": Case(_by_shape, len_upper_bound=True),
    "PaddedBatchData": Case(_padded),
    "BucketByLengthData": Case(_bucketed),
    "PackData": Case(lambda _: dataflow.PackData(dataflow.DataFromList(
        [{"tokens": np.arange(n) + 1} for n in (3, 7, 2, 9, 5, 1)], shuffle=False), 8, method="best_fit",
        num_bins=2)),
    # epoch size
    "FixedSizeData": Case(lambda _: dataflow.FixedSizeData(_lst(5), 7, keep_state=False)),
    "RepeatedData": Case(lambda _: dataflow.RepeatedData(_lst(4), 3)),
    "RepeatedDataPoint": Case(lambda _: dataflow.RepeatedDataPoint(_lst(4), 2)),
    "TakeData": Case(lambda _: dataflow.TakeData(dataflow.RepeatedData(_lst(4), -1), 9)),
    # shuffling, caching
    "LocallyShuffleData": Case(lambda _: dataflow.LocallyShuffleData(_lst(20), 5, num_reuse=2),
                               order="multiset"),
    "CacheData": Case(lambda _: dataflow.CacheData(_lst(), shuffle=True), order="multiset"),
    # several upstreams
    "ConcatData": Case(lambda _: dataflow.ConcatData([_lst(3), _lst(4)])),
    "JoinData": Case(_join),
    "RandomChooseData": Case(lambda _: dataflow.RandomChooseData([_lst(5), _lst(8)]), order="random"),
    "RandomMixData": Case(lambda _: dataflow.RandomMixData([_lst(5), _lst(8)]), order="multiset"),
    "WeightedMixData": Case(lambda _: dataflow.mix([_lst(5), _lst(8)], [1, 2], stop="all"), order="multiset"),
    "InterleaveData": Case(lambda _: dataflow.InterleaveData(_lst(5), _three, cycle_length=2)),
    # data-parallel sharding
    "ShardData": Case(lambda _: dataflow.ShardData(_lst(9), 2, 1)),
    # parallel (num_proc/num_thread kept small: the CI machine has 2 cores)
    "MultiProcessRunnerZMQ": Case(lambda _: dataflow.MultiProcessRunnerZMQ(_lst(6), num_proc=1, timeout=30),
                                  order="multiset"),
    "MultiProcessRunner": Case(lambda _: dataflow.MultiProcessRunner(_lst(6), 4, 1, timeout=30),
                               order="multiset"),
    "MultiProcessMapDataZMQ": Case(lambda _: dataflow.MultiProcessMapDataZMQ(
        _lst(8), 2, _double, strict=True, timeout=30), order="multiset"),
    # the tensorpack default: not strict (the upstream repeats; an epoch is len(ds) results)
    "MultiProcessMapData": Case(lambda _: dataflow.MultiProcessMapData(_lst(8), 2, _double, timeout=30),
                                order="random"),
    "MultiProcessMapAndBatchDataZMQ": Case(lambda _: dataflow.MultiProcessMapAndBatchDataZMQ(
        _lst(9), 2, _double, 3, strict=True, timeout=30), order="multiset"),
    "MultiThreadMapData": Case(lambda _: dataflow.MultiThreadMapData(
        _lst(8), 2, _double, strict=True, ordered=True, timeout=30)),
    "MultiThreadRunner": Case(lambda _: dataflow.MultiThreadRunner(_six, 4, 1, timeout=30), order="multiset"),
    "ThreadPrefetchData": Case(lambda _: dataflow.ThreadPrefetchData(_lst(6), 2, timeout=30)),
    # tools
    "LMDBData": Case(_lmdb),
    "LMDBDataDecoder": Case(_lmdb_decoder),
    "HDF5Data": Case(_hdf5, order="multiset"),
    "TFRecordData": Case(_tfrecord),
    "ParquetData": Case(_parquet),
    "WebDatasetData": Case(_webdataset, order="multiset"),
    "SVMLightData": Case(_svmlight),
    "DataFromHF": Case(_hf, order="multiset"),
    # datasets permutes the stream's shards from the second epoch on (ds.set_epoch)
    "DataFromHFIterable": Case(_hf_stream, order="multiset"),
    "PrintData": Case(lambda _: dataflow.PrintData(_lst(4), num=2, file=io.StringIO())),
    "TestDataSpeed": Case(lambda _: dataflow.TestDataSpeed(_lst(4), size=3, progress=False)),
}


def _exported_dataflow_classes() -> set[str]:
    """The DataFlow classes of the homes users build flows from: dataflow and dataflow.on_ray."""
    import dataflow.on_ray

    names = set()
    for module in (dataflow, dataflow.on_ray):
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isclass(obj) and issubclass(obj, DataFlow):
                names.add(name)
    return names


def _canon(x: Any) -> Any:
    """A comparable, hashable form of a datapoint (arrays by dtype, shape and values)."""
    if isinstance(x, np.ndarray):
        return ("ndarray", str(x.dtype), x.shape, repr(x.tolist()))
    if isinstance(x, dict):
        return ("dict", tuple((repr(k), _canon(v)) for k, v in x.items()))
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, tuple(_canon(v) for v in x))
    if isinstance(x, np.generic):
        return ("scalar", str(x.dtype), repr(x.item()))
    return ("obj", type(x).__name__, repr(x))


def _length(df: DataFlow) -> int | None:
    try:
        return len(df)
    except LengthUnknownError:
        return None


# --- completeness of the registry ----------------------------------------------------------


def test_every_exported_dataflow_has_a_factory() -> None:
    exported = _exported_dataflow_classes()
    missing = sorted(exported - set(FACTORIES) - set(EXCLUDED))
    assert not missing, f"add a contract factory (tests/test_contract.py FACTORIES) for: {missing}"


def test_every_factory_and_exclusion_names_an_exported_dataflow() -> None:
    exported = _exported_dataflow_classes()
    assert sorted(set(FACTORIES) - exported) == []
    assert sorted(set(EXCLUDED) - exported) == []
    assert not set(FACTORIES) & set(EXCLUDED)


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_factory_builds_that_class_which_closes_without_reset_state(name: str, tmp_path: Path) -> None:
    df = FACTORIES[name].build(tmp_path)
    assert type(df) is getattr(dataflow, name)
    assert FACTORIES[name].order in ("exact", "multiset", "random")
    df.close()


# --- the contract --------------------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_two_epochs(name: str, tmp_path: Path) -> None:
    case = FACTORIES[name]
    df = case.build(tmp_path)
    df.reset_state()
    with df:  # closed here, not when collected: the leak checks of later tests see every socket
        e1 = list(iter(df))
        e2 = list(df)  # list() asks len() first; LengthUnknownError is a TypeError, so it iterates
    assert e1, f"{name}: first epoch is empty"
    assert e2, f"{name}: second epoch is empty"
    for dp in e1 + e2:
        assert isinstance(dp, (list, tuple, dict)), f"{name}: datapoint {dp!r} is not a list/tuple/dict"
    if case.order == "exact":
        assert [_canon(dp) for dp in e1] == [_canon(dp) for dp in e2], f"{name}: epochs differ"
    elif case.order == "multiset":
        assert sorted(map(repr, map(_canon, e1))) == sorted(map(repr, map(_canon, e2))), (
            f"{name}: epochs are not permutations of each other"
        )
    n = _length(df)
    if n is not None:
        for ep in (e1, e2):
            if case.len_upper_bound:
                assert n >= len(ep), f"{name}: len() {n} < {len(ep)} datapoints produced"
            else:
                assert n == len(ep), f"{name}: len() {n} != {len(ep)} datapoints produced"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_close_and_context_manager(name: str, tmp_path: Path) -> None:
    case = FACTORIES[name]
    df = case.build(tmp_path)  # a factory's own helpers (a save's tqdm monitor) are not the flow's
    before = snapshot()
    df.reset_state()
    it = iter(df)
    assert isinstance(next(it), (list, tuple, dict))
    del it
    df.close()
    assert_no_leaks(before, what=f"{name}: close()", os_threads=not case.native_pool)

    df2 = case.build(tmp_path)
    with df2 as entered:
        assert entered is df2
        df2.reset_state()
        assert isinstance(next(iter(df2)), (list, tuple, dict))
    assert_no_leaks(before, what=f"{name}: with-block", os_threads=not case.native_pool)
