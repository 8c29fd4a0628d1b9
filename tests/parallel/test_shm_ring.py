"""dataflow/parallel/_shm.py (with the framing of _messages.py): the shared-memory ring,
in one process. A :class:`RingWriter` and a :class:`RingReader` share a ring; messages are
encoded with ``_messages.send(..., ring=writer)`` on an inproc PUSH socket and decoded with
``_messages.decode(frames, reader)`` from the PULL end, exactly as between a worker and the
consumer."""

from __future__ import annotations

import gc
import hashlib
import mmap
import os
import pickle
import weakref
from typing import Any

import numpy as np
import pytest
import zmq

from dataflow.parallel import _messages as tr
from dataflow.parallel import _shm
from dataflow.parallel._shm import RingReader, RingWriter
from tests._leaks import our_shm, ring_mappings
from tests.parallel._util import leaves

pytestmark = pytest.mark.timeout(60)

KiB = 1024
MiB = 1024 * KiB
DTYPES = [np.uint8, np.int16, np.float32, np.float64, np.complex64, np.bool_]


# --- helpers -------------------------------------------------------------------------------


def digest(arr: np.ndarray) -> tuple[str, tuple[int, ...], str]:
    """What identifies an array's logical content: dtype, shape, bytes in C order."""
    return arr.dtype.str, arr.shape, hashlib.sha1(arr.tobytes()).hexdigest()


def root(arr: np.ndarray) -> np.ndarray:
    """The last ndarray in ``arr``'s chain of bases."""
    while isinstance(arr.base, np.ndarray):
        arr = arr.base
    return arr


def views_shm(arr: np.ndarray) -> bool:
    base = root(arr).base
    return isinstance(base, mmap.mmap) or (isinstance(base, memoryview) and isinstance(base.obj, mmap.mmap))


def owns_memory(arr: np.ndarray) -> bool:
    r = root(arr)
    return r.base is None and r.flags.owndata


