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
from duetime.domain.messages import (
    KeysUnavailable,
    MessageAuth,
    RunMessage,
    UnauthenticatedMessage,
    UnverifiedSignature,
)
from duetime.observability import logger

# After a failed first read, seals and opens fail at once for this long (a send's parallel
# batches, a worker's other records), then the next one reads again: a throttled or silent
# Secrets Manager is asked once, not once a message (a silent one holds each read ~30 s).
# Keys read less than this long ago are not read again for a signature none of them made.
RETRY_AFTER_MS = 5_000
# Keys are read again on their first use after this long, so a warm container keeps up with a
# rotation (security.md): it signs with the new key within it. One thread reads; the others go
# on with the keys in hand; a read that fails keeps them, and is made again REREAD_AFTER_MS on.
KEYS_FRESH_MS = 10 * 60_000
REREAD_AFTER_MS = 60_000
READ_FAILED = "the run messages' keys could not be read"


class KeysOnFirstUse(MessageAuth):
    """MessageAuth whose keys are read when a message is first sealed or opened, and again
    after KEYS_FRESH_MS, or at once for a signature none of them made (until 2026-12-01 they
    were kept for the process's life: after a rotation's first step a warm worker refused the
    runs a new container signed with the new key as forged, parked unsigned for good; an
    outside fault audit, round ten)."""

    def __init__(self, read: Callable[[], str], *, clock: Callable[[], int] = wall_ms) -> None:
        # (no keys yet: not MessageAuth's)
        self._read = read
        self._clock = clock
        self._lock = threading.Lock()
        self._loaded: tuple[int, MessageAuth] | None = None  # when read, and the keys
        self._failed: tuple[int, Exception] | None = None  # when the last read failed, why
        self._reading = False  # a thread is reading the keys again (others use those in hand)

    def _auth(self, older_than_ms: int = KEYS_FRESH_MS) -> tuple[int, MessageAuth]:
        """The keys and when they were read: read again if that is `older_than_ms` ago,
        unless a read failed lately or another thread is at it."""
        with self._lock:
            loaded, now = self._loaded, self._clock()
            if loaded is None:  # every message needs them: they wait for the one read
                return self._first_read(now)
            if now - loaded[0] < older_than_ms or self._reading:
                return loaded
            if self._failed is not None and now < self._failed[0] + REREAD_AFTER_MS:
                return loaded
            self._reading = True
        try:
            fresh = MessageAuth.from_text(self._read())
        except Exception as exc:
            logger.warning("reading the run messages' keys again failed", exc_info=True)
            with self._lock:
                self._failed, self._reading = (self._clock(), exc), False
            return loaded
        with self._lock:
            self._loaded, self._failed, self._reading = (self._clock(), fresh), None, False
            return self._loaded

    def _first_read(self, now: int) -> tuple[int, MessageAuth]:
        """(Under the lock.) The first read, or KeysUnavailable; a failure's time is when it
        failed, so a silent read (~30 s) is not made again by the next message at once."""
        if self._failed is not None and now < self._failed[0] + RETRY_AFTER_MS:
            cause = self._failed[1]
            raise KeysUnavailable(f"{READ_FAILED}: {cause}") from cause
        try:
            self._loaded = (self._clock(), MessageAuth.from_text(self._read()))
        except Exception as exc:
            self._failed = (self._clock(), exc)
            raise KeysUnavailable(f"{READ_FAILED}: {exc}") from exc
        self._failed = None
        return self._loaded

    def seal(self, message: RunMessage) -> str:
        return self._auth()[1].seal(message)

    def open(self, body: str) -> RunMessage:
        began = self._clock()
        auth = self._auth()[1]
        try:
            return auth.open(body)
        except UnauthenticatedMessage as refused:
            if not refused.signed:
                raise
            # Signed with none of these keys: a rotation since they were read, or a forgery.
            read_at, auth = self._auth(older_than_ms=RETRY_AFTER_MS)
            try:
                return auth.open(body)
            except UnauthenticatedMessage:
                if read_at >= began or not self._unsure():
                    raise  # keys read since it came, or a moment ago: not duetime's
                # The keys could not be read again (a read under way, or failing): it comes
                # back rather than be refused on keys maybe stale.
                raise UnverifiedSignature(
                    "signed with none of the keys in hand, which cannot be read again now",
                    refused.message,
                ) from refused

    def _unsure(self) -> bool:
        """Whether the keys in hand could not be read again: a read under way, or failing."""
        with self._lock:
            failed = self._failed
            return self._reading or (
                failed is not None and self._clock() < failed[0] + REREAD_AFTER_MS
            )
