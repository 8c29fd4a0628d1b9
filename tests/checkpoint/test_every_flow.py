"""Every DataFlow class that ``dataflow`` exports (tensorpack names included), through the
shared resume harness (registry: ``tests/checkpoint/_flows.py``):

- it resumes exactly from a state saved at any cut (inside an epoch, at its last datapoint,
  between epochs; loaded before and after ``reset_state()``; saved again right after loading),
  or ``state_dict()`` raises ``StateUnsupportedError`` naming the class and saying why;
- a run preempted three times in a row (cut, resume in a fresh copy, cut again, ...; cuts
  inside and across epochs, drawn by hypothesis too) gives the uninterrupted stream; for
  runners whose workers each run a copy of the flow, each worker's stream does;
- a user-written flow (subclassing ``DataFlow``, ``RNGDataFlow``, ``ProxyDataFlow``) without
  a state of its own resumes exactly or refuses, naming itself; never resumes wrong;
- a new export without an entry in the registry fails the coverage test.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import dataflow as D
from tests.checkpoint._flows import EXCLUDED, FLOWS, write_files
from tests.checkpoint._harness import check_chain, check_resume, positions, reference_run, worker_reference

pytestmark = pytest.mark.filterwarnings("ignore:.*tensorpack's old name:DeprecationWarning")

EPOCHS = 2
EXACT = sorted(n for n, f in FLOWS.items() if f.promise == "exact")
PER_WORKER = sorted(n for n, f in FLOWS.items() if f.promise == "per_worker")
REFUSES = sorted(n for n, f in FLOWS.items() if f.promise == "refuses")
RESUMABLE = EXACT + PER_WORKER
# the runners' datapoints are [value, worker]: canonical form ("list", (value, worker))
_WORKER_OF: Callable[[Any], Any] = lambda c: c[1][-1]  # noqa: E731
# no shrinking: a failing example reports its cuts as drawn (shrinking re-runs whole chains)
_PHASES = (Phase.explicit, Phase.generate)
_QUIET = {"deadline": None, "phases": _PHASES, "suppress_health_check": list(HealthCheck), "database": None}
_FEW = settings(max_examples=2, **_QUIET)
_SOME = settings(max_examples=8, **_QUIET)


def _exported_dataflow_classes() -> set[str]:
    """The DataFlow classes of the homes users build flows from: dataflow and dataflow.on_ray."""
    import dataflow.on_ray

    return {
        name
        for module in (D, dataflow.on_ray)
        for name in module.__all__
        if inspect.isclass(obj := getattr(module, name)) and issubclass(obj, D.DataFlow)
    }


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("flows")
    write_files(tmp)
    return tmp


_REFERENCES: dict[str, list[list[Any]]] = {}


def _reference(name: str, files: Path) -> list[list[Any]]:
    """The uninterrupted run of ``name`` (long enough per worker for runners), once per run."""
    if name not in _REFERENCES:
        build = _builder(name, files)
        if FLOWS[name].promise == "per_worker":
            _REFERENCES[name] = worker_reference(build, EPOCHS, _WORKER_OF, workers=2)
        else:
            _REFERENCES[name] = reference_run(build, EPOCHS)
    return _REFERENCES[name]


def _builder(name: str, files: Path) -> Callable[[], D.DataFlow]:
    return lambda: FLOWS[name].build(files)


def _chain(name: str, files: Path, cuts: list[int]) -> None:
    check_chain(
        _builder(name, files), cuts, EPOCHS, reference=_reference(name, files),
        worker_of=_WORKER_OF if FLOWS[name].promise == "per_worker" else None,
    )


# --- coverage --------------------------------------------------------------------------------


def test_every_exported_flow_is_covered() -> None:
    """Each exported DataFlow class is built by the registry or excluded with a reason; no
    entry names something that is not exported."""
    exported = _exported_dataflow_classes()
    missing = sorted(exported - set(FLOWS) - set(EXCLUDED))
    assert not missing, f"add a resume entry (tests/checkpoint/_flows.py FLOWS) for: {missing}"
    assert sorted((set(FLOWS) | set(EXCLUDED)) - exported) == []
    assert not set(FLOWS) & set(EXCLUDED)
    assert {f.promise for f in FLOWS.values()} <= {"exact", "per_worker", "refuses"}


@pytest.mark.parametrize("name", sorted(FLOWS))
def test_registry_builds_that_class(name: str, files: Path) -> None:
    """The entry builds that class (an endless one under a TakeData that ends its epochs; a
    shuffled TFRecordData is a subclass)."""
    df = FLOWS[name].build(files)
    try:
        assert isinstance(df, cls := getattr(D, name)) or isinstance(getattr(df, "ds", None), cls)
    finally:
        df.close()


# --- one cut ---------------------------------------------------------------------------------


@pytest.mark.timeout(240)
@pytest.mark.parametrize("name", EXACT)
def test_flow_resumes_at_every_cut(name: str, files: Path) -> None:
    """Every cut of two epochs (a spread of them for flows with workers), each state loaded in
    a freshly built copy, gives exactly the rest of the uninterrupted stream."""
    cuts = check_resume(_builder(name, files), epochs=EPOCHS, max_cuts=5 if FLOWS[name].workers else 40)
    assert cuts > 3


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", REFUSES)
def test_flow_that_cannot_seek_refuses_naming_itself(name: str, files: Path) -> None:
    """A flow that cannot save its position says so when asked, naming itself and why, and
    a state it could never have written is not loaded either."""
    flow = FLOWS[name]
    df = flow.build(files)
    try:
        df.reset_state()
        it = iter(df)
        for _ in range(flow.take):
            next(it)
        with pytest.raises(D.StateUnsupportedError, match=name) as err:
            df.state_dict()
        if flow.refusal:
            assert flow.refusal in str(err.value)
    finally:
        df.close()


# --- a run preempted three times -------------------------------------------------------------


def _fixed_cuts(name: str, files: Path) -> list[int]:
    """Three cuts that cross an epoch boundary and cut twice in the second epoch: half-way
    through epoch 0, then 1 and 2 datapoints into epoch 1 (a flow resumed after a resume)."""
    ref = _reference(name, files)
    where = positions([len(ep) for ep in ref[:EPOCHS]])
    wanted = [(0, len(ref[0]) // 2, True), (1, min(1, len(ref[1])), True), (1, min(2, len(ref[1])), True)]
    return [where.index(p) for p in wanted]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("name", RESUMABLE)
def test_flow_preempted_three_times_gives_the_uninterrupted_stream(name: str, files: Path) -> None:
    _chain(name, files, _fixed_cuts(name, files))


def _draw_cuts(name: str, files: Path, data: st.DataObject) -> list[int]:
    where = positions([len(ep) for ep in _reference(name, files)[:EPOCHS]])
    return data.draw(st.lists(st.integers(0, len(where) - 1), min_size=3, max_size=3), label="cuts")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", [n for n in RESUMABLE if not FLOWS[n].workers])
@_SOME
@given(data=st.data())
def test_flow_preempted_at_any_three_cuts_gives_the_uninterrupted_stream(
    name: str, files: Path, data: st.DataObject
) -> None:
    """Three cuts anywhere in two epochs (repeats allowed: a checkpoint right after a
    resume; between epochs; at the very end)."""
    _chain(name, files, _draw_cuts(name, files, data))


@pytest.mark.timeout(240)
@pytest.mark.parametrize("name", [n for n in RESUMABLE if FLOWS[n].workers])
@_FEW
@given(data=st.data())
def test_parallel_flow_preempted_at_any_three_cuts_gives_the_uninterrupted_stream(
    name: str, files: Path, data: st.DataObject
) -> None:
    """The same with 2 workers (processes or threads); few examples: each starts workers."""
    _chain(name, files, _draw_cuts(name, files, data))


# --- flows written by users ------------------------------------------------------------------


class _Squares(D.DataFlow):
    def __iter__(self) -> Iterator[list[int]]:
        for i in range(6):
            yield [i * i]

    def __len__(self) -> int:
        return 6


class _Noisy(D.RNGDataFlow):
    def __iter__(self) -> Iterator[list[Any]]:
        for i in range(6):
            yield [i, float(self.rng.random())]


class _PlusOne(D.ProxyDataFlow):
    def __iter__(self) -> Iterator[list[Any]]:
        for dp in self.ds:
            yield [dp[0] + 1]


_USER_FLOWS: dict[str, Callable[[], D.DataFlow]] = {
    "_Squares": _Squares,
    "_Noisy": _Noisy,
    "_PlusOne": lambda: _PlusOne(D.DataFromList([[i] for i in range(6)], shuffle=True, seed=2)),
}


@pytest.mark.parametrize("name", sorted(_USER_FLOWS))
def test_user_flows_without_a_state_resume_exactly_or_refuse_naming_themselves(name: str) -> None:
    """A user's subclass of DataFlow / RNGDataFlow / ProxyDataFlow that declares no state:
    either ``state_dict()`` refuses, naming the class, or the state resumes exactly, also
    after three preemptions. Never a state that resumes to another stream."""
    build = _USER_FLOWS[name]
    df = build()
    df.reset_state()
    it = iter(df)
    next(it)
    try:
        df.state_dict()
    except D.StateUnsupportedError as err:
        assert name in str(err)
        return
    finally:
        del it
        df.close()
    assert check_resume(build, epochs=EPOCHS) > 3
    for cuts in ([3, 9, 10], [0, 8, 16], [1, 1, 12]):
        check_chain(build, cuts, EPOCHS)
