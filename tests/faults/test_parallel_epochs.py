"""Leaving an epoch early (docs/failure_semantics.rst, "break out of an epoch"): a strict
map's abandoned pass is discarded, data and errors; a non-strict map's stream goes on, so
what was in flight — an error included — arrives in the next epoch."""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest

from tests._leaks import assert_no_leaks, snapshot
from tests.parallel import _util as u

pytestmark = pytest.mark.timeout(60)


class FailOnceOn15:
    """Raises on 15 the first time any worker or thread sees it (claimed through a file)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self, dp: list[Any]) -> list[Any]:
        if dp[0] == 15 and u._claim(self.path):
            time.sleep(0.1)
            raise u.MyError("bad 15")
        return dp


@pytest.mark.parametrize("kind", ["proc", "thread"])
def test_strict_break_discards_the_failing_rest_of_the_pass(kind: str, tmp_path: Any) -> None:
    """Promise: strict=True: the error of an item of an abandoned pass never surfaces
    later; the next pass is complete."""
    before = snapshot()
    df = u.make_map(kind, u.Range(20), FailOnceOn15(str(tmp_path / "claim")), strict=True, buffer_size=20)
    df.reset_state()
    it = iter(df)
    first = list(itertools.islice(it, 3))
    it.close()  # what a `break` does once the loop's iterator is dropped (done here, not left to GC)
    assert len(first) == 3
    time.sleep(0.3)  # the failing item is done meanwhile: its error waits in the transport
    assert sorted(list(df)) == [[i] for i in range(20)]
    assert (tmp_path / "claim").exists()  # it did fail, in the abandoned pass
    df.close()
    assert_no_leaks(before)


@pytest.mark.parametrize("kind", ["proc", "thread"])
def test_non_strict_break_carries_the_stream_and_its_error_over(kind: str, tmp_path: Any) -> None:
    """Promise: strict=False (tensorpack's default): nothing in flight is discarded, so the
    error of an item in flight when the consumer left still reaches it. Item 15 fails only
    once (a discarded error would never surface); it comes in the next epoch, or in the one
    after if the unordered map delivered faster items of the next pass first (on a busy
    machine the failing item can still be sleeping when the next epoch starts)."""
    before = snapshot()
    df = u.make_map(kind, u.Range(20), FailOnceOn15(str(tmp_path / "claim")), strict=False, buffer_size=20)
    try:
        df.reset_state()
        it = iter(df)
        first = list(itertools.islice(it, 3))
        it.close()  # what a `break` does once the loop's iterator is dropped (done here, not left to GC)
        assert len(first) == 3
        time.sleep(0.3)
        with pytest.raises(u.MyError, match="bad 15"):
            for _ in range(3):
                list(df)
    finally:
        df.close()
    assert_no_leaks(before)
