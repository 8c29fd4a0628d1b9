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
- ``floor``: tf.data's own cost for the hand-off: the flow's first 16 batches stacked once
  into a 64-byte aligned group, handed ``len(df) / 16`` times through ``from_generator`` and
  split by ``dataflow_to_dataset``'s ``flat_map(from_tensor_slices)``, in a ``tf.function``
  (no flow, no Python work per batch);
- ``by hand``: what each adapter replaces, written by hand: a ``torch.from_numpy`` loop,
  ``tf.data.Dataset.from_generator`` over a plain generator, a ``jax.device_put`` loop.
  TensorFlow and JAX copy every batch into memory they own (torch shares it), so "vs by hand"
  is the adapter's own cost, beyond what using the framework costs anyway;

and with ``--diagnostics`` rows that explain the numbers (``to_torch`` without DataLoader or
with an identity ``collate_fn``, ``dataflow_to_dataset().prefetch(2)``, the per-element floor
of tf.data, the copy of ``tf.convert_to_tensor``, and ``prefetch_to_device`` as it was before
issue 13). ``dataflow_to_dataset`` before issue 13 was the by-hand ``from_generator`` row
(measured 1.03x of it).

``--device cuda`` measures instead the staging of batches onto the GPU, with no step (the
staging alone) and with a float32 GPU step per batch, each table against the usual way of
doing it by hand. ``--step heavy`` (default): ~18 GFLOP in 3 kernels (the batch as a 2048x96
matrix times 96x2048, then times 2048x2048, tanh; jax at ``Precision.HIGHEST``), so the GPU
is the bottleneck and staging can overlap it; ``--step light``: ~5 GFLOP in 17 kernels (64x3072
times 3072x2048, then eight 2048x2048 matmuls with tanh), so launching its kernels from
Python is the bottleneck. The contenders:

- torch: ``DevicePrefetcher(df, "cuda")`` (pinned memory, ``non_blocking`` copies on a side
  stream) vs ``DataLoader(to_torch(df), batch_size=None, pin_memory=True)`` with
  ``.to("cuda", non_blocking=True)`` per tensor (the reference; target >= 1.0x), and a naive
  ``torch.from_numpy(c).to("cuda")`` loop; the step is queued without host syncs and the run
  ends with ``torch.cuda.synchronize()``;
- JAX: ``prefetch_to_device(df)`` vs the plain loop handing numpy batches to the same jitted
  step (the reference) and a ``jax.device_put`` loop; the step is either waited for after
  each batch (``block_until_ready``) or queued (only the last result waited for);
- TensorFlow: ``StagingIterator(df, "/gpu:0")`` and ``stage_to_device(dataflow_to_dataset(df))``
  vs a plain loop of ``tf.convert_to_tensor`` into the same ``tf.function`` step (the
  reference).

A framework that sees no GPU is skipped with a note.

Timing: each framework is measured in its own process (a program uses one; measured together,
their thread pools disturb each other), after one warm-up run of every contender. Rounds
interleave the contenders, each run after a 0.5 s pause (TensorFlow's threads keep spinning for
a while after work), and a run during which other processes used more than 0.2 cores is done
again (``run_timed_rounds``), as the machines are shared.

    pip install torch tensorflow jax      # whichever you want measured
    python benchmarks/adapters.py [--batches 1500] [--rounds 5] [--diagnostics]
                                  [--flows batch prebuilt] [--frameworks jax tensorflow torch]
                                  [--max-foreign 0.2] [--device cpu|cuda] [--step heavy|light]

Targets: issue 6: >= 0.9x direct for each adapter on the ``batch`` flow; issue 13 (item 6):
``dataflow_to_dataset`` at most 200 µs per batch over direct, ``prefetch_to_device`` on CPU
>= 0.9x direct; issue 28 (item 3), printed under the table: ``dataflow_to_dataset`` consumed
in a ``tf.function`` at most 1.5x the floor (its µs per batch over direct against the floor's
µs per batch), ``prefetch_to_device + step`` at least 1.3x the plain loop into the same step.
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
    Result,
    TimedContender,
    machine_line,
    note,
    run_timed_rounds,
)
from dataflow import DataFromList  # noqa: E402
from dataflow.base import DataFlow  # noqa: E402

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
TF_FLOOR = "floor: pre-made aligned groups through from_generator, in a tf.function"


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
        out.append(timed(TF_FLOOR, _in_graph(tf, _floor_dataset(tf, df, tf_ds.element_spec))))
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


