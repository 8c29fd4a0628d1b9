"""Train a logistic regression in plain numpy, fed by a DataFlow.

The pipeline: rows of (features, label) arrays -> shuffled every epoch -> batches of 32.
Prints the loss per epoch; the last line is ``initial_loss=... final_loss=...``.

Run (after `pip install .` or `pip install -e .`):  python examples/numpy_training_loop.py
"""

from __future__ import annotations

import numpy as np

from dataflow import DataFromArrays


def make_data(n: int = 2000, dim: int = 8, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A linearly separable-ish binary problem: y = [x @ w_true + noise > 0]."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, dim)).astype(np.float32)
    w_true = rng.normal(size=dim).astype(np.float32)
    y = (x @ w_true + 0.5 * rng.normal(size=n) > 0).astype(np.float32)
    return x, y


def sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


def log_loss(w: np.ndarray, b: float, x: np.ndarray, y: np.ndarray) -> float:
    p = np.clip(sigmoid(x @ w + b), 1e-7, 1 - 1e-7)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def main(epochs: int = 5, batch_size: int = 32, lr: float = 0.5) -> None:
    x, y = make_data()
    # One datapoint per row: [x[i], y[i]]; a new permutation every epoch; seed= for repeatability.
    df = DataFromArrays([x, y], shuffle=True, seed=0).batch(batch_size)

    w = np.zeros(x.shape[1], dtype=np.float32)
    b = 0.0
    initial = log_loss(w, b, x, y)
    print(f"epoch 0: loss {initial:.4f}")

    df.reset_state()
    with df:  # close() when done
        for epoch in range(1, epochs + 1):
            for xb, yb in df:  # one epoch: len(df) batches of (32, 8) float32 and (32,) float32
                err = sigmoid(xb @ w + b) - yb  # gradient of the log loss w.r.t. the logits
                w -= lr * (xb.T @ err) / len(yb)
                b -= lr * float(err.mean())
            accuracy = float(np.mean((sigmoid(x @ w + b) > 0.5) == (y > 0.5)))
            print(f"epoch {epoch}: loss {log_loss(w, b, x, y):.4f}, accuracy {accuracy:.3f}, "
                  f"{len(df)} batches")

    final = log_loss(w, b, x, y)
    print(f"initial_loss={initial:.6f} final_loss={final:.6f}")


if __name__ == "__main__":
    main()
