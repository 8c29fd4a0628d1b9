"""The running side of ``num_proc="auto"`` and ``buffer_size="auto"``: when to leave the
in-process probe and with how many workers, when to use one more or one fewer, when to go
back in-process, and how many datapoints to keep in flight.

Like :mod:`._autotune`, these objects hold no clock and start nothing: the map feeds them
measurements with the time they were taken (``now``, seconds on any monotonic clock) and
reads back decisions, so every rule is tested with made-up numbers.

**Measured, not only predicted.** :class:`~._autotune.WorkerPlan`'s model proposes a worker
count from the map and consumer times measured in-process; it assumes the cores are this
pipeline's. On a machine that other processes load, or when the transport costs more than
the model assumes (large results), workers can be slower than mapping in-process. So every
measuring window (:attr:`AutoWorkers.window` seconds) records the datapoints per second
actually received with the current count (0: in-process; a count's rate is the median of
its last 3 windows). After a move, the first window is skipped (workers starting, results of
the old count still arriving), and the mean of the next :attr:`AutoWorkers.trial_windows`
is compared with the rate of the old count: **a move that lost** (under
:attr:`AutoWorkers.keep` of it) **is undone**, and the losing count is not tried again for
:attr:`AutoWorkers.retry` seconds (doubling after each further loss, up to
:attr:`AutoWorkers.retry_max`). Parallel rates are also compared with the in-process rate:
workers that fall clearly below it (the load rose) give way to the in-process map — which
then has to deliver at least the workers' last rate in its own trial, or the workers come
back (a fallback goes against the model, so it must prove itself; the thresholds differ so
that rates swinging with the others' load do not flip the map back and forth). So the map
does not stay clearly below its serial rate for longer than a trial, plus a trial per
retry, whatever the model said.
"""

from __future__ import annotations

from collections import deque

from ._autotune import COPY_BYTES_PER_S, WorkerPlan, logger

__all__ = ["AutoBuffer", "AutoWorkers"]


