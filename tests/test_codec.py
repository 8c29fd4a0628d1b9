"""The codecs (dataflow/codec.py): the safe wire codec (``dumps``/``loads``,
``dumps_frames``/``loads_frames``) and the local one (``dumps_local``/``loads_local``).

Round trips are property tests: values are compared with :func:`assert_same`, which checks
types exactly (tuples stay tuples, numpy scalars stay numpy scalars), floats bit for bit up
to NaN payloads, and arrays by dtype, shape and bytes. Malformed input is fuzzed: decoding
may return something or raise :class:`CodecError`, never any other exception.
"""

from __future__ import annotations

import math
import pickle
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dataflow.codec import (
    CODEC_VERSION,
    CodecError,
    dumps,
    dumps_frames,
    dumps_local,
    loads,
    loads_frames,
    loads_local,
)

pytestmark = pytest.mark.timeout(120)

PROPERTY = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

NUMERIC_DTYPES = [
    np.dtype(name)
    for name in (
        "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
        "float16", "float32", "float64", "complex64", "complex128",
    )
]  # fmt: skip


# --- comparing -------------------------------------------------------------------------------


def _same_float(a: float, b: float) -> bool:
    if math.isnan(a):
        return math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def assert_same(got: Any, want: Any, path: str = "x") -> None:
    """``got`` equals ``want`` with the same types all the way down."""
    assert type(got) is type(want), f"{path}: {type(got).__name__} != {type(want).__name__}"
    if isinstance(want, np.ndarray):
        assert got.dtype == want.dtype and got.shape == want.shape, f"{path}: {got.dtype}{got.shape}"
        assert got.tobytes() == want.tobytes(), f"{path}: array contents differ"
    elif isinstance(want, np.generic):
        assert got.dtype == want.dtype, path
        assert np.asarray(got).tobytes() == np.asarray(want).tobytes(), f"{path}: {got!r} != {want!r}"
    elif isinstance(want, float):
        assert _same_float(got, want), f"{path}: {got!r} != {want!r}"
    elif isinstance(want, complex):
        assert _same_float(got.real, want.real) and _same_float(got.imag, want.imag), f"{path}: {got!r}"
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want), f"{path}: length {len(got)} != {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, f"{path}[{i}]")
    elif isinstance(want, dict):
        assert list(got) == list(want), f"{path}: keys {list(got)} != {list(want)}"
        for k in want:
            assert type(next(x for x in got if x == k)) is type(k)
            assert_same(got[k], want[k], f"{path}[{k!r}]")
    else:
        assert got == want, f"{path}: {got!r} != {want!r}"


def arrays_in(obj: Any) -> list[np.ndarray]:
    if isinstance(obj, np.ndarray):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [a for x in obj for a in arrays_in(x)]
    if isinstance(obj, dict):
        return [a for x in obj.values() for a in arrays_in(x)]
    return []


def assert_writable(obj: Any) -> None:
    for arr in arrays_in(obj):
        assert arr.flags.writeable, f"decoded array {arr.dtype}{arr.shape} is read-only"
        if arr.size:
            arr.reshape(-1)[:1] = arr.reshape(-1)[:1]  # and really writable


# --- strategies ------------------------------------------------------------------------------

ints = st.integers(min_value=-(2**63), max_value=2**64 - 1)
floats = st.floats(allow_nan=True, allow_infinity=True)
scalars = (
    st.none()
    | st.booleans()
    | ints
    | floats
    | st.complex_numbers(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | st.binary(max_size=40)
)


@st.composite
def numpy_arrays(draw: st.DrawFn) -> np.ndarray:
    """An array of any numeric dtype and 0-4 dims (zero-size sides included), often made
    non-contiguous by a stepped slice, a reversal or a transpose."""
    dtype = draw(st.sampled_from(NUMERIC_DTYPES))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5))
    arr = draw(hnp.arrays(dtype, shape))
    view = draw(st.sampled_from(["as is", "step", "reverse", "transpose", "fortran"]))
    if view == "step" and arr.ndim:
        arr = arr[(slice(None, None, 2),) * arr.ndim]
    elif view == "reverse" and arr.ndim:
        arr = arr[..., ::-1]
    elif view == "transpose":
        arr = arr.T
    elif view == "fortran":
        arr = np.asfortranarray(arr)
    return arr