def random_array(rng: np.random.Generator, large: bool) -> np.ndarray:
    """A random array of a random dtype, shape and memory layout: C, Fortran, a transpose,
    a strided slice, a reversed view; ``large`` ones have 16 KiB to 600 KiB (so they travel
    out of band, through the ring), small ones less than 16 KiB."""
    dtype = np.dtype(DTYPES[rng.integers(len(DTYPES))])
    nbytes = int(rng.integers(16 * KiB, 600 * KiB)) if large else int(rng.integers(1, 8 * KiB))
    ndim = int(rng.integers(1, 4))
    n = max(1, nbytes // dtype.itemsize)
    shape = [int(rng.integers(1, 9)) for _ in range(ndim - 1)]
    shape.append(max(1, n // int(np.prod(shape))))
    layout = rng.choice(["C", "C", "F", "T", "step", "rev"])
    if layout == "step":
        shape[-1] *= 2
    size = int(np.prod(shape))
    if dtype == np.bool_:
        a = rng.integers(0, 2, size, dtype=np.uint8).astype(bool)
    else:
        a = rng.integers(0, 256, size * dtype.itemsize, dtype=np.uint8).view(dtype)
    a = a.reshape(shape)
    if layout == "F":
        a = np.asfortranarray(a)
    elif layout == "T":
        a = a.T
    elif layout == "step":
        a = a[..., ::2]
    elif layout == "rev":
        a = a[::-1]
    return a


def random_message(rng: np.random.Generator, i: int) -> Any:
    """Message ``i``: a lone array, a list of arrays, or a nested dict/list/tuple mixing large,
    small, zero-size and 0-d arrays."""
    kind = i % 4
    if kind == 0:
        return random_array(rng, large=True)
    if kind == 1:
        return [i, random_array(rng, large=True), random_array(rng, large=False)]
    if kind == 2:
        return {
            "img": random_array(rng, large=True),
            "pair": (random_array(rng, large=bool(rng.integers(2))), np.zeros((0, 5), np.float32)),
            "deep": [[np.array(i, dtype=np.int16)], {"x": np.empty((3, 0, 2), np.complex64)}],
        }
    return (random_array(rng, large=False), np.array(True), [random_array(rng, large=True)])


class Channel:
    """A ring and an inproc PUSH/PULL pair: ``send`` as a worker does, ``recv`` as the
    consumer does; ``last_descriptors`` tells where each out-of-band buffer went (a
    descriptor for the ring, ``None`` for a ZMQ frame)."""

    def __init__(
        self, ctx: zmq.Context, total_bytes: int, copy: bool = False, name: str = "inproc://ring"
    ) -> None:
        reader = RingReader.create("RingTest", 1, total_bytes, copy=copy)
        assert reader is not None
        self.reader = reader
        self.writer = RingWriter(reader.paths[0], 0)
        self.push = ctx.socket(zmq.PUSH)
        self.pull = ctx.socket(zmq.PULL)
        self.push.bind(name)
        self.pull.connect(name)
        self.last_descriptors: list[Any] = []

    def send(self, obj: Any) -> None:
        tr.send(self.push, tr.DATA, obj, ring=self.writer)

    def recv(self) -> Any:
        frames = self.pull.recv_multipart(copy=False)
        self.last_descriptors = pickle.loads(frames[2].bytes) if len(frames) > 2 and frames[2].bytes else []
        _, kind, obj = tr.decode(frames, self.reader)
        assert kind == tr.DATA
        return obj

    def roundtrip(self, obj: Any) -> Any:
        self.send(obj)
        return self.recv()

    def live(self) -> int:
        """Slots the writer still considers in use (after taking back the released ones)."""
        self.writer._reclaim()
        return len(self.writer._live)

    def busy_slots(self) -> int:
        return int(np.count_nonzero(self.reader._tables[0]))

    def close(self) -> None:
        self.push.close(linger=0)
        self.pull.close(linger=0)
        self.writer.close()
        self.reader.close()


# --- integrity -----------------------------------------------------------------------------


@pytest.mark.slow  # a soak: the ring cycles many times over
def test_1000_messages_arrive_intact_while_held_arrays_survive_ring_cycling(channel: Any) -> None:
    ch = channel(24 * MiB)
    rng = np.random.default_rng(0)
    held: list[tuple[int, list[np.ndarray], list[Any]]] = []  # (release at, arrays, digests)
    ring_bytes = frame_buffers = verified_held = 0
    n = 1000
    for i in range(n):
        msg = random_message(rng, i)
        expected = [digest(a) for a in leaves(msg)]
        got = ch.roundtrip(msg)
        assert type(got) is type(msg)
        del msg  # the consumer's arrays must not depend on the sender's objects
        arrays = list(leaves(got))
        assert [digest(a) for a in arrays] == expected, f"message {i} corrupted"
        ring_bytes += sum(d[3] for d in ch.last_descriptors if d is not None)
        frame_buffers += sum(d is None for d in ch.last_descriptors)
        if rng.random() < 0.2 or i >= n - 15:  # hold some for a while, the last ones to the end
            held.append((i + int(rng.integers(1, 30)), arrays, expected))
        for entry in [h for h in held if h[0] <= i and h[0] < n]:  # due: verify, then release
            assert [digest(a) for a in entry[1]] == entry[2], f"held message overwritten by {i}"
            held.remove(entry)
            verified_held += 1
            del entry
        del got, arrays
    for _, arrays, expected in held:  # still held at the end: intact
        assert [digest(a) for a in arrays] == expected
    assert verified_held > 100
    # the ring was really used, and cycled several times, while arrays were held
    assert ring_bytes > 4 * ch.writer._cap, (ring_bytes, ch.writer._cap)
    assert frame_buffers < n // 10  # holding a few arrays for a while fits: nearly no fallback
    del held, arrays
    gc.collect()
    assert ch.live() == 0 and ch.busy_slots() == 0


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.arange(40_000, dtype=np.float64).reshape(200, 200)[::3, 1::2],  # strided
        lambda: np.arange(40_000, dtype=np.int16).reshape(200, 200).T,  # transpose
        lambda: np.asfortranarray(np.arange(60_000, dtype=np.float32).reshape(300, 200)),
        lambda: np.arange(30_000, dtype=np.complex64)[::-1],
        lambda: np.arange(100_000) % 3 == 0,  # bool
        lambda: np.zeros((0, 100_000), np.uint8),  # zero-size
        lambda: np.array(3.5),  # 0-d
        lambda: np.zeros((100_000, 0), np.float64),
    ],
    ids=["strided", "transpose", "fortran", "reversed", "bool", "zero-size", "0-d", "zero-size-2"],
)
def test_layouts_round_trip_exactly(channel: Any, make: Any) -> None:
    ch = channel(4 * MiB)
    a = make()
    got = ch.roundtrip({"a": a, "nested": [(a, a)]})
    for g in leaves(got):
        assert digest(g) == digest(a)
        assert np.array_equal(g, a)
        assert g.flags.writeable
    if a.flags.f_contiguous and not a.flags.c_contiguous:
        assert got["a"].flags.f_contiguous  # Fortran order is kept, not just the values


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.arange(10, dtype=np.float32),
        lambda: np.arange(12, dtype=">i4").reshape(3, 4),  # big-endian
        lambda: np.zeros(3, dtype=[("a", "<i4"), ("b", "f8", (2,))]),  # structured
        lambda: np.arange(12).reshape(3, 4).T,  # not C-contiguous: numpy's own reduce
        lambda: np.asfortranarray(np.ones((3, 4), np.int16)),
        lambda: np.zeros((0, 10), np.float64),
        lambda: np.array(2.5),
        lambda: np.array(["ab", "c"]),
        lambda: np.array([1, "x", None], dtype=object),
        lambda: np.zeros(4, dtype="V0"),  # zero itemsize: numpy's own reduce
    ],
    ids=["f32", "big-endian", "structured", "transpose", "fortran", "empty", "0-d", "str", "object", "V0"],
)
def test_small_arrays_in_band_round_trip_like_numpys_pickle(channel: Any, make: Any) -> None:
    """Small arrays are pickled in band by the messages' own reducer: what arrives is what
    ``pickle.loads(pickle.dumps(...))`` gives (type, dtype, shape, order, values, writability,
    identity of an array sent twice)."""
    ch = channel(4 * MiB)
    a = make()
    frozen = make()
    frozen.flags.writeable = False
    got = ch.roundtrip([a, {"again": a}, frozen])
    want = pickle.loads(pickle.dumps([a, {"again": a}, frozen], protocol=5))
    assert ch.last_descriptors == []
    for g, w in ((got[0], want[0]), (got[1]["again"], want[1]["again"]), (got[2], want[2])):
        assert type(g) is type(w) is np.ndarray
        assert (g.dtype, g.shape, g.strides) == (w.dtype, w.shape, w.strides)
        assert g.tobytes() == w.tobytes() if g.dtype.kind != "O" else g.tolist() == w.tolist()
        assert g.flags.writeable == w.flags.writeable
    assert got[0] is got[1]["again"]
    assert got[0].flags.writeable


