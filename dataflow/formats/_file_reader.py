"""What the readers of a list of files share (:class:`~dataflow.TFRecordData`,
:class:`~dataflow.ParquetData`, :class:`~dataflow.WebDatasetData`): :class:`FileReader`."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

import numpy as np

from .. import _seeding as seeding
from .._errors import DataFlowNotReset, StateError
from .._state import checking_only
from .._state_fields import check_file_count, int_field, offset_field
from ..base import DataFlow
from ..sources._order import ShardSpec
from ._storage import STORAGE_ARGS, PathSpec, ShardStorage, StorageReader

__all__ = ["FileReader", "storage_args"]

T = TypeVar("T")


def storage_args(args: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of remote files among a reader's ``__init__`` arguments."""
    return {name: args[name] for name in STORAGE_ARGS}


class FileReader(StorageReader, DataFlow[T]):
    """A flow over the files of one :class:`~dataflow.formats._storage.ShardStorage`, read as
    a list of *pieces* (a file, or part of one) per epoch: this rank's pieces
    (``_rank_work()``), in file order or, with ``_shuffle_work``, in a permutation drawn from
    the shuffle seed and the epoch number. ``self._pos`` is the piece being read,
    ``self._yielded`` the datapoints yielded this epoch, ``self._limit`` where the rank stops
    (``None``: at its last piece).

    State: the number of files, the shuffle seed and the epoch, and during an epoch the
    position the subclass gives (``_position_state()``) and reads back (``_position_from()``),
    handed to ``_resume()`` when the next epoch starts.
    """

    _shuffle_work: bool
    #: the smallest value of each field of a piece saved in a state (``None``: a byte offset,
    #: saved as a decimal string); the first field is the file
    _piece_fields: tuple[int | None, ...]

    def __init__(
        self, path: PathSpec, seed: int | None, storage: Mapping[str, Any], name: str = "path"
    ) -> None:
        stage = type(self).__name__
        self._storage = ShardStorage(stage, path, name=name, **storage)
        self.paths = self._storage.urls
        self._seed = seeding.check_seed(stage, seed)
        self._shard_seed: int | None = None
        self._epoch = 0
        self._file_shard: ShardSpec | None = None  # this rank's files, given by ShardData
        self._yielded = 0

    def reset_state(self) -> None:
        if self._shard_seed is None:
            self._shard_seed = int(seeding.seed_sequence(self._seed).generate_state(1)[0])

    def _rank_work(self) -> list[list[int]]:
        raise NotImplementedError

    _worker_shard: ShardSpec | None = None  # this worker's part of the rank's pieces

    def _split_shard(self, spec: ShardSpec) -> DataFlow[Any] | None:
        """A copy of this reader that reads part ``spec`` (``equal=False``) of this rank's
        pieces: the workers of a rank (see :class:`~dataflow.ShardData`). ``None`` (sharded
        by position) when this reader is not sharded by file, is split already, ``spec``
        asks for equal counts, the rank has fewer pieces than workers, or
        :meth:`_splits_rank` says the rank's pieces cannot be dealt exactly. This reader is
        unchanged."""
        rank = self._file_shard
        if rank is None or self._worker_shard is not None or spec.equal or spec.pad:
            return None
        if not self._splits_rank(rank) or len(self._rank_work()) < spec.num_shards:
            return None
        part = copy.copy(self)
        part._worker_shard = spec
        for epoch_attr in ("_resume_at", "_started", "_epoch_ref"):  # no epoch of this reader's goes on in it
            part.__dict__.pop(epoch_attr, None)
        return part

    def _worker_part(self, work: list[list[int]]) -> list[list[int]]:
        """This worker's pieces of its rank's ``work`` (all of them outside a worker)."""
        return work if self._worker_shard is None else self._worker_shard.split(work)

    def _splits_rank(self, rank: ShardSpec) -> bool:
        """Whether the workers of ``rank`` can split its pieces exactly (the readers whose
        ``equal=True`` ranks are first cut to their exact count: always)."""
        return True

    def _epoch_limit(self) -> int | None:
        """Where a fresh epoch of this rank stops (``None``: after its last piece): with
        ``equal=True``, at its length, which every rank has."""
        spec = self._file_shard
        return len(self) if spec is not None and spec.equal else None

    def _records(self) -> Iterator[T]:
        """The datapoints of ``self._work`` from ``self._pos`` on."""
        raise NotImplementedError

    def _resume(self, resume: dict[str, Any]) -> None:
        raise NotImplementedError

    def _shuffled(self, work: list[list[int]]) -> list[list[int]]:
        if not self._shuffle_work:
            return work
        if self._shard_seed is None:
            raise DataFlowNotReset(f"{type(self).__name__} was iterated before reset_state()")
        perm = np.random.default_rng([self._shard_seed, self._epoch]).permutation(len(work))
        return [work[k] for k in perm]

    def __iter__(self) -> Iterator[T]:
        records = self._records()  # a generator: it reads nothing before the first datapoint
        resume = self.__dict__.pop("_resume_at", None)
        if resume is None:
            self._epoch += 1
            self._work = self._shuffled(self._rank_work())
            self._pos, self._yielded = 0, 0
            self._limit = self._epoch_limit()
        else:
            self._resume(resume)
        self._started = True
        return self._track(records)

    def _position_state(self) -> dict[str, Any]:
        """The state fields of the position in a started epoch."""
        raise NotImplementedError

    def _position_from(self, stage: str, state: Mapping[str, Any]) -> dict[str, Any] | None:
        """The position in ``state`` (checked), for ``_resume``; ``None`` if it has none."""
        raise NotImplementedError

    def _get_state(self, live: bool) -> dict[str, Any]:
        state: dict[str, Any] = {"files": len(self.paths)}
        if self._shuffle_work:
            state.update(seed=str(self._shard_seed), epoch=self._epoch)
        if live and self.__dict__.get("_started"):
            state.update(self._position_state())
        return state

    def _set_state(self, state: Mapping[str, Any], live: bool) -> None:
        stage = type(self).__name__
        check_file_count(stage, state, len(self.paths))
        self.__dict__.pop("_resume_at", None)
        if ("seed" in state) != bool(self._shuffle_work):  # the position counts in that order
            raise StateError(
                f"{stage}: the state was saved by a reader with shuffle={'seed' in state}, this one "
                f"has shuffle={bool(self._shuffle_work)}: its position would be read in another "
                f"order (datapoints lost and repeated); resume with the same shuffle="
            )
        if self._shuffle_work:
            seed = state.get("seed")
            if not isinstance(seed, str) or not seed.isdigit():
                raise StateError(f"{stage}: state field 'seed' must be a decimal string, got {seed!r}")
            epoch = int_field(stage, state, "epoch", 0)
            if not checking_only():
                self._shard_seed, self._epoch = int(seed), epoch
        resume = self._position_from(stage, state) if live else None
        if resume is not None and not checking_only():
            self._resume_at = resume

    def _file_position(self, stage: str, state: Mapping[str, Any]) -> dict[str, Any]:
        """Where a live epoch of a reader of whole files and byte offsets resumes: the file
        (its position in the epoch), the byte offset, what was read of it and yielded in all,
        and the pieces a sharded rank had left (see :meth:`_pieces_left`)."""
        files = len(self.paths)
        resume: dict[str, Any] = {
            "file": int_field(stage, state, "file", 0, files),
            "offset": offset_field(stage, state),
            "read": int_field(stage, state, "read", 0),
            "yielded": int_field(stage, state, "yielded", 0) if "yielded" in state else 0,
            "limit": None,
        }
        if "work" in state:
            resume.update(self._pieces_left(stage, state))
        return resume

    def _pieces_left(self, stage: str, state: Mapping[str, Any]) -> dict[str, Any]:
        """For a rank sharded by file: the pieces it had left (``work``, each checked against
        ``_piece_fields``), its limit, and whether :func:`dataflow.checkpoint.reshard` merged
        them (which needs a reader sharded again)."""
        limit = state.get("limit")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise StateError(f"{stage}: state field 'limit' must be an int >= 0 or None, got {limit!r}")
        merged = state.get("merged") is True
        if merged and self._file_shard is None:
            raise StateError(
                f"{stage}: this state was merged from several ranks by dataflow.checkpoint.reshard; "
                f"load it into a pipeline that calls .shard() right after this reader"
            )
        work = state.get("work")
        if not isinstance(work, list) or not all(self._piece_ok(piece) for piece in work):
            raise StateError(f"{stage}: state field 'work' is corrupted ({work!r:.80})")
        return {"work": [[int(v) for v in piece] for piece in work], "limit": limit, "merged": merged}

    def _piece_ok(self, piece: Any) -> bool:
        if not isinstance(piece, list) or len(piece) != len(self._piece_fields):
            return False
        for value, low in zip(piece, self._piece_fields):
            if low is None:
                ok = isinstance(value, str) and value.isdigit()
            else:
                ok = isinstance(value, int) and not isinstance(value, bool) and value >= low
            if not ok:
                return False
        return bool(piece[0] < len(self.paths))
