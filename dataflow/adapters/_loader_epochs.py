"""Which DataLoader iteration a worker process belongs to: :class:`LoaderEpochs`.

The workers of one ``iter(loader)`` must draw one order of a sharded flow, and so must the
workers of every data-parallel rank (each rank's loader is its own). DataLoader's per-iteration
seed cannot give that: it comes from each rank's torch generator, which scripts often seed
per rank. What every rank does agree on is how many times it has started its loader's
workers, so each worker takes a ticket from a counter its loader's workers share, and the
iteration is ``ticket // num_workers``.
"""

from __future__ import annotations

import os
import tempfile
import uuid

__all__ = ["LoaderEpochs"]


class LoaderEpochs:
    """A counter shared by the processes a DataLoader starts for one dataset.

    It is a file of one byte per ticket in the temporary directory, appended to with
    ``O_APPEND``: the offset after a process's one-byte write is its ticket, and the system
    makes each append atomic, so no lock is needed and it works under ``fork``, ``spawn``
    and ``forkserver`` (the object pickles as its path). The workers of one iteration all
    start before the next iteration's, so ``ticket // num_workers`` numbers the iterations.
    The process that made the counter removes the file when the counter is collected.
    """

    def __init__(self) -> None:
        self.path = os.path.join(tempfile.gettempdir(), f"dataflow-loader-{uuid.uuid4().hex}")
        self._owner = os.getpid()

    def next_ticket(self) -> int:
        """This process's ticket: 0, 1, 2, ... in the order processes asked."""
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, b".")
            return os.lseek(fd, 0, os.SEEK_CUR) - 1
        finally:
            os.close(fd)

    def __del__(self) -> None:
        if getattr(self, "_owner", None) == os.getpid():
            try:
                os.unlink(self.path)
            except OSError:
                pass
