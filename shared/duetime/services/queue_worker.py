"""A long-running worker over the execution core: the Fargate worker (and the local stack's).

- One poller thread per priority queue (per lane of it: `lanes`) long-polls for up to as
  many messages as there are free execution slots; the runs execute on a thread pool. Runs
  received together on several queues may outnumber the free slots: they wait for one
  highest priority first (then first received), leased by the heartbeat.
- Messages are received with a short visibility timeout that a heartbeat keeps extending
  while the run executes: a worker that dies loses its lease within `visibility_seconds`.
- A finished run frees its slot at once; its message is deleted in a batch of 10 of its
  queue's (one request per 10 runs), or, fewer, once the first of them has waited
  `delete_hold_seconds`. (If the worker dies first, the messages of runs that finished come
  back: their run records say so, and they do not run again.)
- stop() (SIGTERM): polling stops; runs received but not started are released at once
  (visibility 0) for another worker; runs in flight may finish until `stop_timeout_seconds`,
  their heartbeat and deletes going on; whatever is still held after that is released.
- A run whose handling raised (a store error) comes back soon, as on the Lambda worker
  (duetime.services.results.retry_soon_seconds).
- A receive that fails (SQS unreachable, throttled, denied) is tried again after a wait that
  doubles from `receive_retry_seconds` up to `receive_retry_cap_seconds` (each drawn between
  half and all of it, so a fleet does not retry in step), back to the first once one succeeds;
  stop() ends the wait.
"""

from __future__ import annotations

import heapq
import itertools
import random
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from duetime.domain.jobs import Priority, Runtime
from duetime.observability import logger, metrics, serialized_metrics
from duetime.ports import Delivery, JobQueue
from duetime.services.execute import RunExecutor
from duetime.services.results import Disposition

DELETE_BATCH = 10  # messages per DeleteMessageBatch
_RANK = {Priority.HIGH: 0, Priority.NORMAL: 1, Priority.LOW: 2}  # which waiting run starts first


