"""The cost of each framework adapter versus iterating the DataFlow directly.

Batches of 64 x (32x32x3) float32 images plus 64 int64 labels; items/s = batches/s x 64.
Two flows, each measured on its own:

- ``batch``: ``DataFromList(images).repeat(k).batch(64)``: a realistic last stage, which
  stacks 64 images into a fresh batch (the target: adapter >= 0.9x direct);
- ``prebuilt``: yields pre-built batches (almost free), so the difference between an adapter's
  rate and the direct rate is the adapter's own cost per batch (the ``µs/batch`` column).

Contenders (each skipped with a note when its framework is missing):

- ``direct``: ``for batch in df``;
- ``to_torch``: ``DataLoader(to_torch(df), batch_size=None, num_workers=0)``;
- ``DevicePrefetcher(cpu)``: ``DevicePrefetcher(df, "cpu")``;
- ``dataflow_to_dataset``: iterating ``dataflow_to_dataset(df)`` eagerly;
- ``prefetch_to_device``: ``prefetch_to_device(df)`` on jax's default device, waiting for each
  batch (``block_until_ready``) as a training step would;
- ``StagingIterator(/cpu:0)``: the eager TensorFlow path, no tf.data;
- ``by hand``: what each adapter replaces, written by hand: a ``torch.from_numpy`` loop,
  ``tf.data.Dataset.from_generator`` over a plain generator, a ``jax.device_put`` loop.
  TensorFlow and JAX copy every batch into memory they own (torch shares it), so "vs by hand"
  is the adapter's own cost, beyond what using the framework costs anyway;

and with ``--diagnostics`` rows that explain the numbers (``to_torch`` without DataLoader or
with an identity ``collate_fn``, ``dataflow_to_dataset().prefetch(2)``, the per-element floor
of tf.data, the copy of ``tf.convert_to_tensor``, and ``prefetch_to_device`` as it was before
issue 13). ``dataflow_to_dataset`` before issue 13 was the by-hand ``from_generator`` row
(measured 1.03x of it). With a CUDA GPU, a last table compares
``DevicePrefetcher(cuda)`` with a naive ``.to("cuda")`` loop, both with a simulated training
step (copy/compute overlap).

Timing: each framework is measured in its own process (a program uses one; measured together,
their thread pools disturb each other), after one warm-up run of every contender. Rounds
interleave the contenders, each run after a 0.5 s pause (TensorFlow's threads keep spinning for
a while after work), and a run during which other processes used more than 0.2 cores is done
again (``run_timed_rounds``), as the machines are shared.

    pip install torch tensorflow jax      # whichever you want measured
    python benchmarks/adapters.py [--batches 1500] [--rounds 5] [--diagnostics]
                                  [--flows batch prebuilt] [--frameworks jax tensorflow torch]
                                  [--max-foreign 0.2]

Targets: issue 6: >= 0.9x direct for each adapter on the ``batch`` flow; issue 13 (item 6):
``dataflow_to_dataset`` at most 200 µs per batch over direct, ``prefetch_to_device`` on CPU
>= 0.9x direct.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._harness import (  # noqa: E402
    Contender,
    Result,
    TimedContender,
    machine_line,
    markdown_table,
    note,
    run_rounds,
    run_timed_rounds,
)
from dataflow.base import DataFlow  # noqa: E402
from dataflow.sources import DataFromList  # noqa: E402

BATCH = 64
SHAPE = (32, 32, 3)
DISTINCT = 16  # distinct batches' worth of images (12 MiB): more than the caches hold


class PrebuiltBatches(DataFlow):
    """``n`` batches per epoch, cycling through a few pre-built ones: nearly free to iterate."""

    def __init__(self, batches: list[list[np.ndarray]], n: int) -> None:
        self.batches = batches
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __iter__(self):  # type: ignore[no-untyped-def]
        batches, k = self.batches, len(self.batches)
        for i in range(self.n):
            yield batches[i % k]


def make_flows(n_batches: int) -> dict[str, DataFlow]:
    rng = np.random.default_rng(0)
    images = [[rng.random(SHAPE, dtype=np.float32), np.int64(i)] for i in range(BATCH * DISTINCT)]
    batch_flow = DataFromList(images, shuffle=False).repeat(max(1, n_batches // DISTINCT)).batch(BATCH)
    prebuilt = [
        [np.stack([im for im, _ in images[j * BATCH:(j + 1) * BATCH]]), np.arange(BATCH, dtype=np.int64)]
        for j in range(DISTINCT)
    ]
    return {"batch": batch_flow, "prebuilt": PrebuiltBatches(prebuilt, n_batches)}


def drain(it: Iterable[Any], each: Callable[[Any], Any] | None = None) -> int:
    n = 0
    if each is None:
        for _ in it:
            n += 1
    else:
        for b in it:
            each(b)
            n += 1
    return n * BATCH


def timed(name: str, run: Callable[[], int], by_hand: str | None = None) -> TimedContender:
    """A contender timed whole (nothing to start or stop), remembering its by-hand baseline."""

    def timed_run() -> tuple[int, float]:
        time.sleep(IDLE_BEFORE_RUN)
        c0, t0 = time.process_time(), time.perf_counter()
        n = run()
        elapsed = time.perf_counter() - t0
        CPU.setdefault(name, []).append((time.process_time() - c0) / n * BATCH)
        return n, elapsed

    contender = TimedContender(name, timed_run)
    BY_HAND[name] = by_hand
    return contender


BY_HAND: dict[str, str | None] = {}
# CPU seconds of this process (all its threads) per batch, per run: less disturbed than the
# wall clock by other jobs on a busy machine (a thread waiting for a core costs no CPU time)
CPU: dict[str, list[float]] = {}
# Frameworks' thread pools spin for a while after work (TensorFlow's do): without a pause, they
# take a core from the next contender, "direct" included (measured: 2x slower on 2 cores).
IDLE_BEFORE_RUN = 0.5
TORCH_HAND = "by hand: torch.from_numpy loop"
TF_HAND = "by hand: tf.data.Dataset.from_generator"
JAX_HAND = "by hand: jax.device_put loop"
JAX_STEP = "direct + step (numpy batches into a jitted step)"
TF_GRAPH = "dataflow_to_dataset, consumed in a tf.function"
TF_GRAPH_HAND = "by hand: from_generator, consumed in a tf.function"


SELECTED = {"torch", "tensorflow", "jax"}


def have(module: str) -> bool:
    """``module`` is installed and was selected with ``--frameworks``."""
    return module in SELECTED and importlib.util.find_spec(module) is not None


def _identity(batch: Any) -> Any:
    return batch


def contenders(df: DataFlow, diagnostics: bool) -> list[TimedContender]:
    df.reset_state()
    out = [timed("direct", lambda: drain(df))]
    if have("torch"):
        import torch
        from torch.utils.data import DataLoader

        from dataflow.adapters.torch import DevicePrefetcher, to_torch

        loader = DataLoader(to_torch(df), batch_size=None, num_workers=0)
        out.append(timed("to_torch (DataLoader, num_workers=0)", lambda: drain(loader), TORCH_HAND))
        prefetcher = DevicePrefetcher(df, "cpu")
        out.append(timed("DevicePrefetcher(cpu)", lambda: drain(prefetcher), TORCH_HAND))
        if diagnostics:
            torch_ds = to_torch(df)
            out.append(timed("  diag: to_torch without DataLoader", lambda: drain(torch_ds), TORCH_HAND))
            plain_loader = DataLoader(to_torch(df), batch_size=None, collate_fn=_identity)
            out.append(timed("  diag: to_torch, DataLoader(collate_fn=identity)", lambda: drain(plain_loader),
                             TORCH_HAND))
        from_numpy = lambda b: [torch.from_numpy(c) for c in b]  # noqa: E731
        out.append(timed(TORCH_HAND, lambda: drain(df, from_numpy)))
    if have("tensorflow"):
        import tensorflow as tf

        from dataflow.adapters.tf import StagingIterator, dataflow_to_dataset

        tf_ds = dataflow_to_dataset(df)
        out.append(timed("dataflow_to_dataset", lambda: drain(tf_ds), TF_HAND))
        staging = StagingIterator(df, device="/cpu:0", depth=2)
        out.append(timed("StagingIterator(/cpu:0)", lambda: drain(staging), TF_HAND))
        if diagnostics:
            prefetched = tf_ds.prefetch(2)
            out.append(timed("  diag: dataflow_to_dataset().prefetch(2)", lambda: drain(prefetched), TF_HAND))
            constant = tf.data.Dataset.from_tensors(tuple(next(iter(df)))).repeat(len(df))
            out.append(timed("  diag: tf.data floor (from_tensors.repeat)", lambda: drain(constant), TF_HAND))
            to_tensors = lambda b: [tf.convert_to_tensor(c) for c in b]  # noqa: E731
            out.append(timed("  diag: tf.convert_to_tensor loop (the copy)", lambda: drain(df, to_tensors),
                             TF_HAND))

        def plain_generator() -> Iterator[Any]:
            for batch in df:
                yield tuple(batch)

        by_hand = tf.data.Dataset.from_generator(plain_generator, output_signature=tf_ds.element_spec)
        out.append(timed(TF_HAND, lambda: drain(by_hand)))
        # Consumed inside a tf.function, as Keras's fit() does: no eager per-element cost
        out.append(timed(TF_GRAPH, _in_graph(tf, tf_ds), TF_GRAPH_HAND))
        out.append(timed(TF_GRAPH_HAND, _in_graph(tf, by_hand)))
    if have("jax"):
        import jax

        from dataflow.adapters.jax import prefetch_to_device

        wait = jax.block_until_ready
        out.append(timed("prefetch_to_device", lambda: drain(prefetch_to_device(df, 2), wait), JAX_HAND))
        if diagnostics:
            out.append(timed("  diag: prefetch_to_device before issue 13 (no thread)",
                             lambda: drain(_prefetch_before(df, 2), wait), JAX_HAND))
        put = lambda b: jax.block_until_ready(jax.device_put(b))  # noqa: E731
        out.append(timed(JAX_HAND, lambda: drain(df, put)))
        # With a training step: what prefetching is for (the step runs while the next batch
        # is read and placed); the reference hands numpy batches to the jitted step.
        step = _jax_step(jax)
        out.append(timed(JAX_STEP, lambda: drain(df, step)))
        prefetched_step = lambda: drain(prefetch_to_device(df, 2), step)  # noqa: E731
        out.append(timed("prefetch_to_device + step", prefetched_step, JAX_STEP))
    return out


def _in_graph(tf: Any, dataset: Any) -> Callable[[], int]:
    """Count the batches of ``dataset`` inside one ``tf.function`` (graph-mode iteration)."""
    count = tf.function(lambda: dataset.reduce(tf.constant(0, tf.int64), lambda n, _: n + 1))

    def run() -> int:
        return int(count()) * BATCH

    return run


def _jax_step(jax: Any) -> Callable[[Any], Any]:
    """A jitted step on a batch (a small matmul, ~0.1-0.3 ms on 2 CPU cores), waited for."""
    import jax.numpy as jnp

    weight = jnp.asarray(np.random.default_rng(1).random((int(np.prod(SHAPE)), 16), dtype=np.float32))
    f = jax.jit(lambda x, y: (x.reshape(x.shape[0], -1) @ weight).sum() + y.sum())
    return lambda b: jax.block_until_ready(f(b[0], b[1]))


def _prefetch_before(iterable: Iterable[Any], size: int) -> Iterator[Any]:
    """``prefetch_to_device`` as it was before issue 13: ``jax.device_put`` per numeric leaf,
    ``size`` batches in flight, all in the consumer's thread."""
    import jax

    def put(batch: Any) -> Any:
        numeric = lambda x: isinstance(x, (np.ndarray, np.generic)) and x.dtype.kind in "iufcb"  # noqa: E731
        return jax.tree_util.tree_map(lambda x: jax.device_put(x) if numeric(x) else x, batch)

    source = iter(iterable)
    queue = [put(b) for _, b in zip(range(size), source)]
    while queue:
        out = queue.pop(0)
        nxt = next(source, None)
        if nxt is not None:
            queue.append(put(nxt))
        yield out


