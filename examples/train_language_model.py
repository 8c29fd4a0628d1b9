"""Mix, tokenize, pack and batch text for a tiny language model; stop it; resume it with new
mixture weights, and see every corpus continue where it was.

Three synthetic corpora ("web", "code", "books") are mixed at chosen weights, tokenized by a
byte-level tokenizer in 2 worker processes, packed into rows of 64 tokens (best fit) and
batched by 8; a tiny next-token model trains on them with torch. The data pipeline's state
is saved with the model and optimizer in one ``torch.save`` checkpoint.

    python examples/train_language_model.py --steps 12                         # uninterrupted
    python examples/train_language_model.py --steps 12 --stop-at 5 --ckpt /tmp/lm.pt
    python examples/train_language_model.py --steps 12 --resume /tmp/lm.pt --weights 0.1,0.1,0.8

Each step prints ``step N loss L counts [web, code, books]``: how many documents each corpus
has given the pipeline so far (the process map reads ahead of training, so the counts run
ahead of the batches, and the first batches after a resume are the ones that were in flight
at the stop). The resumed run goes on from the counts saved at the stop (each corpus
continues with its next document: nothing read twice, nothing skipped) and draws its
corpora with the new weights from there on.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
import torch

import dataflow
from dataflow import DataFromList

CORPORA = ("web", "code", "books")
SEQ_LEN, BATCH, VOCAB = 64, 8, 257  # bytes 1..256; 0 is padding


def corpus(name: str) -> dataflow.DataFlow[Any]:
    """A corpus of 400 short documents, each tagged with its corpus and number."""
    rng = np.random.default_rng(CORPORA.index(name))
    docs = [
        {"doc": f"{name}:{i}", "text": f"{name} {i} " + "x" * int(rng.integers(5, 40))} for i in range(400)
    ]
    return DataFromList(docs, shuffle=False)


def tokenize(dp: dict[str, Any]) -> dict[str, Any]:
    """Byte-level tokens (1..256), so no tokenizer package is needed."""
    return {"tokens": np.frombuffer(dp["text"].encode(), np.uint8).astype(np.int64) + 1, "doc": dp["doc"]}


def pipeline(weights: list[float]) -> dataflow.DataFlow[Any]:
    mixed = dataflow.mix([corpus(name) for name in CORPORA], weights, seed=0, stop="never")
    tokens = mixed.parallel_map(tokenize, num_proc=2)
    packed = tokens.pack(SEQ_LEN, keys=("tokens",), method="best_fit", num_bins=8)
    return packed.batch(BATCH)


class TinyLM(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, 32)
        self.out = torch.nn.Linear(32, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.out(self.embed(tokens))  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument(
        "--stop-at", type=int, default=None, help="save a checkpoint and stop after this step"
    )
    parser.add_argument("--ckpt", default="/tmp/lm.pt")
    parser.add_argument("--resume", default=None, help="a checkpoint to go on from")
    parser.add_argument("--weights", default="0.6,0.25,0.15", help="the mixture weights (web, code, books)")
    args = parser.parse_args()
    weights = [float(w) for w in args.weights.split(",")]

    torch.manual_seed(0)
    model = TinyLM()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    flow = pipeline(weights)
    first = 0
    if args.resume:
        ckpt = torch.load(args.resume)
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["opt"])
        flow.load_state_dict(ckpt["data"])
        mixer = _mixer(flow)
        mixer.set_weights(weights)  # every corpus goes on where it was, drawn with the new weights
        first = ckpt["step"]
    flow.reset_state()
    with flow:
        for step, (rows, _, _) in zip(range(first + 1, args.steps + 1), _batches(flow)):
            tokens = torch.as_tensor(rows)
            logits = model(tokens[:, :-1])
            loss = torch.nn.functional.cross_entropy(
                logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1), ignore_index=0
            )
            opt.zero_grad()
            loss.backward()
            opt.step()
            print(f"step {step} loss {loss.item():.4f} counts {_mixer(flow).counts}", flush=True)
            if step == args.stop_at:
                torch.save(
                    {
                        "model": model.state_dict(),
                        "opt": opt.state_dict(),
                        "data": flow.state_dict(),
                        "step": step,
                    },
                    args.ckpt,
                )
                print(f"saved {args.ckpt} at step {step}", flush=True)
                return


def _batches(flow: dataflow.DataFlow[Any]) -> Any:
    for batch in flow:
        yield batch["tokens"], batch["tokens_segment_ids"], batch["tokens_positions"]


def _mixer(flow: dataflow.DataFlow[Any]) -> dataflow.WeightedMixData:
    """The mixer at the bottom of the pipeline (through its single-upstream stages)."""
    node: Any = flow
    while not isinstance(node, dataflow.WeightedMixData):
        node = node.ds
    return node


if __name__ == "__main__":
    main()
