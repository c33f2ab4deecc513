"""The run messages' keys, read when a message is first sealed or opened (duetime.wiring builds
the read: a Secrets Manager secret), so a function that never does (the coordinator) needs
neither the key nor its grant.

A read that fails is no message's fault: every message needs the key. It raises
KeysUnavailable, which the SQS adapter turns into QueueUnavailable (the sweep stops there and
parks nothing, as when SQS takes no request; the worker's record fails and comes back). Until
2026-12-01 botocore's error went through raw, and the sweeper's hand-over took it for each
timer's own failure: every group was split down to single timers, each read the key again (324
reads for a page of 160), and each was parked with an attempt counted, quarantined after two
hours of a Secrets Manager outage (found by an outside audit, round 29)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from duetime.clock import wall_ms
from duetime.domain.messages import KeysUnavailable, MessageAuth, RunMessage

# After a failed read, seals and opens fail at once for this long (a send's parallel batches,
# a worker's other records), then the next one reads again: a throttled or silent Secrets
# Manager is asked once, not once a message (a silent one holds each read ~30 s).
RETRY_AFTER_MS = 5_000
READ_FAILED = "the run messages' keys could not be read"


class KeysOnFirstUse(MessageAuth):
    """MessageAuth whose keys are read when a message is first sealed or opened, and kept."""

    def __init__(self, read: Callable[[], str], *, clock: Callable[[], int] = wall_ms) -> None:
        # (no keys yet: not MessageAuth's)
        self._read = read
        self._clock = clock
        self._lock = threading.Lock()
        self._loaded: MessageAuth | None = None
        self._failed: tuple[int, Exception] | None = None  # when the last read failed, why

    def _auth(self) -> MessageAuth:
        with self._lock:
            if self._loaded is not None:
                return self._loaded
            if self._failed is not None and self._clock() < self._failed[0] + RETRY_AFTER_MS:
                cause = self._failed[1]
                raise KeysUnavailable(f"{READ_FAILED}: {cause}") from cause
            try:
                self._loaded = MessageAuth.from_text(self._read())
            except Exception as exc:
                self._failed = (self._clock(), exc)
                raise KeysUnavailable(f"{READ_FAILED}: {exc}") from exc
            self._failed = None
            return self._loaded

    def seal(self, message: RunMessage) -> str:
        return self._auth().seal(message)

    def open(self, body: str) -> RunMessage:
        return self._auth().open(body)
