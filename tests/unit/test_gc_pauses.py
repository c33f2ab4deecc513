"""duetime.local.gc_pauses: with automatic full collections off, garbage that reached the
oldest generation is still freed, by a full collection made when the process is quiet or when
one has been due too long."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from duetime.local.gc_pauses import IdleFullCollections, freeze_long_lived
from tests.waiting import wait_for


class Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the cyclic collector frees it


@pytest.fixture
def frozen() -> Iterator[None]:
    undo = freeze_long_lived(full_collections=False)
    try:
        yield
    finally:
        undo()


def old_garbage() -> weakref.ref[Node]:
    """A cycle that survived two young collections while in use, then became garbage, and
    enough young collections after it for a full one to be due."""
    node = Node()
    gc.collect(1)
    gc.collect(1)  # it is in the oldest generation now
    ref = weakref.ref(node)
    del node
    for _ in range(20):
        gc.collect(1)
    return ref


class Requests:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> int:
        return self.count


def test_old_garbage_outlives_young_collections_and_an_idle_look_frees_it(frozen: None) -> None:
    requests = Requests()
    collector = IdleFullCollections(requests)
    ref = old_garbage()
    assert ref() is not None  # no automatic full collection ran

    assert collector.look() is True

    assert ref() is None
    assert collector.collections == 1
    assert gc.get_count()[2] == 0


def test_under_load_a_due_collection_waits_until_it_is_overdue(
    frozen: None,
) -> None:
    requests = Requests()
    collector = IdleFullCollections(requests, every_s=1.0, overdue_s=3.0)
    ref = old_garbage()

    looks = []
    for _ in range(3):
        requests.count += 31
        looks.append(collector.look())

    assert looks == [False, False, True]
    assert ref() is None


def test_a_busy_look_waits_and_the_next_quiet_one_collects(frozen: None) -> None:
    requests = Requests()
    collector = IdleFullCollections(requests, quiet=30)
    ref = old_garbage()

    requests.count += 31
    assert collector.look() is False
    assert ref() is not None
    requests.count += 30  # an idle stack's pollers still call
    assert collector.look() is True
    assert ref() is None


def test_an_idle_process_with_no_collection_due_is_left_alone(frozen: None) -> None:
    collector = IdleFullCollections(Requests())
    gc.collect()

    assert collector.look() is False
    assert collector.collections == 0


def test_started_it_looks_on_its_own_until_stopped(frozen: None) -> None:
    collector = IdleFullCollections(Requests(), every_s=0.01)
    ref = old_garbage()
    collector.start()
    try:
        wait_for(lambda: ref() is None, seconds=5)
    finally:
        collector.stop()
    assert collector.collections >= 1