def test_received_views_are_writable_views_of_the_ring(channel: Any) -> None:
    ch = channel(4 * MiB)
    a = np.arange(100_000, dtype=np.float32)
    got = ch.roundtrip([a, a * 2])
    assert all(d is not None for d in ch.last_descriptors)
    for g in got:
        assert views_shm(g)
        assert g.flags.writeable
    got[0][:10] = -1  # writing into one view touches nothing else
    assert np.array_equal(got[0][10:], a[10:]) and np.array_equal(got[1], a * 2)


# --- lifetime ------------------------------------------------------------------------------


def test_slots_are_released_when_the_consumer_drops_the_arrays(channel: Any) -> None:
    ch = channel(8 * MiB)
    got = [ch.roundtrip(np.full(50_000, i, np.int32)) for i in range(10)]
    assert ch.live() == 10 and ch.busy_slots() == 10
    del got[:5]
    gc.collect()
    assert ch.live() == 5  # oldest first: the first five are free again
    assert ch.busy_slots() == 5
    # a derived view keeps its slot busy: the array's memory is still in use
    keep = got[-1][::7]
    del got
    gc.collect()
    assert ch.busy_slots() == 1 and ch.live() == 1
    assert np.all(keep == 9)
    del keep
    gc.collect()
    assert ch.live() == 0 and ch.busy_slots() == 0


