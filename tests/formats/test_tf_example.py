"""``tf.train.Example`` records without TensorFlow: encode_example / parse_example round
trips, TFRecordData(decode="example") over files written by TensorFlow (CI has it) and by
our own protobuf module, errors, and the missing-protobuf message."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dataflow import TFRecordData, codec
from dataflow.formats import _tf_example as tfe
from dataflow.formats._tfrecord import frame, write_index

HAS_TF = importlib.util.find_spec("tensorflow") is not None
needs_tf = pytest.mark.skipif(
    not HAS_TF, reason="TensorFlow is not installed; CI installs it for the adapters and runs this test there"
)

FEATURES: dict[str, Any] = {
    "label": 7,
    "ids": np.array([3, -1, 2**40], np.int64),
    "flags": np.array([True, False]),
    "score": 0.25,
    "embedding": np.linspace(-1, 1, 33, dtype=np.float64),
    "image": [b"\xff\xd8jpeg bytes\x00\x00"],  # trailing NULs must survive
    "tokens": ["a", "b\u00e9", ""],
    "empty_ints": np.empty(0, np.int64),
    "empty_bytes": np.empty(0, object),
}


def _expected(features: dict[str, Any]) -> dict[str, np.ndarray]:
    out = {}
    for name, v in features.items():
        if isinstance(v, list) and all(isinstance(x, (bytes, str)) for x in v):
            out[name] = np.empty(len(v), object)
            out[name][:] = [x.encode() if isinstance(x, str) else x for x in v]
        elif isinstance(v, np.ndarray) and v.dtype == object:
            out[name] = v.reshape(-1)
        else:
            arr = np.asarray(v).reshape(-1)
            out[name] = arr.astype(np.float32 if arr.dtype.kind == "f" else np.int64)
    return out


def _assert_parsed(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    assert sorted(got) == sorted(want)
    for name, w in want.items():
        g = got[name]
        assert g.dtype == w.dtype and g.shape == w.shape, (name, g, w)
        assert g.tolist() == w.tolist(), name
        assert g.flags.writeable, name


def test_encode_then_parse_round_trip() -> None:
    _assert_parsed(tfe.parse_example(tfe.encode_example(FEATURES)), _expected(FEATURES))


def test_bad_values_and_records_raise_naming_them() -> None:
    with pytest.raises(TypeError, match="feature 'x' has dtype complex128"):
        tfe.encode_example({"x": np.array([1j])})
    with pytest.raises(TypeError, match="feature 'x' holds dict values"):
        tfe.encode_example({"x": np.array([{}], dtype=object)})
    with pytest.raises(ValueError, match="feature 'x' is an empty list"):
        tfe.encode_example({"x": []})
    with pytest.raises(codec.CodecError, match="not a valid tf.train.Example"):
        tfe.parse_example(b"\xff\xff\xff")


def _write(path: Path, records: list[bytes]) -> Path:
    path.write_bytes(b"".join(frame(r) for r in records))
    return path


def test_tfrecord_data_reads_examples_built_without_tensorflow(tmp_path: Path) -> None:
    rows = [{"i": i, "v": np.full(i + 1, i / 2, np.float32), "s": [b"x" * i]} for i in range(6)]
    path = _write(tmp_path / "ex.tfrecord", [tfe.encode_example(r) for r in rows])
    df = TFRecordData(str(path), decode="example")
    df.reset_state()
    got = list(df)
    assert len(got) == 6
    for row, dp in zip(rows, got):
        _assert_parsed(dp, _expected(row))
    write_index(str(path))  # random access works for Examples too
    shuffled = TFRecordData(str(path), decode="example", shuffle=True, seed=0)
    shuffled.reset_state()
    assert sorted(int(dp["i"][0]) for dp in shuffled) == list(range(6))


def test_a_record_that_is_no_example_names_the_file_and_record(tmp_path: Path) -> None:
    path = _write(tmp_path / "bad.tfrecord", [tfe.encode_example({"a": 1}), b"\xff\xff\xff"])
    df = TFRecordData(str(path), decode="example")
    df.reset_state()
    it = iter(df)
    assert next(it)["a"].tolist() == [1]
    with pytest.raises(
        codec.CodecError, match=r"bad\.tfrecord: record 1 at byte offset \d+ cannot be decoded"
    ):
        next(it)


def test_missing_protobuf_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path / "ex.tfrecord", [b"x"])
    tfe.example_class.cache_clear()
    monkeypatch.setitem(sys.modules, "google.protobuf", None)
    try:
        with pytest.raises(ImportError, match=r'pip install "dataflow-ml\[tfrecord\]"'):
            TFRecordData(str(path), decode="example").reset_state()
    finally:
        monkeypatch.undo()
        tfe.example_class.cache_clear()


@needs_tf
@pytest.mark.framework
def test_examples_written_by_tensorflow_match_its_own_parser(tmp_path: Path) -> None:
    import tensorflow as tf

    def feature(v: Any) -> Any:
        arr = np.asarray(v, dtype=object if isinstance(v, list) and not v else None).reshape(-1)
        if arr.dtype.kind in "SUO":
            values = [x.encode() if isinstance(x, str) else x for x in arr.tolist()]
            return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))
        if arr.dtype.kind == "f":
            return tf.train.Feature(float_list=tf.train.FloatList(value=arr.tolist()))
        return tf.train.Feature(int64_list=tf.train.Int64List(value=arr.astype(np.int64).tolist()))

    rows = [
        {
            "label": i,
            "image": [bytes([i]) * (10 + i) + b"\x00"],
            "box": np.arange(4.0) * i,
            "tags": ["a", "bb"][: i % 3],
        }
        for i in range(5)
    ]
    path = str(tmp_path / "tf.tfrecord")
    with tf.io.TFRecordWriter(path) as w:
        for r in rows:
            ex = tf.train.Example(features=tf.train.Features(feature={k: feature(v) for k, v in r.items()}))
            w.write(ex.SerializeToString())
    spec = {
        "label": tf.io.VarLenFeature(tf.int64),
        "image": tf.io.VarLenFeature(tf.string),
        "box": tf.io.VarLenFeature(tf.float32),
        "tags": tf.io.VarLenFeature(tf.string),
    }
    ours = TFRecordData(path, decode="example")
    ours.reset_state()
    got = list(ours)
    theirs = [tf.io.parse_single_example(r, spec) for r in tf.data.TFRecordDataset(path)]
    assert len(got) == len(theirs) == 5
    for dp, ref in zip(got, theirs):
        for name in ("label", "image", "box"):
            want = ref[name].values.numpy()
            assert dp[name].dtype == (object if want.dtype == object else want.dtype)
            assert dp[name].tolist() == want.tolist(), name
        # an empty bytes list has no kind on the wire: TensorFlow's writer keeps the kind
        assert dp["tags"].tolist() == ref["tags"].values.numpy().tolist()
    for r in rows:  # and our encoder writes what TensorFlow's parser reads
        tags = np.array(r["tags"], dtype=object)  # an empty list needs a dtype to have a kind
        parsed = tf.io.parse_single_example(tfe.encode_example({**r, "tags": tags}), spec)
        assert parsed["label"].values.numpy().tolist() == [r["label"]]
        assert parsed["image"].values.numpy().tolist() == r["image"]
        assert parsed["tags"].values.numpy().tolist() == [t.encode() for t in r["tags"]]
