"""In-process scenario: map then batch(64) over 200k small datapoints ``[int, float32[10]]``.

Contenders, in one run: this library, tensorpack 0.11's dataflow (if installed), and a
hand-written Python loop doing the same work. Prints medians of several rounds and ratios.

    pip install tensorpack==0.11   # optional peer
    python benchmarks/in_process.py [--size 200000] [--rounds 5]

Targets (issue 2): >= 1.0x tensorpack and >= 0.9x the hand-written loop.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._harness import Contender, machine_line, markdown_table, run_rounds  # noqa: E402

BATCH = 64


def make_data(size: int) -> list[list]:
    rng = np.random.default_rng(0)
    return [[i, rng.random(10, dtype=np.float32)] for i in range(size)]


def transform(dp: list) -> list:
    return [dp[0] + 1, dp[1] * 2.0]


def hand_written(data: list) -> int:
    """What a user would write without a library: the same map, batch and stacking."""
    n = 0
    batch = []
    for dp in data:
        batch.append(transform(dp))
        if len(batch) == BATCH:
            out = [np.asarray([b[0] for b in batch]), np.stack([b[1] for b in batch])]
            n += len(out[0])
            batch = []
    return n


def ours(data: list) -> Contender:
    from dataflow import DataFromList

    df = DataFromList(data, shuffle=False).map(transform).batch(BATCH)
    df.reset_state()

    def run() -> int:
        return sum(len(b[0]) for b in df)

    return Contender("dataflow", run)


def tensorpack(data: list) -> Contender | None:
    try:
        from tensorpack.dataflow import BatchData, DataFromList, MapData
    except ImportError:
        print("tensorpack not installed: pip install tensorpack==0.11 to compare", file=sys.stderr)
        return None
    df = BatchData(MapData(DataFromList(data, shuffle=False), transform), BATCH)
    df.reset_state()

    def run() -> int:
        return sum(len(b[0]) for b in df)

    return Contender("tensorpack 0.11", run)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    data = make_data(args.size)
    contenders = [Contender("hand-written loop", lambda: hand_written(data)), ours(data)]
    peer = tensorpack(data)
    if peer is not None:
        contenders.append(peer)
    results = run_rounds(contenders, rounds=args.rounds)
    refs = ["hand-written loop"] + (["tensorpack 0.11"] if peer is not None else [])
    print(
        f"in_process: map + batch({BATCH}) over {args.size:,} x [int, float32[10]], "
        f"{args.rounds} rounds, medians; {machine_line()}\n"
    )
    print(markdown_table(results, refs, unit="datapoints/s"))


if __name__ == "__main__":
    main()
