"""Stop a PyTorch training run mid-epoch and resume it exactly: same batches, same loss curve.

The data pipeline (a shuffled source, a random augmentation seeded per datapoint, batching)
is saved with the model and optimizer in one ``torch.save`` checkpoint; ``torch.load`` with its
default ``weights_only=True`` reads it back, because a dataflow state is plain data.

    python examples/checkpoint_resume_torch.py                      # uninterrupted
    python examples/checkpoint_resume_torch.py --stop-at 37 --ckpt /tmp/run.pt   # "preempted"
    python examples/checkpoint_resume_torch.py --resume /tmp/run.pt  # goes on from step 37

Each run prints one ``step loss`` line per step; the interrupted + resumed runs print exactly
the lines of the uninterrupted one. With ``--loader stateful`` (needs ``pip install
torchdata``) the pipeline runs in torchdata's ``StatefulDataLoader`` with 2 worker processes,
which saves one state per worker.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
import torch

from dataflow import DataFromArrays
from dataflow.adapters.torch import to_torch

EPOCHS, BATCH = 3, 32


def make_data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1000, 8)).astype(np.float32)
    y = (x @ rng.normal(size=8) + 0.1 * rng.normal(size=1000)).astype(np.float32)
    return x, y


def augment(dp: list[Any], rng: np.random.Generator) -> list[Any]:
    """Random noise from the datapoint's own generator: the same after a resume."""
    x, y = dp
    return [x + rng.normal(0, 0.05, size=x.shape).astype(np.float32), y]


def make_loader(kind: str) -> Any:
    x, y = make_data()
    if kind == "stateful":
        from torchdata.stateful_dataloader import StatefulDataLoader

        flow = DataFromArrays([x, y], shuffle=True, seed=1).map(augment, item_rng=True, seed=2)
        # persistent workers keep the flows (and their RNGs) across epochs, so the order of
        # later epochs does not depend on the per-epoch seeds DataLoader draws from torch
        return StatefulDataLoader(to_torch(flow), batch_size=BATCH, num_workers=2, persistent_workers=True)
    flow = DataFromArrays([x, y], shuffle=True, seed=1).map(augment, item_rng=True, seed=2).batch(BATCH)
    return to_torch(flow)  # iterated directly: one batch per step, state via .state_dict()


def train(kind: str, stop_at: int | None, ckpt: str | None, resume: str | None) -> list[tuple[int, float]]:
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = make_loader(kind)
    step, epoch = 0, 0
    if resume:
        saved = torch.load(resume)  # weights_only=True: the data state is plain data
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["opt"])
        loader.load_state_dict(saved["data"])
        torch.set_rng_state(saved["torch_rng"])  # DataLoader draws each epoch's worker seeds from it
        step, epoch = saved["step"], saved["epoch"]
    losses = []
    while epoch < EPOCHS:
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x).squeeze(1), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            losses.append((step, float(loss)))
            print(f"{step} {float(loss):.10f}", flush=True)
            if step == stop_at:
                state = {"model": model.state_dict(), "opt": opt.state_dict(), "data": loader.state_dict()}
                torch.save({**state, "torch_rng": torch.get_rng_state(), "step": step, "epoch": epoch}, ckpt)
                return losses
        epoch += 1
    return losses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stop-at", type=int, default=None, help="save a checkpoint after this step, exit")
    parser.add_argument("--ckpt", default="checkpoint.pt", help="where --stop-at saves")
    parser.add_argument("--resume", default=None, help="a checkpoint to resume from")
    parser.add_argument("--loader", choices=["direct", "stateful"], default="direct")
    args = parser.parse_args()
    train(args.loader, args.stop_at, args.ckpt, args.resume)


if __name__ == "__main__":
    main()
