"""``tf.train.Example`` records without TensorFlow: :func:`parse_example` and :func:`encode_example`.

TensorFlow's ``Example`` is a protocol buffer (``tensorflow/core/example/example.proto`` and
``feature.proto``): a map from feature names to a ``Feature``, which holds one list of
``bytes``, ``float`` (32-bit) or ``int64`` values. This module builds those message types at
run time from their descriptors (``google.protobuf.descriptor_pb2``) in a private descriptor
pool, so it needs the ``protobuf`` package only (``pip install "dataflow-ml[tfrecord]"``),
never TensorFlow, and does not clash with the types TensorFlow registers when it is loaded
too. Parsing is protobuf's own (its C implementation, ``upb``); there is no hand-written
wire parser here.

Read a TFRecord file of Examples with ``TFRecordData(path, decode="example")``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import numpy as np

from .. import codec
from ._common import require

__all__ = ["encode_example", "example_class", "parse_example"]

_STAGE = "tf_example"
_EMPTY = np.empty(0, np.float32)
_EMPTY.flags.writeable = False


@functools.lru_cache(maxsize=1)
def example_class() -> Any:
    """The ``tensorflow.Example`` message class (built once, from its descriptor)."""
    require("google.protobuf", "tfrecord", "TFRecordData(decode='example')")
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(
        name="dataflow/tf_example.proto", package="tensorflow", syntax="proto3"
    )

    def message(name: str, *fields: tuple[str, int, int, int, str]) -> Any:
        msg = fdp.message_type.add(name=name)
        for fname, number, label, ftype, type_name in fields:
            f = msg.field.add(name=fname, number=number, label=label, type=ftype)
            if type_name:
                f.type_name = type_name
        return msg

    rep, opt = F.LABEL_REPEATED, F.LABEL_OPTIONAL
    message("BytesList", ("value", 1, rep, F.TYPE_BYTES, ""))
    message("FloatList", ("value", 1, rep, F.TYPE_FLOAT, "")).field[0].options.packed = True
    message("Int64List", ("value", 1, rep, F.TYPE_INT64, "")).field[0].options.packed = True
    feature = message(
        "Feature",
        ("bytes_list", 1, opt, F.TYPE_MESSAGE, ".tensorflow.BytesList"),
        ("float_list", 2, opt, F.TYPE_MESSAGE, ".tensorflow.FloatList"),
        ("int64_list", 3, opt, F.TYPE_MESSAGE, ".tensorflow.Int64List"),
    )
    feature.oneof_decl.add(name="kind")
    for f in feature.field:
        f.oneof_index = 0
    features = message("Features", ("feature", 1, rep, F.TYPE_MESSAGE, ".tensorflow.Features.FeatureEntry"))
    entry = features.nested_type.add(name="FeatureEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, label=opt, type=F.TYPE_STRING)
    entry.field.add(name="value", number=2, label=opt, type=F.TYPE_MESSAGE, type_name=".tensorflow.Feature")
    message("Example", ("features", 1, opt, F.TYPE_MESSAGE, ".tensorflow.Features"))

    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    desc = pool.FindMessageTypeByName("tensorflow.Example")
    get_class = getattr(message_factory, "GetMessageClass", None)
    if get_class is not None:
        return get_class(desc)
    return message_factory.MessageFactory(pool).GetPrototype(desc)  # protobuf < 4.21


def parse_example(data: bytes) -> dict[str, np.ndarray]:
    """Parse one serialized ``tf.train.Example`` into ``{feature name: 1-D numpy array}``:
    ``int64_list`` -> ``int64``, ``float_list`` -> ``float32``, ``bytes_list`` -> an object
    array of ``bytes`` (as TensorFlow's ``.numpy()`` gives for strings), a feature with no
    list set -> an empty ``float32`` array. Every array is a new, writable one, in the
    order the values were written; feature order follows the record. What
    ``tf.io.parse_single_example`` would give with a ``VarLenFeature`` per feature, without
    a feature spec (no defaults, no fixed shapes: reshape as your data needs).

    Raises :class:`~dataflow.codec.CodecError` if ``data`` is not a valid ``Example``."""
    try:
        ex = _from_string(data)
    except Exception as e:  # protobuf's DecodeError, or a TypeError for a non-bytes record
        raise codec.CodecError(f"{_STAGE}: not a valid tf.train.Example ({type(e).__name__}: {e})") from e
    out: dict[str, np.ndarray] = {}
    fromiter, empty, f32, i64 = np.fromiter, np.empty, np.float32, np.int64
    for name, feat in ex.features.feature.items():
        kind = feat.WhichOneof("kind")
        if kind == "bytes_list":
            values = feat.bytes_list.value
            n = len(values)
            arr = empty(n, dtype=object)
            if n == 1:  # the usual case (an encoded image, a string): no list built
                arr[0] = values[0]
            elif n:
                arr[:] = list(values)
        elif kind == "float_list":  # fromiter with a count: ~8x np.array on protobuf's containers
            values = feat.float_list.value
            arr = fromiter(values, f32, len(values))
        elif kind == "int64_list":
            values = feat.int64_list.value
            arr = fromiter(values, i64, len(values))
        else:
            arr = _EMPTY.copy()
        out[name] = arr
    return out


def _from_string(data: bytes) -> Any:
    global _from_string
    _from_string = example_class().FromString  # the first call builds the class
    return _from_string(data)


def encode_example(features: Mapping[str, Any]) -> bytes:
    """Serialize ``{name: values}`` as a ``tf.train.Example`` (what TensorFlow's
    ``tf.train.Example(...).SerializeToString()`` gives, without TensorFlow). Values are a
    scalar, a list or a numpy array (flattened): integers and booleans become an
    ``int64_list``, floating-point numbers a ``float_list`` (as float32), ``bytes`` and
    ``str`` (UTF-8) a ``bytes_list``. Raises :class:`TypeError` naming the feature for
    anything else, and :class:`ValueError` for an empty list whose kind is unknown (give an
    empty numpy array with a dtype)."""
    if not isinstance(features, Mapping):
        raise TypeError(f"encode_example: features must be a dict, got {type(features).__name__}")
    ex = example_class()()
    fmap = ex.features.feature
    for name, values in features.items():
        if not isinstance(name, str):
            raise TypeError(f"encode_example: feature names must be str, got {name!r}")
        kind, items = _kind(name, values)
        getattr(fmap[name], kind).value.extend(items)
        if not items:
            fmap[name].SetInParent()
            getattr(fmap[name], kind).SetInParent()
    return ex.SerializeToString()  # type: ignore[no-any-return]


def _kind(name: str, values: Any) -> tuple[str, list[Any]]:
    if isinstance(values, (bytes, str)) or np.isscalar(values):
        values = [values]
    if isinstance(values, (list, tuple)) and values and all(isinstance(v, (bytes, str)) for v in values):
        return "bytes_list", [v.encode() if isinstance(v, str) else v for v in values]  # no numpy: keeps NULs
    arr = values if isinstance(values, np.ndarray) else np.asarray(values)
    kind = arr.dtype.kind
    if arr.size == 0 and not isinstance(values, np.ndarray):
        raise ValueError(
            f"encode_example: feature {name!r} is an empty list; give np.empty(0, dtype) to say its kind"
        )
    if kind in "biu":
        return "int64_list", arr.reshape(-1).astype(np.int64).tolist()
    if kind == "f":
        return "float_list", arr.reshape(-1).astype(np.float32).tolist()
    if kind in "SUO":
        items = [v.encode() if isinstance(v, str) else v for v in arr.reshape(-1).tolist()]
        bad = [v for v in items if not isinstance(v, bytes)]
        if not bad:
            return "bytes_list", items
        raise TypeError(
            f"encode_example: feature {name!r} holds {type(bad[0]).__name__} values; give bytes or str"
        )
    raise TypeError(
        f"encode_example: feature {name!r} has dtype {arr.dtype}; give ints, floats, bytes or str"
    )
