"""Train a linear classifier with plain JAX (``jax.grad``), fed by a DataFlow.

The pipeline: rows of (features, label) -> shuffled every epoch -> batches of 64 (made by
dataflow) -> ``prefetch_to_device`` (``jax.device_put`` of the next two batches while the
current step runs; ``device_put`` is asynchronous, so the copies overlap the computation).
Prints the loss per epoch; the last line is ``initial_loss=... final_loss=...``.

Run (after ``pip install ".[jax]"``):  python examples/train_jax.py
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from dataflow import DataFromArrays
from dataflow.adapters.jax import prefetch_to_device

NUM_CLASSES = 4


def make_data(n: int = 4096, dim: int = 16, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian blobs, one per class: x is float32 (n, dim), y is int32 (n,)."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=0.5, size=(NUM_CLASSES, dim)).astype(np.float32)
    y = rng.integers(0, NUM_CLASSES, size=n)
    x = (centers[y] + rng.normal(size=(n, dim))).astype(np.float32)
    return x, y.astype(np.int32)


def loss_fn(params: dict, x: jax.Array, y: jax.Array) -> jax.Array:
    logits = x @ params["w"] + params["b"]
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))


@jax.jit
def train_step(params: dict, x: jax.Array, y: jax.Array, lr: float) -> tuple[dict, jax.Array]:
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), loss


def main(epochs: int = 5, batch_size: int = 64, lr: float = 0.05) -> None:
    x, y = make_data()
    df = DataFromArrays([x, y], shuffle=True, seed=0).batch(batch_size)
    df.reset_state()

    params = {"w": jnp.zeros((x.shape[1], NUM_CLASSES)), "b": jnp.zeros(NUM_CLASSES)}
    initial = float(loss_fn(params, x, y))
    print(f"epoch 0: loss {initial:.4f} (device {jax.devices()[0]})")

    with df:  # close() when done
        for epoch in range(1, epochs + 1):
            steps = 0
            for xb, yb in prefetch_to_device(df, size=2):  # one epoch; xb, yb are jax.Arrays
                params, _ = train_step(params, xb, yb, lr)
                steps += 1
            print(f"epoch {epoch}: loss {float(loss_fn(params, x, y)):.4f}, {steps} steps")

    final = float(loss_fn(params, x, y))
    print(f"initial_loss={initial:.6f} final_loss={final:.6f}")


if __name__ == "__main__":
    main()
