"""Sequence packing: sequences/s and padding fraction of ``PackData`` per method, vs Grain.

The input: ``--size`` (200,000) datapoints ``{"tokens": int32[n]}`` whose lengths ``n`` are
drawn from a long-tailed distribution (log-normal, median ~120 tokens, clipped to
1..``--seq-len``; seed 0), packed into rows of ``--seq-len`` (2048) tokens. The token arrays
are views into one random block (made before the clock starts), so the input costs no
memory per sequence. Contenders, in one run, each over one full epoch of the same list:

- ``dataflow first_fit`` / ``best_fit``: ``DataFromList(data, shuffle=False).pack(seq_len,
  method=..., num_bins=--num-bins)``;
- ``dataflow concat``: ``.pack(seq_len, method="concat")`` (no padding but the last row;
  sequences are split across rows);
- ``grain first_fit`` / ``grain best_fit`` (optional peer; ``pip install grain``; skipped
  with a note when missing): ``grain.experimental.FirstFitPackIterDataset`` /
  ``BestFitPackIterDataset`` over ``MapDataset.source(data).to_iter_dataset()`` with
  ``length_struct={"tokens": seq_len}`` and ``num_packing_bins=--num-bins``.

Each round runs every contender once (interleaved) and times the whole epoch, rows produced
and all; the rate is input sequences per second. The padding fraction is the share of the
produced rows' positions that are padding (segment id 0), the same for every round.

    python benchmarks/packing.py [--size 200000] [--seq-len 2048] [--num-bins 64] [--rounds 3]

Targets (issue 27): throughput >= 1.0x Grain's and a padding fraction <= Grain's for the
same method.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._harness import Contender, machine_line, markdown_table, note, run_rounds  # noqa: E402


def make_data(size: int, seq_len: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    lengths = np.clip(rng.lognormal(4.8, 1.2, size), 1, seq_len).astype(np.int64)
    block = rng.integers(1, 50_000, 1 << 20, dtype=np.int32)
    starts = rng.integers(0, len(block) - seq_len, size)
    return [{"tokens": block[s : s + n]} for s, n in zip(starts.tolist(), lengths.tolist())]


def padding_of(rows: list[dict[str, np.ndarray]]) -> float:
    total = sum(len(r["tokens_segment_ids"]) for r in rows)
    used = sum(int(np.count_nonzero(r["tokens_segment_ids"])) for r in rows)
    return 1.0 - used / total if total else 0.0


def ours(data: list[Any], seq_len: int, method: str, num_bins: int, padding: dict[str, float]) -> Contender:
    from dataflow import DataFromList

    name = f"dataflow {method}"

    def run() -> int:
        df = DataFromList(data, shuffle=False).pack(seq_len, method=method, num_bins=num_bins)
        df.reset_state()
        for _ in df:
            pass
        padding[name] = float(df.stats()["padding"])
        return len(data)

    return Contender(name, run)


def grain_contenders(
    data: list[Any], seq_len: int, num_bins: int, padding: dict[str, float]
) -> list[Contender]:
    try:
        import grain  # type: ignore[import-not-found]
    except ImportError:
        note("grain not installed: pip install grain to compare with its first-fit and best-fit packing")
        return []
    out = []
    pairs = (("first_fit", "FirstFitPackIterDataset"), ("best_fit", "BestFitPackIterDataset"))
    for method, cls_name in pairs:
        cls = getattr(grain.experimental, cls_name, None)
        if cls is None:
            note(f"this grain has no grain.experimental.{cls_name}: its {method} is skipped")
            continue
        name = f"grain {method}"

        def run(cls: Callable[..., Any] = cls, name: str = name) -> int:
            source = grain.MapDataset.source(data).to_iter_dataset()
            rows = list(cls(source, length_struct={"tokens": seq_len}, num_packing_bins=num_bins))
            padding[name] = padding_of(rows)
            return len(data)

        out.append(Contender(name, run))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=200_000)
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--num-bins", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    data = make_data(args.size, args.seq_len)
    tokens = sum(len(d["tokens"]) for d in data)
    padding: dict[str, float] = {}
    methods = ("first_fit", "best_fit", "concat")
    contenders = [ours(data, args.seq_len, m, args.num_bins, padding) for m in methods]
    contenders += grain_contenders(data, args.seq_len, args.num_bins, padding)
    results = run_rounds(contenders, rounds=args.rounds, warmup=False)
    refs = [c.name for c in contenders if c.name.startswith("grain")] or ["dataflow first_fit"]
    print(
        f"packing: {args.size:,} sequences ({tokens:,} tokens, lengths 1..{args.seq_len} long-tailed) into "
        f"rows of {args.seq_len}, num_bins={args.num_bins}; {args.rounds} rounds; {machine_line()}\n"
    )
    print(markdown_table(results, refs, unit="sequences/s"))
    print("\n| contender | padding fraction |\n|---|---|")
    for r in results:
        print(f"| {r.name} | {padding[r.name]:.4f} |")


if __name__ == "__main__":
    main()
