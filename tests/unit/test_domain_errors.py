"""The words of a refused change (409 conflict): what was asked, in plain words, and what to do
instead where it helps. "job … is scheduled; it cannot become paused" read as a contradiction
for a one-off, and "cannot become run" as no English (an outside audit, 2026-11-30)."""

from __future__ import annotations

import pytest

from duetime.domain.errors import IllegalTransition
from duetime.domain.jobs import JobStatus


@pytest.mark.parametrize(
    ("current", "wanted", "message"),
    [
        (
            JobStatus.SCHEDULED,
            JobStatus.PAUSED,
            "job J1 is scheduled: it cannot be paused (only recurring and `after` jobs pause: "
            "this one runs once)",
        ),
        (JobStatus.PAUSED, "run", "job J1 is paused: it cannot be run now (resume it first)"),
        (
            JobStatus.CANCELLED,
            JobStatus.SCHEDULED,
            "job J1 is cancelled: it cannot be resumed (a cancelled job is final)",
        ),
        (JobStatus.COMPLETED, JobStatus.CANCELLED, "job J1 is completed: it cannot be cancelled"),
    ],
)
def test_a_refused_change_says_what_was_asked_and_what_to_do(
    current: str, wanted: str, message: str
) -> None:
    refused = IllegalTransition("J1", current, wanted)
    assert str(refused) == message
    assert (refused.current, refused.wanted) == (current, wanted)
