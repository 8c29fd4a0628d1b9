"""Small in-memory flows shared by the tests: they record what the stage under test did to
them (epochs started, items produced, resets, closes, iterators closed early)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from dataflow import LengthUnknownError
from dataflow.base import DataFlow

__all__ = ["ListFlow", "collect", "epochs"]


class ListFlow(DataFlow):
    """Yields the items of ``items`` in order each epoch; reentrant; exact ``len``.

    Records: ``resets`` (reset_state calls), ``closes`` (close calls), ``epochs`` (iterators
    started), ``produced`` (items yielded in total), ``finished`` (epochs that ran to the
    end), ``aborted`` (epochs whose iterator was closed before the end).
    ``has_len=False`` makes ``len`` raise :class:`LengthUnknownError`; ``fake_len`` makes
    ``len`` claim that number instead of the real one.
    """

    def __init__(self, items: Sequence[Any], has_len: bool = True, fake_len: int | None = None) -> None:
        self.items = list(items)
        self.has_len = has_len
        self.fake_len = fake_len
        self.resets = 0
        self.closes = 0
        self.epochs = 0
        self.produced = 0
        self.finished = 0
        self.aborted = 0

    def __len__(self) -> int:
        if not self.has_len:
            raise LengthUnknownError("ListFlow(has_len=False)")
        return self.fake_len if self.fake_len is not None else len(self.items)

    def reset_state(self) -> None:
        self.resets += 1

    def close(self) -> None:
        self.closes += 1

    def __iter__(self) -> Iterator[Any]:
        self.epochs += 1
        done = False
        try:
            for item in self.items:
                self.produced += 1
                yield item
            done = True
        finally:
            if done:
                self.finished += 1
            else:
                self.aborted += 1


def collect(df: DataFlow) -> list[Any]:
    """One epoch of ``df`` as a list."""
    return list(iter(df))


def epochs(df: DataFlow, n: int, reset: bool = True) -> list[list[Any]]:
    """``reset_state()`` (unless ``reset=False``) then ``n`` epochs, each as a list."""
    if reset:
        df.reset_state()
    return [collect(df) for _ in range(n)]