def _floor_dataset(tf: Any, df: DataFlow, signature: Any) -> Any:
    """The hand-off with no flow and no Python work per batch: ``len(df)`` batches as groups
    of ``GROUP_MAX``, made once (64-byte aligned, as ``dataflow_to_dataset`` hands them), through
    ``from_generator`` and split by the same ``flat_map(from_tensor_slices)``: what tf.data
    itself costs for this hand-off."""
    from itertools import islice

    from dataflow.adapters._aligned import AlignedPool
    from dataflow.adapters._tf_groups import GROUP_MAX

    batches = list(islice(df, GROUP_MAX))  # the flow's first batches (fewer if it is shorter)
    pool = AlignedPool(len(batches[0]))
    groups = []
    for column in zip(*batches):
        group = pool.empty((len(batches), *np.shape(column[0])), np.asarray(column[0]).dtype)
        np.stack(column, out=group)
        groups.append(group)
    total, size = len(df), len(batches)
    group_signature = tuple(tf.TensorSpec((None, *spec.shape), spec.dtype) for spec in signature)

    def generator() -> Iterator[Any]:
        for start in range(0, total, size):
            n = min(size, total - start)
            yield tuple(g if n == size else g[:n] for g in groups)

    return tf.data.Dataset.from_generator(generator, output_signature=group_signature).flat_map(
        lambda *group: tf.data.Dataset.from_tensor_slices(group)
    )


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


def target_lines(results: list[Result]) -> list[str]:
    """Issue 28's two CPU targets, from the medians of this run: the tf.data hand-off (in a
    ``tf.function``) as a multiple of the floor's cost, and ``prefetch_to_device`` with a
    jitted step against the plain loop into the same step."""
    by_name = {r.name: r.median for r in results}
    lines = []
    if {"direct", TF_GRAPH, TF_FLOOR} <= by_name.keys():
        over = (BATCH / by_name[TF_GRAPH] - BATCH / by_name["direct"]) * 1e6
        floor = BATCH / by_name[TF_FLOOR] * 1e6
        lines.append(
            f"tf.data hand-off, consumed in a tf.function: dataflow_to_dataset costs {over:,.1f} µs per "
            f"batch over direct, {over / floor:.2f}x the floor ({floor:,.1f} µs per batch: pre-made "
            f"aligned groups through from_generator and the same split, no flow). Target (issue 28): "
            f"<= 1.5x."
        )
    step = "prefetch_to_device + step"
    if {JAX_STEP, step} <= by_name.keys():
        lines.append(
            f"JAX with a jitted step: prefetch_to_device + step is {by_name[step] / by_name[JAX_STEP]:.2f}x "
            f"the plain loop into the same step. Target (issue 28): >= 1.3x."
        )
    return lines


STEP = "heavy"  # the device tables' step (--step)
LIGHT_MATMULS = 8  # 2048x2048 matmuls of the light step, after the 3072x2048 one
TORCH_PINNED = "DataLoader(pin_memory=True) + .to(non_blocking=True)"
JAX_PLAIN = "plain loop: numpy batches into the step"
TF_PLAIN = "plain loop: tf.convert_to_tensor into the step"


def _synced(run: Callable[[], int], sync: Callable[[], Any]) -> Callable[[], int]:
    def synced() -> int:
        n = run()
        sync()
        return n

    return synced


