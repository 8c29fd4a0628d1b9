"""The checkpoint of a parallel map (:class:`~._map_base.ParallelMapBase`): the state its
hooks save and load back (:func:`get_state`, :func:`set_state`, :func:`upstreams_live`; the
class keeps thin methods calling them), and the part of it that the consumer keeps: which
inputs are not delivered yet.

Every task (a chunk of upstream datapoints, with the item index of its first one) stays in a
:class:`TaskLedger` from its submission until every output it produced has been yielded.
When a task's outputs are released to the consumer (in input order for ordered maps, as they
come for unordered ones), the ledger notes the cumulative number of *units* released (a unit
is an output datapoint; for a map-and-batch, a mapped datapoint before batching). At
``state_dict()`` time, the units not yet yielded tell which released tasks are not fully
delivered and how many outputs of the first of them were; tasks still in flight or waiting
in the reorder buffer are not delivered at all. Those tasks' inputs, in the order they will
be delivered, are the state: a resumed map submits them again first and skips what the
first one had delivered. The state does not depend on the number of workers, so an ordered
map resumes identically at any worker count (as long as ``map_func`` is deterministic, or
draws from per-item RNGs: ``item_rng=True``).

Cost: a dict entry and a deque entry per task, pruned as tasks are delivered.
"""

from __future__ import annotations

import inspect
from collections import deque
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._state_fields import decode_items, encode_items, field, int_field
from ..errors import StateError

if TYPE_CHECKING:
    from ._map_base import ParallelMapBase

__all__ = ["TaskLedger", "decode_tasks", "encode_tasks", "get_state", "set_state", "upstreams_live"]

Task = tuple[list[Any], int]  # the inputs, the item index of the first one


class TaskLedger:
    """Tasks not yet fully delivered (see the module docstring)."""

    __slots__ = ("added", "marks", "tasks")

    def __init__(self) -> None:
        self.tasks: dict[int, Task] = {}
        self.marks: deque[tuple[int, int, int]] = deque()  # seq, first unit, end unit (released)
        self.added = 0  # units released so far

    def submitted(self, seq: int, inputs: list[Any], first_index: int) -> None:
        self.tasks[seq] = (inputs, first_index)

    def released(self, seq: int, units: int) -> None:
        start = self.added
        self.added = start + units
        self.marks.append((seq, start, self.added))

    def prune(self, unyielded: int) -> None:
        """Forget tasks whose every unit was yielded (``unyielded`` units are still waiting)."""
        yielded, marks, tasks = self.added - unyielded, self.marks, self.tasks
        while marks and marks[0][2] <= yielded:
            tasks.pop(marks.popleft()[0], None)

    def undelivered(self, unyielded: int, ordered: bool) -> tuple[list[Task], int]:
        """The tasks to submit again, in delivery order, and how many units of the first of
        them were already yielded."""
        self.prune(unyielded)
        yielded = self.added - unyielded
        released = [seq for seq, _, _ in self.marks if seq in self.tasks]
        skip = yielded - self.marks[0][1] if self.marks else 0
        rest = sorted(seq for seq in self.tasks if seq not in set(released))
        order = sorted(released + rest) if ordered else released + rest
        return [self.tasks[seq] for seq in order], max(0, skip)

    def clear(self) -> None:
        self.tasks.clear()
        self.marks.clear()
        self.added = 0


def encode_tasks(stage: str, tasks: list[Task], skip: int) -> dict[str, Any]:
    """The tasks as plain data: every input in one encoded list, plus the chunk sizes."""
    flat = [dp for inputs, _ in tasks for dp in inputs]
    return {
        "inputs": encode_items(stage, flat, "inputs in flight") if flat else None,
        "sizes": [len(inputs) for inputs, _ in tasks],
        "first_indices": [first for _, first in tasks],
        "skip": skip,
    }


def decode_tasks(stage: str, state: Mapping[str, Any]) -> tuple[list[Task], int]:
    """What :func:`encode_tasks` wrote."""
    sizes = field(stage, state, "sizes", list)
    firsts = field(stage, state, "first_indices", list)
    skip = int_field(stage, state, "skip")
    flat = decode_items(stage, state, "inputs") if sizes and sum(sizes) else []
    sizes_ok = all(isinstance(n, int) and n > 0 for n in sizes)
    if len(sizes) != len(firsts) or not sizes_ok or sum(sizes) != len(flat):
        raise StateError(f"{stage}: the saved inputs in flight are corrupted")
    tasks, pos = [], 0
    for n, first in zip(sizes, firsts):
        tasks.append((flat[pos : pos + n], int(first)))
        pos += n
    return tasks, skip


def upstreams_live(m: ParallelMapBase, live: bool) -> list[bool]:
    if m.strict:
        return [live]
    gen = m._endless  # _forever yields only from inside an upstream epoch
    return [gen is not None and inspect.getgeneratorstate(gen) == inspect.GEN_SUSPENDED]  # type: ignore[arg-type]


def get_state(m: ParallelMapBase, live: bool) -> dict[str, Any]:
    stage = type(m).__name__
    carry = live or not m.strict  # a non-strict map's results in flight belong to its next epoch
    tasks, skip = m._ledger.undelivered(m._unyielded_units(), m.ordered) if carry else ([], 0)
    state: dict[str, Any] = {"epoch": m._epoch, "index": m._index}
    state["produced"] = m._produced if live else 0
    state["tasks"] = encode_tasks(stage, tasks, skip)
    if m.item_rng and m._base is not None:
        state["base"] = [str(m._base[0]), list(m._base[1])]
    return state


def set_state(m: ParallelMapBase, state: Mapping[str, Any], live: bool) -> None:
    stage = type(m).__name__
    tasks, skip = decode_tasks(stage, field(stage, state, "tasks", dict))
    m._epoch = int_field(stage, state, "epoch")
    m._index = int_field(stage, state, "index")
    if m.item_rng and "base" in state:
        entropy, key = field(stage, state, "base", list)
        m._base = (int(entropy), tuple(int(k) for k in key))
    m.__dict__.pop("_resume", None)
    resume: tuple[Any, ...] | None = None
    if m.strict:
        resume = (tasks, skip) if live else None
    else:
        resume = (tasks, skip, int_field(stage, state, "produced") if live else 0, True)
    if resume is not None:
        m._resume = resume
