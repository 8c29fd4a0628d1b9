"""dataflow.adapters.tf: dataflow_to_dataset / infer_signature, QueueInput / BatchQueueInput,
stage_to_device, StagingIterator, ZMQInput and DummyConstantInput (all on CPU)."""

from __future__ import annotations

import gc
import os
import socket
import threading
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
tf = pytest.importorskip("tensorflow")

from dataflow._errors import WorkerError  # noqa: E402
from dataflow.adapters.tf import (  # noqa: E402
    BatchQueueInput,
    DummyConstantInput,
    QueueInput,
    StagingIterator,
    ZMQInput,
    dataflow_to_dataset,
    infer_signature,
    stage_to_device,
)
from tests.helpers import ListFlow  # noqa: E402

from ._util import (  # noqa: E402
    CountingIterable,
    EndlessFlow,
    FailingFlow,
    documented_example_tests,
    final_losses,
    wait_until,
)


def _items(n: int) -> list[list[Any]]:
    return [[np.full(3, i, dtype=np.float32), np.int32(i)] for i in range(n)]


def _ids(elements: Any, index: int = 1) -> list[int]:
    return [int(e[index]) for e in elements]


# -- dataflow_to_dataset / infer_signature ---------------------------------------------------


def test_dataset_iterations_are_epochs_with_exact_values_and_dtypes() -> None:
    df = ListFlow(_items(5))
    ds = dataflow_to_dataset(df)
    for _ in range(2):
        out = list(ds)
        assert len(out) == 5
        for i, (x, label) in enumerate(out):
            assert x.dtype == tf.float32 and x.shape == (3,) and x.numpy().tolist() == [i] * 3
            assert label.dtype == tf.int32 and label.shape == () and int(label) == i
    # one epoch abandoned or finished by the inference, then one per dataset iteration
    assert df.epochs == 3 and df.resets == 1


def test_dict_datapoints_become_dicts_of_tensors() -> None:
    df = ListFlow([{"image": np.ones((2, 2), np.uint8) * i, "label": i} for i in range(3)])
    ds = dataflow_to_dataset(df)
    assert set(ds.element_spec) == {"image", "label"}
    out = list(ds)
    assert [int(e["label"]) for e in out] == [0, 1, 2]
    assert out[2]["image"].dtype == tf.uint8 and out[2]["image"].numpy().tolist() == [[2, 2], [2, 2]]
    assert out[0]["label"].dtype == tf.int64  # a Python int, as numpy sees it


def test_explicit_signature_is_used_and_nothing_happens_before_iterating() -> None:
    df = ListFlow(_items(4))
    signature = (tf.TensorSpec((3,), tf.float32), tf.TensorSpec((), tf.int32))
    ds = dataflow_to_dataset(df, output_signature=signature)
    assert df.resets == 0 and df.epochs == 0  # no peeking when the signature is given
    assert ds.element_spec == signature
    assert _ids(ds) == [0, 1, 2, 3] and _ids(ds) == [0, 1, 2, 3]
    assert df.resets == 1 and df.epochs == 2


def test_inferred_signature_variable_dims_strings_and_scalars() -> None:
    df = ListFlow(
        [
            [np.zeros((2, 3), np.float32), "a", b"x", 1, 0.5, True, np.array(["p", "q"])],
            [np.zeros((4, 3), np.float32), "bc", b"yz", 2, 1.5, False, np.array(["r"])],
        ]
    )
    sig = infer_signature(df)
    assert [tuple(s.shape.as_list()) for s in sig] == [(None, 3), (), (), (), (), (), (None,)]
    assert [s.dtype for s in sig] == [
        tf.float32, tf.string, tf.string, tf.int64, tf.float64, tf.bool, tf.string,
    ]
    out = list(dataflow_to_dataset(df))
    assert out[1][0].shape == (4, 3)
    assert out[1][1].numpy() == b"bc" and out[1][2].numpy() == b"yz"
    assert out[0][6].numpy().tolist() == [b"p", b"q"]
    assert df.resets == 1  # reset once in this process, inference included


