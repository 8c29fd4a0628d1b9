"""What one worker of a process runner in shard mode runs: :class:`RunnerPart`.

Worker ``index`` of ``num_parts`` runs ``ds.shard(num_parts, index, equal=False)``, built in
the worker (after the fork, or after unpickling), so the consumer's flow is never changed and
every worker shards its own copy. After each epoch of its part the worker yields a
:class:`PartEnd` marker, which the consumer uses to end its epoch once every worker's part of
that epoch has arrived (a fast worker's next epoch waits in the consumer meanwhile).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from .. import _seeding as seeding
from .._state_fields import field
from ..base import DataFlow, ProxyDataFlow
from ..ops._shard import ShardData

__all__ = ["PartEnd", "RunnerPart"]


class PartEnd:
    """The marker a :class:`RunnerPart` yields after each epoch of its part."""

    __slots__ = ()

    def __reduce__(self) -> tuple[type[PartEnd], tuple[()]]:
        return (PartEnd, ())


class RunnerPart(ProxyDataFlow):
    """Part ``index`` of ``num_parts`` of ``ds`` (``equal=False``), each epoch followed by a
    :class:`PartEnd`. ``reset_state()`` marks the process as a worker whose RNGs are those of
    ``seed`` itself (the same in every worker, so every worker draws the same order of ``ds``
    and the parts partition it), then builds the shard and resets it."""

    def __init__(self, ds: DataFlow[Any], num_parts: int, index: int, seed: int) -> None:
        super().__init__(ds)
        self.num_parts, self.index, self.seed = num_parts, index, seed
        self._built = False
        self._marked = False  # the current epoch's PartEnd was yielded
        self._resume_marked: bool | None = None

    def reset_state(self) -> None:
        seeding.enter_worker((), seed=self.seed)
        if not self._built:
            self.ds = ShardData(self.ds, self.num_parts, self.index, equal=False)
            self._built = True
        self.ds.reset_state()

    def __len__(self) -> int:
        return len(self.ds) + 1

    def __iter__(self) -> Iterator[Any]:
        marked, self._resume_marked = self._resume_marked, None
        self._marked = bool(marked)
        return self._part()

    def _part(self) -> Iterator[Any]:
        yield from self.ds
        if not self._marked:
            self._marked = True
            yield PartEnd()

    def _get_state(self, live: bool) -> dict[str, Any]:
        return {"marked": self._marked if live else False}

    def _set_state(self, state: Mapping[str, Any], live: bool) -> None:
        marked = bool(field(type(self).__name__, state, "marked", bool))
        self._resume_marked = marked if live else None

