"""The safe codec against hostile input (fault-injection suite).

Promise (``dataflow.codec.loads``): decoding never runs code, never crashes, never hangs and
never hands out an internal object. Any input either decodes to a plain datapoint (one that
encodes again to the same value) or raises :class:`~dataflow.codec.CodecError` — never another
exception type. Inputs: random bytes, every truncation of valid payloads, bit flips, hostile
declared lengths and counts, deep nesting and misplaced tuple markers.
"""

from __future__ import annotations

import struct
from typing import Any

import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataflow import codec
from tests.checkpoint._harness import canon

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_PLAIN = (type(None), bool, int, float, complex, str, bytes, list, tuple, dict, np.ndarray, np.generic)


def _check_plain(value: Any) -> int:
    """Every object in ``value`` is a plain datapoint type; returns the nesting depth."""
    todo, deepest = [(value, 0)], 0
    while todo:
        v, depth = todo.pop()
        deepest = max(deepest, depth)
        assert isinstance(v, _PLAIN), f"decoded an internal object {v!r:.80} ({type(v).__name__})"
        if isinstance(v, (list, tuple)):
            todo.extend((x, depth + 1) for x in v)
        elif isinstance(v, dict):
            todo.extend((x, depth + 1) for kv in v.items() for x in kv)
    return deepest


def decodes_safely(data: bytes) -> None:
    """The promise for one input."""
    try:
        value = codec.loads(data)
    except codec.CodecError:
        return
    if _check_plain(value) < 200:  # deeper values exceed the encoder's recursion limit
        again = codec.dumps(value)  # bytes, not values: NaN != NaN
        assert codec.dumps(codec.loads(again)) == again


leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False),
    st.text(max_size=8),
    st.binary(max_size=8),
    st.builds(
        lambda n, k: (np.arange(n) % 3).astype(k), st.integers(0, 6), st.sampled_from(["u1", "i4", "f8", "?"])
    ),
)
datapoints = st.recursive(
    leaves,
    lambda kids: st.one_of(
        st.lists(kids, max_size=4),
        st.lists(kids, max_size=4).map(tuple),
        st.dictionaries(st.text(max_size=4), kids, max_size=3),
    ),
    max_leaves=12,
)


def _raw(body_obj: Any, buffers: tuple[bytes, ...] = ()) -> bytes:
    """A payload with a hand-made msgpack body (markers anywhere) in the codec's framing."""
    return _frame(msgpack.packb(body_obj, use_bin_type=True), buffers)


def _frame(body: bytes, buffers: tuple[bytes, ...] = ()) -> bytes:
    head = codec.dumps(0)[:4]
    lengths = struct.pack(f"<I{len(buffers)}Q", len(buffers), *(len(b) for b in buffers))
    return head + struct.pack("<Q", len(body)) + lengths + body + b"".join(buffers)


MARK = msgpack.ExtType(2, b"")


@FUZZ
@given(st.binary(max_size=200))
def test_random_bytes(data: bytes) -> None:
    decodes_safely(data)
    decodes_safely(codec.dumps(0)[:4] + data)  # past the magic: the framing and body parsers


@FUZZ
@given(datapoints, st.data())
def test_truncations_and_bit_flips_of_valid_payloads(dp: Any, data: st.DataObject) -> None:
    payload = codec.dumps(dp)
    assert canon(codec.loads(payload)) == canon(dp)  # valid data round-trips
    cut = data.draw(st.integers(0, len(payload) - 1), label="cut")
    with pytest.raises(codec.CodecError):
        codec.loads(payload[:cut])  # the framing knows the total length: every cut is caught
    flipped = bytearray(payload)
    for _ in range(data.draw(st.integers(1, 4), label="flips")):
        pos = data.draw(st.integers(0, len(payload) - 1), label="position")
        flipped[pos] ^= 1 << data.draw(st.integers(0, 7), label="bit")
    decodes_safely(bytes(flipped))


@FUZZ
@given(st.integers(0, 2**64 - 1), st.integers(0, 2**32 - 1), st.binary(max_size=32))
def test_hostile_declared_lengths(body_len: int, count: int, rest: bytes) -> None:
    head = codec.dumps(0)[:4]
    decodes_safely(head + struct.pack("<QI", body_len, count) + rest)


@pytest.mark.parametrize(
    "body",
    [[1, MARK], {"k": MARK}, [[1], [2, MARK]], MARK, [MARK, 1, MARK], {"a": [MARK, MARK]}, [MARK, {"x": MARK}]],  # noqa: E501
)
def test_misplaced_tuple_markers_are_refused(body: Any) -> None:
    """A tuple marker anywhere but at the head of a list is malformed data, not a value."""
    with pytest.raises(codec.CodecError, match="tuple marker"):
        codec.loads(_raw(body))


@pytest.mark.parametrize("body", [[MARK], [MARK, [MARK]], [MARK, 1, [MARK, 2]]])
def test_markers_at_the_head_of_lists_are_tuples(body: Any) -> None:
    assert isinstance(codec.loads(_raw(body)), tuple)


@pytest.mark.parametrize("depth", [10, 1_000, 100_000])
def test_deep_nesting(depth: int) -> None:
    """Deep nesting decodes or raises CodecError (msgpack's recursion limit), never crashes."""
    decodes_safely(_frame(b"\x91" * depth + b"\xc0"))  # fixarray(1) x depth, then nil
    decodes_safely(_frame(b"\x91\xd4\x02\x00" * depth + b"\xc0"))  # tuple x depth (markers)


@FUZZ
@given(st.lists(st.integers(-5, 2**40), min_size=0, max_size=4), st.integers(0, 3), st.binary(max_size=64))
def test_hostile_array_headers(shape: list[int], index: int, buffer: bytes) -> None:
    """Array extension headers with wrong shapes, buffer indices and sizes are refused."""
    header = msgpack.packb(["<f4", shape, index], use_bin_type=True)
    decodes_safely(_raw(msgpack.ExtType(1, header), (buffer,)))
