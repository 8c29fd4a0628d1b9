"""dataflow.adapters.jax: prefetch_to_device (on the CPU device here)."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pytest

jax = pytest.importorskip("jax")

from dataflow import DataFromList  # noqa: E402
from dataflow.adapters import _jax_place  # noqa: E402
from dataflow.adapters.jax import prefetch_to_device  # noqa: E402
from dataflow.ops._batch import BatchData  # noqa: E402
from tests.helpers import ListFlow  # noqa: E402

from ._util import (  # noqa: E402
    CountingIterable,
    FailingFlow,
    documented_example_tests,
    final_losses,
    wait_until,
)


def _batches(n: int) -> list[list[Any]]:
    return [[np.full((2, 3), i, dtype=np.float32), np.arange(2, dtype=np.int32) + i] for i in range(n)]


def test_yields_jax_arrays_with_equal_values_in_order() -> None:
    batches = _batches(5)
    out = list(prefetch_to_device(batches))
    assert len(out) == 5
    for (x, y), (x_host, y_host) in zip(out, batches):
        assert isinstance(x, jax.Array) and isinstance(y, jax.Array)
        assert x.dtype == np.float32 and y.dtype == np.int32 and x.shape == (2, 3)
        np.testing.assert_array_equal(np.asarray(x), x_host)
        np.testing.assert_array_equal(np.asarray(y), y_host)


def test_pytrees_strings_and_python_values_pass_through() -> None:
    batch = {"image": np.ones((2, 2), np.uint8), "meta": ("name", b"raw", 3, [np.float64(1.5)])}
    (out,) = prefetch_to_device([batch], size=1)
    assert isinstance(out["image"], jax.Array) and out["image"].dtype == np.uint8
    name, raw, count, (scalar,) = out["meta"]
    assert (name, raw, count) == ("name", b"raw", 3)  # not numeric numpy: left as they are
    assert isinstance(scalar, jax.Array) and float(scalar) == 1.5  # a numpy scalar is transferred
    assert isinstance(out["meta"], tuple) and isinstance(out["meta"][3], list)


def test_reads_size_batches_ahead_and_no_more() -> None:
    source = CountingIterable(_batches(8))
    it = prefetch_to_device(source, size=3)
    first = next(it)
    wait_until(lambda: source.pulled == 4, what="the thread to read ahead")  # in use + `size`
    time.sleep(0.2)  # room for a fifth read, which the bound must refuse
    assert source.pulled == 4
    second = next(it)
    wait_until(lambda: source.pulled == 5, what="one more read once a batch was taken")
    rest = list(it)
    assert [int(b[1][0]) for b in [first, second, *rest]] == list(range(8))


@pytest.mark.parametrize("size", [1, 2, 10])
def test_any_size_keeps_order_and_count(size: int) -> None:
    out = list(prefetch_to_device(iter(_batches(4)), size=size))
    assert [int(b[1][0]) for b in out] == [0, 1, 2, 3]
    assert list(prefetch_to_device([], size=size)) == []


def test_over_a_dataflow_each_call_is_one_epoch() -> None:
    df = ListFlow(_batches(3))
    df.reset_state()
    for _ in range(2):
        assert [int(b[1][0]) for b in prefetch_to_device(df)] == [0, 1, 2]
    assert df.epochs == 2 and df.finished == 2


def test_with_a_sharding_and_with_a_device() -> None:
    device = jax.devices()[0]
    sharding = jax.sharding.SingleDeviceSharding(device)
    out = list(prefetch_to_device(_batches(3), size=2, sharding=sharding))
    assert all(x.sharding == sharding and y.sharding == sharding for x, y in out)
    np.testing.assert_array_equal(np.asarray(out[2][0]), np.full((2, 3), 2, np.float32))
    out = list(prefetch_to_device(_batches(2), sharding=device))
    assert all(x.devices() == {device} for x, _ in out)


def test_checks_size_when_called() -> None:
    """A bad ``size`` is a ValueError at the call, like every other argument check (not at the
    first ``next``, far from the mistake)."""
    for size in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="prefetch_to_device: size"):
            prefetch_to_device(_batches(2), size=size)


def test_checks_size_at_the_latest_when_iterated() -> None:
    for size in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="prefetch_to_device: size"):
            list(prefetch_to_device(_batches(2), size=size))


@pytest.mark.parametrize("size", [1, 4])
def test_an_error_in_the_source_reaches_the_consumer_after_every_batch_before_it(size: int) -> None:
    df = FailingFlow(good=3, message="broken batch")
    seen = []
    with pytest.raises(RuntimeError, match="broken batch") as info:
        for (i,) in prefetch_to_device(df, size=size):
            seen.append(int(i))
    assert type(info.value) is RuntimeError  # the flow's own exception, not a wrapper
    assert seen == [0, 1, 2]
    wait_until(lambda: not _prefetch_threads(), timeout=5, what="the thread to end")


def _prefetch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "dataflow-jax-prefetch"]


def test_breaking_early_stops_the_thread_and_closes_the_source() -> None:
    closed = []

    def endless() -> Any:
        try:
            i = 0
            while True:
                yield [np.full(4, i, np.float32)]
                i += 1
        finally:
            closed.append(True)

    for size in (1, 3):
        it = prefetch_to_device(endless(), size=size)
        assert [int(b[0][0]) for b, _ in zip(it, range(5))] == [0, 1, 2, 3, 4]
        it.close()  # what a `break` out of a for loop does once the iterator is dropped
        assert not _prefetch_threads() and closed == [True] * (1 + (size == 3))
    it = prefetch_to_device(endless())
    del it  # never started: no thread, nothing read
    assert not _prefetch_threads() and len(closed) == 2


def test_an_exception_in_the_consumer_stops_the_thread() -> None:
    def consume() -> None:
        for _ in prefetch_to_device(iter(_batches(50)), size=2):
            raise KeyError("consumer failed")

    with pytest.raises(KeyError):
        consume()
    assert not _prefetch_threads()


def test_arrays_equal_those_of_jax_device_put_for_many_dtypes_and_shapes() -> None:
    """The direct transfer gives what jax.device_put gives: dtype (64-bit types narrowed
    unless x64), shape, sharding, committed flag, values; aligned or not, any shape."""
    rng = np.random.default_rng(0)
    batches = []
    for dtype in (np.float32, np.float64, np.int64, np.uint8, np.bool_, np.int16, np.complex64):
        for shape in ((0,), (3,), (2, 5), (64, 8, 8, 3)):
            x = (rng.random(shape) * 100).astype(dtype)
            batches.append([x, x[..., ::-1] if x.ndim else x, np.ascontiguousarray(x.T)])
    unaligned = np.zeros(4096 + 4, np.uint8)[4:].view(np.float32).reshape(32, 32)
    batches.append([unaligned, unaligned, unaligned])
    out = list(prefetch_to_device(batches, size=3))
    for got, host in zip(out, batches):
        for g, h in zip(got, host):
            ref = jax.device_put(h)
            assert isinstance(g, jax.Array) and g.dtype == ref.dtype and g.shape == ref.shape
            assert g.sharding == ref.sharding and g.committed == ref.committed is False
            np.testing.assert_array_equal(np.asarray(g), np.asarray(ref))


def _unaligned(value: float, n: int = 64 * 1024) -> np.ndarray:
    raw = np.empty(4 * n + 128, np.uint8)
    start = -raw.ctypes.data % 64 + 16  # never 64-byte aligned
    out = raw[start : start + 4 * n].view(np.float32)
    out[:] = value
    return out


def test_arrays_held_by_the_consumer_keep_their_values_while_buffers_are_reused() -> None:
    """On CPU an unaligned array is copied into a pooled aligned buffer that XLA then uses
    as it is: a buffer must not be refilled while a jax.Array still uses it."""
    batches = [[_unaligned(float(i))] for i in range(40)]
    kept = []
    for i, (x,) in enumerate(prefetch_to_device(batches, size=3)):
        assert float(x[0]) == float(x[-1]) == i
        if i % 3 == 0:
            kept.append((i, x))  # the others are dropped: their buffers may be reused
    for i, x in kept:
        assert float(jax.numpy.min(x)) == float(jax.numpy.max(x)) == i


def test_a_batch_flow_is_stacked_straight_into_aligned_memory(monkeypatch: Any) -> None:
    """On CPU, a plain BatchData's large components are stacked into the placer's aligned
    buffers (no copy before the transfer); the batches equal iterating the flow, and those
    the consumer keeps keep their values while the buffers are reused. Placed on the CPU
    device by name, so that a machine whose default backend is a GPU tests the same path."""
    arrived: list[bool] = []  # per large array handed to the placer: 64-byte aligned?
    place = _jax_place.Placer.__call__

    def spy(self: Any, x: Any) -> Any:
        if isinstance(x, np.ndarray) and x.nbytes >= 64 * 1024:
            arrived.append(x.ctypes.data % 64 == 0)
        return place(self, x)

    monkeypatch.setattr(_jax_place.Placer, "__call__", spy)
    rng = np.random.default_rng(0)
    items = [[rng.random((32, 32, 3), dtype=np.float32), i] for i in range(16 * 30)]
    df = BatchData(DataFromList(items, shuffle=False), 16)
    df.reset_state()
    want = list(df)
    kept = []
    cpu = jax.devices("cpu")[0]
    for i, (images, labels) in enumerate(prefetch_to_device(df, size=2, sharding=cpu)):
        np.testing.assert_array_equal(np.asarray(images), want[i][0])
        assert labels.tolist() == want[i][1].tolist()
        if i % 4 == 0:
            kept.append((i, images))
    assert len(arrived) == len(want) == 30 and all(arrived)
    for i, images in kept:
        np.testing.assert_array_equal(np.asarray(images), want[i][0])


def test_only_what_is_placed_is_stacked_into_aligned_memory() -> None:
    place = _jax_place.Placer(None)
    texts = [np.full(64 * 1024, "abc") for _ in range(4)]  # large, but strings: never placed
    out = place.stack("BatchData", 0, texts)
    assert out.shape == (4, 64 * 1024) and out[3, -1] == "abc" and place._buffers._pool == []
    numbers = [np.full(64 * 1024, i, np.float32) for i in range(4)]
    out = place.stack("BatchData", 1, numbers)
    assert out.ctypes.data % 64 == 0 and float(out[3, -1]) == 3.0 and len(place._buffers._pool) == 1


def test_without_jax_internals_or_when_they_differ_jax_device_put_is_used(monkeypatch: Any) -> None:
    """The direct transfer is an optimisation over jax's internals: where they are missing,
    raise, or give something else than jax.device_put, the results are still exact."""
    from dataflow.adapters import _jax_place

    def wrong(aval: Any, sharding: Any, xs: Any, devices: Any, committed: bool, **kw: Any) -> Any:
        return jax.device_put(np.zeros(3, np.float32), devices[0])  # committed, wrong shape

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise TypeError("batched_device_put() got an unexpected keyword argument")

    real = _jax_place._internals()
    assert real is not None  # this jax has them: the fast path is what the other tests check
    batches = _batches(4)
    for internals in (None, (wrong, real[1]), (broken, real[1])):
        monkeypatch.setattr(_jax_place, "_internals", lambda internals=internals: internals)
        assert _jax_place.Placer(None)._fast is None
        out = list(prefetch_to_device(batches, size=2))
        for (x, y), (xh, yh) in zip(out, batches):
            assert x.committed is False and x.shape == (2, 3)
            np.testing.assert_array_equal(np.asarray(x), xh)
            np.testing.assert_array_equal(np.asarray(y), yh)
    monkeypatch.setattr(_jax_place, "_internals", lambda: real)
    assert _jax_place.Placer(None)._fast is not None


def test_a_transfer_error_is_raised_in_order_as_itself(monkeypatch: Any) -> None:
    import dataflow.adapters.jax as jax_adapter

    class FailsOnSeven(jax_adapter.Placer):
        def __call__(self, x: Any) -> Any:
            if np.ndim(x) and x.flat[0] == 7:
                raise MemoryError("device full")
            return super().__call__(x)

    monkeypatch.setattr(jax_adapter, "Placer", FailsOnSeven)
    seen = []
    with pytest.raises(MemoryError, match="device full"):
        for x, _ in prefetch_to_device(_batches(10), size=3):
            seen.append(int(x[0, 0]))
    assert seen == list(range(7))
    wait_until(lambda: not _prefetch_threads(), timeout=5, what="the thread to end")


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_train_jax_example_reduces_the_loss() -> None:
    initial, final = final_losses("train_jax.py")
    assert final < initial


test_documented_examples_run, test_the_page_has_runnable_examples = documented_example_tests(
    "adapters_jax.rst"
)