def test_infer_signature_looks_at_num_samples_datapoints() -> None:
    df = ListFlow([[np.zeros(2 if i < 3 else 5)] for i in range(6)])
    assert infer_signature(df, num_samples=3)[0].shape.as_list() == [2]
    assert infer_signature(df, num_samples=4)[0].shape.as_list() == [None]
    assert df.resets == 1


def test_infer_signature_on_an_empty_flow_raises() -> None:
    with pytest.raises(ValueError, match="infer_signature: ListFlow produced no datapoint"):
        infer_signature(ListFlow([]))
    with pytest.raises(ValueError, match="no datapoint"):
        dataflow_to_dataset(ListFlow([]))


def test_infer_signature_rejects_what_has_no_fixed_rank_or_structure() -> None:
    with pytest.raises(TypeError, match="component 0"):
        infer_signature(ListFlow([[np.zeros(2)], [np.zeros((2, 2))]]))
    with pytest.raises(TypeError, match="list/tuple or dict"):
        infer_signature(ListFlow([np.zeros(2)]))


def test_infinite_flow_with_take() -> None:
    df = EndlessFlow()
    ds = dataflow_to_dataset(df)
    assert _ids(ds.take(7), index=0) == list(range(7))
    assert _ids(ds.take(3), index=0) == [0, 1, 2]  # a new iteration is a new epoch
    assert df.resets == 1


def test_an_error_in_the_flow_surfaces_in_the_consumer() -> None:
    ds = dataflow_to_dataset(FailingFlow(good=2, message="corrupt record"), (tf.TensorSpec((), tf.int64),))
    it = iter(ds)
    assert [int(next(it)[0]) for _ in range(2)] == [0, 1]
    with pytest.raises(tf.errors.OpError, match="RuntimeError: corrupt record"):
        next(it)


def test_dataset_composes_with_tf_data_transformations() -> None:
    ds = dataflow_to_dataset(ListFlow(_items(6))).map(lambda x, y: (x * 2, y)).batch(4)
    batches = list(ds)
    assert [b[0].shape for b in batches] == [(4, 3), (2, 3)]
    assert batches[1][0].numpy()[:, 0].tolist() == [8.0, 10.0]


# -- QueueInput / BatchQueueInput ------------------------------------------------------------


def test_queue_input_values_and_wrap_around_epochs() -> None:
    df = ListFlow(_items(5))
    with QueueInput(df, capacity=3) as q:
        out = [q.dequeue() for _ in range(12)]
        assert _ids(out) == [0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1]
        assert out[3][0].dtype == tf.float32 and out[3][0].numpy().tolist() == [3.0] * 3
        assert out[3][1].dtype == tf.int32
        assert df.resets == 1


def test_queue_input_dict_datapoints() -> None:
    df = ListFlow([{"x": np.full(2, i, np.float32), "y": i} for i in range(3)])
    with QueueInput(df) as q:
        out = [q.dequeue() for _ in range(4)]
    assert [int(e["y"]) for e in out] == [0, 1, 2, 0]
    assert out[1]["x"].numpy().tolist() == [1.0, 1.0]


def test_batch_queue_input_dequeues_batches_across_epochs() -> None:
    with BatchQueueInput(ListFlow(_items(5)), batch_size=4, capacity=10) as q:
        batches = [q.dequeue() for _ in range(3)]
    assert [b[1].numpy().tolist() for b in batches] == [[0, 1, 2, 3], [4, 0, 1, 2], [3, 4, 0, 1]]
    assert batches[0][0].shape == (4, 3) and batches[0][0].dtype == tf.float32


def test_batch_queue_input_dict_datapoints() -> None:
    df = ListFlow([{"x": np.full(2, i, np.float32), "y": np.int64(i)} for i in range(4)])
    with BatchQueueInput(df, batch_size=2) as q:
        batch = q.dequeue()
    assert set(batch) == {"x", "y"} and batch["y"].numpy().tolist() == [0, 1]
    assert batch["x"].shape == (2, 2)