def torch_device_contenders(flow: DataFlow, device: Any, with_step: bool) -> list[TimedContender]:
    """Staging onto ``device`` (a torch device): ours, DataLoader's pinned path, naive."""
    import torch
    from torch.utils.data import DataLoader

    from dataflow.adapters.torch import DevicePrefetcher, to_torch

    flow.reset_state()
    device = torch.device(device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    gen = torch.Generator(device=device).manual_seed(0)
    weight = torch.randn(int(np.prod(SHAPE)), 2048, device=device, generator=gen) / 64

    def step(x: Any, y: Any) -> Any:  # queued on the current stream, no host sync
        if not with_step:
            return None
        if STEP == "heavy":
            h = x.reshape(x.shape[0] * SHAPE[0], -1) @ weight[:SHAPE[1] * SHAPE[2]]
            return torch.tanh(h @ weight[:2048])
        h = x.reshape(x.shape[0], -1) @ weight
        for _ in range(LIGHT_MATMULS):
            h = torch.tanh(h @ weight[:2048])
        return h

    loader = DataLoader(to_torch(flow), batch_size=None, num_workers=0, pin_memory=device.type == "cuda")
    prefetcher = DevicePrefetcher(flow, device, depth=2)
    naive = lambda b: step(*[torch.from_numpy(c).to(device) for c in b])  # noqa: E731
    pinned = lambda b: step(*[t.to(device, non_blocking=True) for t in b])  # noqa: E731
    ours = lambda b: step(*b)  # noqa: E731
    return [
        timed(f"DevicePrefetcher({device.type})", _synced(lambda: drain(prefetcher, ours), sync)),
        timed(TORCH_PINNED, _synced(lambda: drain(loader, pinned), sync)),
        timed(f"naive torch.from_numpy(c).to({device.type!r})", _synced(lambda: drain(flow, naive), sync)),
    ]


def _jax_device_step(jax: Any) -> Callable[[Any, Any], Any]:
    """The GPU step of the device tables, jitted."""
    import jax.numpy as jnp

    rng = np.random.default_rng(0)
    weight = jnp.asarray(rng.standard_normal((int(np.prod(SHAPE)), 2048), dtype=np.float32) / 64)
    highest = jax.lax.Precision.HIGHEST  # float32 as torch computes it (not TF32)

    def step(x: Any, y: Any) -> Any:
        if STEP == "heavy":
            rows = x.reshape(x.shape[0] * SHAPE[0], -1)
            h = jnp.matmul(rows, weight[:SHAPE[1] * SHAPE[2]], precision=highest)
            return jnp.tanh(jnp.matmul(h, weight[:2048], precision=highest)).sum() + y.sum()
        h = x.reshape(x.shape[0], -1) @ weight
        for _ in range(LIGHT_MATMULS):
            h = jnp.tanh(h @ weight[:2048])
        return h.sum() + y.sum()

    return jax.jit(step)  # type: ignore[no-any-return]


def jax_device_contenders(flow: DataFlow, step_mode: str) -> list[TimedContender]:
    """Staging onto jax's default device: ``prefetch_to_device`` vs the plain loop and a
    ``device_put`` loop; ``step_mode`` is ``none``, ``waited`` or ``queued``."""
    import jax

    from dataflow.adapters.jax import prefetch_to_device

    flow.reset_state()
    wait = jax.block_until_ready
    f = _jax_device_step(jax)
    put = jax.device_put

    def loop(batches: Callable[[], Iterable[Any]], place: Callable[[Any], Any]) -> Callable[[], int]:
        def run() -> int:
            n, last = 0, None
            for b in batches():
                if step_mode == "none":
                    wait(place(b))
                elif step_mode == "waited":
                    wait(f(*place(b)))
                else:
                    last = f(*place(b))
                n += BATCH
            wait(last)
            return n

        return run

    same = lambda b: b  # noqa: E731
    contenders = [timed("prefetch_to_device", loop(lambda: prefetch_to_device(flow, 2), same))]
    if step_mode != "none":
        contenders.append(timed(JAX_PLAIN, loop(lambda: flow, same)))
    contenders.append(timed("jax.device_put loop", loop(lambda: flow, put)))
    return contenders


def tf_device_contenders(flow: DataFlow, device: str, with_step: bool) -> list[TimedContender]:
    """Staging onto ``device`` (e.g. ``/gpu:0``): ``StagingIterator`` and ``stage_to_device``
    vs a plain loop converting each batch into the same step."""
    import tensorflow as tf

    from dataflow.adapters.tf import StagingIterator, dataflow_to_dataset, stage_to_device

    flow.reset_state()
    with tf.device(device):
        rng = np.random.default_rng(0)
        weight = tf.constant(rng.standard_normal((int(np.prod(SHAPE)), 2048), dtype=np.float32) / 64)
        step_fn = tf.function(lambda x, y: _tf_step(tf, weight, x, y))
    staged = stage_to_device(dataflow_to_dataset(flow), device)

    def loop(batches: Callable[[], Iterable[Any]], convert: bool) -> Callable[[], int]:
        def run() -> int:
            n, last = 0, None
            with tf.device(device):
                for b in batches():
                    x, y = (tf.convert_to_tensor(c) for c in b) if convert else b
                    last = step_fn(x, y) if with_step else tf.identity(x)
                    n += BATCH
            if last is not None:
                last.numpy()  # waits for the queued work
            return n

        return run

    return [
        timed(f"StagingIterator({device})", loop(lambda: StagingIterator(flow, device, depth=2), False)),
        timed(f"stage_to_device(dataflow_to_dataset, {device})", loop(lambda: staged, False)),
        timed(TF_PLAIN, loop(lambda: flow, True)),
    ]


def _tf_step(tf: Any, weight: Any, x: Any, y: Any) -> Any:
    if STEP == "heavy":
        h = tf.reshape(x, (-1, SHAPE[1] * SHAPE[2])) @ weight[:SHAPE[1] * SHAPE[2]]
        return tf.reduce_sum(tf.tanh(h @ weight[:2048])) + tf.cast(tf.reduce_sum(y), tf.float32)
    h = tf.reshape(x, (tf.shape(x)[0], -1)) @ weight
    for _ in range(LIGHT_MATMULS):
        h = tf.tanh(h @ weight[:2048])
    return tf.reduce_sum(h) + tf.cast(tf.reduce_sum(y), tf.float32)


def device_table(results: list[Result], reference: str) -> str:
    """Medians, the ratio to ``reference``, wall and CPU time per batch."""
    by_name = {r.name: r.median for r in results}
    cpu = {name: statistics.median(v[1:] or v) for name, v in CPU.items()}  # [0]: the warm-up
    rows = [
        f"| contender | median items/s | min–max | vs {reference} | µs/batch | CPU µs/batch |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        cpu_us = f"{cpu[r.name] * 1e6:,.0f}" if r.name in cpu else ""
        rows.append(
            f"| {r.name} | {r.median:,.0f} | {min(r.rates):,.0f}–{max(r.rates):,.0f} "
            f"| {r.median / by_name[reference]:.2f}x | {BATCH / r.median * 1e6:,.0f} | {cpu_us} |"
        )
    return "\n".join(rows)


def device_gpu_name(framework: str) -> str | None:
    """The GPU ``framework`` would use, or ``None`` when it sees none."""
    if framework == "torch":
        import torch

        return torch.cuda.get_device_name() if torch.cuda.is_available() else None
    if framework == "jax":
        import jax

        return jax.devices()[0].device_kind if jax.default_backend() == "gpu" else None
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return None
    return str(tf.config.experimental.get_device_details(gpus[0]).get("device_name", gpus[0].name))


def measure_device(args: argparse.Namespace, framework: str) -> None:
    """The staging tables of ``framework`` on its GPU (``--device cuda``)."""
    gpu = device_gpu_name(framework)
    if gpu is None:
        note(f"{framework} sees no GPU: its staging tables are skipped")
        return
    flows = make_flows(args.batches)
    version = __import__(framework).__version__
    modes = ["none", "waited", "queued"] if framework == "jax" else ["none", "step"]
    for name in args.flows:
        for mode in modes:
            CPU.clear()
            if framework == "torch":
                runs, reference = torch_device_contenders(flows[name], "cuda", mode == "step"), TORCH_PINNED
            elif framework == "jax":
                runs = jax_device_contenders(flows[name], mode)
                reference = JAX_PLAIN if mode != "none" else "jax.device_put loop"
            else:
                runs, reference = tf_device_contenders(flows[name], "/gpu:0", mode == "step"), TF_PLAIN
            for contender in runs:  # warm up: first iterations compile, allocate and pin
                contender.run()
            results, quiet = run_timed_rounds(runs, rounds=args.rounds, max_foreign=args.max_foreign)
            step = {"none": "no step", "step": f"{STEP} GPU step per batch, queued",
                    "waited": f"{STEP} GPU step per batch, waited for",
                    "queued": f"{STEP} GPU step per batch, queued"}[mode]
            print(f"### {framework} {version} on {gpu}; flow: {name}; {step}\n")
            print(device_table(results, reference))
            print(f"\n({quiet.line()})\n", flush=True)


def measure(args: argparse.Namespace) -> None:
    """The tables for the selected frameworks, in this process."""
    if args.device == "cuda":
        for framework in sorted(SELECTED):
            measure_device(args, framework)
        return
    flows = make_flows(args.batches)
    for name in args.flows:
        runs = contenders(flows[name], args.diagnostics)
        for contender in runs:  # warm up: first iterations trace, compile and allocate
            contender.run()
        results, quiet = run_timed_rounds(runs, rounds=args.rounds, max_foreign=args.max_foreign)
        versions = ", ".join(f"{m} {__import__(m).__version__}" for m in sorted(SELECTED)) or "no framework"
        print(f"### {versions}; flow: {name}\n")
        print(ratio_table(results))
        for line in target_lines(results):
            print(f"\n{line}")
        print(f"\n({quiet.line()})\n", flush=True)


def main() -> None:
    global STEP
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=1500, help="batches per run (default 1500)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--flows", nargs="+", default=["batch", "prebuilt"], choices=["batch", "prebuilt"])
    parser.add_argument("--diagnostics", action="store_true", help="also the explanatory rows")
    parser.add_argument("--max-foreign", type=float, default=0.2,
                        help="redo a run during which other processes used more cores (default 0.2)")
    parser.add_argument("--frameworks", nargs="+", default=sorted(SELECTED), choices=sorted(SELECTED))
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                        help="cpu: the adapters' cost (default); cuda: staging batches onto the GPU")
    parser.add_argument("--step", choices=["heavy", "light"], default=STEP,
                        help="--device cuda: the GPU step per batch (default heavy: GPU-bound)")
    parser.add_argument("--in-process", action="store_true",
                        help="measure all frameworks in this process (default: one process each)")
    args = parser.parse_args()
    SELECTED.intersection_update(args.frameworks)
    STEP = args.step
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
               "--max-foreign", str(args.max_foreign), "--device", args.device, "--step", args.step,
               *(["--diagnostics"] * args.diagnostics)]
        subprocess.run(cmd, check=False, env={**os.environ, "_ADAPTERS_BENCH_CHILD": "1"})


if __name__ == "__main__":
    main()