def test_copy_true_gives_owned_arrays_and_frees_the_slot_at_once(channel: Any) -> None:
    ch = channel(8 * MiB, copy=True)
    got = [ch.roundtrip({"x": np.full((300, 300), i, np.float32)}) for i in range(20)]
    assert ch.live() == 0 and ch.busy_slots() == 0  # all still held, yet every slot is free
    for i, g in enumerate(got):
        x = g["x"]
        assert owns_memory(x) and not views_shm(x)
        assert x.flags.writeable
        assert x.shape == (300, 300) and np.all(x == i)
    # the ring's bytes are reused, the copies are not affected
    more = [ch.roundtrip(np.full(90_000, -1.0)) for _ in range(200)]
    assert all(np.all(g["x"] == i) for i, g in enumerate(got))
    assert all(np.all(m == -1.0) for m in more)


def test_ring_full_of_held_arrays_falls_back_to_zmq_and_everything_survives(channel: Any) -> None:
    ch = channel(1 * MiB)
    held, where = [], []
    for i in range(20):  # 20 x 128 KiB held by the consumer: the ring cannot take them all
        held.append(ch.roundtrip(np.full(128 * KiB, i % 256, np.uint8)))
        where.append(ch.last_descriptors[0] is not None)
    assert where[0] and not all(where)  # first ones in the ring, later ones as ZMQ frames
    assert where.index(False) >= 5
    for i, (arr, in_ring) in enumerate(zip(held, where)):
        assert arr.shape == (128 * KiB,) and np.all(arr == i % 256)
        assert views_shm(arr) == in_ring
        assert arr.flags.writeable
    del held, arr
    gc.collect()
    assert ch.live() == 0
    again = ch.roundtrip(np.full(128 * KiB, 7, np.uint8))
    assert ch.last_descriptors[0] is not None and np.all(again == 7)  # the ring is usable again


def test_array_bigger_than_the_ring_goes_over_zmq(channel: Any) -> None:
    ch = channel(1 * MiB)
    big = np.random.default_rng(1).integers(0, 2**31, 1 * MiB, dtype=np.int32)  # 4 MiB
    small = np.arange(20_000, dtype=np.float64)
    got = ch.roundtrip([big, small])
    assert ch.last_descriptors[0] is None and ch.last_descriptors[1] is not None
    assert digest(got[0]) == digest(big) and digest(got[1]) == digest(small)
    assert not views_shm(got[0]) and views_shm(got[1])
    assert got[0].flags.writeable


def test_one_long_held_array_does_not_stall_the_ring(channel: Any) -> None:
    """Holding a single early array (say, the first batch, kept for logging) must not push
    every later buffer off the ring: the ring has plenty of free space. With first-in
    first-out reuse it does, and each later buffer then costs the writer a 50 ms wait before
    it falls back to ZMQ (20 datapoints/s for one worker)."""
    ch = channel(4 * MiB)
    first = ch.roundtrip(np.full(100 * KiB, 1, np.uint8))
    fallbacks = 0
    for i in range(80):  # 8 MiB through a 4 MiB ring, each array dropped at once
        got = ch.roundtrip(np.full(100 * KiB, i % 200, np.uint8))
        assert np.all(got == i % 200)
        fallbacks += ch.last_descriptors[0] is None
        del got
    assert np.all(first == 1)
    assert fallbacks == 0, f"{fallbacks} of 80 buffers left the ring while one 100 KiB array was held"


# --- lazy reservation ----------------------------------------------------------------------


