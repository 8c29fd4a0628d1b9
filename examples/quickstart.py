"""Quickstart: build one pipeline in class style and in fluent style, iterate it, time it.

Run (after `pip install .` or `pip install -e .`):  python examples/quickstart.py
"""

from __future__ import annotations

import numpy as np

from dataflow import BatchData, DataFromList, FilterData, MapData, set_seed


def load(i: int) -> list:
    """Turn an index into a datapoint: [features (float32 array of 4), label (int)]."""
    return [np.full(4, i, dtype=np.float32), i % 3]


def keep(dp: list) -> bool:
    """Drop the datapoints whose label is 2."""
    return dp[1] != 2


def class_style(n: int = 100) -> BatchData:
    # tensorpack's spelling: each transform wraps its upstream.
    return BatchData(FilterData(MapData(DataFromList(list(range(n)), shuffle=True, seed=0), load), keep), 8)


def fluent_style(n: int = 100):
    # The same pipeline, built by the methods every DataFlow has.
    return DataFromList(list(range(n)), shuffle=True, seed=0).map(load).filter(keep).batch(8)


def main() -> None:
    a, b = class_style(), fluent_style()
    print("class style: ", a.__class__.__name__, "<-", a.ds.__class__.__name__, "<- ...")
    print("fluent style:", b.__class__.__name__, "<-", b.ds.__class__.__name__, "<- ...")

    # reset_state() once, in the process that iterates, before the first epoch.
    a.reset_state()
    b.reset_state()
    for epoch in range(2):
        batches_a, batches_b = list(a), list(b)
        same = all(
            np.array_equal(xa, xb) and np.array_equal(ya, yb)
            for (xa, ya), (xb, yb) in zip(batches_a, batches_b)
        )
        features, labels = batches_a[0]
        print(
            f"epoch {epoch}: {len(batches_a)} batches; first batch features {features.shape} "
            f"{features.dtype}, labels {labels.tolist()}; both styles identical: {same}"
        )
        if not same or len(batches_a) != len(batches_b):
            raise SystemExit("class style and fluent style disagree")

    # The reproducibility switch for every flow without its own seed=.
    set_seed(1234)
    df = DataFromList(list(range(10)), shuffle=True)
    df.reset_state()
    print("a seeded shuffle:", list(df))
    set_seed(None)

    # How fast is it? speed_test() resets the flow, times `size` datapoints (here batches)
    # with a progress bar on stderr, and returns the throughput and latency percentiles.
    result = fluent_style(n=10_000).speed_test(size=500)
    print("speed test:", result)


if __name__ == "__main__":
    main()
