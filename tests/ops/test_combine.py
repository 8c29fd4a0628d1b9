"""dataflow/ops/_combine.py: ConcatData, JoinData, RandomChooseData, RandomMixData."""

from __future__ import annotations

from collections import Counter

import pytest

from dataflow import ComponentError, DataFlowNotReset, LengthUnknownError
from dataflow.ops._combine import ConcatData, JoinData, RandomChooseData, RandomMixData
from tests.helpers import ListFlow, epochs


def _flow(tag: str, n: int, **kw: object) -> ListFlow:
    return ListFlow([[f"{tag}{i}"] for i in range(n)], **kw)  # type: ignore[arg-type]


def _vals(ep: list) -> list:
    return [dp[0] for dp in ep]


# --- shared argument checks ----------------------------------------------------------------


@pytest.mark.parametrize("cls", [ConcatData, JoinData, RandomMixData])
def test_df_lists_must_be_non_empty_list(cls: type) -> None:
    with pytest.raises(
        ValueError, match=rf"{cls.__name__}: df_lists must be a non-empty list of DataFlows, got \[\]"
    ):
        cls([])
    with pytest.raises(
        ValueError, match=rf"{cls.__name__}: df_lists must be a non-empty list of DataFlows, got ListFlow"
    ):
        cls(_flow("a", 1))
    with pytest.raises(
        TypeError, match=rf"{cls.__name__}: the upstream must be a DataFlow.*got list.*DataFromList"
    ):
        cls([_flow("a", 1), [[1]]])


def test_random_choose_df_lists_checks() -> None:
    with pytest.raises(
        ValueError, match=r"RandomChooseData: df_lists must be a non-empty list of DataFlows, got \[\]"
    ):
        RandomChooseData([])
    with pytest.raises(TypeError, match="RandomChooseData: the upstream must be a DataFlow.*got int"):
        RandomChooseData([(_flow("a", 1), 0.5), (3, 0.5)])


@pytest.mark.parametrize("cls", [ConcatData, JoinData, RandomChooseData, RandomMixData])
def test_reset_and_close_forwarded_to_all(cls: type) -> None:
    a, b = _flow("a", 2), _flow("b", 2)
    with cls([a, b]) as df:
        df.reset_state()
    assert (a.resets, b.resets, a.closes, b.closes) == (1, 1, 1, 1)


# --- ConcatData ----------------------------------------------------------------------------


def test_concat_order_len_epochs() -> None:
    df = ConcatData([_flow("a", 2), _flow("b", 3), _flow("c", 1)])
    assert len(df) == 6
    e1, e2 = epochs(df, 2)
    assert _vals(e1) == _vals(e2) == ["a0", "a1", "b0", "b1", "b2", "c0"]


def test_concat_len_unknown() -> None:
    with pytest.raises(LengthUnknownError):
        len(ConcatData([_flow("a", 2), _flow("b", 3, has_len=False)]))


# --- JoinData ------------------------------------------------------------------------------


def test_join_lists_concatenated() -> None:
    a = ListFlow([[i, i * 10] for i in range(3)])
    b = ListFlow([(f"s{i}",) for i in range(3)])
    df = JoinData([a, b])
    assert len(df) == 3
    e1, e2 = epochs(df, 2)
    assert e1 == e2 == [[0, 0, "s0"], [1, 10, "s1"], [2, 20, "s2"]]
    assert all(type(dp) is list for dp in e1)


def test_join_dicts_merged() -> None:
    a = ListFlow([{"x": i} for i in range(2)])
    b = ListFlow([{"y": -i, "z": "q"} for i in range(2)])
    assert epochs(JoinData([a, b]), 1)[0] == [{"x": 0, "y": 0, "z": "q"}, {"x": 1, "y": -1, "z": "q"}]


def test_join_dict_key_clash() -> None:
    a = ListFlow([{"x": 1, "y": 2}])
    b = ListFlow([{"y": 3, "x": 4}])
    with pytest.raises(ComponentError, match=r"JoinData: flow #1 repeats the keys \['x', 'y'\]"):
        epochs(JoinData([a, b]), 1)


def test_join_shortest_length() -> None:
    df = JoinData([_flow("a", 5), _flow("b", 2), _flow("c", 4)])
    assert len(df) == 2
    assert epochs(df, 2) == [[["a0", "b0", "c0"], ["a1", "b1", "c1"]]] * 2


def test_join_mixed_kinds() -> None:
    with pytest.raises(
        ComponentError, match="JoinData: flow #1 produced a dict; all flows must produce list/tuple"
    ):
        epochs(JoinData([ListFlow([[1]]), ListFlow([{"a": 1}])]), 1)
    with pytest.raises(ComponentError, match="JoinData: flow #1 produced a list among dicts"):
        epochs(JoinData([ListFlow([{"a": 1}]), ListFlow([[1]])]), 1)
    with pytest.raises(ComponentError, match="JoinData: flow #0 produced a int; all flows must produce"):
        epochs(JoinData([ListFlow([5]), ListFlow([[1]])]), 1)