def allocated(writer: RingWriter) -> int:
    """Bytes of the ring's file that exist in /dev/shm (pages reserved or touched)."""
    return os.fstat(writer._fd).st_blocks * 512


def test_a_new_ring_holds_only_its_table_and_first_reserve(channel: Any) -> None:
    """Starting a runner must not cost (nor hold) its whole shm_bytes: a 64 MiB ring holds
    its table and the first INITIAL_RESERVE bytes until larger buffers need more."""
    ch = channel(64 * MiB)
    assert ch.writer._cap > 60 * MiB
    assert ch.writer.reserved_bytes == _shm.INITIAL_RESERVE
    assert allocated(ch.writer) <= _shm._DATA_START + _shm.INITIAL_RESERVE
    got = ch.roundtrip(np.full(100 * KiB, 3, np.uint8))  # fits in the first reserve
    assert ch.last_descriptors[0] is not None and np.all(got == 3)
    assert ch.writer.reserved_bytes == _shm.INITIAL_RESERVE


def test_the_ring_grows_as_needed_and_never_touches_unreserved_pages(channel: Any) -> None:
    """tmpfs gives a page to whatever touches it, so a page written or read beyond the
    reserved part would show up in the file's allocated size (and, with /dev/shm full, be a
    SIGBUS). Hold growing sets of arrays so the ring must grow, and check after every message
    that the file holds no page beyond what the writer reserved."""
    ch = channel(48 * MiB)
    rng = np.random.default_rng(3)
    held: list[tuple[np.ndarray, tuple[str, tuple[int, ...], str]]] = []
    grown = [ch.writer.reserved_bytes]
    for i in range(120):
        a = rng.integers(0, 256, int(rng.integers(64 * KiB, 3 * MiB)), dtype=np.uint8)
        got = ch.roundtrip(a)
        assert ch.last_descriptors[0] is not None, f"message {i} left the ring"
        held.append((got, digest(a)))
        if len(held) > int(rng.integers(1, 12)):
            held.pop(0)
        d = ch.last_descriptors[0]
        assert d[2] + d[3] <= ch.writer.reserved_bytes  # written inside the reserved part only
        assert allocated(ch.writer) <= _shm._DATA_START + ch.writer.reserved_bytes
        if ch.writer.reserved_bytes != grown[-1]:
            grown.append(ch.writer.reserved_bytes)
        for arr, dig in held:
            assert digest(arr) == dig
    assert len(grown) >= 3, grown  # it grew, in several steps
    assert grown[-1] <= ch.writer._cap
    assert all(b > a for a, b in zip(grown, grown[1:]))