@st.composite
def numpy_scalars(draw: st.DrawFn) -> np.generic:
    dtype = draw(st.sampled_from(NUMERIC_DTYPES))
    return draw(hnp.arrays(dtype, ()))[()]


leaves = scalars | numpy_arrays() | numpy_scalars()
keys = st.text(max_size=10) | ints
values = st.recursive(
    leaves,
    lambda children: (
        st.lists(children, max_size=4)
        | st.lists(children, max_size=4).map(tuple)
        | st.dictionaries(keys, children, max_size=4)
    ),
    max_leaves=12,
)


# --- round trips -----------------------------------------------------------------------------


@PROPERTY
@given(values)
def test_dumps_loads_round_trip(x: Any) -> None:
    data = dumps(x)
    assert isinstance(data, bytes) and data[:4] == b"DFC" + bytes([CODEC_VERSION])
    for buf in (data, bytearray(data), memoryview(data)):
        got = loads(buf)
        assert_same(got, x)
        assert_writable(got)


@PROPERTY
@given(values)
def test_dumps_frames_loads_frames_round_trip(x: Any) -> None:
    frames = dumps_frames(x)
    assert bytes(frames[0][:4]) == b"DFC" + bytes([CODEC_VERSION])
    # as the sender hands them over, as immutable bytes, and as writable buffers
    for copy in (lambda f: f, bytes, bytearray):
        got = loads_frames([copy(f) for f in frames])
        assert_same(got, x)
        assert_writable(got)


@PROPERTY
@given(values)
def test_dumps_local_loads_local_round_trip(x: Any) -> None:
    assert_same(loads_local(dumps_local(x)), x)


@PROPERTY
@given(numpy_arrays())
def test_top_level_arrays_and_tuples(arr: np.ndarray) -> None:
    dp = (arr, [arr, (arr,)], {0: arr, "a": (1, 2)})
    assert_same(loads(dumps(dp)), dp)
    assert_same(loads_frames([bytes(f) for f in dumps_frames(arr)]), arr)


def test_examples_of_every_kind() -> None:
    base = np.arange(60, dtype=np.float64).reshape(3, 4, 5)
    dp = {
        "none": None,
        "bools": (True, False),
        "ints": [0, -1, 2**64 - 1, -(2**63)],
        "floats": [0.5, -0.0, math.inf, -math.inf],
        "complex": 1.5 - 2j,
        "str": "héllo",
        "bytes": b"\x00\xff",
        7: "int key",
        -(2**63): "min int key",
        "arrays": [base[::2, ::-1, 1::2], base.transpose(2, 0, 1), np.zeros((0, 3), np.int8),
                   np.array(3, np.uint16), np.ones((2, 0), np.complex64)],
        "scalars": (np.float16(0.5), np.int64(-3), np.uint64(2**64 - 1), np.bool_(True),
                    np.complex128(1j), np.float64(2.5)),
    }  # fmt: skip
    got = loads(dumps(dp))
    assert_same(got, dp)
    assert math.isnan(loads(dumps(math.nan)))
    assert np.isnan(loads(dumps(np.array([np.nan], np.float32)))[0])


def test_decoded_arrays_are_writable_copies_of_immutable_input() -> None:
    arr = np.arange(10, dtype=np.int32)
    data = dumps([arr])
    got = loads(data)[0]
    got[0] = 99  # no error, and the input bytes did not change
    assert loads(data)[0][0] == 0


