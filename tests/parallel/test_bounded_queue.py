"""dataflow/parallel/_bounded_queue.py: the bounded FIFO of the thread stages."""

from __future__ import annotations

import queue
import threading

import pytest

from dataflow.parallel._bounded_queue import BoundedQueue


def test_it_holds_at_most_maxsize_in_order() -> None:
    q: BoundedQueue[int] = BoundedQueue(3)
    for i in range(3):
        q.put(i, timeout=1)
    with pytest.raises(queue.Full):
        q.put(3, timeout=0.01)
    assert q.qsize() == 3
    assert [q.get(timeout=1), q.get_nowait()] == [0, 1]
    q.put(3, timeout=1)
    assert [q.get(timeout=1), q.get(timeout=1)] == [2, 3]
    with pytest.raises(queue.Empty):
        q.get_nowait()
    with pytest.raises(queue.Empty):
        q.get(timeout=0.01)


def test_a_lost_slot_is_put_back_by_a_waiting_consumer() -> None:
    """A Ctrl-C between a get's two steps loses a slot; with every slot lost, a producer
    finds no room, and the consumer's timed-out wait on the empty queue repairs it."""
    q: BoundedQueue[int] = BoundedQueue(2)
    q.put(1, timeout=1)
    q._items.get()  # the consumer took the item and was interrupted before returning its slot
    q._slots.get()  # ... twice: no slot left, no item either
    with pytest.raises(queue.Full):
        q.put(2, timeout=0.01)
    with pytest.raises(queue.Empty):
        q.get(timeout=0.01)
    q.put(2, timeout=1)
    assert q.get(timeout=1) == 2


@pytest.mark.timeout(60)
def test_producers_and_a_consumer_pass_everything_once() -> None:
    q: BoundedQueue[int] = BoundedQueue(4)

    def produce(base: int) -> None:
        for i in range(2000):
            q.put(base + i)

    threads = [threading.Thread(target=produce, args=(k * 10_000,)) for k in range(3)]
    for t in threads:
        t.start()
    got = [q.get(timeout=10) for _ in range(6000)]
    for t in threads:
        t.join(10)
    assert sorted(got) == sorted(k * 10_000 + i for k in range(3) for i in range(2000))
    assert all(got.index(k * 10_000 + i) < got.index(k * 10_000 + i + 1) for k in range(3) for i in (0, 999))