class QueueWorker:
    def __init__(
        self,
        queue: JobQueue,
        executor: RunExecutor,
        runtime: Runtime,
        *,
        priorities: Sequence[Priority] = (Priority.HIGH, Priority.NORMAL, Priority.LOW),
        concurrency: int = 32,
        wait_seconds: int = 10,
        visibility_seconds: int = 60,
        heartbeat_seconds: float = 20.0,
        stop_timeout_seconds: float = 90.0,
        delete_interval_seconds: float = 0.05,
        delete_hold_seconds: float = 1.0,
        lanes: Mapping[Priority, int] | None = None,  # lanes per priority queue; default 1
        receive_retry_seconds: float = 1.0,
        receive_retry_cap_seconds: float = 30.0,
    ) -> None:
        self._queue = queue
        self._executor = executor
        self._runtime = runtime
        self._priorities = list(priorities)
        self._concurrency = concurrency
        self._wait = wait_seconds
        self._visibility = visibility_seconds
        self._heartbeat = heartbeat_seconds
        self._stop_timeout = stop_timeout_seconds
        self._delete_interval = delete_interval_seconds
        # Well inside the visibility timeout: a finished run's message must not come back.
        self._delete_hold = min(delete_hold_seconds, visibility_seconds / 2)
        self._lanes = dict(lanes or {})
        self._receive_retry = (receive_retry_seconds, receive_retry_cap_seconds)
        self._stopping = threading.Event()  # stop receiving (SIGTERM)
        # Stop the heartbeat and the deletes: only once the runs in flight have drained, or
        # their messages would come back to other workers while they still run.
        self._halted = threading.Event()
        self._lock = threading.Lock()
        # Received, not yet deleted or released; by receipt handle (two copies of one message
        # may be held at once).
        self._held: dict[str, Delivery] = {}
        # Received, not started yet, as (rank, arrival, delivery): each pool task starts the
        # first. Released, not started, when the worker stops.
        self._waiting: list[tuple[int, int, Delivery]] = []
        self._arrivals = itertools.count()
        # Finished, waiting for a batched delete: by queue, with when the first finished.
        self._finished: defaultdict[str, list[Delivery]] = defaultdict(list)
        self._first_finished: dict[str, float] = {}
        self.processed = 0

    def stop(self) -> None:
        self._stopping.set()

    def run(self) -> None:
        with serialized_metrics():
            self._run()

    def _run(self) -> None:
        logger.info("worker started", extra={"runtime": self._runtime.value})
        pool = ThreadPoolExecutor(max_workers=self._concurrency, thread_name_prefix="run")
        pollers = [
            threading.Thread(
                target=self._poll, args=(p, pool, lane), name=f"poll-{p.value}-{lane}", daemon=True
            )
            for p in self._priorities
            for lane in range(self._lanes.get(p, 1))
        ]
        helpers = [
            threading.Thread(target=self._every, args=(self._heartbeat, self._extend), daemon=True),
            threading.Thread(
                target=self._every, args=(self._delete_interval, self._flush), daemon=True
            ),
            # Outside Lambda nothing flushes the EMF metrics per invocation: once a minute.
            threading.Thread(target=self._every, args=(60.0, metrics.flush_metrics), daemon=True),
        ]
        for thread in pollers + helpers:
            thread.start()
        # Wake twice a second: a wait with no timeout was seen to miss SIGTERM's handler after
        # the process had been stopped and continued (SIGSTOP/SIGCONT).
        while not self._stopping.wait(0.5):
            pass
        logger.info("worker stopping", extra={"in_flight": len(self._held)})
        self._release_waiting()
        for thread in pollers:
            thread.join(timeout=self._wait + 5)
        self._release_waiting()  # what a poller received as the stop came
        deadline = time.monotonic() + self._stop_timeout
        while time.monotonic() < deadline:
            with self._lock:
                if not self._held.keys() - self._finished_ids():
                    break
            time.sleep(0.05)
        pool.shutdown(wait=False, cancel_futures=True)
        self._halted.set()
        self._flush(everything=True)
        self._release_all()
        metrics.flush_metrics()
        logger.info("worker stopped", extra={"processed": self.processed})

    def _poll(self, priority: Priority, pool: ThreadPoolExecutor, lane: int = 0) -> None:
        # Pollers do not reserve execution slots while they long-poll (one idle queue would
        # starve the others); each asks for up to the capacity free right now. Messages that
        # arrive together on several queues may wait briefly for a slot (`_next`: the highest
        # priority first), leased by the heartbeat.
        failures = 0
        while not self._stopping.is_set():
            with self._lock:
                free = self._concurrency - len(self._held) + sum(map(len, self._finished.values()))
            if free <= 0:
                time.sleep(0.05)
                continue
            try:
                deliveries = self._queue.receive(
                    self._runtime, priority, min(10, free), self._wait, self._visibility, lane=lane
                )
            except Exception:
                failures += 1
                first, cap = self._receive_retry
                wait = min(cap, first * 2 ** min(failures - 1, 32)) * random.uniform(0.5, 1.0)
                logger.exception(
                    "receive failed",
                    extra={"priority": priority.value, "failures": failures, "retry_in": wait},
                )
                self._stopping.wait(wait)
                continue
            failures = 0
            with self._lock:
                for delivery in deliveries:
                    self._held[delivery.receipt_handle] = delivery
                    entry = (_RANK[priority], next(self._arrivals), delivery)
                    heapq.heappush(self._waiting, entry)
            if self._stopping.is_set():  # received as the stop came: handed back now
                self._release_waiting()
                continue
            for _ in deliveries:
                pool.submit(self._next)

    def _next(self) -> None:
        """A pool task: start the waiting run that comes first (none once stopping)."""
        with self._lock:
            if self._stopping.is_set() or not self._waiting:
                return
            delivery = heapq.heappop(self._waiting)[2]
        self._process(delivery)

    def _release_waiting(self) -> None:
        """On stop: the runs received but not started yet are handed back at once (another
        task starts them), not started here during the stop's grace, where a long run would be
        killed at its end and its attempt counted failed."""
        with self._lock:
            waiting = [delivery for _, _, delivery in self._waiting]
            self._waiting.clear()
        for delivery in waiting:
            self._release(delivery)

    def _process(self, delivery: Delivery) -> None:
        try:
            result = self._executor.handle(delivery, stopping=self._stopping.is_set)
            if result.disposition == Disposition.DONE:
                with self._lock:
                    self._first_finished.setdefault(delivery.queue, time.monotonic())
                    self._finished[delivery.queue].append(delivery)
            else:
                with self._lock:
                    self._held.pop(delivery.receipt_handle, None)
        except Exception:
            # Logged by the executor and back soon (2, 4, 8, ... s by its receive count), as on
            # the Lambda worker: not after whatever is left of its visibility, which a long
            # outage would spend in quick receives until the DLQ.
            with self._lock:
                self._held.pop(delivery.receipt_handle, None)
        finally:
            with self._lock:
                self.processed += 1

    def _every(self, seconds: float, action: Callable[[], None]) -> None:
        while not self._halted.wait(seconds):
            try:
                action()
            except Exception:
                logger.exception("worker housekeeping failed")

    def _extend(self) -> None:
        """Heartbeat: keep the SQS visibility of every run still executing. Each message on its
        own: one that fails (throttled, its receipt gone) must not leave the others to lapse.
        A message that lapses comes back to another worker, which finds the run's lease live
        in the run record and leaves it alone (duetime.domain.runs.decide_claim)."""
        with self._lock:
            done = self._finished_ids()
            running = [d for i, d in self._held.items() if i not in done]
        for delivery in running:
            with self._lock:  # handled since (put back, finished): its visibility is set
                if self._held.get(delivery.receipt_handle) is not delivery:
                    continue
            try:
                self._queue.change_visibility(delivery, self._visibility)
            except Exception:
                logger.warning(
                    "extending a message's visibility failed",
                    extra={"message_id": delivery.message_id},
                    exc_info=True,
                )

    def _finished_ids(self) -> set[str]:
        return {d.receipt_handle for queue in self._finished.values() for d in queue}

    def _flush(self, *, everything: bool = False) -> None:
        """Delete finished runs' messages: each queue's full batches of 10, and the rest of a
        queue's once its first has waited `delete_hold_seconds` (all of them: `everything`)."""
        now = time.monotonic()
        batch: list[Delivery] = []
        with self._lock:
            for queue, finished in list(self._finished.items()):
                if everything or now - self._first_finished[queue] >= self._delete_hold:
                    batch += finished
                    del self._finished[queue], self._first_finished[queue]
                elif len(finished) >= DELETE_BATCH:
                    full = len(finished) - len(finished) % DELETE_BATCH
                    batch += finished[:full]
                    del finished[:full]
                    if not finished:
                        del self._finished[queue], self._first_finished[queue]
            for delivery in batch:
                self._held.pop(delivery.receipt_handle, None)
        if batch:
            left = self._queue.delete(batch)
            if left:  # they come back, and their run records make the next worker drop them
                logger.warning(
                    "messages of finished runs were not deleted", extra={"count": len(left)}
                )

    def _release(self, delivery: Delivery) -> None:
        with self._lock:
            self._held.pop(delivery.receipt_handle, None)
        try:
            self._queue.change_visibility(delivery, 0)
        except Exception:
            logger.exception("release failed", extra={"message_id": delivery.message_id})

    def _release_all(self) -> None:
        with self._lock:
            held = list(self._held.values())
        for delivery in held:
            self._release(delivery)
