"""The DataFlow protocol: :class:`DataFlow`, :class:`ProxyDataFlow`, :class:`RNGDataFlow`.

A DataFlow is a re-iterable of *datapoints* (a list/tuple or dict of components):

- ``reset_state()`` is called once, in the process that will iterate, before the first
  ``__iter__``. It opens files, seeds RNGs and starts workers; ``__init__`` never does,
  so a flow can be built, pickled and forked cheaply.
- ``__iter__()`` yields one *epoch*. A finite flow can be iterated again right after.
- ``__len__()`` is optional; when defined it is exact unless documented as an upper bound.
  Flows that cannot know it raise :class:`~dataflow._errors.LengthUnknownError`.
- ``close()`` releases what the flow owns; every flow is a context manager that closes.
- ``state_dict()`` / ``load_state_dict(state)`` save and restore the position after the last
  datapoint the consumer received (see :meth:`DataFlow.state_dict` and
  :mod:`dataflow._state`). A stage takes part through two methods, ``_get_state(live)``
  (its own part out) and ``_set_state(state, live)`` (its part back in, handed over by the
  base class when the stage's next epoch starts); a stage that keeps nothing between
  datapoints says ``stateless = True`` instead. The base class nests the upstreams' states
  (``_state_upstreams()``: ``self.ds`` for a :class:`ProxyDataFlow`), checks shapes and
  versions, and keeps a loaded state until the epoch starts.

Fluent methods (``df.map(f).batch(64)``) come from :class:`~dataflow._fluent.FluentMixin`.
"""

from __future__ import annotations

import functools
import inspect
import weakref
from collections.abc import Iterator, Mapping, Sequence
from types import GeneratorType, TracebackType
from typing import Any, ClassVar, TypeVar

import numpy as np

from . import _seeding as seeding
from ._deprecation import warn_once
from ._errors import DataFlowNotReset, DataFlowTerminated, LengthUnknownError
from ._fluent import FluentMixin, T_co
from ._reentrancy import ReentrancyGuard
from ._replay import adopt_replay
from ._rng import CompatGenerator, new_rng
from ._state import PENDING, UNSUPPORTED, SaveOptions, checking_only, load_pipeline, save_pipeline, state_mode
from ._state_fields import load_rng, save_rng

__all__ = ["DataFlow", "DataFlowTerminated", "Datapoint", "ProxyDataFlow", "RNGDataFlow", "ReentrancyGuard"]

#: The type of a datapoint, a list/tuple of components or a dict of named components.
Datapoint = list[Any] | tuple[Any, ...] | dict[Any, Any]

_F = TypeVar("_F", bound="DataFlow[Any]")


class EpochRef:
    """A weak reference to a flow's current epoch generator that pickles as a dead one, so
    a flow that was iterated can still be sent to workers (a generator never travels)."""

    __slots__ = ("_ref",)

    def __init__(self, gen: GeneratorType[Any] | None) -> None:
        self._ref = None if gen is None else weakref.ref(gen)

    def __call__(self) -> GeneratorType[Any] | None:
        return None if self._ref is None else self._ref()

    def __reduce__(self) -> tuple[Any, ...]:
        return EpochRef, (None,)