class AutoWorkers:
    """Decisions of a ``num_proc="auto"`` map; see the module docstring.

    - **Probe** (in-process): every task mapped in the consumer reports its datapoints and
      map time (:meth:`mapped_inline`); once :attr:`probe_items` datapoints and
      :attr:`probe_seconds` have passed, the model splits the window's wall time into the
      map's part and the consumer's own part and proposes a count. The probe is as long as
      starting workers costs (forking, connecting): a job shorter than that is never worth
      them, so a short epoch of a cheap map never pays for a try (ski rental).
      In-process windows then last :attr:`window` seconds; after each, the model may propose
      workers again (a map that gets slower later still gets its workers).
    - **Parallel**: every receive reports its datapoints and how long the consumer waited
      (:meth:`received`); after each :attr:`window` seconds the measured rate is judged
      (give way to a faster in-process map), then :meth:`WorkerPlan.adjust` may use one
      worker more or fewer.
    - **Trials**: after every move, one window is skipped, then the mean rate of
      :attr:`trial_windows` windows is compared with the old count's rate; the move is
      undone if it delivers less than :attr:`keep` of it.
    """

    probe_items = 8
    probe_seconds = 0.25
    window = 0.5
    trial_windows = 2
    retry = 2.0
    retry_max = 60.0
    #: a count keeps its place unless it delivers less than this fraction of the rate it is
    #: compared with: rates measured seconds apart on a shared machine swing by tens of
    #: percent with the others' load, so only a clear loss undoes a move
    keep = 0.75

    def __init__(self, plan: WorkerPlan) -> None:
        self.plan = plan
        self.decided = False
        #: bytes of large arrays in a result (the map's latest measure): workers copy them
        self.result_bytes = 0.0
        #: datapoints/s per count (0: in-process): the median of its last 3 windows
        self.rates: dict[int, float] = {}
        self._history: dict[int, deque[float]] = {}
        self._settle = 0  # windows still to skip after a move
        self._from: int | None = None  # the count before the last move, until it is judged
        self._trial: list[float] = []  # rates of the windows since the move (after settling)
        self._need = self.keep  # the fraction of the old rate the move must deliver
        self._until: dict[int, float] = {}  # count -> not tried before this instant
        self._losses: dict[int, int] = {}
        self._start: float | None = None
        self._items = 0
        self._spent = 0.0  # map time (in-process) or waiting time (parallel) in the window
        self._per_item: list[float] = []  # map seconds per datapoint of each in-process group

    @property
    def parallel(self) -> bool:
        return self.plan.workers > 0

    def restart(self, now: float) -> None:
        """A new measuring window begins (start of a pass, workers just started)."""
        self._start, self._items, self._spent = now, 0, 0.0
        self._per_item = []

    def _window(self, items: int, spent: float, now: float) -> float:
        if self._start is None:
            self.restart(now - spent)
        self._items += items
        self._spent += spent
        return now - (now if self._start is None else self._start)

    def mapped_inline(self, items: int, busy: float, now: float) -> bool:
        """A task of ``items`` datapoints was mapped in-process in ``busy`` s; ``True`` when the
        map should now go to :attr:`WorkerPlan.workers` worker processes."""
        elapsed = self._window(items, busy, now)
        if items > 0:
            self._per_item.append(busy / items)
        n = self._items
        if self.decided:
            ripe = elapsed >= self.window
        else:
            ripe = n >= self.probe_items and elapsed >= self.probe_seconds
        if not ripe or n == 0:
            return False
        # The map's cost: the lower quartile of the groups' times, not their mean: on a
        # loaded machine a group that the OS paused for others looks many times slower.
        times = sorted(self._per_item)
        work = min(self._spent / n, times[len(times) // 4]) if times else self._spent / n
        own = max(0.0, elapsed - self._spent) / n
        first, self.decided = not self.decided, True
        self.restart(now)
        if self._measured(0, n / max(elapsed, 1e-9), now):
            ship = self.result_bytes / COPY_BYTES_PER_S
            self.plan.decide(work, own, quiet=not first, avoid=self._avoid(now), ship=ship)
            self._moved(0)
        return self.parallel

    def too_cheap_for_workers(self, work: float) -> None:
        """The map was measured at ``work`` s per datapoint in-process, less than receiving a
        worker's result costs the consumer (:attr:`WorkerPlan.transport`): no worker count can
        be faster, so the probe is over (decided: in-process) without running its course."""
        if self.decided or self.parallel:
            return
        self.decided = True
        logger.debug(
            "%s: maps in-process (map %.2f us/datapoint, under the %.1f us a worker's result costs "
            "the consumer: no worker count is faster)",
            self.plan.stage, work * 1e6, self.plan.transport * 1e6,
        )

    def received(self, items: int, wait: float, now: float) -> int | None:
        """A result of ``items`` datapoints arrived after the consumer waited ``wait`` s for
        it; a new worker count (0: map in-process from now on), or ``None``: unchanged."""
        elapsed = self._window(items, wait, now)
        if elapsed < self.window or self._items == 0:
            return None
        before = self.plan.workers
        rate = self._items / elapsed
        wait_fraction = self._spent / elapsed
        self.restart(now)
        if self._measured(before, rate, now):
            serial, mine = self.rates.get(0), self.rates[before]
            if serial is not None and mine < self.keep * serial and 0 not in self._avoid(now):
                self._lost(before, now)  # the load rose, or the results grew: in-process is faster
                logger.debug(
                    "%s: %d worker(s) deliver %.0f/s, below the %.0f/s measured in-process: maps "
                    "in-process (workers tried again in %.0f s)",
                    self.plan.stage, before, mine, serial, self._until[before] - now,
                )
                self.plan.workers = 0
                self._moved(before, need=1.0)  # against the model: in-process must prove itself
            else:
                self.plan.adjust(wait_fraction, avoid=self._avoid(now))
                self._moved(before)
        after = self.plan.workers
        return after if after != before else None

    # -- judging moves ---------------------------------------------------------------------
    def _measured(self, count: int, rate: float, now: float) -> bool:
        """A window at ``count`` delivered ``rate``: record it and judge a pending move.
        ``True``: free to decide (no move waits for its verdict, none was undone)."""
        if self._settle:  # the first window after a move: workers starting, old results arriving
            self._settle -= 1
            return False
        history = self._history.setdefault(count, deque(maxlen=3))
        history.append(rate)
        self.rates[count] = sorted(history)[len(history) // 2]
        came_from = self._from
        if came_from is None or came_from == count:
            self._from = None
            return True
        self._trial.append(rate)
        if len(self._trial) < self.trial_windows:
            return False
        verdict = sum(self._trial) / len(self._trial)
        self._trial, self._from = [], None
        before = self.rates.get(came_from)
        if before is None or verdict >= self._need * before:
            self._losses.pop(count, None)  # it held its own: tried again at once next time
            return True
        self._lost(count, now)
        logger.debug(
            "%s: %s delivered %.0f/s, below the %.0f/s of %s before: back to %s (%s tried again "
            "in %.0f s)",
            self.plan.stage, _count(count), verdict, before, _count(came_from), _count(came_from),
            _count(count), self._until[count] - now,
        )
        self.plan.workers = came_from
        self._until.pop(came_from, None)  # it proved the better one: no longer held back
        self._losses.pop(came_from, None)
        self._settle = 1
        return False

    def _lost(self, count: int, now: float) -> None:
        losses = self._losses[count] = self._losses.get(count, 0) + 1
        self._until[count] = now + min(self.retry_max, self.retry * 2 ** (losses - 1))

    def _avoid(self, now: float) -> set[int]:
        return {c for c, until in self._until.items() if until > now}

    def _moved(self, before: int, need: float | None = None) -> None:
        """A move from ``before`` was made: judged after settling, over a trial, where it
        must deliver ``need`` (default :attr:`keep`) of ``before``'s rate to stay."""
        if self.plan.workers != before:
            self._from, self._trial = before, []
            self._need = self.keep if need is None else need
            self._settle = 1


def _count(n: int) -> str:
    return f"{n} worker(s)" if n else "in-process"


class AutoBuffer:
    """``buffer_size="auto"``: datapoints in flight. At most ``most`` (128 per worker that may
    run) and :attr:`tasks_per_worker` tasks per worker; once results have been seen, no more
    than fit in ``budget_bytes`` at the measured bytes per datapoint (large arrays: the
    shared-memory rings hold the results in flight; a buffer that overflows them sends the
    arrays over the socket instead, slower); never fewer than :attr:`floor_per_worker` tasks
    (of ``unit`` datapoints: a batch of ``MultiProcessMapAndBatchDataZMQ``) per worker, so
    none waits for a task."""

    floor_per_worker = 2
    tasks_per_worker = 16

    def __init__(self, stage: str, most: int, budget_bytes: int, unit: int = 1) -> None:
        self.stage = stage
        self.unit = unit  # datapoints per task when fixed (a batch): the floor counts tasks
        self.most = max(most, self.floor_per_worker * unit)
        self.budget = max(1, budget_bytes)
        self.current = most
        self.per_item: float | None = None  # bytes per datapoint (running estimate)

    def observe(self, items: int, nbytes: int, workers: int, chunk: int = 0) -> int | None:
        """A result of ``items`` datapoints took ``nbytes``, tasks now hold ``chunk``
        datapoints; the new buffer size, or ``None`` when it stays (changes under 25% are
        ignored: the estimate wobbles)."""
        if items <= 0 or nbytes < 0:
            return None
        sample = nbytes / items
        est = self.per_item
        self.per_item = est = sample if est is None else est + 0.25 * (sample - est)
        want, cur = self.size(max(1, workers), chunk), self.current
        if want == cur or abs(want - cur) < 0.25 * cur:
            return None
        logger.debug(
            "%s: buffer_size %d -> %d datapoints (%.0f bytes per datapoint, %d MiB for results "
            "in flight)", self.stage, cur, want, est, self.budget >> 20,
        )
        self.current = want
        return want

    def size(self, workers: int, chunk: int = 0) -> int:
        """The buffer for ``workers`` workers at the current estimate, when tasks hold
        ``chunk`` datapoints (0: not known): at most :attr:`tasks_per_worker` tasks per worker
        (more only queue behind a worker that the OS pauses, and an ordered map waits for
        it), at most what fits the byte budget, at least the floor."""
        most = self.most
        if chunk > 0:
            most = min(most, self.tasks_per_worker * chunk * workers)
        if self.per_item is not None and self.per_item > 0:
            most = min(most, int(self.budget / self.per_item))
        return max(self.floor_per_worker * workers * self.unit, most)