def test_a_reservation_that_fails_sends_over_zmq_with_one_warning(
    channel: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """/dev/shm filling up after the start: the writer cannot reserve more, so buffers that
    do not fit in what it has go over ZMQ (intact), with one warning; the reserved part
    stays in use and nothing beyond it is ever touched."""
    ch = channel(32 * MiB)

    def full(fd: int, offset: int, length: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_shm.os, "posix_fallocate", full)
    big = np.arange(600_000, dtype=np.float32)  # 2.4 MB: beyond the first reserve
    with pytest.warns(RuntimeWarning, match="cannot reserve more shared memory") as rec:
        got = [ch.roundtrip(big) for _ in range(3)]
        where = [d is not None for d in ch.last_descriptors]
    assert len([w for w in rec if issubclass(w.category, RuntimeWarning)]) == 1
    assert where == [False] and all(np.array_equal(g, big) for g in got)
    assert not any(views_shm(g) for g in got)
    assert ch.writer._cap == ch.writer.reserved_bytes == _shm.INITIAL_RESERVE
    small = ch.roundtrip(np.full(200 * KiB, 5, np.uint8))  # still fits: still zero-copy
    assert ch.last_descriptors[0] is not None and views_shm(small) and np.all(small == 5)
    assert allocated(ch.writer) <= _shm._DATA_START + _shm.INITIAL_RESERVE


def test_a_ring_larger_than_the_free_dev_shm_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing is reserved up front any more, so the size is checked against the free
    space: a request /dev/shm cannot hold warns at once instead of failing later."""
    monkeypatch.setattr(_shm, "_warned", set())
    monkeypatch.setattr(_shm, "_free_bytes", lambda: 8 * MiB)
    before = our_shm()
    with pytest.warns(RuntimeWarning, match="only 8 MiB free"):
        assert RingReader.create("RingSmallShm", 2, 16 * MiB) is None
    assert our_shm() - before == set()
    reader = RingReader.create("RingSmallShm", 2, 4 * MiB)  # fits: created
    assert reader is not None
    reader.close()


# --- /dev/shm hygiene ----------------------------------------------------------------------


def test_names_are_unlinked_by_the_writer_and_by_close() -> None:
    before = our_shm()
    reader = RingReader.create("RingTest", 3, 3 * MiB)
    assert reader is not None
    assert len(our_shm() - before) == 3  # created, not yet taken by any worker
    writer = RingWriter(reader.paths[1], 1)
    assert len(our_shm() - before) == 2  # the worker's side unlinks once it has mapped it
    reader.close()  # unlinks the names no worker took
    assert our_shm() - before == set()
    writer.close()


def test_close_while_arrays_are_held_keeps_them_valid_and_leaves_nothing() -> None:
    before = our_shm()
    ctx = zmq.Context()
    ch = Channel(ctx, 2 * MiB, name="inproc://held-across-close")
    got = [ch.roundtrip(np.full(40_000, i, np.float64)) for i in range(5)]
    assert all(views_shm(g) for g in got)
    ch.close()
    ctx.term()
    assert our_shm() - before == set()
    assert all(np.all(g == i) for i, g in enumerate(got))  # mapping lives on with the arrays
    got[0][:] = 9  # and is still writable memory
    assert np.all(got[0] == 9)
    del got
    gc.collect()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_release_skipped_by_ctrl_c_does_not_keep_the_ring_mapped_after_close(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A SIGINT can land as an array's release finalizer starts (it is Python code run by
    the garbage collector): the release is skipped and the finalizer stays registered, with
    its arguments. Those must not keep the ring mapped once the reader is closed."""
    ctx = zmq.Context()
    ch = Channel(ctx, 2 * MiB, name="inproc://skipped-release")
    got = ch.roundtrip(np.full(40_000, 1.0))
    assert views_shm(got)

    def interrupted(self: Any, _: Any = None) -> None:
        raise KeyboardInterrupt  # what a signal at the finalizer's first bytecode does

    monkeypatch.setattr(weakref.finalize, "__call__", interrupted)
    del got  # "Exception ignored in: <finalize ...>": the release did not happen
    monkeypatch.undo()
    mapped = [m for m in ring_mappings() if ch.reader.paths[0].rsplit("/", 1)[1] in m]
    assert mapped, "the ring should be mapped before close()"
    ch.close()
    ctx.term()
    gc.collect()
    assert not [m for m in ring_mappings() if ch.reader.paths[0].rsplit("/", 1)[1] in m]


def test_shm_that_cannot_be_reserved_gives_none_and_one_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_shm, "_warned", set())
    before = our_shm()
    with pytest.warns(RuntimeWarning, match="shm_bytes") as rec:
        assert RingReader.create("RingTooBig", 2, 2**50) is None
        assert RingReader.create("RingTooBig", 2, 2**50) is None  # warned once per stage
    assert len([w for w in rec if issubclass(w.category, RuntimeWarning)]) == 1
    assert "RingTooBig" in str(rec[0].message)
    assert our_shm() - before == set()  # the partial reservation was undone


def test_ring_too_small_for_the_table_is_refused() -> None:
    assert RingReader.create("RingTest", 2, 4096) is None


def test_shm_message_without_rings_is_an_error(channel: Any) -> None:
    ch = channel(2 * MiB)
    ch.send(np.zeros(100_000, np.uint8))
    frames = ch.pull.recv_multipart(copy=False)
    with pytest.raises(RuntimeError, match="without rings"):
        tr.decode(frames, None)
