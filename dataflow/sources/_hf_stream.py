"""A Hugging Face ``datasets.IterableDataset`` as a stream: :class:`DataFromHFIterable` (what
:class:`~dataflow.DataFromHF` and :func:`~dataflow.from_hf` build for one)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from itertools import islice
from typing import Any

from .._errors import StateError, StateUnsupportedError
from .._state_fields import check_plain, field, int_field
from ..base import DataFlow
from ._hf_rows import check_format, hf_kind, table_rows
from ._order import ShardSpec

__all__ = ["DataFromHFIterable"]

#: Rows per batch when the stream is backed by Arrow tables (one formatting call per batch).
_BLOCK_ROWS = 256
_BUFFERED = "BufferShuffledExamplesIterable"


class DataFromHFIterable(DataFlow[dict[str, Any]]):
    """One dict per example of a Hugging Face ``datasets.IterableDataset``, in the dataset's
    order (build it with ``DataFromHF(ds)`` or ``from_hf(ds)``).

    Epochs: epoch ``k`` (from 0) iterates the dataset after ``ds.set_epoch(e0 + k)``, where
    ``e0`` is ``ds.epoch`` when this flow was built, as a ``datasets`` training loop does:
    ``datasets`` then permutes the order of the stream's shards from the second epoch on
    (seeded by the epoch), and a dataset it shuffles reshuffles every epoch. ``len`` is
    unknown. The dataset given is not changed (the flow iterates its own copy). ``format``
    is as for :class:`~dataflow.DataFromHF`: numpy values by default, strings as ``str``,
    binary values as ``bytes``.

    Reading: a stream backed by Arrow tables (``Dataset.to_iterable_dataset``, Parquet or
    Arrow files) is read in Arrow batches of 256 rows, each formatted with one call of
    ``datasets``' formatter and cut into rows; other streams (``from_generator``) are read
    as Python examples, turned into numpy values (or tensors) by the formatter's
    ``recursive_tensorize``.

    State: the epoch count and the dataset's own ``state_dict()`` (``datasets`` updates it
    as each example is yielded): read example by example, the state after the last example
    delivered; read by batch, the state before the batch in progress and how many of its
    rows were delivered. Resuming loads it with the dataset's ``load_state_dict()`` (the
    batch is read again and its delivered rows dropped) and goes on exactly. A dataset
    shuffled by ``datasets`` with a shuffle buffer cannot resume exactly (``datasets`` does
    not save the buffer and would lose its examples): ``state_dict()`` raises
    :class:`~dataflow.StateUnsupportedError` then; shuffle with dataflow instead
    (``.shuffle(buffer_size)`` after this source checkpoints its buffer), or give the
    map-style ``datasets.Dataset`` with ``shuffle=True``.

    Sharding under :class:`~dataflow.ShardData`: **by stream shards** with ``equal=False``
    when the dataset has at least ``num_shards`` shards (``ds.num_shards``: its files, or
    the ``num_shards`` of ``to_iterable_dataset``): rank ``i`` reads only shards
    ``i, i + num_shards, ...`` (``ds.shard(num_shards, i, contiguous=False)``). Otherwise,
    and always with ``equal=True`` (shard lengths are unknown, so equal counts cannot be
    promised from shards), **by position**: every rank reads the whole stream and keeps its
    datapoints. States of a stream cannot be resharded to another number of ranks.
    """

    def __init__(
        self, ds: Any, shuffle: bool = False, seed: int | None = None, format: str | None = "numpy"
    ) -> None:
        stage = type(self).__name__
        if hf_kind(stage, ds) != "iterable":
            raise TypeError(f"{stage}: ds must be a datasets.IterableDataset, got {type(ds).__name__}")
        if shuffle:
            raise ValueError(
                f"{stage}: shuffle=True needs random access, which a datasets.IterableDataset does "
                f"not have; shuffle the stream with .shuffle(buffer_size) after this source (it "
                f"checkpoints its buffer), or give a map-style datasets.Dataset"
            )
        self.format = check_format(stage, format)
        self.ds = ds
        self._first_epoch = int(ds.epoch)
        self._epochs = 0
        self._shard: ShardSpec | None = None
        self._hf: Any = None
        self._resume: tuple[dict[str, Any] | None, int, int] | None = None
        self._saved: dict[str, Any] | None = None  # the dataset's state before the batch in progress
        self._skip = 0  # rows of that batch delivered
        self._block = 0  # rows per batch this epoch (0: example by example)
        self._reading = False  # example by example: the dataset's live state_dict() is the position
        self._arrow = False  # read as Arrow tables, by batch
        self._epoch_hf: Any = None  # the copy the epoch in progress reads

    def _repr_args(self) -> dict[str, Any]:
        args: dict[str, Any] = {"shards": self.ds.num_shards, "format": self.format}
        if self._shard is not None:
            args["rank"] = f"{self._shard.index}/{self._shard.num_shards}"
        return args

    def _set_shard(self, spec: ShardSpec) -> bool:
        """Called by :class:`~dataflow.ShardData` right after this source: read only this
        rank's stream shards when that is exact (see the class docstring), else ``False``."""
        if self._shard is not None and self._shard != spec:
            raise ValueError(
                f"{type(self).__name__} is already sharded as shard {self._shard.index} of "
                f"{self._shard.num_shards}; build one source per .shard() call"
            )
        if spec.equal or spec.pad or self.ds.num_shards < spec.num_shards:
            return False
        self._shard, self._hf = spec, None
        return True

    def _handle(self) -> Any:
        """This flow's own copy of the dataset (this rank's shards): Arrow tables when the
        stream is backed by Arrow, else Python examples; formatted here, not by ``datasets``."""
        if self._hf is None:
            ds, spec = self.ds, self._shard
            if spec is not None:
                ds = ds.shard(num_shards=spec.num_shards, index=spec.index, contiguous=False)
            arrow = getattr(getattr(ds, "_ex_iterable", None), "iter_arrow", None) is not None
            self._hf = ds.with_format("arrow" if arrow else None)
            self._arrow = arrow
        return self._hf

    def close(self) -> None:
        """Drop this flow's copy of the dataset (with torch imported, ``datasets`` keeps each
        copy's epoch in a shared-memory tensor, released with the copy)."""
        self._hf = self._epoch_hf = None

    def __iter__(self) -> Iterator[dict[str, Any]]:
        from datasets.formatting import get_formatter

        hf = self._handle()
        resume, self._resume = self._resume, None
        if resume is None:
            self._epochs += 1
            resume = (None, 0, _BLOCK_ROWS if self._arrow else 0)
        saved, skip, block = resume
        hf.set_epoch(self._first_epoch + self._epochs - 1)
        hf.load_state_dict(saved)  # None: from the epoch's start
        self._saved, self._skip, self._block, self._reading = saved, skip, block, False
        self._epoch_hf = hf
        formatter = get_formatter(self.format, features=hf.features)
        return self._batches(hf, block, formatter) if block else self._examples(hf, formatter)

    def _batches(self, hf: Any, block: int, formatter: Any) -> Iterator[dict[str, Any]]:
        before, skip = self._saved, self._skip
        for table in hf.iter(batch_size=block):
            after = hf.state_dict()
            self._saved, self._skip = before, skip
            for row in islice(table_rows(table, formatter), skip, None):
                self._skip += 1
                yield row
            before, skip = after, 0

    def _examples(self, hf: Any, formatter: Any) -> Iterator[dict[str, Any]]:
        tensorize = getattr(formatter, "recursive_tensorize", None)  # None: Python objects
        for example in hf:
            self._reading = True
            yield example if tensorize is None else tensorize(example)

    def _get_state(self, live: bool) -> dict[str, Any]:
        stage = type(self).__name__
        state: dict[str, Any] = {
            "epochs": self._epochs,
            "first_epoch": self._first_epoch,
            "shard": None if self._shard is None else self._shard.as_list(),
        }
        if live:
            hf = self._epoch_hf if self._epoch_hf is not None else self._handle()
            hf_state = hf.state_dict() if self._reading else self._saved
            if _shuffle_buffered(getattr(hf, "_ex_iterable", None)):
                raise StateUnsupportedError(
                    f"{stage}: the dataset shuffles with a buffer (IterableDataset.shuffle), whose "
                    f"examples datasets does not save, so a resume would lose them; shuffle with "
                    f"dataflow instead (.shuffle(buffer_size) after this source checkpoints its "
                    f"buffer), or read a map-style datasets.Dataset with shuffle=True"
                )
            check_plain(stage, hf_state, "the dataset's state_dict()")
            state.update(hf=hf_state, skip=self._skip if self._block else 0, block=self._block)
        return state

    def _set_state(self, state: Mapping[str, Any], live: bool) -> None:
        stage = type(self).__name__
        saved_shard = field(stage, state, "shard", (list, type(None)))
        mine = None if self._shard is None else self._shard.as_list()
        if saved_shard != mine:
            raise StateError(
                f"{stage}: the state was saved by stream shard {saved_shard} ([num_shards, index, "
                f"equal, pad]) but this pipeline reads {mine}; each rank loads its own state"
            )
        epochs = int_field(stage, state, "epochs")
        first_epoch = int_field(stage, state, "first_epoch")
        resume = None
        if live:
            hf_state = field(stage, state, "hf", (dict, type(None)))
            if hf_state is not None:
                fresh = _types(self._handle().state_dict())
                if _types(hf_state) != fresh:
                    raise StateError(
                        f"{stage}: the dataset's saved state is for a stream of {sorted(_types(hf_state))} "
                        f"but this dataset is a stream of {sorted(fresh)}; resume with the same dataset"
                    )
                if hf_state.get("epoch") != first_epoch + epochs - 1:
                    raise StateError(
                        f"{stage}: the dataset's saved state is for its epoch {hf_state.get('epoch')!r}, "
                        f"not {first_epoch + epochs - 1}; the state is corrupted"
                    )
            resume = (hf_state, int_field(stage, state, "skip"), int_field(stage, state, "block"))
        self._epochs, self._first_epoch, self._resume = epochs, first_epoch, resume


def _shuffle_buffered(ex: Any) -> bool:
    """Whether a ``datasets`` example iterable (and those it reads from) shuffles with a
    buffer: its state does not say so (the buffer passes its source's state on)."""
    if ex is None:
        return False
    if type(ex).__name__ == _BUFFERED:
        return True
    inner = [getattr(ex, "ex_iterable", None), *getattr(ex, "ex_iterables", ())]
    return any(_shuffle_buffered(e) for e in inner)


def _types(state: Any) -> set[str]:
    """The ``type`` names (the example iterables) in a ``datasets`` state."""
    if isinstance(state, Mapping):
        found = {state["type"]} if isinstance(state.get("type"), str) else set()
        for value in state.values():
            found |= _types(value)
        return found
    if isinstance(state, list):
        return set().union(*map(_types, state)) if state else set()
    return set()