def test_batch_queue_input_needs_fully_defined_shapes() -> None:
    before = threading.active_count()
    df = ListFlow([[np.zeros(2 + i % 2, np.float32)] for i in range(4)])
    with pytest.raises(ValueError, match="BatchQueueInput: dequeue_many needs fully defined shapes"):
        BatchQueueInput(df, batch_size=2)
    assert threading.active_count() == before  # the feeding thread it started was joined


@pytest.mark.parametrize("bad", [0, -1, 2.5, "4"])
def test_queue_inputs_check_their_arguments(bad: Any) -> None:
    with pytest.raises(ValueError, match="QueueInput: capacity"):
        QueueInput(ListFlow(_items(2)), capacity=bad)
    with pytest.raises(ValueError, match="BatchQueueInput: batch_size"):
        BatchQueueInput(ListFlow(_items(2)), batch_size=bad)


def test_queue_input_error_in_the_flow_becomes_a_chained_worker_error() -> None:
    signature = (tf.TensorSpec((), tf.int64),)
    q = QueueInput(FailingFlow(good=3, message="decode failed"), output_signature=signature)
    try:
        assert [int(q.dequeue()[0]) for _ in range(3)] == [0, 1, 2]  # what came before the error
        with pytest.raises(WorkerError, match="decode failed") as info:
            q.dequeue()
        assert isinstance(info.value.__cause__, RuntimeError)
        assert str(info.value.__cause__) == "decode failed"
        assert info.value.type_name == "RuntimeError"
        with pytest.raises(WorkerError):  # and again: the consumer never hangs
            q.dequeue()
    finally:
        q.close()


def test_queue_input_empty_epoch_is_an_error() -> None:
    with QueueInput(ListFlow([]), output_signature=(tf.TensorSpec((), tf.int64),)) as q:
        with pytest.raises(WorkerError, match="empty epoch"):
            q.dequeue()


def test_close_joins_the_thread_and_is_idempotent() -> None:
    before = threading.active_count()
    q = QueueInput(ListFlow(_items(3)), capacity=2)
    assert threading.active_count() == before + 1
    assert int(q.dequeue()[1]) == 0
    q.close()
    assert not q._thread.is_alive()
    assert threading.active_count() == before
    q.close()


def test_close_cancels_a_producer_blocked_on_a_full_queue() -> None:
    df = EndlessFlow()
    q = QueueInput(df, capacity=2)
    wait_until(lambda: q.size() == 2 and df.produced >= 3, what="the queue to fill up")
    assert q._thread.is_alive()  # blocked in enqueue: the queue is full
    q.close()
    assert not q._thread.is_alive()
    # what was queued can still be taken, then the closed queue ends instead of blocking
    with pytest.raises(tf.errors.OutOfRangeError):
        for _ in range(3):
            q.dequeue()


# -- device staging --------------------------------------------------------------------------


def test_stage_to_device_cpu() -> None:
    ds = stage_to_device(dataflow_to_dataset(ListFlow(_items(4))), device="/cpu:0", buffer_size=2)
    for _ in range(2):
        out = list(ds)
        assert _ids(out) == [0, 1, 2, 3]
        assert "CPU:0" in out[0][0].device
        assert out[2][0].numpy().tolist() == [2.0] * 3


def test_staging_iterator_values_order_device_and_read_ahead() -> None:
    source = CountingIterable(_items(6))
    staged = StagingIterator(source, device="/cpu:0", depth=2)
    it = iter(staged)
    first = next(it)
    assert source.pulled == 3  # the one being used plus `depth` staged
    out = [first, *it]
    assert _ids(out) == list(range(6))
    assert all(isinstance(x, tf.Tensor) and "CPU:0" in x.device for dp in out for x in dp)
    assert out[4][0].dtype == tf.float32 and out[4][1].dtype == tf.int32
    assert _ids(staged) == list(range(6))  # re-iterable when the iterable is


@pytest.mark.parametrize("depth", [0, -2, 1.5])
def test_staging_iterator_checks_depth(depth: Any) -> None:
    with pytest.raises(ValueError, match="StagingIterator: depth"):
        StagingIterator([], device="/cpu:0", depth=depth)


