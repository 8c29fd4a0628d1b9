"""Batches collated straight into the shared-memory ring (dataflow/parallel/_slot_batch.py and
``RingWriter.reserve``): the space handed over without a copy, unsent space released, results
equal to the ordinary collate, and MultiProcessMapAndBatchDataZMQ's workers copying nothing
into the ring after stacking."""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pytest

from dataflow import ComponentError, MultiProcessMapAndBatchDataZMQ
from dataflow.ops._stack import collate
from dataflow.parallel import _shm
from dataflow.parallel._slot_batch import ring_stacker
from tests._leaks import our_shm
from tests.parallel._util import Range
from tests.parallel.test_shm_ring import Channel, views_shm

pytestmark = pytest.mark.timeout(60)

KiB = 1024
MiB = 1024 * KiB


def in_ring(ch: Channel, arr: np.ndarray) -> int | None:
    """The offset of ``arr``'s data in the writer's data area, or ``None`` if outside it."""
    offset = arr.ctypes.data - ch.writer._base
    return offset if 0 <= offset < ch.writer._cap else None


# --- RingWriter.reserve --------------------------------------------------------------------


def test_reserved_space_is_sent_without_a_copy_and_freed_when_dropped(channel: Any) -> None:
    ch = channel(4 * MiB)
    space = ch.writer.reserve(64 * KiB)
    assert space is not None and space.dtype == np.uint8 and space.nbytes == 64 * KiB
    assert space.ctypes.data % 64 == 0
    arr = space.view(np.float32).reshape(128, 128)
    arr[...] = np.arange(128 * 128, dtype=np.float32).reshape(128, 128)
    start = in_ring(ch, arr)
    got = ch.roundtrip([arr, "meta"])
    ((ring, slot, offset, nbytes),) = ch.last_descriptors
    assert (ring, offset, nbytes) == (0, start, 64 * KiB)  # the reserved bytes, not a copy
    assert ch.busy_slots() == 1 and ch.live() == 1
    np.testing.assert_array_equal(got[0], np.arange(128 * 128, dtype=np.float32).reshape(128, 128))
    ch.writer.release_reserved()  # nothing left to release: the sent space stays busy
    assert ch.busy_slots() == 1
    del got
    gc.collect()
    assert ch.busy_slots() == 0 and ch.live() == 0


def test_unsent_or_partly_sent_reservations_are_released(channel: Any) -> None:
    ch = channel(4 * MiB)
    sent, unsent, sliced = (ch.writer.reserve(32 * KiB) for _ in range(3))
    assert sent is not None and unsent is not None and sliced is not None
    sent[:] = 1
    sliced[:] = 2
    got = ch.roundtrip([sent, sliced[: 20 * KiB]])  # a part of a reservation is copied
    descriptors = ch.last_descriptors
    assert descriptors[0][2] == in_ring(ch, sent)
    assert descriptors[1][2] not in (in_ring(ch, sliced), in_ring(ch, unsent))
    assert ch.busy_slots() == 4  # 3 reserved (one of them sent as it is) + 1 copy
    ch.writer.release_reserved()
    del sent, unsent, sliced
    assert ch.busy_slots() == 2  # what the consumer holds
    assert got[0].min() == 1 and got[1].min() == 2 and got[1].nbytes == 20 * KiB
    del got
    gc.collect()
    assert ch.busy_slots() == 0 and ch.live() == 0


def test_reserve_gives_none_when_the_ring_has_no_room(channel: Any) -> None:
    ch = channel(1 * MiB)
    assert ch.writer.reserve(2 * MiB) is None  # bigger than the ring
    held = [ch.writer.reserve(200 * KiB) for _ in range(4)]
    assert all(h is not None for h in held)
    assert ch.writer.reserve(400 * KiB) is None  # after waiting _WAIT_S for room
    ch.writer.release_reserved()
    assert ch.writer.reserve(400 * KiB) is not None
    ch.writer.release_reserved()


# --- ring_stacker: the same batches as collate ----------------------------------------------


