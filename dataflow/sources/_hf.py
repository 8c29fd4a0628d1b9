"""A Hugging Face ``datasets.Dataset`` as a random-access source: :class:`DataFromHF` (and
:func:`from_hf`, its function spelling). A ``datasets.IterableDataset`` given to either becomes
a :class:`~._hf_stream.DataFromHFIterable`."""

from __future__ import annotations

from collections.abc import Iterator
from operator import itemgetter
from typing import Any

import numpy as np

from ._hf_rows import check_format, hf_kind, table_rows
from ._hf_stream import DataFromHFIterable
from ._indexed import IndexedSource, Order, cursor

__all__ = ["DataFromHF", "from_hf"]

#: Rows are read in blocks of at most this many rows and about this many bytes: one Arrow
#: ``take`` (or zero-copy ``slice``) and one formatting call per block instead of per row.
_BLOCK_ROWS = 1024
_BLOCK_BYTES = 16 << 20


class DataFromHF(IndexedSource[dict[str, Any]]):
    """One dict per row of a Hugging Face ``datasets.Dataset``: a random-access source.

    ``DataFromHF(ds)`` with a ``datasets.Dataset`` (in memory or memory-mapped, with or
    without an indices mapping from ``select``/``shuffle``/``train_test_split``) yields
    ``{column: value}`` for rows ``0..len(ds)-1`` in order, or with ``shuffle=True`` in a new
    permutation each epoch drawn from ``self.rng`` (``seed=`` or :func:`dataflow.set_seed`
    make it reproducible; ``reset_state()`` is required then). ``len`` is exact. Like every
    random-access source it shards by index (``.shard()`` right after it reads only its
    rank's rows), and its state is ``(epoch, position)`` plus the RNG at the epoch's start:
    resuming reads nothing again, and :func:`dataflow.checkpoint.reshard` changes the number
    of ranks mid-epoch. The state checks the row count, not the content: resume with the
    same dataset.

    ``format`` is the output format, overriding the dataset's own (its selected columns are
    kept): ``"numpy"`` (the default) gives numpy values as ``datasets`` formats them (a
    fixed-size list or a tensor as an array, a number as a numpy scalar), except that strings
    are ``str`` and binary values ``bytes``; ``None`` (or ``"python"``) gives Python objects;
    ``"torch"``, ``"tensorflow"`` and ``"jax"`` give that framework's tensors.

    Speed: rows are read in blocks (up to 1024 rows, about 16 MiB) with one Arrow ``take``
    (or a zero-copy slice when the order is contiguous) and one call of ``datasets``'
    formatter per block, then cut into rows. Reading row by row (``ds[i]``) costs a query and
    a formatting call per row, tens of times slower. The block is read ahead of the
    consumer, but the position in the state counts only the rows delivered, so a resume is
    exact. Array values of a block's rows are views of the block's arrays.

    A ``datasets.IterableDataset`` given here builds a :class:`DataFromHFIterable` instead
    (a stream checkpointed through the dataset's own ``state_dict()``); so does
    :func:`from_hf`. ``import dataflow`` does not import ``datasets``: it is imported when a
    dataset is given (``pip install "dataflow-ml[hf]"``).
    """

    def __new__(cls, ds: Any = None, *args: Any, **kwargs: Any) -> Any:
        if ds is not None and hf_kind(cls.__name__, ds) == "iterable":
            return DataFromHFIterable(ds, *args, **kwargs)
        return super().__new__(cls)

    def __init__(
        self, ds: Any, shuffle: bool = False, seed: int | None = None, format: str | None = "numpy"
    ) -> None:
        stage = type(self).__name__
        super().__init__(seed)
        hf_kind(stage, ds)
        self._shuffle = bool(shuffle)
        self.format = check_format(stage, format)
        if not ds.column_names:
            raise ValueError(f"{stage}: the dataset has no columns; give a dataset with at least one")
        self.ds = ds
        self._n = len(ds)

    def _num_items(self) -> int:
        return self._n

    def _repr_args(self) -> dict[str, Any]:
        return {"rows": self._n, "columns": list(self.ds.format["columns"]), "format": self.format,
                **super()._repr_args()}

    def _getter(self) -> Any:
        return lambda i: next(self._rows([i], 0))

    def _open(self, order: Order, start: int) -> tuple[Iterator[Any], Iterator[int], Iterator[Any]]:
        # The cursor is advanced once per row delivered (zip pulls it first, then the row),
        # while the rows come from blocks read ahead of it: the state's position stays exact.
        cur, probe, lead = cursor(order, start)
        return map(itemgetter(1), zip(lead, self._rows(order, start))), cur, probe

    def _rows(self, order: Order, start: int) -> Iterator[dict[str, Any]]:
        """The rows at ``order[start:]``, read block by block."""
        from datasets.formatting import get_formatter

        ds = self.ds
        spec = ds.format
        kwargs = spec["format_kwargs"] if spec["type"] == self.format else {}
        formatter = get_formatter(self.format, features=ds.features, **kwargs)
        columns = None if spec["columns"] == ds.column_names else spec["columns"]
        output_all = spec["output_all_columns"]
        table = ds.data.table
        indices = getattr(ds, "_indices", None)  # the mapping of select/shuffle, if any
        mapping = None if indices is None else indices.column(0).to_numpy()
        per_row = ds.data.nbytes // max(1, table.num_rows)
        block = max(1, min(_BLOCK_ROWS, _BLOCK_BYTES // max(1, per_row)))
        for s in range(start, len(order), block):
            part = order[s : s + block]
            if mapping is None and isinstance(part, range) and part.step == 1:
                sub = table.slice(part.start, len(part))
            else:
                rows = np.asarray(part, dtype=np.int64)
                sub = table.take(rows if mapping is None else mapping[rows])
            yield from table_rows(sub, formatter, columns, output_all)


def from_hf(ds: Any, **kwargs: Any) -> Any:
    """A flow over a Hugging Face dataset: :class:`DataFromHF` for a ``datasets.Dataset``
    (random access), :class:`DataFromHFIterable` for a ``datasets.IterableDataset`` (a
    stream). ``kwargs`` are theirs (``shuffle``, ``seed``, ``format``)."""
    return DataFromHF(ds, **kwargs)
