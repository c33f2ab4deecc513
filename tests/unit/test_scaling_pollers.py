"""The local event source mapping's pollers scale with a queue's backlog
(duetime.local.lambda_runtime.ScalingPollers): one on an idle queue, one more whenever every
poller holds a batch and messages wait (at once up to five, then on Lambda's ramp), back to one
when the backlog is gone."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from duetime.local.lambda_runtime import ScalingPollers


class FakeQueue:
    """Messages to receive; each batch is held until `release` is set."""

    def __init__(self, messages: int) -> None:
        self.lock = threading.Lock()
        self.messages = deque(range(messages))
        self.release = threading.Event()
        self.receives = 0
        self.empty_receives = 0
        self.holding = 0
        self.most_holding = 0
        self.first_polls: list[float] = []  # when each source first polled (monotonic)
        self.made: list[float] = []  # when each source was made (its poller started)


class FakeSource:
    def __init__(self, queue: FakeQueue) -> None:
        self.queue = queue
        self.polled = False
        queue.made.append(time.monotonic())

    def poll_once(self, received: Callable[[int], None] | None = None) -> int:
        queue = self.queue
        with queue.lock:
            if not self.polled:
                self.polled = True
                queue.first_polls.append(time.monotonic())
            batch = [queue.messages.popleft() for _ in range(min(10, len(queue.messages)))]
            queue.receives += 1
            queue.empty_receives += not batch
        if received is not None:
            received(len(batch))
        if not batch:
            time.sleep(0.02)  # the long poll's wait
            return 0
        with queue.lock:
            queue.holding += 1
            queue.most_holding = max(queue.most_holding, queue.holding)
        queue.release.wait()
        with queue.lock:
            queue.holding -= 1
        return len(batch)


def running(
    queue: FakeQueue, maximum: int, **options: Any
) -> tuple[ScalingPollers, threading.Event, Any]:
    made: list[FakeSource] = []

    def make() -> Any:
        made.append(FakeSource(queue))
        return made[-1]

    pollers = ScalingPollers(make, maximum, **options)
    stopping = threading.Event()
    thread = threading.Thread(target=pollers.run, args=(stopping, "normal"), name="lambda-n-0")
    thread.start()
    return pollers, stopping, (thread, made)


def wait_until(condition: Callable[[], bool], seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_given_an_idle_queue_then_one_poller_receives() -> None:
    queue = FakeQueue(0)
    pollers, stopping, (thread, made) = running(queue, maximum=5)
    wait_until(lambda: queue.receives >= 5)
    stopping.set()
    thread.join(5)
    assert pollers.peak == 1
    assert pollers.polling == 0  # stopped
    assert len(made) == 1
    assert queue.receives == queue.empty_receives > 0


def test_given_a_backlog_then_pollers_are_added_up_to_the_maximum_and_retire_after_it() -> None:
    queue = FakeQueue(200)
    pollers, stopping, (thread, made) = running(queue, maximum=5)
    wait_until(lambda: queue.most_holding == 5)
    time.sleep(0.1)
    assert pollers.peak == 5  # every poller holds a batch; none beyond the maximum
    with queue.lock:
        assert len(queue.messages) == 150  # the rest waits for a poller
    queue.release.set()
    wait_until(lambda: not queue.messages)
    wait_until(lambda: pollers.polling == 1)  # the added ones retired once the queue was empty
    stopping.set()
    thread.join(5)
    assert not thread.is_alive()
    assert len(made) == 5  # retired pollers' sources are reused, not made again


def test_given_every_poller_holding_a_batch_then_one_more_keeps_receiving() -> None:
    queue = FakeQueue(15)
    pollers, stopping, (thread, _) = running(queue, maximum=5)
    wait_until(lambda: queue.most_holding == 2)
    # Two batches (10 and 5) are held, and a third poller polls an empty queue.
    wait_until(lambda: queue.empty_receives > 0)
    assert pollers.peak == 3
    queue.release.set()
    stopping.set()
    thread.join(5)


def test_a_message_arriving_while_every_other_poller_holds_a_batch_is_received() -> None:
    # Found by an outside audit: the added poller retired on its first empty receive while the
    # first still held its batch (a long run), so nothing received until that batch ended.
    queue = FakeQueue(1)
    pollers, stopping, (thread, _) = running(queue, maximum=5)
    try:
        wait_until(lambda: queue.holding == 1)
        wait_until(lambda: queue.empty_receives >= 3)  # the added poller polled, and polls on
        assert pollers.polling == 2
        with queue.lock:
            queue.messages.append(99)
        wait_until(lambda: queue.holding == 2)  # received while the first batch is held
        queue.release.set()
        wait_until(lambda: pollers.polling == 1)  # with nothing held, one poller is enough
    finally:
        queue.release.set()
        stopping.set()
        thread.join(5)


def test_beyond_the_first_five_pollers_are_added_on_lambdas_ramp_up_to_the_maximum() -> None:
    queue = FakeQueue(200)
    pollers, stopping, (thread, _) = running(queue, maximum=8, initial=5, ramp_seconds=0.5)
    wait_until(lambda: queue.most_holding == 8, seconds=15)
    queue.release.set()
    stopping.set()
    thread.join(5)
    assert pollers.peak == 8
    # The first five start together (whenever every poller holds a batch); then the k-th one
    # beyond them polls no sooner than k ramps after the fifth started. (Not the gaps between
    # first polls: a thread started late on a loaded machine makes the next gap short.)
    assert len(queue.first_polls) == 8
    ramped = [queue.first_polls[4 + k] - queue.made[4] for k in (1, 2, 3)]
    assert all(ahead >= 0.5 * k - 0.01 for k, ahead in zip((1, 2, 3), ramped, strict=True)), ramped


def test_a_source_that_cannot_be_made_once_leaves_no_phantom_poller() -> None:
    # Found by an outside audit: the count went up before the source was made; one failed
    # emulator call left a poller counted that did not exist, and the queue never scaled again
    # (the batch being received, which the failure escaped, waited for its visibility).
    queue = FakeQueue(30)
    calls = [0]

    def make() -> Any:
        calls[0] += 1
        if calls[0] in (1, 3):  # the first poller's first try, then the first added poller's
            raise RuntimeError("GetQueueAttributes: connection refused")
        return FakeSource(queue)

    pollers = ScalingPollers(make, 5)
    stopping = threading.Event()
    thread = threading.Thread(target=pollers.run, args=(stopping, "normal"), name="lambda-n-0")
    thread.start()
    try:
        wait_until(lambda: queue.most_holding == 3)  # 30 messages: three batches held at once
        assert pollers.polling == 4  # three holding, one receiving: every one real
        assert len(queue.made) == 4
        assert calls[0] == 6
    finally:
        queue.release.set()
        stopping.set()
        thread.join(5)