@pytest.mark.gpu
def test_stage_to_device_and_staging_iterator_on_gpu() -> None:
    if not tf.config.list_physical_devices("GPU"):
        pytest.skip("this TensorFlow build sees no GPU")
    out = list(stage_to_device(dataflow_to_dataset(ListFlow(_items(3))), "/gpu:0"))
    assert _ids(out) == [0, 1, 2] and "GPU:0" in out[0][0].device
    staged = list(StagingIterator(_items(3), device="/gpu:0"))
    assert "GPU:0" in staged[0][0].device and staged[2][0].numpy().tolist() == [2.0] * 3


# -- ZMQInput / DummyConstantInput -----------------------------------------------------------


def _tcp_addr() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{s.getsockname()[1]}"


def _send_in_thread(items: list[Any], addr: str) -> threading.Thread:
    from dataflow.parallel._remote import send_dataflow_zmq

    thread = threading.Thread(
        target=send_dataflow_zmq, args=(ListFlow(items), addr), kwargs={"progress": False}
    )
    thread.start()
    return thread


def test_zmq_input_receives_a_remote_flow_over_tcp() -> None:
    addr = _tcp_addr()
    signature = (tf.TensorSpec((3,), tf.float32), tf.TensorSpec((), tf.int32))
    ds = ZMQInput(addr, signature, timeout=60)
    for _ in range(2):  # each sender's finite epoch is one iteration of the dataset
        sender = _send_in_thread(_items(6), addr)
        out = list(ds)
        sender.join(timeout=60)
        assert _ids(out) == list(range(6))
        assert out[5][0].numpy().tolist() == [5.0] * 3 and out[5][1].dtype == tf.int32


def test_zmq_input_releases_its_address() -> None:
    """Once its dataset is gone, a ZMQInput must not keep the address bound: a second one on
    the same address (say, a new dataset for the next run in a notebook) has to work."""
    import zmq

    addr = _tcp_addr()
    signature = (tf.TensorSpec((3,), tf.float32), tf.TensorSpec((), tf.int32))
    ds = ZMQInput(addr, signature, timeout=60)
    sender = _send_in_thread(_items(2), addr)
    assert _ids(ds) == [0, 1]
    sender.join(timeout=60)
    del ds
    gc.collect()
    ctx = zmq.Context()
    sock = ctx.socket(zmq.PULL)
    try:
        sock.bind(addr)  # "Address already in use" while the old receiver still holds it
    finally:
        sock.close(linger=0)
        ctx.term()


def test_dummy_constant_input_shapes_and_dtypes() -> None:
    ds = DummyConstantInput([[2, 3], [4], []], ["float32", np.int32, np.dtype("uint8")])
    elements = list(ds.take(3))  # endless: take what you need
    assert len(elements) == 3
    for x, y, z in elements:
        assert x.shape == (2, 3) and x.dtype == tf.float32 and not np.any(x.numpy())
        assert y.shape == (4,) and y.dtype == tf.int32 and not np.any(y.numpy())
        assert z.shape == () and z.dtype == tf.uint8
    single = next(iter(DummyConstantInput([[5], [1, 1]], "float16")))
    assert [t.dtype for t in single] == [tf.float16, tf.float16]


def test_dummy_constant_input_accepts_tf_dtypes() -> None:
    """TF users spell dtypes ``tf.float32``: one for all components, or one per component."""
    single = next(iter(DummyConstantInput([[2], [3]], tf.float16)))
    assert [t.dtype for t in single] == [tf.float16, tf.float16]
    mixed = next(iter(DummyConstantInput([[2], [3]], [tf.float32, tf.int64])))
    assert [t.dtype for t in mixed] == [tf.float32, tf.int64]


# -- the example -----------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_train_tf_example_reduces_the_loss() -> None:
    initial, final = final_losses("train_tf.py")
    assert final < initial


test_documented_examples_run, test_the_page_has_runnable_examples = documented_example_tests(
    "adapters_tf.rst"
)
