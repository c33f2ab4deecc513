"""The overlap gate's pure rule (duetime.domain.overlap): admit, release, holder_active."""

from __future__ import annotations

import pytest

from duetime.domain.overlap import (
    Admission,
    Decision,
    Gate,
    Overlap,
    admit,
    holder_active,
    late_copy,
    release,
)
from duetime.domain.runs import Attempt, Lease, Run, RunStatus

NOW = 1_000_000
SKIP, BUFFER = Overlap.SKIP, Overlap.BUFFER_ONE


@pytest.mark.parametrize(
    ("policy", "gate", "active", "expected"),
    [
        # free gate: take it
        (SKIP, Gate(), False, Decision(Admission.RUN, Gate(5, NOW, None, 0))),
        (BUFFER, Gate(None, 1, None, 3), False, Decision(Admission.RUN, Gate(5, NOW, None, 3))),
        # this occurrence holds it (a retry, a redelivery): run, gate unchanged
        (SKIP, Gate(5, 1, None, 2), True, Decision(Admission.RUN, Gate(5, 1, None, 2))),
        # an active holder
        (SKIP, Gate(4, 1, None, 2), True, Decision(Admission.SKIP, Gate(4, 1, None, 2))),
        (BUFFER, Gate(4, 1, None, 2), True, Decision(Admission.BUFFER, Gate(4, 1, 5, 2))),
        (BUFFER, Gate(4, 1, 3, 2), True, Decision(Admission.SKIP, Gate(4, 1, 3, 2))),
        (BUFFER, Gate(4, 1, 5, 2), True, Decision(Admission.DUPLICATE, Gate(4, 1, 5, 2))),
        # an inactive holder: take over, unless one is buffered: that one goes first
        (SKIP, Gate(4, 1, None, 2), False, Decision(Admission.RUN, Gate(5, NOW, None, 2))),
        (BUFFER, Gate(4, 1, 5, 2), False, Decision(Admission.RUN, Gate(5, NOW, None, 2))),
        (BUFFER, Gate(4, 1, 3, 2), False, Decision(Admission.BUFFER, Gate(3, NOW, 5, 2), 3)),
        (SKIP, Gate(4, 1, 3, 2), False, Decision(Admission.SKIP, Gate(3, NOW, None, 2), 3)),
    ],
)
def test_admit(policy: Overlap, gate: Gate, active: bool, expected: Decision) -> None:
    assert admit(policy, gate, 5, active, NOW) == expected


@pytest.mark.parametrize(
    ("policy", "gate", "active", "expected"),
    [
        # an active holder: nothing changes, nothing is recorded
        (SKIP, Gate(4, 1, None, 2), True, Decision(Admission.DUPLICATE, Gate(4, 1, None, 2))),
        (BUFFER, Gate(4, 1, None, 2), True, Decision(Admission.DUPLICATE, Gate(4, 1, None, 2))),
        (BUFFER, Gate(4, 1, 3, 2), True, Decision(Admission.DUPLICATE, Gate(4, 1, 3, 2))),
        # a dead holder with one buffered: it is handed the gate, the copy takes no place
        (BUFFER, Gate(4, 1, 3, 2), False, Decision(Admission.DUPLICATE, Gate(3, NOW, None, 2), 3)),
        (SKIP, Gate(4, 1, 3, 2), False, Decision(Admission.DUPLICATE, Gate(3, NOW, None, 2), 3)),
    ],
)
def test_a_late_copy_of_an_occurrence_that_ran_takes_no_place(
    policy: Overlap, gate: Gate, active: bool, expected: Decision
) -> None:
    assert late_copy(admit(policy, gate, 5, active, NOW), gate) == expected


def test_release_hands_over_to_the_buffered_one_or_frees_the_gate() -> None:
    assert release(Gate(5, 1, 7, 4), 5, NOW) == Gate(7, NOW, None, 4)
    assert release(Gate(5, 1, None, 4), 5, NOW) == Gate(None, NOW, None, 4)
    assert release(Gate(6, 1, 7, 4), 5, NOW) is None  # no longer the holder
    assert release(Gate(), 5, NOW) is None


def run(status: RunStatus, *, lease_until: int = 0, finished: int | None = None) -> Run:
    attempts = (Attempt(1, 0, 0, finished),) if finished is not None else ()
    lease = Lease("m", 1, lease_until) if lease_until else None
    return Run("t", "j", 4, status, 1, attempts, lease)


@pytest.mark.parametrize(
    ("holder", "active"),
    [
        (None, True),  # handed the gate, no record yet: within the grace
        (run(RunStatus.BUFFERED), True),
        (run(RunStatus.RUNNING, lease_until=NOW - 99), True),  # lease + grace not past
        (run(RunStatus.RUNNING, lease_until=NOW - 100), False),
        (run(RunStatus.RETRYING, finished=NOW - 1_099), True),  # backoff + grace not past
        (run(RunStatus.RETRYING, finished=NOW - 1_100), False),
        (run(RunStatus.SUCCEEDED, finished=NOW), False),
        (run(RunStatus.FAILED, finished=NOW), False),
        (run(RunStatus.SKIPPED), False),
    ],
)
def test_holder_active(holder: Run | None, active: bool) -> None:
    gate = Gate(4, NOW - 50, None, 1)
    assert holder_active(holder, gate, NOW, grace_ms=100, max_backoff_ms=1_000) is active


@pytest.mark.parametrize("status", [RunStatus.RUNNING, RunStatus.RETRYING])
def test_a_holder_without_a_lease_or_a_finished_attempt_counts_from_the_gate_s_since(
    status: RunStatus,
) -> None:
    # A running run with no lease, a retrying one with no finished attempt: since_ms stands in
    holder = run(status)
    backoff = 1_000 if status == RunStatus.RETRYING else 0

    within = Gate(4, NOW - 99 - backoff, None, 1)
    past = Gate(4, NOW - 100 - backoff, None, 1)
    assert holder_active(holder, within, NOW, grace_ms=100, max_backoff_ms=1_000)
    assert not holder_active(holder, past, NOW, grace_ms=100, max_backoff_ms=1_000)


def test_a_holder_without_a_record_stops_counting_after_the_grace() -> None:
    gate = Gate(4, NOW - 100, None, 1)
    assert not holder_active(None, gate, NOW, grace_ms=100, max_backoff_ms=1_000)
    assert not holder_active(run(RunStatus.BUFFERED), gate, NOW, grace_ms=100, max_backoff_ms=0)
