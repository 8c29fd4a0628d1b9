"""Train a linear classifier with PyTorch, fed by a DataFlow.

The pipeline: rows of (features, label) -> shuffled every epoch -> batches of 64 (made by
dataflow) -> ``to_torch`` (tensors sharing the batches' memory) -> ``DataLoader`` with
``batch_size=None`` (dataflow already batched) -> ``DevicePrefetcher`` (the next batches are
copied to the GPU while the current one trains; on a CPU-only machine it just converts).
Prints the loss per epoch; the last line is ``initial_loss=... final_loss=...``.

Run (after ``pip install ".[torch]"``):  python examples/train_torch.py
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import DataLoader

from dataflow import DataFromArrays
from dataflow.adapters.torch import DevicePrefetcher, to_torch

NUM_CLASSES = 4


def make_data(n: int = 4096, dim: int = 16, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian blobs, one per class: x is float32 (n, dim), y is int64 (n,)."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=0.5, size=(NUM_CLASSES, dim)).astype(np.float32)
    y = rng.integers(0, NUM_CLASSES, size=n)
    x = (centers[y] + rng.normal(size=(n, dim))).astype(np.float32)
    return x, y.astype(np.int64)


def full_loss(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    with torch.no_grad():
        return float(torch.nn.functional.cross_entropy(model(x), y))


def main(epochs: int = 5, batch_size: int = 64, lr: float = 0.05) -> None:
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    x, y = make_data()
    df = DataFromArrays([x, y], shuffle=True, seed=0).batch(batch_size)
    # dataflow batches; the DataLoader only hands the batches over (no workers, no collate).
    loader = DataLoader(to_torch(df), batch_size=None, num_workers=0)
    batches = DevicePrefetcher(loader, device=device, depth=2)

    model = torch.nn.Linear(x.shape[1], NUM_CLASSES).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    x_all, y_all = torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)
    initial = full_loss(model, x_all, y_all)
    print(f"epoch 0: loss {initial:.4f} (device {device})")

    for epoch in range(1, epochs + 1):
        steps = 0
        for xb, yb in batches:  # one epoch of the flow; xb, yb already on `device`
            loss = torch.nn.functional.cross_entropy(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            steps += 1
        print(f"epoch {epoch}: loss {full_loss(model, x_all, y_all):.4f}, {steps} steps")

    final = full_loss(model, x_all, y_all)
    print(f"initial_loss={initial:.6f} final_loss={final:.6f}")


if __name__ == "__main__":
    main()
