"""The in-memory JobQueue and DeadLetters (duetime.ports): queues per runtime × priority with
delays, visibility timeouts and dead letters, and dead-letter queues read as SQS reads them."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from duetime.domain.jobs import Priority, Runtime
from duetime.domain.messages import MessageAuth, RunMessage
from duetime.ports import DeadLetter, Delivery
from duetime.settings import queue_key


@dataclass
class _Stored:
    message_id: str
    body: str
    visible_at_ms: int
    receive_count: int = 0
    receipt: str = ""


class MemoryQueue:
    """Queues per runtime × priority with delays, visibility timeouts and dead letters."""

    def __init__(
        self,
        clock: Callable[[], int],
        visibility_timeout_seconds: int = 30,
        auth: MessageAuth | None = None,
    ) -> None:
        self._clock = clock
        # Messages are signed as the SQS adapter signs them; by default with a key of this
        # twin's own (give the executor `queue.auth`).
        self.auth = auth or MessageAuth.ephemeral()
        self._visibility_ms = visibility_timeout_seconds * 1000
        self._queues: dict[str, list[_Stored]] = {
            queue_key(r, p): [] for r in Runtime for p in Priority
        }
        self.dead: dict[str, list[tuple[RunMessage, str]]] = {k: [] for k in self._queues}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def send(self, messages: Sequence[tuple[RunMessage, int]]) -> None:
        now = self._clock()
        with self._lock:
            for message, delay in messages:
                if not 0 <= delay <= 900:
                    raise ValueError(f"delay {delay} outside 0..900")
                body = self.auth.seal(message)
                stored = _Stored(f"m{next(self._ids)}", body, now + delay * 1000)
                self._queues[queue_key(message.runtime, message.priority)].append(stored)

    def send_dead(self, message: RunMessage, reason: str, *, signed: bool = True) -> None:
        with self._lock:
            self.dead[queue_key(message.runtime, message.priority)].append((message, reason))

    def receive(
        self,
        runtime: Runtime,
        priority: Priority,
        max_messages: int,
        wait_seconds: int,
        visibility_seconds: int | None = None,
        *,
        lane: int = 0,
    ) -> list[Delivery]:
        if lane != 0:
            raise ValueError(f"the memory queues have one lane each, not lane {lane}")
        now = self._clock()
        visibility_ms = (
            self._visibility_ms if visibility_seconds is None else visibility_seconds * 1000
        )
        key = queue_key(runtime, priority)
        out: list[Delivery] = []
        with self._lock:
            for stored in self._queues[key]:
                if len(out) == max_messages:
                    break
                if stored.visible_at_ms <= now:
                    stored.receive_count += 1
                    stored.receipt = f"{stored.message_id}:{stored.receive_count}"
                    stored.visible_at_ms = now + visibility_ms
                    out.append(
                        Delivery(
                            stored.message_id,
                            stored.receipt,
                            stored.body,
                            stored.receive_count,
                            key,
                        )
                    )
        return out

    def delete(self, deliveries: Sequence[Delivery]) -> list[Delivery]:
        receipts = {d.receipt_handle for d in deliveries}
        with self._lock:
            for key, stored in self._queues.items():
                self._queues[key] = [s for s in stored if s.receipt not in receipts]
        return []

    def change_visibility(self, delivery: Delivery, seconds: int) -> None:
        with self._lock:
            for stored in self._queues[delivery.queue]:
                if stored.receipt == delivery.receipt_handle:
                    stored.visible_at_ms = self._clock() + seconds * 1000

    def visibility_times(self) -> list[tuple[int, int]]:
        """(visible at, due) of every stored message: when SQS would release it."""
        with self._lock:
            return [
                (s.visible_at_ms, RunMessage.from_json(s.body).due_ms)
                for queue in self._queues.values()
                for s in queue
            ]

    def depth(self) -> int:
        return sum(len(q) for q in self._queues.values())


@dataclass
class _Dead:
    message_id: str
    body: str
    reason: str | None
    sent_ms: int
    visible_at_ms: int
    receive_count: int = 0
    receipt: str = ""


class MemoryDeadLetters:
    """Dead-letter queues per runtime × priority. Receiving hides a message for a while, as
    SQS does; it leaves only when deleted. `add` is a message arriving: one a worker sent
    (with its reason), or one the redrive policy moved (no reason)."""

    def __init__(self, clock: Callable[[], int]) -> None:
        self._clock = clock
        self._letters: dict[str, list[_Dead]] = {
            queue_key(r, p): [] for r in Runtime for p in Priority
        }
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def add(self, queue: str, body: str, reason: str | None = None) -> None:
        now = self._clock()
        with self._lock:
            self._letters[queue].append(_Dead(f"d{next(self._ids)}", body, reason, now, now))

    def approximate_count(self, queue: str) -> int:
        now = self._clock()
        with self._lock:
            return sum(1 for dead in self._letters[queue] if dead.visible_at_ms <= now)

    def receive(self, queue: str, max_messages: int, visibility_seconds: int) -> list[DeadLetter]:
        now = self._clock()
        wanted = max(1, min(10, max_messages))  # as SQS: at most 10 per call
        out: list[DeadLetter] = []
        with self._lock:
            for dead in self._letters[queue]:
                if len(out) == wanted:
                    break
                if dead.visible_at_ms <= now:
                    dead.receive_count += 1
                    dead.receipt = f"{dead.message_id}:{dead.receive_count}"
                    dead.visible_at_ms = now + visibility_seconds * 1000
                    out.append(
                        DeadLetter(
                            queue,
                            dead.message_id,
                            dead.receipt,
                            dead.body,
                            dead.reason,
                            dead.sent_ms,
                            dead.receive_count,
                        )
                    )
        return out

    def release(self, letters: Sequence[DeadLetter]) -> None:
        now = self._clock()
        with self._lock:
            for letter in letters:
                for dead in self._letters[letter.queue]:
                    if dead.receipt == letter.receipt_handle:
                        dead.visible_at_ms = now

    def delete(self, letter: DeadLetter) -> None:
        with self._lock:
            self._letters[letter.queue] = [
                dead
                for dead in self._letters[letter.queue]
                if dead.receipt != letter.receipt_handle
            ]
