"""Which occurrences of a recurring job a sweep enqueues: on time, missed, catch-up."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from duetime.domain.jobs import Catchup, CatchupMode
from duetime.domain.planning import MAX_CATCHUP_RUNS, Plan, first_due, plan_recurring
from duetime.domain.schedule import Cron, Rate
from duetime.domain.timeutil import to_ms

T0 = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
MS = to_ms(T0)
EVERY_MINUTE = Rate(60, start_at=T0)
GRACE = 60_000


def plan(mode: CatchupMode, due: int, now: int, horizon: int, window: int = 3600) -> Plan:
    return plan_recurring(
        EVERY_MINUTE,
        created_at=T0,
        catchup=Catchup(mode, window),
        due_ms=due,
        now_ms=now,
        horizon_ms=horizon,
        grace_ms=GRACE,
    )


def test_on_time_occurrences_before_the_horizon_are_all_enqueued() -> None:
    result = plan_recurring(
        Rate(20, start_at=T0),
        created_at=T0,
        catchup=Catchup(),
        due_ms=MS,
        now_ms=MS - 30_000,
        horizon_ms=MS + 60_000,
        grace_ms=GRACE,
    )
    assert result.enqueue == (MS, MS + 20_000, MS + 40_000)
    assert result.next_due_ms == MS + 60_000
    assert result.skipped == 0


@pytest.mark.parametrize(
    ("mode", "enqueued_missed"),
    [
        (CatchupMode.ALL, [MS + m * 60_000 for m in range(9)]),
        (CatchupMode.LATEST, [MS + 8 * 60_000]),
        (CatchupMode.NONE, []),
    ],
)
def test_after_ten_minutes_down_the_catchup_policy_picks_missed_runs(
    mode: CatchupMode, enqueued_missed: list[int]
) -> None:
    now = MS + 10 * 60_000
    result = plan(mode, MS, now, now + 60_000)
    on_time = [MS + 9 * 60_000, MS + 10 * 60_000]  # within the 60 s misfire grace and ahead
    assert list(result.enqueue) == enqueued_missed + on_time
    assert result.next_due_ms == now + 60_000
    assert result.skipped == 9 - len(enqueued_missed)


def test_missed_runs_older_than_the_window_are_never_run() -> None:
    now = MS + 120 * 60_000
    result = plan(CatchupMode.ALL, MS, now, now + 60_000, window=600)
    missed = [o for o in result.enqueue if o < now - GRACE]
    assert missed == [now - m * 60_000 for m in range(10, 1, -1)]


def test_catching_up_all_is_bounded() -> None:
    now = MS + 500 * 60_000
    result = plan(CatchupMode.ALL, MS, now, now + 60_000, window=86_400)
    missed = [o for o in result.enqueue if o < now - GRACE]
    assert len(missed) == MAX_CATCHUP_RUNS


def test_a_schedule_that_ends_has_no_next_timer() -> None:
    ending = Rate(60, start_at=T0, end_at=datetime(2026, 11, 21, 10, 2, tzinfo=UTC))
    result = plan_recurring(
        ending,
        created_at=T0,
        catchup=Catchup(),
        due_ms=MS,
        now_ms=MS,
        horizon_ms=MS + 10 * 60_000,
        grace_ms=GRACE,
    )
    assert result.enqueue == (MS, MS + 60_000, MS + 120_000)
    assert result.next_due_ms is None


def test_a_rate_anchored_in_the_past_starts_at_the_next_occurrence_after_creation() -> None:
    created = datetime(2026, 11, 21, 10, 5, 30, tzinfo=UTC)
    first = first_due(Rate(60, start_at=T0), created_at=created)
    assert first == datetime(2026, 11, 21, 10, 6, tzinfo=UTC)
    assert first_due(Cron("0 * * * *"), created_at=created) == datetime(
        2026, 11, 21, 11, 0, tzinfo=UTC
    )
