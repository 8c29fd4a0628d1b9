"""The passes of a parallel map (:class:`~._map_base.ParallelMapBase`): the generators that
an ``__iter__`` returns, over the map's bookkeeping (its tasks, :mod:`._map_tasks`; its
ledger, :mod:`._map_state`).

- **strict** (:func:`strict_pass`): one pass over the upstream, begun eagerly in
  ``__iter__`` (:func:`begin_pass`: a resumed pass first submits the tasks a checkpoint
  owed). While the map's :meth:`~._map_base.ParallelMapBase._in_consumer` asks for it
  (``num_proc="auto"`` while workers do not pay), groups are mapped in the consumer and
  their outputs yielded straight, with no task, queue or reorder step per datapoint (a
  checkpoint still owes the rest of the group being yielded).
- **non-strict** (:func:`endless_epoch`, :func:`endless_run`): the upstream repeated
  forever (:func:`forever`); each epoch yields ``len(ds)`` results.
- **serial rest**: where the map's ``_serial_rest`` says so, the rest of a strict pass (of
  a non-strict epoch) is mapped in its own loop exactly as ``.map`` maps: no groups, no
  clock, nothing held. The loop is kept as tight as ``.map``'s (a cheap map's whole cost is
  such overheads): no try, call or attribute lookup per datapoint beyond ``.map``'s; an
  error leaving it is told apart by the line it came through (:func:`map_error`):
  ``call_line``, computed three lines above ``mapped = func(dp)``, must stay its line.
- **measured stretch** (:func:`measured_stretch`): where the map's ``_stream_here`` gives a
  size, up to that many datapoints are mapped in the same kind of loop, a generator of its
  own (an A/B against the loop inlined in the pass, 2,000 small file reads, 25 rounds x 3
  processes each: no difference, 0.953-0.974x ``.map`` for both). A stretch of
  :data:`SAMPLED_FROM` datapoints or more times one call of ``map_func`` in
  :data:`TIME_EVERY`, a shorter one (a map of ~0.3 ms or more) every call; the timed
  positions shift by one each stretch, so an upstream whose cost repeats every few
  datapoints is not always caught at the same point of its period.
  The datapoints read, the map's time (extrapolated from the timed calls), the end and,
  where ``_stretch_sample`` asks, the first result go to ``_stretch_measured``
  (``num_proc="auto"`` deciding whether workers pay). Nothing is held: a checkpoint within
  a stretch is the upstream's position, as in the serial rest. Each result is yielded as it
  is made, as ``.map`` does: groups mapped into a list first (what item RNGs and traces
  still use) made a pass of 2,000 small file reads 5-9% slower than ``.map``, a stretch ~3%.
  A non-strict epoch maps in the same stretches, each no longer than the results its epoch
  still owes (so nothing is read past the epoch), each result counted toward ``len(ds)``.

The map's class keeps thin methods (``_begin_pass``, ``_strict_pass``, ``_forever``,
``_endless_epoch``, ``_endless_run``) that call these.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Generator, Iterator
from itertools import islice
from typing import TYPE_CHECKING, Any

from . import _messages as msg
from ._map_tasks import fill, rng_key, submit_task, take_result

if TYPE_CHECKING:
    from ._map_base import ParallelMapBase

__all__ = [
    "IN_CONSUMER",
    "begin_pass",
    "endless_epoch",
    "endless_run",
    "forever",
    "map_error",
    "measured_stretch",
    "strict_pass",
    "SAMPLED_FROM",
    "TIME_EVERY",
]

IN_CONSUMER = "map_func (in-process: num_proc='auto' found it faster than workers)"
#: a measured stretch of at least :data:`SAMPLED_FROM` datapoints times one call of
#: ``map_func`` in this many; a shorter one (a map of ~0.3 ms or more) times every call
TIME_EVERY = 8
SAMPLED_FROM = 32


def map_error(m: ParallelMapBase, exc: Exception, *call_lines: int) -> BaseException | None:
    """What to raise for ``exc``, which left a serial-rest loop or a measured stretch: if it
    came through a line calling ``map_func`` (``call_lines``), the map's error as a mapped
    group reports it (the user's exception, noted as raised in-process); ``None`` for an
    error of the upstream (or one thrown in at a ``yield``): it goes on untouched."""
    tb = exc.__traceback__
    if tb is None or tb.tb_lineno not in call_lines:
        return None
    return msg.error_for(type(m).__name__, msg.capture_error(exc, IN_CONSUMER, same_process=True))


def measured_stretch(m: ParallelMapBase, source: Iterator[Any], size: int) -> Generator[Any, None, int]:
    """Map up to ``size`` datapoints of ``source`` here, yielding each result as it is made,
    timing one call in :data:`TIME_EVERY` (every call when ``size`` < :data:`SAMPLED_FROM`),
    at positions that shift by one each stretch; then hand the datapoints read, the map's
    time (extrapolated from the timed calls), the end and, where ``_stretch_sample`` asks,
    the first result to ``_stretch_measured``. Returns the datapoints read (0: ``source``
    ended)."""
    func, clock = m.map_func, time.perf_counter
    every = TIME_EVERY if size >= SAMPLED_FROM else 1  # 1: every call timed
    phase = (1 + m._stretch_count) % every
    m._stretch_count += 1
    want, sample = m._stretch_sample(), None
    n, timed, busy = 0, 0, 0.0
    call_line = sys._getframe().f_lineno + 5  # the untimed call; the timed one 3 lines on
    try:
        for dp in islice(source, size):
            n += 1
            if n % every != phase:
                mapped = func(dp)
            else:
                t0 = clock()
                mapped = func(dp)
                busy += clock() - t0
                timed += 1
            if mapped is not None:
                if want:
                    sample, want = [mapped], False
                yield mapped
    except Exception as e:
        err = map_error(m, e, call_line, call_line + 3)
        if err is None:
            raise
        raise err  # noqa: B904 - the user's own exception (with a note)
    if n:
        m._index += n  # per stretch: it keys item RNGs only, which never stream
        # a stretch cut short by the upstream's end may have no timed call
        busy = busy * n / timed if timed else n * (m._tuner.per_item or 0.0)
        m._stretch_measured(n, busy, clock(), sample)
    return n


def begin_pass(m: ParallelMapBase, resume: Any) -> tuple[int, Iterator[Any], int]:
    """Start a strict pass (eagerly, in ``__iter__``): ``(epoch, source, resubmitted)``."""
    m._clear_epoch_state()
    if resume is None:
        m._epoch += 1
        m._index = 0
        return m._epoch, iter(m.ds), 0
    tasks, m._skip = resume
    source = iter(m.ds)
    for chunk, first in tasks:
        submit_task(m, chunk, m._epoch, first)
    return m._epoch, source, len(tasks)


def strict_pass(m: ParallelMapBase, begun: tuple[int, Iterator[Any], int]) -> Iterator[Any]:
    # The guard and the interrupt flag live here, not in a wrapping generator: one
    # generator level less per datapoint (a cheap map's whole cost is such overheads).
    epoch, source, _ = begun
    more, received = True, 0
    ready, ledger = m._ready, m._ledger
    with m._guard:
        try:
            while True:
                size = m._in_consumer() if more and not m._inflight else 0
                if size and m._serial_rest():  # the rest of the pass as .map maps it
                    func, call_line = m.map_func, sys._getframe().f_lineno + 3
                    try:  # around the loop: a try inside it costs a cheap map ~8%
                        for dp in source:
                            mapped = func(dp)
                            if mapped is not None:
                                yield mapped
                    except Exception as e:
                        err = map_error(m, e, call_line)
                        if err is None:
                            raise
                        raise err  # noqa: B904 - the user's own exception (with a note)
                    more = False
                    m._serial_done()
                    continue
                stretch = m._stream_here(size) if size else 0
                if stretch:  # map here as .map does, timing one call in TIME_EVERY
                    if not (yield from measured_stretch(m, source, stretch)):
                        more = False
                    continue
                if size:  # map a group here and yield it straight (no task, no queue)
                    chunk = list(islice(source, size))
                    if not chunk:
                        more = False
                        continue
                    first, seq = m._index, m._seq
                    m._index = first + len(chunk)
                    out = m._map_here(chunk, rng_key(m, epoch, first))
                    m._seq = m._want = seq + 1
                    received += 1
                    ledger.submitted(seq, chunk, first)
                    ledger.released(seq, len(out))
                    m._here = here = iter(out)  # length_hint: what a checkpoint still owes
                    yield from here
                    ledger.prune(len(ready))
                    continue
                if more:
                    more = fill(m, source, epoch)
                if not more and received == m._seq:
                    break
                if take_result(m, epoch):
                    received += 1
                while ready:
                    yield ready.popleft()
            m._finish_pass()
            while ready:
                yield ready.popleft()
        except KeyboardInterrupt:
            m._interrupted = True
            raise


def forever(m: ParallelMapBase, resumed: bool) -> Iterator[Any]:
    produced = resumed  # a resumed upstream epoch had produced before the checkpoint
    itr = iter(m.ds)
    while True:
        for dp in itr:
            produced = True
            yield dp
        if not produced:
            raise ValueError(
                f"{type(m).__name__}: the upstream {type(m.ds).__name__} produced an empty "
                f"epoch; with strict=False it is repeated forever, which would hang"
            )
        produced = False
        itr = iter(m.ds)


def endless_epoch(m: ParallelMapBase, resume: Any) -> Iterator[Any]:
    if resume is not None:
        tasks, m._skip, produced, up_live = resume
        m._endless = m._forever(up_live) if up_live else None
        for chunk, first in tasks:
            submit_task(m, chunk, 0, first)
    else:
        produced = 0
    m._produced = produced  # the epoch begins now, not when first pulled
    if m._endless is None:
        m._endless = m._forever(False)
    return m._endless_run()


def endless_run(m: ParallelMapBase) -> Iterator[Any]:
    try:
        size: int | None = len(m)
    except (TypeError, NotImplementedError):
        size = None
    ready = m._ready
    endless = m._endless
    if endless is None:
        raise RuntimeError(f"{type(m).__name__}: the endless upstream was not started")
    with m._guard:
        try:
            while size is None or m._produced < size:
                if ready:
                    m._produced += 1
                    yield ready.popleft()
                    continue
                serial = m._serial_rest()  # then the tasks held are finished first
                if serial and not m._inflight:  # the rest of the epoch as .map maps it
                    func, call_line = m.map_func, sys._getframe().f_lineno + 3
                    try:
                        for dp in endless:
                            mapped = func(dp)
                            if mapped is not None:
                                m._produced += 1
                                yield mapped
                                if size is not None and m._produced >= size:
                                    break
                    except Exception as e:
                        err = map_error(m, e, call_line)
                        if err is None:
                            raise
                        raise err  # noqa: B904 - the user's own exception (with a note)
                    m._serial_done()
                    continue
                here = m._in_consumer() if not serial and not m._inflight else 0
                stretch = m._stream_here(here) if here else 0
                if stretch:  # as in a strict pass, never reading past the epoch's results
                    left = stretch if size is None else min(stretch, size - m._produced)
                    for mapped in measured_stretch(m, endless, left):
                        m._produced += 1
                        yield mapped
                    continue
                if not serial:
                    fill(m, endless, 0)
                take_result(m, 0)
        except KeyboardInterrupt:
            m._interrupted = True
            raise