# --- RandomChooseData ----------------------------------------------------------------------


def test_random_choose_only_input_elements_in_each_flows_order() -> None:
    a, b = _flow("a", 10), _flow("b", 10)
    df = RandomChooseData([a, b], seed=0)
    with pytest.raises(LengthUnknownError):
        len(df)
    for ep in epochs(df, 3):
        vals = _vals(ep)
        assert vals
        from_a = [v for v in vals if v.startswith("a")]
        from_b = [v for v in vals if v.startswith("b")]
        assert len(from_a) + len(from_b) == len(vals)
        assert from_a == [f"a{i}" for i in range(len(from_a))]
        assert from_b == [f"b{i}" for i in range(len(from_b))]
        # it stopped when a flow was drawn after its end: that flow is complete
        assert len(from_a) == 10 or len(from_b) == 10


def test_random_choose_stops_at_first_exhausted() -> None:
    short, long_ = _flow("s", 3), _flow("l", 1000)
    df = RandomChooseData([short, long_], seed=1)
    vals = _vals(epochs(df, 1)[0])
    assert [v for v in vals if v.startswith("s")] == ["s0", "s1", "s2"]
    assert 3 < len(vals) < 1003


def test_random_choose_probabilities() -> None:
    a, b = _flow("a", 5), _flow("b", 5)
    df = RandomChooseData([(a, 1.0), (b, 0.0)], seed=0)
    assert epochs(df, 2) == [[[f"a{i}"] for i in range(5)]] * 2
    assert b.produced == 0


def test_random_choose_probabilities_bias() -> None:
    a, b = _flow("a", 10_000), _flow("b", 10_000)
    vals = _vals(epochs(RandomChooseData([(a, 0.9), (b, 0.1)], seed=3), 1)[0])
    counts = Counter(v[0] for v in vals)
    assert counts["a"] == 10_000 and counts["b"] < 10_000
    assert 0.05 < counts["b"] / len(vals) < 0.15


@pytest.mark.parametrize("probs", [(0.5, 0.6), (1.2, -0.2), (0.1, 0.1)])
def test_random_choose_probabilities_validated(probs: tuple) -> None:
    with pytest.raises(
        ValueError, match=r"RandomChooseData: probabilities must be >= 0 and sum to 1, got \["
    ):
        RandomChooseData([(_flow("a", 1), probs[0]), (_flow("b", 1), probs[1])])


def test_random_choose_seed_reproducible_and_needs_reset() -> None:
    def run(seed: int) -> list:
        return epochs(RandomChooseData([_flow("a", 20), _flow("b", 20)], seed=seed), 2)

    assert run(5) == run(5)
    assert run(5) != run(6)
    with pytest.raises(DataFlowNotReset, match="RandomChooseData"):
        list(iter(RandomChooseData([_flow("a", 2)])))


# --- RandomMixData -------------------------------------------------------------------------


def test_random_mix_every_element_once_each_order_kept() -> None:
    a, b, c = _flow("a", 7), _flow("b", 3), _flow("c", 5)
    df = RandomMixData([a, b, c], seed=0)
    assert len(df) == 15
    eps = [_vals(e) for e in epochs(df, 3)]
    for vals in eps:
        assert len(vals) == 15
        for tag, n in (("a", 7), ("b", 3), ("c", 5)):
            assert [v for v in vals if v[0] == tag] == [f"{tag}{i}" for i in range(n)]
    assert eps[0] != eps[1] or eps[1] != eps[2]
    assert eps[0][:7] != [f"a{i}" for i in range(7)] or eps[1][:7] != [f"a{i}" for i in range(7)]


def test_random_mix_seed_reproducible() -> None:
    def run(seed: int) -> list:
        return epochs(RandomMixData([_flow("a", 10), _flow("b", 10)], seed=seed), 2)

    assert run(1) == run(1)
    assert run(1) != run(2)


def test_random_mix_flow_without_len() -> None:
    with pytest.raises(
        ValueError,
        match=r"RandomMixData: flow #1 \(ListFlow\) has no len\(\); every flow must know its length",
    ):
        RandomMixData([_flow("a", 2), _flow("b", 2, has_len=False)])


def test_random_mix_flow_ending_early() -> None:
    df = RandomMixData([_flow("a", 2), _flow("b", 2, fake_len=4)], seed=0)
    with pytest.raises(
        ValueError,
        match=r"RandomMixData: flow #1 \(ListFlow\) ended before the 4 datapoints its len\(\) promised",
    ):
        epochs(df, 1)
