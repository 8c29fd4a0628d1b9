"""Reading ``tf.train.Example`` records: ``TFRecordData(path, decode="example")`` (protobuf,
no TensorFlow) vs ``tf.data.TFRecordDataset`` + ``tf.io.parse_single_example`` on CPU.

Data: ``--size`` Examples, each ``image`` (``--image-bytes`` random bytes, one value),
``label`` (one int64) and ``box`` (``--floats`` float32 values), in one TFRecord file. Every
contender reads one epoch and hands out each record as a dict of numpy arrays:

- ``dataflow``: ``TFRecordData(path, decode="example")`` (both CRCs checked);
- ``tf.data``: ``TFRecordDataset(path).map(parse_single_example)`` with ``FixedLenFeature``
  specs (TensorFlow's fastest per-record parse) and ``as_numpy_iterator()``;
- ``tf.data, parallel``: the same with ``num_parallel_calls=AUTOTUNE`` (several threads);
- for reference, TensorFlow's fastest idiom, which is not the same job: ``batch(64)`` then
  ``parse_example`` on each batch (one dict of 64-row arrays per batch; counted per record).

Medians of ``--rounds`` rounds, wall clock, interleaved; the CPU column is the process's
CPU time per record (all threads), which TensorFlow spreads over its own threads.

    pip install protobuf tensorflow-cpu
    python benchmarks/tfexample_read.py [--size 20000] [--rounds 7] [--floats 4]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._harness import machine_line, note  # noqa: E402

BATCHED = "tf.data, batch(64) + parse_example (yields batches, not per-record dicts)"


def write_file(path: str, size: int, image_bytes: int, floats: int) -> None:
    from dataflow.formats._tf_example import encode_example
    from dataflow.formats._tfrecord import frame

    rng = np.random.default_rng(0)
    with open(path, "wb") as f:
        for i in range(size):
            ex = {"image": [rng.bytes(image_bytes)], "label": i, "box": rng.random(floats, dtype=np.float32)}
            f.write(frame(encode_example(ex)))


def ours(path: str) -> Callable[[], Iterable]:
    from dataflow import TFRecordData

    df = TFRecordData(path, decode="example")
    df.reset_state()
    return lambda: df


def tf_data(path: str, floats: int, parallel: bool = False, batch: int = 0) -> Callable[[], Iterable]:
    import tensorflow as tf

    spec = {
        "image": tf.io.FixedLenFeature([], tf.string),
        "label": tf.io.FixedLenFeature([], tf.int64),
        "box": tf.io.FixedLenFeature([floats], tf.float32),
    }
    calls = tf.data.AUTOTUNE if parallel else None

    @tf.autograph.experimental.do_not_convert
    def parse(record: Any) -> Any:
        return tf.io.parse_example(record, spec) if batch else tf.io.parse_single_example(record, spec)

    def epoch() -> Iterable:
        ds = tf.data.TFRecordDataset(path)
        ds = ds.batch(batch) if batch else ds
        return ds.map(parse, num_parallel_calls=calls).as_numpy_iterator()

    return epoch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--image-bytes", type=int, default=3072)
    parser.add_argument("--floats", type=int, default=4)
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "examples.tfrecord")
        write_file(path, args.size, args.image_bytes, args.floats)
        contenders: dict[str, Callable[[], Iterable]] = {
            "dataflow TFRecordData(decode='example')": ours(path)
        }
        try:
            contenders["tf.data + parse_single_example"] = tf_data(path, args.floats, parallel=False)
            contenders["tf.data + parse_single_example, AUTOTUNE"] = tf_data(path, args.floats, parallel=True)
            contenders[BATCHED] = tf_data(path, args.floats, batch=64)
        except ImportError:
            note("TensorFlow not installed: pip install tensorflow-cpu to compare")
        rates: dict[str, list[float]] = {name: [] for name in contenders}
        cpu: dict[str, list[float]] = {name: [] for name in contenders}
        for rnd in range(args.rounds + 1):  # round 0 warms up
            for name, epoch in contenders.items():
                c0, t0 = time.process_time(), time.perf_counter()
                n, last = 0, None
                weight = 64 if name == BATCHED else 1
                for last in epoch():  # noqa: B007 - the last record is checked below
                    n += weight
                n = min(n, args.size)  # the last batch may be short
                wall, used = time.perf_counter() - t0, time.process_time() - c0
                assert n == args.size and isinstance(last, dict), name
                if rnd:
                    rates[name].append(n / wall)
                    cpu[name].append(used / n * 1e6)
    ref = statistics.median(rates["dataflow TFRecordData(decode='example')"])
    print(
        f"tfexample_read: {args.size:,} Examples (image {args.image_bytes} bytes, label, box "
        f"{args.floats} floats), {args.rounds} rounds, medians; {machine_line()}\n"
    )
    print("| contender | median records/s | min–max | CPU us/record | dataflow vs this |")
    print("|---|---|---|---|---|")
    for name, r in rates.items():
        med = statistics.median(r)
        print(
            f"| {name} | {med:,.0f} | {min(r):,.0f}–{max(r):,.0f} | {statistics.median(cpu[name]):.1f} "
            f"| {ref / med:.2f}x |"
        )


if __name__ == "__main__":
    main()