def test_arrays_view_writable_input_and_copy_read_only_input_once() -> None:
    dp = [np.arange(6, dtype=np.int16).reshape(2, 3), np.float64(2.5), np.zeros((0, 4), np.uint8)]
    data = bytearray(dumps(dp))
    got = loads(data)
    assert_same(got, dp)
    got[0][0, 0] = 7  # a view of the writable payload: the write shows in it
    assert loads(data)[0][0, 0] == 7
    frozen = loads(memoryview(bytes(data)))  # read-only: the arrays share one writable copy
    assert_writable(frozen)
    assert frozen[0].base is not None and frozen[0][0, 0] == 7


@pytest.mark.parametrize("guess", [False, True])
def test_tuples_decode_whatever_the_decoder_guessed(guess: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The decoder uses the (costly) list hook only while the last datapoint held a tuple;
    a wrong guess either way still gives exact types, canonical tuple markers or not (ext 16
    of length 0 is another valid packing of the marker)."""
    import msgpack

    from dataflow import codec

    canonical = dumps([1, (2, 3)])
    body = canonical[16:]  # no arrays: the layout is 4 + 12 bytes
    other = body.replace(b"\xc7\x00\x02", b"\xc8\x00\x00\x02")
    assert other != body and msgpack.unpackb(other, ext_hook=lambda c, d: (c, d)) == [1, [(2, b""), 2, 3]]
    non_canonical = canonical[:4] + struct.pack("<QI", len(other), 0) + other
    for data, want in [(canonical, [1, (2, 3)]), (non_canonical, [1, (2, 3)]), (dumps([[1], 2]), [[1], 2])]:
        monkeypatch.setattr(codec, "_tuples_last", [guess])
        got = loads(data)
        assert_same(got, want)
        monkeypatch.setattr(codec, "_tuples_last", [guess])
        assert_same(loads_frames([data[:4] + data[16:]]), want)


# --- what is refused -------------------------------------------------------------------------


class Custom:
    pass


@pytest.mark.parametrize(
    ("obj", "name"),
    [
        ({1, 2}, "set"),
        (frozenset([1]), "frozenset"),
        (Custom(), "Custom"),
        ([1, {"a": [Custom()]}], "Custom"),
        (np.array([1, "a"], dtype=object), "object"),
        (np.array([None]), "object"),
        (np.zeros(2, dtype=[("a", "i4"), ("b", "O")]), "object"),
        ((1, [np.array([{}], dtype=object)]), "object"),
        (len, "builtin_function_or_method"),
        (2**64, "int"),
        (-(2**63) - 1, "int"),
    ],
)
def test_unencodable_objects_raise_codec_error_naming_the_type(obj: Any, name: str) -> None:
    with pytest.raises(CodecError, match=name):
        dumps(obj)
    with pytest.raises(CodecError, match=name):
        dumps_frames(obj)


def test_codec_error_is_a_value_error() -> None:
    assert issubclass(CodecError, ValueError)


class _CreatesFile:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.path, "w"))


def test_pickle_payload_is_refused(tmp_path: Path) -> None:
    control = tmp_path / "control"
    pickle.loads(pickle.dumps(_CreatesFile(str(control)))).close()
    assert control.exists()  # the payload is live

    target = tmp_path / "pwned"
    payload = pickle.dumps(_CreatesFile(str(target)))
    header_len = struct.pack("<Q", len(payload)) + struct.pack("<I", 0)
    attempts = [
        payload,
        b"DFC\x01" + payload,
        b"DFC\x01" + header_len + payload,  # a well-formed layout around a pickle body
    ]
    for data in attempts:
        with pytest.raises(CodecError):
            loads(data)
        with pytest.raises(CodecError):
            loads_frames([data])
    assert not target.exists()


SAMPLE = [
    np.arange(12, dtype=np.float32).reshape(3, 4),
    (1, "two", b"3"),
    {"a": np.zeros(3, np.uint8), 4: [None, 2.5]},
]


def test_truncated_input_raises_codec_error() -> None:
    data = dumps(SAMPLE)
    for cut in range(len(data)):
        with pytest.raises(CodecError):
            loads(data[:cut])


def test_truncated_frames_raise_codec_error() -> None:
    head, *arrays = (bytes(f) for f in dumps_frames(SAMPLE))
    for cut in range(len(head)):
        with pytest.raises(CodecError):
            loads_frames([head[:cut], *arrays])
    for i, arr in enumerate(arrays):
        with pytest.raises(CodecError):
            loads_frames([head, *arrays[:i], arr[:-1], *arrays[i + 1 :]])
    with pytest.raises(CodecError):
        loads_frames([head, *arrays[:-1]])  # a frame missing
    with pytest.raises(CodecError):
        loads_frames([])


def test_oversized_input_raises_codec_error() -> None:
    data = dumps(SAMPLE)
    for extra in (b"\x00", b"DFC\x01", data):
        with pytest.raises(CodecError):
            loads(data + extra)
    head, *arrays = (bytes(f) for f in dumps_frames(SAMPLE))
    with pytest.raises(CodecError):
        loads_frames([head + b"\x00", *arrays])
    with pytest.raises(CodecError):
        loads_frames([head, *arrays[:-1], arrays[-1] + b"\x00"])


def test_newer_version_is_refused_saying_which() -> None:
    data = bytearray(dumps(SAMPLE))
    data[3] = CODEC_VERSION + 1
    with pytest.raises(CodecError, match=f"version {CODEC_VERSION + 1}"):
        loads(bytes(data))
    head, *arrays = (bytes(f) for f in dumps_frames(SAMPLE))
    with pytest.raises(CodecError, match="version 255"):
        loads_frames([b"DFC\xff" + head[4:], *arrays])


@pytest.mark.parametrize("data", [b"", b"D", b"DFC", b"XYZ\x01", b"dfc\x01", b"\x80\x04N."])
def test_missing_header_raises_codec_error(data: bytes) -> None:
    with pytest.raises(CodecError):
        loads(data)
    with pytest.raises(CodecError):
        loads_frames([data])


# --- fuzzing ---------------------------------------------------------------------------------


def _decode_or_codec_error(fn: Any, arg: Any) -> None:
    try:
        fn(arg)
    except CodecError:
        pass  # anything else propagates and fails the test


@PROPERTY
@given(st.binary(max_size=300))
def test_fuzz_loads_raises_only_codec_error(data: bytes) -> None:
    _decode_or_codec_error(loads, b"DFC\x01" + data)
    _decode_or_codec_error(loads, data)


@PROPERTY
@given(st.binary(max_size=300), st.lists(st.binary(max_size=64), max_size=3))
def test_fuzz_loads_frames_raises_only_codec_error(data: bytes, more: list[bytes]) -> None:
    _decode_or_codec_error(loads_frames, [b"DFC\x01" + data, *more])
    _decode_or_codec_error(loads_frames, [b"DFC\x01" + data, *(bytearray(m) for m in more)])


@PROPERTY
@given(values, st.data())
def test_fuzz_mutated_encodings_raise_only_codec_error(x: Any, data: st.DataObject) -> None:
    """Valid encodings with bytes flipped, cut out or inserted reach deeper than random bytes."""
    encoded = bytearray(dumps(x))
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(encoded) - 1))
        op = data.draw(st.sampled_from(["flip", "delete", "insert"]))
        byte = data.draw(st.integers(0, 255))
        if op == "flip":
            encoded[pos] = byte
        elif op == "delete":
            del encoded[pos]
        else:
            encoded.insert(pos, byte)
        if not encoded:
            break
    _decode_or_codec_error(loads, bytes(encoded))
    head, *arrays = (bytes(f) for f in dumps_frames(x))
    pos = data.draw(st.integers(0, len(head) - 1))
    mutated = head[:pos] + bytes([data.draw(st.integers(0, 255))]) + head[pos + 1 :]
    _decode_or_codec_error(loads_frames, [mutated, *arrays])


@pytest.mark.parametrize(
    "body",
    [
        # array headers that lie: object dtype, negative/huge shapes, a missing buffer
        ["|O", [2], 0],
        ["<f8", [-1], 0],
        ["<f8", [2**62, 2**62], 0],
        ["<f8", [2**64 - 1], 0],
        ["<f8", [1], 5],
        ["<f8", [1], -1],
        ["not a dtype", [1], 0],
        [[["a", "|O"]], [1], 0],
        "not a list",
    ],
)
def test_lying_array_headers_raise_codec_error(body: Any) -> None:
    import msgpack

    for code in (1, 3):  # array and numpy scalar extension types
        frames = [b"DFC\x01" + msgpack.packb(msgpack.ExtType(code, msgpack.packb(body))), b"\x00" * 8]
        with pytest.raises(CodecError):
            loads_frames(frames)


def test_unknown_extension_type_and_deep_lists_raise_codec_error() -> None:
    import msgpack

    with pytest.raises(CodecError):
        loads_frames([b"DFC\x01" + msgpack.packb(msgpack.ExtType(99, b""))])
    with pytest.raises(CodecError):
        loads_frames([b"DFC\x01" + b"\x91" * 100_000 + b"\xc0"])  # lists nested 100000 deep


# Deeply nested tuples: each level of the tuple extension is one more msgpack.unpackb call
# (tens of KB of C stack each), so these run in a child process: a crash (SIGSEGV) there
# fails the test instead of killing the test run.
_DEEP = r"""
import struct, sys
import msgpack
from dataflow.codec import CodecError, dumps, loads, loads_frames

case, depth = sys.argv[1], int(sys.argv[2])
nested = 0
for _ in range(depth):
    nested = msgpack.ExtType(2, msgpack.packb([nested]))  # ((((0,),),),) on the wire
body = msgpack.packb(nested)
try:
    if case == "loads_frames":
        loads_frames([b"DFC" + body])
    elif case == "loads":
        loads(b"DFC" + struct.pack("<QI", len(body), 0) + body)
    else:  # "dumps": a user datapoint nested that deep
        x = 0
        for _ in range(depth):
            x = (x,)
        loads(dumps(x))
    print("decoded")
except CodecError:
    print("CodecError")
"""


@pytest.mark.parametrize(
    ("case", "depth", "allowed"),
    [
        ("loads_frames", 200, {"CodecError", "decoded"}),  # a 940-byte hostile message
        ("loads", 200, {"CodecError", "decoded"}),
        ("loads_frames", 5000, {"CodecError"}),
        ("dumps", 300, {"CodecError", "decoded"}),
        ("dumps", 3000, {"CodecError"}),
    ],
)
def test_deep_nesting_raises_codec_error_without_crashing(case: str, depth: int, allowed: set[str]) -> None:
    import os
    import subprocess
    import sys

    root = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    proc = subprocess.run(
        [sys.executable, "-c", _DEEP, case, str(depth)], capture_output=True, text=True, env=env, timeout=60
    )
    assert proc.returncode == 0, (
        f"{case} of tuples nested {depth} deep ended with exit {proc.returncode} instead of "
        f"CodecError or a value (negative: killed by that signal); "
        f"stderr tail:\n{proc.stderr[-1500:]}"
    )
    assert proc.stdout.strip() in allowed, proc.stdout


@given(numpy_arrays(), st.integers(0, 2**20))
def test_cached_array_header_is_the_bytes_of_packing_it_whole(arr: np.ndarray, index: int) -> None:
    """The encoder builds an array's header from a per-(dtype, shape) prefix: the bytes must
    be exactly those of packing ``[descr, shape, index]`` at once (the format is unchanged)."""
    from dataflow import codec
    from dataflow._msgpack import Packer

    descr = arr.dtype.descr if arr.dtype.fields else arr.dtype.str
    whole = Packer(use_bin_type=True).pack([descr, arr.shape, index])
    for _ in range(2):  # built, then from the cache
        tail = codec._SMALL_INTS[index] if index < 128 else Packer().pack(index)
        assert codec._array_prefix(arr) + tail == whole