def _cases() -> list[tuple[str, list[Any]]]:
    rng = np.random.default_rng(0)
    img = [rng.integers(0, 255, (32, 32, 3), dtype=np.uint8) for _ in range(32)]
    flt = [rng.random((8, 300), dtype=np.float32) for _ in range(8)]
    return [
        ("lists", [[i, im, np.float32(i)] for i, im in enumerate(img)]),
        ("dicts", [{"x": f, "label": i, "name": f"n{i}"} for i, f in enumerate(flt)]),
        ("fortran and strided values", [[np.asfortranarray(f), f[:, ::2]] for f in flt]),
        ("mixed dtypes promote", [[im.astype(np.int8 if i % 2 else np.uint8)] for i, im in enumerate(img)]),
        ("small arrays stay out", [[np.zeros(4, np.float64)] for _ in range(8)]),
        ("zero-size", [[np.zeros((0, 3), np.float32)] for _ in range(8)]),
        ("0-d arrays", [[np.array(float(i))] for i in range(8)]),
        ("objects", [[np.array([object()] * 5000, dtype=object)] for _ in range(2)]),
    ]


@pytest.mark.parametrize("name,holder", _cases(), ids=[c[0] for c in _cases()])
def test_ring_stacker_gives_what_collate_gives(channel: Any, name: str, holder: list[Any]) -> None:
    ch = channel(8 * MiB)
    expected = collate("Stage", holder)
    got = collate("Stage", holder, stack=ring_stacker(ch.writer))
    keys = list(expected) if isinstance(expected, dict) else range(len(expected))
    big = 0
    for k in keys:
        e, g = expected[k], got[k]
        assert type(g) is type(e)
        if isinstance(e, np.ndarray):
            assert g.dtype == e.dtype and g.shape == e.shape and g.flags.c_contiguous
            np.testing.assert_array_equal(g, e)
            large = e.nbytes >= 16 * KiB and e.dtype.kind != "O" and e.dtype == holder[0][k].dtype
            assert (in_ring(ch, g) is not None) == large, k
            big += large
        else:
            assert g == e
    assert big == {"lists": 1, "dicts": 1, "fortran and strided values": 2}.get(name, 0)
    ch.writer.release_reserved()


def test_ring_stacker_raises_the_errors_of_collate(channel: Any) -> None:
    ch = channel(8 * MiB)
    holder = [[np.zeros((64, 64), np.float32)], [np.zeros((64, 65), np.float32)]] * 4
    with pytest.raises(ComponentError) as plain:
        collate("Stage", holder)
    with pytest.raises(ComponentError) as ringed:
        collate("Stage", holder, stack=ring_stacker(ch.writer))
    assert str(ringed.value) == str(plain.value)
    ch.writer.release_reserved()
    assert ch.busy_slots() == 0


# --- MultiProcessMapAndBatchDataZMQ: no copy into the ring --------------------------------


def big_item(dp: list[int]) -> list[Any]:
    i = dp[0]
    return [i, np.full((64, 64, 3), i % 251, np.uint8), np.full(600, i, np.float64)]


def test_map_and_batch_workers_stack_into_the_ring_and_copy_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under fork the workers inherit this patch: a large buffer that reaches the ring by a
    copy (not reserved space) fails the worker's send, which the consumer raises."""
    real = _shm.RingWriter.write

    def write_without_copy(self: _shm.RingWriter, buf: memoryview) -> Any:
        before = dict(self._reserved)
        desc = real(self, buf)
        if desc is not None and desc[2] not in before:
            raise AssertionError(f"a buffer of {buf.nbytes} bytes was copied into the ring")
        return desc

    monkeypatch.setattr(_shm.RingWriter, "write", write_without_copy)
    before = our_shm()
    with MultiProcessMapAndBatchDataZMQ(
        Range(96), 2, big_item, 16, strict=True, ordered=True, start_method="fork", shm_bytes=32 * MiB
    ) as df:
        df.reset_state()
        for _ in range(2):
            batches = list(df)
            assert [int(b[0][0]) for b in batches] == list(range(0, 96, 16))
            for b in batches:
                idx, images, floats = b
                assert images.shape == (16, 64, 64, 3) and floats.shape == (16, 600)
                assert [int(v) for v in images[:, 0, 0, 0]] == [int(i) % 251 for i in idx]
                np.testing.assert_array_equal(floats[:, 0], idx.astype(np.float64))
                assert views_shm(images) and views_shm(floats)
            del batches, b, idx, images, floats
    assert our_shm() == before
