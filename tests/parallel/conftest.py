"""Fixtures shared by the tests of the shared-memory ring (test_shm_ring, test_slot_batch)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest
import zmq

from tests._leaks import our_shm
from tests.parallel.test_shm_ring import Channel


@pytest.fixture
def channel() -> Iterator[Any]:
    """``channel(total_bytes, copy=False)`` opens a :class:`Channel`; all are closed (and
    /dev/shm checked clean) at the end."""
    ctx = zmq.Context()
    opened: list[Channel] = []
    before = our_shm()

    def make(total_bytes: int, copy: bool = False) -> Channel:
        ch = Channel(ctx, total_bytes, copy, name=f"inproc://ring-{len(opened)}")
        opened.append(ch)
        return ch

    yield make
    gc.collect()
    for ch in opened:
        ch.close()
    ctx.term()
    assert our_shm() - before == set()
