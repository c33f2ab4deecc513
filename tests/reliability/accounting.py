"""Jepsen-style accounting of runs: what should have run against what the outside world saw.

The reliability tests and `scripts/chaos.py` submit jobs with a recording target, inject
faults, let the system run on, and then compare, job by job:

- **expected**: the occurrences the job's schedule has (bounded schedules only: a one-off, or
  a rate/cron with an `end_at`), from `expected_occurrences`;
- **started**: expected runs whose target was executed at least once;
- **lost**: expected runs whose target was never executed (must be 0);
- **duplicated**: executions beyond the first of one attempt of one run (the documented
  at-least-once window: the target ran, the worker died before recording the outcome);
- **unexpected**: executions of runs that were not expected (must be 0).

Pure: no clock, no I/O; `Accounting.table()` renders the report.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from duetime.domain.planning import first_due
from duetime.domain.schedule import Schedule, next_occurrence
from duetime.domain.timeutil import to_ms

# A bounded schedule used in an experiment has at most this many occurrences.
MAX_OCCURRENCES = 10_000


@dataclass(frozen=True)
class Execution:
    """One call of the target, as the target saw it."""

    job_id: str
    scheduled_ms: int
    attempt: int = 1


@dataclass(frozen=True)
class JobAccount:
    job_id: str
    kind: str
    expected: int
    started: int
    lost: int
    duplicated: int
    unexpected: int
    lost_runs: tuple[int, ...] = ()  # scheduled instants (ms) of the lost runs


@dataclass(frozen=True)
class Totals:
    jobs: int
    expected: int
    started: int
    lost: int
    duplicated: int
    unexpected: int


@dataclass(frozen=True)
class Accounting:
    jobs: tuple[JobAccount, ...]

    @property
    def totals(self) -> Totals:
        return Totals(
            jobs=len(self.jobs),
            expected=sum(j.expected for j in self.jobs),
            started=sum(j.started for j in self.jobs),
            lost=sum(j.lost for j in self.jobs),
            duplicated=sum(j.duplicated for j in self.jobs),
            unexpected=sum(j.unexpected for j in self.jobs),
        )

    def lost_runs(self) -> list[tuple[str, int]]:
        return [(j.job_id, s) for j in self.jobs for s in j.lost_runs]

    def table(self, *, only_anomalies: bool = False) -> str:
        """A fixed-width table, one row per job (or per job with a loss, duplicate or
        unexpected run), then the totals."""
        header = ("JOB", "KIND", "EXPECTED", "STARTED", "LOST", "DUPLICATED", "UNEXPECTED")
        rows = [
            (j.job_id, j.kind, j.expected, j.started, j.lost, j.duplicated, j.unexpected)
            for j in self.jobs
            if not only_anomalies or j.lost or j.duplicated or j.unexpected
        ]
        t = self.totals
        total = ("TOTAL", f"{t.jobs} jobs", t.expected, t.started, t.lost, t.duplicated)
        rows.append((*total, t.unexpected))
        cells = [tuple(str(c) for c in header)] + [tuple(str(c) for c in r) for r in rows]
        widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
        lines = []
        for row in cells:
            left = [row[0].ljust(widths[0]), row[1].ljust(widths[1])]
            right = [c.rjust(w) for c, w in zip(row[2:], widths[2:], strict=True)]
            lines.append("  ".join(left + right).rstrip())
        return "\n".join(lines) + "\n"


def expected_occurrences(
    schedule: Schedule, *, created_at: datetime, until_ms: int | None = None
) -> list[int]:
    """Every occurrence (ms) of a schedule, in order: all of a bounded one, or those at or
    before `until_ms`. ValueError when that is more than MAX_OCCURRENCES (an experiment needs
    a finite answer)."""
    found: list[int] = []
    occurrence = first_due(schedule, created_at=created_at)
    while occurrence is not None and (until_ms is None or to_ms(occurrence) <= until_ms):
        if len(found) >= MAX_OCCURRENCES:
            raise ValueError("the schedule has no end within the accounting's limit")
        found.append(to_ms(occurrence))
        occurrence = next_occurrence(schedule, created_at=created_at, after=occurrence)
    return found


def account(
    expected: Mapping[str, Collection[int]],
    executions: Iterable[Execution],
    kinds: Mapping[str, str] | None = None,
    *,
    until_ms: int | None = None,
) -> Accounting:
    """Compare the expected runs of each job (scheduled instants, ms) with the executions the
    target recorded. Jobs are reported in the order of `expected`; executions of a job not in
    `expected` are reported as a job of kind "unknown" with only unexpected runs. With
    `until_ms`, runs scheduled after it are outside the experiment and not counted at all
    (the expected runs must have been computed with the same bound)."""
    # Per scheduled instant, whatever the attempt: the recording target records the calls that
    # completed, so a second one is a duplicate even under a new attempt number (an attempt
    # whose outcome was lost is abandoned and retried).
    calls: dict[str, Counter[int]] = {}
    for e in executions:
        if until_ms is not None and e.scheduled_ms > until_ms:
            continue
        calls.setdefault(e.job_id, Counter())[e.scheduled_ms] += 1
    ran = {job_id: set(counted) for job_id, counted in calls.items()}
    accounts: list[JobAccount] = []
    for job_id in [*expected, *(j for j in ran if j not in expected)]:
        wanted = set(expected.get(job_id, ()))
        seen = ran.get(job_id, set())
        counted = calls.get(job_id, Counter())
        lost = sorted(wanted - seen)
        accounts.append(
            JobAccount(
                job_id=job_id,
                kind=(kinds or {}).get(job_id, "unknown" if job_id not in expected else "-"),
                expected=len(wanted),
                started=len(wanted & seen),
                lost=len(lost),
                duplicated=sum(n - 1 for s, n in counted.items() if s in wanted),
                unexpected=sum(n for s, n in counted.items() if s not in wanted),
                lost_runs=tuple(lost),
            )
        )
    return Accounting(tuple(accounts))
