"""Process runner, batches made in the workers: 2 workers, each an endless source of
``[int, float32[10]]`` batched by 64 inside the worker; items/s (= batches/s x 64) received.

Contenders, in one run:

- ``dataflow``: ``MultiProcessRunnerZMQ(source.batch(64), num_proc=2)``;
- ``tensorpack 0.11``: ``MultiProcessRunnerZMQ(BatchData(source, 64), num_proc=2)`` (if installed);
- ``torch DataLoader``: ``DataLoader(IterableDataset of items, num_workers=2, batch_size=64)``
  with its default collate, which also batches in the workers (if torch is installed).

The source and the measurement are those of ``mp_small.py`` (worker start-up excluded).

    pip install tensorpack==0.11 torch   # optional peers
    python benchmarks/mp_batch.py [--seconds 2] [--rounds 5]

Targets (issue 3): >= 1.0x tensorpack and >= 20x torch's DataLoader.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.mp_small import main_for  # noqa: E402

BATCH = 64

if __name__ == "__main__":
    main_for("mp_batch", BATCH, ">= 1.0x tensorpack 0.11 and >= 20x torch DataLoader")