class DataFlow(FluentMixin[T_co]):
    """Base class of every flow. Subclasses implement ``__iter__`` (and ``__len__`` if known).

    Thread/fork safety: a flow is built in one process and may be forked or pickled before
    ``reset_state()``; after it, it belongs to the process (and, unless documented, the
    thread) that iterates it.

    Generic in the datapoint type: ``DataFlow[T]`` yields ``T`` (``DataFromList([1, 2])`` is a
    ``DataFlow[int]``, ``.map(str)`` of it a ``DataFlow[str]``); ``DataFlow`` alone means
    ``DataFlow[Any]``.
    """

    #: A stage whose ``__iter__`` keeps nothing between datapoints (its position is its
    #: upstream's) sets this to ``True`` to take part in ``state_dict()`` without hooks.
    stateless: ClassVar[bool] = False

    #: A source written by a user whose epoch cannot seek but can be run again (its
    #: datapoints are a function of its attributes and of ``self.rng`` only) sets this to
    #: ``True`` in its class body to be checkpointed: resuming rewinds the RNG to the epoch's
    #: start, runs ``__iter__`` again and skips what was consumed (see :mod:`dataflow._replay`).
    resumes_by_replay: ClassVar[bool] = False

    #: Stages of one family that save the same state (a parallel map on threads, processes
    #: or Ray) share this name, so a state saved by one loads into another.
    _state_kind: ClassVar[str | None] = None

    #: How the class takes part in ``state_dict()``, decided from its body when it is created
    #: (see :func:`dataflow._state.state_mode`).
    _state_mode: ClassVar[str] = UNSUPPORTED

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Alias tensorpack's ``get_data``/``size``, decide the state protocol mode, and wrap
        the ``__iter__`` of the class body so that every epoch starts through the base."""
        super().__init_subclass__(**kwargs)
        ns = cls.__dict__
        for new, old in (("__iter__", "get_data"), ("__len__", "size")):
            if new not in ns and inspect.isfunction(ns.get(old)):  # like tensorpack's metaclass
                setattr(cls, new, ns[old])
                warn_once(
                    f"{cls.__module__}.{cls.__qualname__}.{old}",
                    f"{cls.__name__} defines {old}(), tensorpack's old name of {new}(); it is used "
                    f"as {new} for now, but rename it to {new}",
                    stacklevel=3,
                )
        adopt_replay(cls)
        cls._state_mode = state_mode(cls, cls._state_mode)
        it = ns.get("__iter__")
        if it is not None and not getattr(it, "_starts_epochs", False):
            cls.__iter__ = _starting_epochs(it)  # type: ignore[method-assign]

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")

    def __len__(self) -> int:
        raise LengthUnknownError(f"{type(self).__name__} does not know its length")

    def reset_state(self) -> None:
        """Prepare to iterate in this process (seed RNGs, open files, start workers)."""

    def close(self) -> None:
        """Release processes, threads, sockets, shared memory and files this flow owns."""

    def __enter__(self: _F) -> _F:
        return self

    # -- tensorpack's old spellings ---------------------------------------------------------
    def get_data(self) -> Iterator[Any]:
        """Deprecated spelling of ``iter(df)`` (tensorpack's old name); warns once."""
        warn_once("DataFlow.get_data", "df.get_data() is deprecated: iterate the flow (iter(df))")
        return iter(self)

    def size(self) -> int:
        """Deprecated spelling of ``len(df)`` (tensorpack's old name); warns once."""
        warn_once("DataFlow.size", "df.size() is deprecated: use len(df)")
        return len(self)

    def __repr__(self) -> str:
        """The pipeline as a tree of stages with their key parameters (see :mod:`dataflow._repr`)."""
        from ._repr import render

        return render(self)

    def _repr_args(self) -> dict[str, Any]:
        """The parameters ``repr`` shows for this stage; default: the ``__init__`` arguments it
        keeps that are required or differ from their default."""
        from ._repr import default_repr_args

        return default_repr_args(self)

    # -- checkpointing ----------------------------------------------------------------------
    def state_dict(self, *, allow_fast_forward: bool = False) -> dict[str, Any]:
        """The pipeline's position after the last datapoint the consumer received, with every
        RNG state and buffered datapoint needed to go on, as plain data.

        Loading it with :meth:`load_state_dict` into a freshly built pipeline of the same shape
        continues bit-identically: the rest of the interrupted epoch (empty if it was taken
        after the epoch's last datapoint but before the loop ended), then the later epochs.
        A state taken between two epochs resumes at the next epoch. Nothing consumed is read
        again, except by flows that cannot seek: generators are re-run and fast-forwarded
        by count only with ``allow_fast_forward=True`` (they raise
        :class:`~dataflow._errors.StateUnsupportedError` otherwise, naming the stage).
        Call it between two datapoints, from the thread that iterates.
        """
        return save_pipeline(self, SaveOptions(allow_fast_forward=allow_fast_forward))

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict` into this pipeline, before or after ``reset_state()``
        but before iterating. The next ``__iter__`` goes on with the saved epoch.

        Raises :class:`~dataflow._errors.StateError` naming the first stage that differs if the
        state was saved from another pipeline shape, and for corrupted or newer states; the
        pipeline is checked whole before anything is changed."""
        load_pipeline(self, state)

    def _get_state(self, live: bool) -> dict[str, Any]:
        """This stage's own part of the state (not its upstreams'); ``live``: an epoch of this
        stage is in progress and will be continued."""
        raise NotImplementedError

    def _set_state(self, state: Mapping[str, Any], live: bool) -> None:
        """Restore :meth:`_get_state`'s output. Called by the base class once, when the next
        epoch starts (right before this stage's ``__iter__`` runs), after ``reset_state()``
        if the user called it: with ``live`` that epoch continues the saved one, else it is
        the epoch after the saved state's."""
        raise NotImplementedError

    def _state_upstreams(self) -> Sequence[DataFlow[Any]]:
        """The flows whose states nest under this stage's (those it iterates in this process)."""
        return ()

    def _state_saved(self) -> None:
        """Called once this stage's and its upstreams' states are saved (or saving failed):
        a stage that paused a producer thread in ``_get_state`` lets it go on here."""

    def _upstreams_live(self, live: bool) -> list[bool]:
        """For each of :meth:`_state_upstreams`, whether this stage goes on with an iterator over
        it (True) or will start a fresh one (False). Default: as this stage."""
        return [live] * len(self._state_upstreams())

    def _iter_live(self) -> bool:
        """Whether this flow's latest epoch is still in progress (asked of a pipeline's root)."""
        ref = self.__dict__.get("_epoch_ref")
        if ref is not None:
            gen = ref()
            return gen is not None and gen.gi_frame is not None
        ups = self._state_upstreams()
        return len(ups) == 1 and ups[0]._iter_live()

    def _track(self, gen: Iterator[Any]) -> Iterator[Any]:
        """Remember ``gen`` weakly as this flow's epoch, for :meth:`_iter_live`: what
        ``__iter__`` does for every stage, for a stage's other way of starting an epoch."""
        if isinstance(gen, GeneratorType):
            self.__dict__["_epoch_ref"] = EpochRef(gen)
        return gen

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _starting_epochs(it: Any) -> Any:
    """``it`` (a class body's ``__iter__``) wrapped so that each epoch starts the same way for
    every stage: a state loaded since the last epoch is handed to ``_set_state`` (once, right
    before the stage's own ``__iter__`` runs), and the epoch's generator is remembered weakly,
    which is how ``state_dict()`` tells an epoch in progress from a finished one."""

    @functools.wraps(it)
    def __iter__(self: Any) -> Any:
        pending = self.__dict__.pop(PENDING, None)
        if pending is not None:
            self._set_state(*pending)
        epoch = it(self)
        if isinstance(epoch, GeneratorType):
            self.__dict__["_epoch_ref"] = EpochRef(epoch)
        return epoch

    __iter__._starts_epochs = True  # type: ignore[attr-defined]
    return __iter__


def close_iterator(it: object) -> None:
    """Close an iterator early if it can be (generators release their resources then)."""
    close = getattr(it, "close", None)
    if close is not None:
        close()


def _check_upstream(stage: str, ds: object) -> None:
    if isinstance(ds, type):
        raise TypeError(
            f"{stage}: the upstream must be a DataFlow instance, got the class {ds.__name__}; "
            f"create one first, e.g. {ds.__name__}(...)"
        )
    if not (hasattr(ds, "__iter__") and hasattr(ds, "reset_state")):
        hint = " wrap it with DataFromList(...)" if isinstance(ds, (list, tuple)) else ""
        raise TypeError(
            f"{stage}: the upstream must be a DataFlow (with __iter__ and reset_state), "
            f"got {type(ds).__name__};{hint or ' wrap it with DataFromIterable(...)'}"
        )


class ProxyDataFlow(DataFlow[Any]):
    """A flow that wraps one upstream flow ``ds`` and forwards ``reset_state``, ``close``,
    ``len`` and the state protocol to it; subclasses override what they change."""

    stateless = True  # __iter__ below is the upstream's

    def __init__(self, ds: DataFlow[Any]) -> None:
        _check_upstream(type(self).__name__, ds)
        self.ds = ds

    def reset_state(self) -> None:
        self.ds.reset_state()

    def close(self) -> None:
        self.ds.close()

    def __len__(self) -> int:
        return len(self.ds)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.ds)

    def _state_upstreams(self) -> Sequence[DataFlow[Any]]:
        return (self.ds,)


class RNGDataFlow(DataFlow[T_co]):
    """A flow with its own random generator ``self.rng``: a :class:`numpy.random.Generator`
    that also answers tensorpack's ``RandomState`` calls (``randint``, ``rand``, ``randn``...;
    see :class:`~dataflow._rng.CompatGenerator`), one stream behind both.

    ``self.rng`` is (re)created by ``reset_state()`` from ``seed=`` (or
    :func:`dataflow.set_seed`, or fresh entropy; see :mod:`dataflow._seeding`): the same
    seed gives the same stream. Subclasses written for tensorpack that never call
    ``super().__init__()`` still work (no seed then).
    """

    _seed: int | None = None
    _rng: CompatGenerator | None = None

    def __init__(self, seed: int | None = None) -> None:
        self._seed = seeding.check_seed(type(self).__name__, seed)
        self._rng = None

    @property
    def rng(self) -> CompatGenerator:
        """The generator; raises :class:`DataFlowNotReset` before ``reset_state()``."""
        rng = self._rng
        if rng is None:
            raise DataFlowNotReset(
                f"{type(self).__name__} was iterated before reset_state(); call "
                f"df.reset_state() once, in the process that iterates, before the first epoch"
            )
        return rng

    @rng.setter
    def rng(self, value: Any) -> None:
        self._rng = value

    def reset_state(self) -> None:
        self._rng = new_rng(seeding.seed_sequence(self._seed))

    def _save_rng(self) -> dict[str, Any] | None:
        """``self.rng``'s state as plain data (``None`` before ``reset_state()``)."""
        return None if self._rng is None else save_rng(self._rng)

    def _load_rng(self, state: Any) -> None:
        """Restore :meth:`_save_rng`'s output (``None``: nothing to restore). Called from
        ``_set_state``, which runs when an epoch starts: after ``reset_state()``. While a
        state is only being checked, it is loaded into a spare generator instead."""
        if state is not None:
            rng = new_rng(np.random.SeedSequence(0)) if checking_only() else self.rng
            load_rng(type(self).__name__, rng, state)
