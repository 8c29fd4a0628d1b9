"""dataflow.adapters.jax: prefetch_to_device (on the CPU device here)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

jax = pytest.importorskip("jax")

from dataflow.adapters.jax import prefetch_to_device  # noqa: E402
from tests.helpers import ListFlow  # noqa: E402

from ._util import CountingIterable, FailingFlow, documented_example_tests, final_losses  # noqa: E402


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


def test_reads_size_batches_ahead() -> None:
    source = CountingIterable(_batches(8))
    it = prefetch_to_device(source, size=3)
    first = next(it)
    assert source.pulled == 4  # the one being used plus `size` in flight
    rest = list(it)
    assert [int(b[1][0]) for b in [first, *rest]] == list(range(8))


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


def test_an_error_in_the_source_reaches_the_consumer() -> None:
    df = FailingFlow(good=3, message="broken batch")
    seen = []
    with pytest.raises(RuntimeError, match="broken batch"):
        for (i,) in prefetch_to_device(df, size=1):
            seen.append(int(i))
    assert seen == [0, 1]  # raised up to `size` batches early, never out of order


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_train_jax_example_reduces_the_loss() -> None:
    initial, final = final_losses("train_jax.py")
    assert final < initial


test_documented_example_runs, test_the_page_has_runnable_examples = documented_example_tests(
    "adapters_jax.rst"
)
