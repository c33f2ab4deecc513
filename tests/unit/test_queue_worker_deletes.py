"""The long-running (Fargate) worker's deletes: full batches of 10 per queue, a partial batch
after the hold, and a finished run's slot free before its message is deleted."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from duetime.domain.jobs import Priority, Runtime
from duetime.ports import Delivery
from duetime.services.queue_worker import QueueWorker
from duetime.services.results import Disposition, Result
from tests.waiting import wait_for


class FakeQueue:
    """Messages waiting on the normal priority's queue(s); every delete call recorded with
    when it was made."""

    def __init__(self) -> None:
        self.waiting: list[Delivery] = []
        self.deletes: list[tuple[float, list[Delivery]]] = []
        self.lock = threading.Lock()

    def put(self, count: int, queue: str = "q-a") -> None:
        with self.lock:
            start = len(self.waiting) + sum(len(d) for _, d in self.deletes)
            self.waiting += [
                Delivery(f"m{start + i}", f"r{start + i}", "{}", 1, queue) for i in range(count)
            ]

    def receive(
        self, runtime: Runtime, priority: Priority, limit: int, wait: int, visibility: int, **_: Any
    ) -> list[Delivery]:
        if priority is Priority.NORMAL:
            with self.lock:
                got, self.waiting = self.waiting[:limit], self.waiting[limit:]
            if got:
                return got
        time.sleep(0.02)
        return []

    def delete(self, deliveries: list[Delivery]) -> list[Delivery]:
        with self.lock:
            self.deletes.append((time.monotonic(), list(deliveries)))
        return []

    def change_visibility(self, delivery: Delivery, seconds: int) -> None:
        pass

    def deleted(self) -> list[str]:
        with self.lock:
            return [d.message_id for _, batch in self.deletes for d in batch]

    def requests(self) -> int:
        """DeleteMessageBatch requests: the adapter sends each queue's messages 10 a request."""
        with self.lock:
            return sum(
                -(-sum(1 for d in batch if d.queue == q) // 10)
                for _, batch in self.deletes
                for q in {d.queue for d in batch}
            )


class FakeExecutor:
    def __init__(self) -> None:
        self.handled: list[str] = []

    def handle(self, delivery: Delivery, **_: Any) -> Result:
        self.handled.append(delivery.message_id)
        return Result(Disposition.DONE, "ran")


@pytest.fixture
def run_worker() -> Iterator[Any]:
    started: list[tuple[QueueWorker, threading.Thread]] = []

    def start(queue: FakeQueue, executor: FakeExecutor, **options: Any) -> QueueWorker:
        worker = QueueWorker(
            queue,  # type: ignore[arg-type]
            executor,  # type: ignore[arg-type]
            Runtime.FARGATE,
            wait_seconds=1,
            **({"concurrency": 30, "delete_hold_seconds": 0.5} | options),
        )
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        started.append((worker, thread))
        return worker

    yield start
    for worker, thread in started:
        worker.stop()
        thread.join(timeout=10)
        assert not thread.is_alive()


def test_full_batches_go_at_once_and_the_rest_after_the_hold(run_worker: Any) -> None:
    queue, executor = FakeQueue(), FakeExecutor()
    queue.put(25)
    run_worker(queue, executor, delete_hold_seconds=2.0)
    wait_for(lambda: len(queue.deleted()) >= 20, 5)
    first = queue.deletes[0][0]
    assert len(queue.deleted()) == 20  # the 5 left wait for the hold
    wait_for(lambda: len(queue.deleted()) == 25, 5)
    assert queue.deletes[-1][0] - first >= 1.5
    assert sorted(queue.deleted()) == sorted(executor.handled)
    assert queue.requests() == 3  # 10 + 10 + 5, not one request per flush of a few


def test_each_queue_fills_its_own_batches(run_worker: Any) -> None:
    queue, executor = FakeQueue(), FakeExecutor()
    queue.put(10, "q-a")
    queue.put(3, "q-b")
    run_worker(queue, executor, delete_hold_seconds=2.0)
    wait_for(lambda: len(executor.handled) == 13, 5)
    wait_for(lambda: len(queue.deleted()) == 10, 5)
    assert {d.queue for _, batch in queue.deletes for d in batch} == {"q-a"}
    wait_for(lambda: len(queue.deleted()) == 13, 5)
    assert queue.requests() == 2


def test_a_finished_run_frees_its_slot_before_its_message_is_deleted(run_worker: Any) -> None:
    queue, executor = FakeQueue(), FakeExecutor()
    queue.put(3)
    run_worker(queue, executor, concurrency=1, delete_hold_seconds=5.0)
    wait_for(lambda: len(executor.handled) == 3, 3)
    assert queue.deleted() == []  # all three ran on one slot while their deletes waited


def test_stopping_deletes_what_finished(run_worker: Any) -> None:
    queue, executor = FakeQueue(), FakeExecutor()
    queue.put(4)
    worker = run_worker(queue, executor, delete_hold_seconds=60.0)
    wait_for(lambda: len(executor.handled) == 4, 3)
    worker.stop()
    wait_for(lambda: len(queue.deleted()) == 4, 10)


def test_the_hold_stays_well_inside_the_visibility_timeout() -> None:
    worker = QueueWorker(
        FakeQueue(),  # type: ignore[arg-type]
        FakeExecutor(),  # type: ignore[arg-type]
        Runtime.FARGATE,
        visibility_seconds=1,
        delete_hold_seconds=5.0,
    )
    assert worker._delete_hold == 0.5


def test_two_copies_of_one_message_each_hold_a_slot_and_are_each_deleted(
    run_worker: Any,
) -> None:
    # SQS may deliver one message twice (the same message id, two receipts). Held by message
    # id, the second copy replaced the first: the worker counted one slot for two runs, and
    # the first copy's heartbeat stopped.
    queue, executor = FakeQueue(), FakeExecutor()
    release = threading.Event()
    handle = executor.handle

    def blocked(delivery: Delivery, **kwargs: Any) -> Result:
        release.wait(5)
        return handle(delivery, **kwargs)

    executor.handle = blocked  # type: ignore[method-assign]
    queue.waiting = [Delivery("m0", receipt, "{}", 1, "q-a") for receipt in ("r0", "r1")]
    worker = run_worker(queue, executor, concurrency=4, delete_hold_seconds=0.1)

    wait_for(lambda: not queue.waiting, 3)
    assert len(worker._held) == 2
    release.set()
    wait_for(lambda: len(queue.deleted()) == 2, 5)
    receipts = sorted(d.receipt_handle for _, batch in queue.deletes for d in batch)
    assert receipts == ["r0", "r1"]


class FailingQueue(FakeQueue):
    """A receive fails while `failing`; every receive's time recorded."""

    def __init__(self) -> None:
        super().__init__()
        self.failing = True
        self.calls: list[float] = []

    def receive(
        self, runtime: Runtime, priority: Priority, *args: Any, **kw: Any
    ) -> list[Delivery]:
        if priority is not Priority.NORMAL:
            return super().receive(runtime, priority, *args, **kw)
        self.calls.append(time.monotonic())
        if self.failing:
            raise ConnectionError("sqs unreachable")
        return super().receive(runtime, priority, *args, **kw)


def test_a_failing_receive_is_retried_after_a_doubling_wait_and_a_success_resets_it(
    run_worker: Any,
) -> None:
    # Every second, forever, from every poller of every worker, was what a receive failure
    # got: no backoff against a throttled or unreachable SQS.
    queue = FailingQueue()
    worker = run_worker(
        queue,
        FakeExecutor(),
        priorities=(Priority.NORMAL,),
        receive_retry_seconds=0.1,
        receive_retry_cap_seconds=0.4,
    )
    wait_for(lambda: len(queue.calls) >= 7, 10)
    gaps = [b - a for a, b in itertools.pairwise(queue.calls[:7])]
    assert gaps[0] < 0.3  # 0.05 to 0.1
    assert all(0.19 <= gap < 0.6 for gap in gaps[3:])  # capped: 0.2 to 0.4
    queue.failing = False
    queue.put(1)
    wait_for(lambda: len(queue.deleted()) == 1, 5)
    queue.failing = True
    failed_again = len(queue.calls)
    wait_for(lambda: len(queue.calls) >= failed_again + 2, 5)
    assert queue.calls[failed_again + 1] - queue.calls[failed_again] < 0.3  # from the first
    started = time.monotonic()
    worker.stop()
    wait_for(worker._halted.is_set, 5)
    assert time.monotonic() - started < 2