def ratio_table(results: list[Result]) -> str:
    """Medians, the ratio to ``direct`` and to the by-hand conversion into the same framework,
    and each contender's cost per batch beyond the direct iteration."""
    by_name = {r.name: r.median for r in results}
    direct = by_name["direct"]
    cpu = {name: statistics.median(v[1:] or v) for name, v in CPU.items()}  # [0]: the warm-up
    rows = [
        "| contender | median items/s | min–max | vs direct | vs by hand | µs/batch over direct "
        "| CPU µs/batch over direct |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        hand = BY_HAND.get(r.name)
        vs_hand = f"{r.median / by_name[hand]:.2f}x" if hand in by_name else ""
        extra = (BATCH / r.median - BATCH / direct) * 1e6
        cpu_extra = f"{(cpu[r.name] - cpu['direct']) * 1e6:,.1f}" if r.name in cpu and "direct" in cpu else ""
        rows.append(
            f"| {r.name} | {r.median:,.0f} | {min(r.rates):,.0f}–{max(r.rates):,.0f} "
            f"| {r.median / direct:.2f}x | {vs_hand} | {extra:,.1f} | {cpu_extra} |"
        )
    return "\n".join(rows)


def cuda_overlap(n_batches: int, rounds: int) -> None:
    """DevicePrefetcher(cuda) vs a naive ``.to("cuda")`` per batch, with a GPU step per batch."""
    import torch

    from dataflow.adapters.torch import DevicePrefetcher

    flow = make_flows(n_batches)["prebuilt"]
    flow.reset_state()
    weight = torch.randn(SHAPE[0] * SHAPE[1] * SHAPE[2], 2048, device="cuda")

    def step(x: Any) -> None:  # GPU work per batch (about 4 GFLOP), queued without host syncs
        h = x.reshape(BATCH, -1) @ weight
        for _ in range(8):
            h = torch.tanh(h @ weight[:2048, :2048])

    def naive() -> int:
        n = drain(flow, lambda b: step(torch.from_numpy(b[0]).to("cuda")))
        torch.cuda.synchronize()
        return n

    def prefetched() -> int:
        n = drain(DevicePrefetcher(flow, "cuda", depth=2), lambda b: step(b[0]))
        torch.cuda.synchronize()
        return n

    def pinned_naive() -> int:
        n = drain(flow, lambda b: step(torch.from_numpy(b[0]).pin_memory().to("cuda", non_blocking=True)))
        torch.cuda.synchronize()
        return n

    results = run_rounds(
        [Contender("naive .to(cuda)", naive), Contender("pinned non_blocking, no side stream", pinned_naive),
         Contender("DevicePrefetcher(cuda)", prefetched)],
        rounds=rounds,
    )
    print(f"\n### DevicePrefetcher overlap on {torch.cuda.get_device_name()} (prebuilt flow + GPU step)\n")
    print(markdown_table(results, reference=["naive .to(cuda)"]))


def measure(args: argparse.Namespace) -> None:
    """The tables for the selected frameworks, in this process."""
    flows = make_flows(args.batches)
    for name in args.flows:
        runs = contenders(flows[name], args.diagnostics)
        for contender in runs:  # warm up: first iterations trace, compile and allocate
            contender.run()
        results, quiet = run_timed_rounds(runs, rounds=args.rounds, max_foreign=args.max_foreign)
        versions = ", ".join(f"{m} {__import__(m).__version__}" for m in sorted(SELECTED)) or "no framework"
        print(f"### {versions}; flow: {name}\n")
        print(ratio_table(results))
        print(f"\n({quiet.line()})\n", flush=True)
    if have("torch"):
        import torch

        if torch.cuda.is_available():
            cuda_overlap(args.batches, args.rounds)
        else:
            note("no CUDA device: the DevicePrefetcher overlap table is skipped")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=1500, help="batches per run (default 1500)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--flows", nargs="+", default=["batch", "prebuilt"], choices=["batch", "prebuilt"])
    parser.add_argument("--diagnostics", action="store_true", help="also the explanatory rows")
    parser.add_argument("--max-foreign", type=float, default=0.2,
                        help="redo a run during which other processes used more cores (default 0.2)")
    parser.add_argument("--frameworks", nargs="+", default=sorted(SELECTED), choices=sorted(SELECTED))
    parser.add_argument("--in-process", action="store_true",
                        help="measure all frameworks in this process (default: one process each)")
    args = parser.parse_args()
    SELECTED.intersection_update(args.frameworks)
    installed = sorted(m for m in SELECTED if have(m))
    for module in sorted(SELECTED - set(installed)):
        note(f"{module} is not installed: its rows are skipped")

    if not os.environ.get("_ADAPTERS_BENCH_CHILD"):
        print(f"# adapters: batches of {BATCH}x{SHAPE} float32 + {BATCH} int64 labels")
        print(f"{machine_line()}; {args.batches} batches per run, {args.rounds} rounds, medians")
        separate = not args.in_process and len(installed) > 1
        print("each framework measured in its own process\n" if separate else "", flush=True)
    if args.in_process or len(installed) <= 1:
        SELECTED.intersection_update(installed)
        measure(args)
        return
    # A program uses one framework: measured together, their thread pools disturb each other
    # (TensorFlow's, once used, slowed jax's asynchronous transfers by half on 2 cores).
    for module in installed:
        cmd = [sys.executable, os.path.abspath(__file__), "--frameworks", module, "--batches",
               str(args.batches), "--rounds", str(args.rounds), "--flows", *args.flows,
               "--max-foreign", str(args.max_foreign),
               *(["--diagnostics"] * args.diagnostics)]
        subprocess.run(cmd, check=False, env={**os.environ, "_ADAPTERS_BENCH_CHILD": "1"})


if __name__ == "__main__":
    main()
