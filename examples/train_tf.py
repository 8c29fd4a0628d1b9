"""Train a linear classifier with TensorFlow 2 / Keras, fed by a DataFlow.

The pipeline: rows of (features, label) -> shuffled every epoch -> batches of 64 (made by
dataflow) -> ``dataflow_to_dataset`` (a ``tf.data.Dataset``; its signature is inferred from
the first batches) -> ``assert_cardinality`` (Keras then knows the number of steps per epoch)
-> ``prefetch`` so the flow runs ahead of the training step. ``model.fit`` takes one epoch of
the flow per Keras epoch. Prints the loss per epoch; the last line is
``initial_loss=... final_loss=...``.

Run (after ``pip install ".[tf]"``):  python examples/train_tf.py
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep TensorFlow's start-up chatter quiet

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from dataflow import DataFromArrays  # noqa: E402
from dataflow.adapters.tf import dataflow_to_dataset  # noqa: E402

NUM_CLASSES = 4


def make_data(n: int = 4096, dim: int = 16, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian blobs, one per class: x is float32 (n, dim), y is int64 (n,)."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=0.5, size=(NUM_CLASSES, dim)).astype(np.float32)
    y = rng.integers(0, NUM_CLASSES, size=n)
    x = (centers[y] + rng.normal(size=(n, dim))).astype(np.float32)
    return x, y.astype(np.int64)


class PrintLoss(tf.keras.callbacks.Callback):
    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        print(f"epoch {epoch + 1}: training loss {(logs or {}).get('loss', float('nan')):.4f}")


def main(epochs: int = 5, batch_size: int = 64, lr: float = 0.05) -> None:
    tf.keras.utils.set_random_seed(0)
    x, y = make_data()
    # 4096 rows / 64 -> 64 full batches; remainder=True would keep a smaller last one.
    df = DataFromArrays([x, y], shuffle=True, seed=0).batch(batch_size)
    dataset = (
        dataflow_to_dataset(df)
        .apply(tf.data.experimental.assert_cardinality(len(df)))
        .prefetch(2)
    )
    print("element_spec:", dataset.element_spec)

    model = tf.keras.Sequential([tf.keras.Input((x.shape[1],)), tf.keras.layers.Dense(NUM_CLASSES)])
    model.compile(
        optimizer=tf.keras.optimizers.SGD(learning_rate=lr),
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    initial = float(model.evaluate(x, y, batch_size=1024, verbose=0))
    print(f"epoch 0: loss {initial:.4f}")
    model.fit(dataset, epochs=epochs, shuffle=False, verbose=0, callbacks=[PrintLoss()])
    final = float(model.evaluate(x, y, batch_size=1024, verbose=0))
    print(f"initial_loss={initial:.6f} final_loss={final:.6f}")


if __name__ == "__main__":
    main()
