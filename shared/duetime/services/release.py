"""When the sweeper sends a run message: at the moment that makes it visible just before its
instant, so the worker does not wait (paid time on Lambda) for most of a second.

SQS delays count whole seconds: a message sent at `now` with `delay_seconds(due, now)` becomes
visible `(due - now) mod 1000` ms early. The sweeper hands runs over seconds to minutes ahead,
so it can afford to hold a send for part of a second (duetime.domain.messages.release_window):
a cron or rate occurrence (whole seconds) is then visible 40-150 ms before its instant instead
of anywhere in the second before it. Held sends go out in groups of messages whose windows
overlap, so the number of SendMessageBatch requests hardly grows. Each group is planned from
the moment the previous one was sent: when a send took long enough (a loaded store) for the
next windows to close, those wait for their next second's window. One send call holds for at
most `budget_ms` in all (a second); whatever cannot be held within it goes at once, as before
(up to 0.9 s early, or at most 0.1 s late: duetime.domain.messages.delay_seconds).

A sweep also holds for at most `hold_at_most` in all, over every send it makes (3 s: the
sweeper, duetime.services.sweep): the runs of whole seconds share one window a second (about
110 ms), so a sweep that held each group for its window handed over some 1,500 timers a second
and lost the minute it was ahead under load (until 2026-11-30; found by an outside audit).
Past its budget a sweep sends at once, at the rate docs/scaling.md measures.

Batch create (`POST /jobs/batch`) holds its sends the same way: a request's hold (at most a
second of the API function) is shared by up to 100 runs, each of which would otherwise cost
a worker up to a second. A single submission's sends are not held: its answer would wait
that second for one run (docs/performance.md, "Early wait"); its delay is rounded to the
next second when that makes it visible at most 100 ms late (`delay_seconds`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from duetime.domain.messages import RunMessage, delay_seconds, release_window
from duetime.ports import QueueError, RunSender


class ReleasedSender:
    """A RunSender whose sends are held to their release moment (see the module docstring).
    Delays are computed when each group is sent, from its messages' due instants."""

    def __init__(
        self,
        queue: RunSender,
        *,
        clock: Callable[[], int],
        sleep: Callable[[float], None],
        budget_ms: int = 1_000,
    ) -> None:
        self._queue = queue
        self._clock = clock
        self._sleep = sleep
        self._budget_ms = budget_ms
        self._left = threading.local()  # this thread's hold left over its sends (hold_at_most)

    def hold_at_most(self, ms: int | None) -> None:
        """From now on this thread's sends hold for at most `ms` in all (None: each send call
        its own budget_ms, whatever the others held)."""
        self._left.ms = ms

    def send(self, messages: Sequence[tuple[RunMessage, int]]) -> None:
        """Raises QueueError naming every message not sent: a failed group's, and those of the
        groups after it (a batch create keeps the jobs whose runs went out)."""
        left: int | None = getattr(self._left, "ms", None)
        budget = self._budget_ms if left is None else max(0, min(self._budget_ms, left))
        tried: set[int] = set()  # the messages handed to the queue (by id)
        try:
            spent = self._held(messages, budget, tried)
        except QueueError as exc:
            untried = [m for m, _ in messages if id(m) not in tried]
            raise type(exc)(str(exc), [*exc.failed, *untried]) from exc
        if left is not None:
            self._left.ms = left - spent

    def _held(
        self, messages: Sequence[tuple[RunMessage, int]], budget: int, tried: set[int]
    ) -> int:
        """Send, holding each group to its window within `budget` ms; returns the ms held."""
        pending = [m for m, _ in messages]
        spent = 0
        while pending:
            # Planned from the moment of each send: a send that took long (a loaded store)
            # may have let the next windows close, and those wait for their next second's.
            now = self._clock()
            windows: list[tuple[int, int, RunMessage]] = []
            ready: list[RunMessage] = []
            for m in pending:
                window = release_window(m.visible_ms, now)
                if window is None:
                    ready.append(m)
                else:
                    windows.append((*window, m))
            if ready:
                self._send(ready, tried)
            windows.sort(key=lambda w: w[0])
            if not windows:
                return spent
            # The next group: messages in order of their window's opening, while every window
            # taken is still open at the last opening. Sent then, all are within the leads.
            latest = windows[0][1]
            size = 0
            for earliest, until, _ in windows:
                if earliest > latest:
                    break
                latest = min(latest, until)
                size += 1
            wait = windows[size - 1][0] - (self._clock() - now)
            if wait > budget - spent:  # held long enough: the rest goes now
                self._send([m for _, _, m in windows], tried)
                return spent
            if wait > 0:
                self._sleep(wait / 1000)
                spent += wait
            self._send([m for _, _, m in windows[:size]], tried)
            pending = [m for _, _, m in windows[size:]]
        return spent

    def _send(self, messages: list[RunMessage], tried: set[int]) -> None:
        tried.update(map(id, messages))
        now = self._clock()
        self._queue.send([(m, delay_seconds(m.visible_ms, now)) for m in messages])
