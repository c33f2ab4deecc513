"""Daylight-saving and time-zone vectors for cron schedules: the complete table.

Each row is one situation: a zone, a cron expression, the instant to search after, and the runs
that follow, written out by hand from the policy in docs/schedules.md (Vixie cron: a *wildcard*
job, whose minute or hour field starts with `*`, follows real time; a *fixed-time* job runs
once per matching wall-clock time: at the end of a gap, at the first pass of a repeat). Every
expected instant carries the local wall time it stands for; `test_hand_arithmetic` checks that
pairing against the zone data only, so a slip in the table shows up as a slip in the table and
not as a bug in `next_occurrence`.

The transitions (from the IANA rules; offsets are standard -> daylight):

    America/New_York     2026-03-08 gap 02:00-02:59 (EST -> EDT at 07:00Z)
                         2026-11-01 repeat 01:00-01:59 (EDT 05:00Z-05:59Z, EST 06:00Z-06:59Z)
    Europe/Berlin        2026-03-29 gap 02:00-02:59 (CET -> CEST at 01:00Z)
                         2026-10-25 repeat 02:00-02:59 (CEST 00:00Z-00:59Z, CET 01:00Z-01:59Z)
    Australia/Lord_Howe  2026-04-05 repeat 01:30-01:59 (+11 14:30Z-14:59Z, +10:30 15:00Z-15:29Z
                         on 4 April UTC); a 30-minute shift
                         2026-10-04 gap 02:00-02:29 (+10:30 -> +11 at 15:30Z on 3 October)
    America/Sao_Paulo    abolished daylight saving in 2019. Its last two transitions still apply:
                         2018-11-04 gap 00:00-00:59 (-03 -> -02 at 03:00Z)
                         2019-02-16 repeat 23:00-23:59 (-02 01:00Z-01:59Z, -03 02:00Z-02:59Z on
                         17 February UTC); none since (the old rule would have had one on
                         2026-11-01)
    Asia/Tokyo           no daylight saving: UTC+9 all year
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from duetime.domain.schedule import Cron, next_occurrence

NEW_YORK = "America/New_York"
BERLIN = "Europe/Berlin"
LORD_HOWE = "Australia/Lord_Howe"
SAO_PAULO = "America/Sao_Paulo"
TOKYO = "Asia/Tokyo"

FIXED, WILDCARD = "fixed-time", "wildcard"
GAP, REPEAT, NO_CHANGE = "gap", "repeat", "no change"

DEFAULT_CREATED = "2000-01-01T00:00Z"


@dataclass(frozen=True)
class Vector:
    name: str
    zone: str
    expression: str
    kind: str  # FIXED or WILDCARD: what the documented text rule says the expression is
    around: str  # GAP, REPEAT or NO_CHANGE: the situation the vector exercises
    after: str | None  # search strictly after this instant; None: the job's first run
    runs: tuple[tuple[str, str], ...]  # (UTC instant, local wall time) of the next runs
    created: str = DEFAULT_CREATED


def v(
    name: str,
    zone: str,
    expression: str,
    kind: str,
    around: str,
    after: str | None,
    *runs: tuple[str, str],
    created: str = DEFAULT_CREATED,
) -> Vector:
    return Vector(name, zone, expression, kind, around, after, runs, created)


VECTORS: Sequence[Vector] = (
    # --- America/New_York: the gap, 8 March 2026 ------------------------------------------------
    v(
        "ny fixed in gap runs at the transition, then back to 02:30",
        *(NEW_YORK, "30 2 * * *", FIXED, GAP, "2026-03-07T12:00Z"),
        ("2026-03-08T07:00Z", "03:00 EDT"),
        ("2026-03-09T06:30Z", "02:30 EDT"),
        ("2026-03-10T06:30Z", "02:30 EDT"),
    ),
    v(
        "ny several fixed times in gap give one run",
        *(NEW_YORK, "0,15,30,45 2 * * *", FIXED, GAP, "2026-03-07T12:00Z"),
        ("2026-03-08T07:00Z", "03:00 EDT"),
        ("2026-03-09T06:00Z", "02:00 EDT"),
        ("2026-03-09T06:15Z", "02:15 EDT"),
    ),
    v(
        "ny fixed 02:00 (missing) and 03:00 (exists) collapse into one run",
        *(NEW_YORK, "0 2,3 * * *", FIXED, GAP, "2026-03-08T06:00Z"),
        ("2026-03-08T07:00Z", "03:00 EDT"),
        ("2026-03-09T06:00Z", "02:00 EDT"),
    ),
    v(
        "ny fixed job created in the gap runs at the transition",
        *(NEW_YORK, "30 2 * * *", FIXED, GAP, None),
        ("2026-03-08T07:00Z", "03:00 EDT"),
        created="2026-03-08T06:59Z",
    ),
    v(
        "ny fixed gap run is not repeated after the transition",
        *(NEW_YORK, "30 2 * * *", FIXED, GAP, "2026-03-08T07:00Z"),
        ("2026-03-09T06:30Z", "02:30 EDT"),
    ),
    v(
        "ny hour range is fixed-time by its text: 02:00 and 03:00 give one run",
        *(NEW_YORK, "0 0-23 * * *", FIXED, GAP, "2026-03-08T05:30Z"),
        ("2026-03-08T06:00Z", "01:00 EST"),
        ("2026-03-08T07:00Z", "03:00 EDT"),
        ("2026-03-08T08:00Z", "04:00 EDT"),
    ),
    v(
        "ny wildcard minute 30 skips the missing 02:30",
        *(NEW_YORK, "30 * * * *", WILDCARD, GAP, "2026-03-08T05:00Z"),
        ("2026-03-08T05:30Z", "00:30 EST"),
        ("2026-03-08T06:30Z", "01:30 EST"),
        ("2026-03-08T07:30Z", "03:30 EDT"),
    ),
    v(
        "ny wildcard minutes of hour 2 have no run on the gap day",
        *(NEW_YORK, "* 2 * * *", WILDCARD, GAP, "2026-03-08T05:00Z"),
        ("2026-03-09T06:00Z", "02:00 EDT"),
    ),
    v(
        "ny quarter hours go straight from 01:45 to 03:00",
        *(NEW_YORK, "*/15 * * * *", WILDCARD, GAP, "2026-03-08T06:30Z"),
        ("2026-03-08T06:45Z", "01:45 EST"),
        ("2026-03-08T07:00Z", "03:00 EDT"),
        ("2026-03-08T07:15Z", "03:15 EDT"),
        ("2026-03-08T07:30Z", "03:30 EDT"),
    ),
    v(
        "ny wildcard every second hour skips 02:30",
        *(NEW_YORK, "30 */2 * * *", WILDCARD, GAP, "2026-03-08T05:00Z"),
        ("2026-03-08T05:30Z", "00:30 EST"),
        ("2026-03-08T08:30Z", "04:30 EDT"),
    ),
    # --- America/New_York: the repeat, 1 November 2026 ------------------------------------------
    v(
        "ny fixed in repeat runs at the first pass only",
        *(NEW_YORK, "30 1 * * *", FIXED, REPEAT, "2026-10-31T12:00Z"),
        ("2026-11-01T05:30Z", "01:30 EDT"),
        ("2026-11-02T06:30Z", "01:30 EST"),
    ),
    v(
        "ny fixed searched from inside the second pass: next day",
        *(NEW_YORK, "30 1 * * *", FIXED, REPEAT, "2026-11-01T06:10Z"),
        ("2026-11-02T06:30Z", "01:30 EST"),
    ),
    v(
        "ny fixed job created between the passes: not run at the second",
        *(NEW_YORK, "30 1 * * *", FIXED, REPEAT, None),
        ("2026-11-02T06:30Z", "01:30 EST"),
        created="2026-11-01T05:45Z",
    ),
    v(
        "ny fixed minute list in repeat: each minute once",
        *(NEW_YORK, "0,30 1 * * *", FIXED, REPEAT, "2026-11-01T00:00Z"),
        ("2026-11-01T05:00Z", "01:00 EDT"),
        ("2026-11-01T05:30Z", "01:30 EDT"),
        ("2026-11-02T06:00Z", "01:00 EST"),
    ),
    v(
        "ny hour range is fixed-time by its text: no second 01:00",
        *(NEW_YORK, "0 0-23 * * *", FIXED, REPEAT, "2026-11-01T04:30Z"),
        ("2026-11-01T05:00Z", "01:00 EDT"),
        ("2026-11-01T07:00Z", "02:00 EST"),
    ),
    v(
        "ny wildcard minute 30 runs at both passes",
        *(NEW_YORK, "30 * * * *", WILDCARD, REPEAT, "2026-11-01T04:00Z"),
        ("2026-11-01T04:30Z", "00:30 EDT"),
        ("2026-11-01T05:30Z", "01:30 EDT"),
        ("2026-11-01T06:30Z", "01:30 EST"),
        ("2026-11-01T07:30Z", "02:30 EST"),
    ),
    v(
        "ny wildcard searched from inside the first pass: the second pass",
        *(NEW_YORK, "30 * * * *", WILDCARD, REPEAT, "2026-11-01T05:40Z"),
        ("2026-11-01T06:30Z", "01:30 EST"),
    ),
    v(
        "ny hourly macro runs every real hour",
        *(NEW_YORK, "@hourly", WILDCARD, REPEAT, "2026-11-01T03:30Z"),
        ("2026-11-01T04:00Z", "00:00 EDT"),
        ("2026-11-01T05:00Z", "01:00 EDT"),
        ("2026-11-01T06:00Z", "01:00 EST"),
        ("2026-11-01T07:00Z", "02:00 EST"),
    ),
    v(
        "ny quarter hours run through the repeated hour again",
        *(NEW_YORK, "*/15 * * * *", WILDCARD, REPEAT, "2026-11-01T05:30Z"),
        ("2026-11-01T05:45Z", "01:45 EDT"),
        ("2026-11-01T06:00Z", "01:00 EST"),
        ("2026-11-01T06:15Z", "01:15 EST"),
        ("2026-11-01T06:30Z", "01:30 EST"),
        ("2026-11-01T06:45Z", "01:45 EST"),
        ("2026-11-01T07:00Z", "02:00 EST"),
    ),
    v(
        "ny wildcard minutes of hour 1 (fixed hour, * minute) run at both passes",
        *(NEW_YORK, "* 1 * * *", WILDCARD, REPEAT, "2026-11-01T05:58Z"),
        ("2026-11-01T05:59Z", "01:59 EDT"),
        ("2026-11-01T06:00Z", "01:00 EST"),
        ("2026-11-01T06:01Z", "01:01 EST"),
    ),
    # --- Europe/Berlin: the gap, 29 March 2026 --------------------------------------------------
    v(
        "berlin fixed in gap runs at 03:00",
        *(BERLIN, "30 2 * * *", FIXED, GAP, "2026-03-28T12:00Z"),
        ("2026-03-29T01:00Z", "03:00 CEST"),
        ("2026-03-30T00:30Z", "02:30 CEST"),
    ),
    v(
        "berlin several fixed times in gap give one run",
        *(BERLIN, "0,30 2 * * *", FIXED, GAP, "2026-03-28T12:00Z"),
        ("2026-03-29T01:00Z", "03:00 CEST"),
        ("2026-03-30T00:00Z", "02:00 CEST"),
        ("2026-03-30T00:30Z", "02:30 CEST"),
    ),
    v(
        "berlin wildcard minute 30 skips the missing 02:30",
        *(BERLIN, "30 * * * *", WILDCARD, GAP, "2026-03-29T00:00Z"),
        ("2026-03-29T00:30Z", "01:30 CET"),
        ("2026-03-29T01:30Z", "03:30 CEST"),
    ),
    v(
        "berlin quarter hours go straight from 01:45 to 03:00",
        *(BERLIN, "*/15 * * * *", WILDCARD, GAP, "2026-03-29T00:30Z"),
        ("2026-03-29T00:45Z", "01:45 CET"),
        ("2026-03-29T01:00Z", "03:00 CEST"),
        ("2026-03-29T01:15Z", "03:15 CEST"),
    ),
    v(
        "berlin wildcard minutes of hour 2 have no run on the gap day",
        *(BERLIN, "* 2 * * *", WILDCARD, GAP, "2026-03-29T00:00Z"),
        ("2026-03-30T00:00Z", "02:00 CEST"),
    ),
    # --- Europe/Berlin: the repeat, 25 October 2026 ---------------------------------------------
    v(
        "berlin fixed in repeat runs at the first pass only",
        *(BERLIN, "30 2 * * *", FIXED, REPEAT, "2026-10-24T12:00Z"),
        ("2026-10-25T00:30Z", "02:30 CEST"),
        ("2026-10-26T01:30Z", "02:30 CET"),
    ),
    v(
        "berlin fixed on Sundays: first pass, then the next Sunday",
        *(BERLIN, "15 2 * * 0", FIXED, REPEAT, "2026-10-24T12:00Z"),
        ("2026-10-25T00:15Z", "02:15 CEST"),
        ("2026-11-01T01:15Z", "02:15 CET"),
    ),
    v(
        "berlin fixed searched from inside the second pass: next day",
        *(BERLIN, "30 2 * * *", FIXED, REPEAT, "2026-10-25T01:10Z"),
        ("2026-10-26T01:30Z", "02:30 CET"),
    ),
    v(
        "berlin wildcard minute 30 runs at both passes",
        *(BERLIN, "30 * * * *", WILDCARD, REPEAT, "2026-10-24T23:40Z"),
        ("2026-10-25T00:30Z", "02:30 CEST"),
        ("2026-10-25T01:30Z", "02:30 CET"),
        ("2026-10-25T02:30Z", "03:30 CET"),
    ),
    v(
        "berlin quarter hours run through the repeated hour again",
        *(BERLIN, "*/15 * * * *", WILDCARD, REPEAT, "2026-10-25T00:30Z"),
        ("2026-10-25T00:45Z", "02:45 CEST"),
        ("2026-10-25T01:00Z", "02:00 CET"),
        ("2026-10-25T01:15Z", "02:15 CET"),
        ("2026-10-25T01:30Z", "02:30 CET"),
    ),
    v(
        "berlin hourly macro runs every real hour",
        *(BERLIN, "@hourly", WILDCARD, REPEAT, "2026-10-24T23:30Z"),
        ("2026-10-25T00:00Z", "02:00 CEST"),
        ("2026-10-25T01:00Z", "02:00 CET"),
        ("2026-10-25T02:00Z", "03:00 CET"),
    ),
    # --- Australia/Lord_Howe: the 30-minute gap, 4 October 2026 ---------------------------------
    v(
        "lord howe fixed in half-hour gap runs at 02:30",
        *(LORD_HOWE, "15 2 * * *", FIXED, GAP, "2026-10-03T10:00Z"),
        ("2026-10-03T15:30Z", "02:30 +11"),
        ("2026-10-04T15:15Z", "02:15 +11"),
    ),
    v(
        "lord howe several fixed times in gap give one run",
        *(LORD_HOWE, "0,10,20 2 * * *", FIXED, GAP, "2026-10-03T10:00Z"),
        ("2026-10-03T15:30Z", "02:30 +11"),
        ("2026-10-04T15:00Z", "02:00 +11"),
    ),
    v(
        "lord howe fixed 02:00 (missing) and 02:30 (exists) collapse into one run",
        *(LORD_HOWE, "0,30 2 * * *", FIXED, GAP, "2026-10-03T10:00Z"),
        ("2026-10-03T15:30Z", "02:30 +11"),
        ("2026-10-04T15:00Z", "02:00 +11"),
        ("2026-10-04T15:30Z", "02:30 +11"),
    ),
    v(
        "lord howe wildcard minute 15 skips the missing 02:15",
        *(LORD_HOWE, "15 * * * *", WILDCARD, GAP, "2026-10-03T14:00Z"),
        ("2026-10-03T14:45Z", "01:15 +1030"),
        ("2026-10-03T16:15Z", "03:15 +11"),
    ),
    v(
        "lord howe quarter hours go straight from 01:45 to 02:30",
        *(LORD_HOWE, "*/15 * * * *", WILDCARD, GAP, "2026-10-03T15:00Z"),
        ("2026-10-03T15:15Z", "01:45 +1030"),
        ("2026-10-03T15:30Z", "02:30 +11"),
        ("2026-10-03T15:45Z", "02:45 +11"),
    ),
    v(
        "lord howe wildcard minutes of hour 2 resume at 02:30",
        *(LORD_HOWE, "* 2 * * *", WILDCARD, GAP, "2026-10-03T15:00Z"),
        ("2026-10-03T15:30Z", "02:30 +11"),
        ("2026-10-03T15:31Z", "02:31 +11"),
    ),
    # --- Australia/Lord_Howe: the 30-minute repeat, 5 April 2026 --------------------------------
    v(
        "lord howe fixed 01:45 in repeat runs at the first pass only",
        *(LORD_HOWE, "45 1 * * *", FIXED, REPEAT, "2026-04-04T10:00Z"),
        ("2026-04-04T14:45Z", "01:45 +11"),
        ("2026-04-05T15:15Z", "01:45 +1030"),
    ),
    v(
        "lord howe fixed 01:30 (start of the repeat) runs at the first pass only",
        *(LORD_HOWE, "30 1 * * *", FIXED, REPEAT, "2026-04-04T12:00Z"),
        ("2026-04-04T14:30Z", "01:30 +11"),
        ("2026-04-05T15:00Z", "01:30 +1030"),
    ),
    v(
        "lord howe wildcard minute 45 runs at both passes",
        *(LORD_HOWE, "45 * * * *", WILDCARD, REPEAT, "2026-04-04T14:00Z"),
        ("2026-04-04T14:45Z", "01:45 +11"),
        ("2026-04-04T15:15Z", "01:45 +1030"),
        ("2026-04-04T16:15Z", "02:45 +1030"),
    ),
    v(
        "lord howe quarter hours run through the repeated half hour again",
        *(LORD_HOWE, "*/15 * * * *", WILDCARD, REPEAT, "2026-04-04T14:30Z"),
        ("2026-04-04T14:45Z", "01:45 +11"),
        ("2026-04-04T15:00Z", "01:30 +1030"),
        ("2026-04-04T15:15Z", "01:45 +1030"),
        ("2026-04-04T15:30Z", "02:00 +1030"),
    ),
    # --- America/Sao_Paulo: daylight saving abolished in 2019 -----------------------------------
    v(
        "sao paulo fixed in the 2018 gap runs at the transition",
        *(SAO_PAULO, "30 0 * * *", FIXED, GAP, "2018-11-03T12:00Z"),
        ("2018-11-04T03:00Z", "01:00 -02"),
        ("2018-11-05T02:30Z", "00:30 -02"),
    ),
    v(
        "sao paulo wildcard skips the missing 00:30 of 2018",
        *(SAO_PAULO, "30 * * * *", WILDCARD, GAP, "2018-11-04T02:00Z"),
        ("2018-11-04T02:30Z", "23:30 -03"),
        ("2018-11-04T03:30Z", "01:30 -02"),
    ),
    v(
        "sao paulo fixed in the 2019 repeat runs at the first pass only",
        *(SAO_PAULO, "30 23 * * *", FIXED, REPEAT, "2019-02-16T12:00Z"),
        ("2019-02-17T01:30Z", "23:30 -02"),
        ("2019-02-18T02:30Z", "23:30 -03"),
    ),
    v(
        "sao paulo wildcard runs at both passes of the 2019 repeat",
        *(SAO_PAULO, "30 * * * *", WILDCARD, REPEAT, "2019-02-17T00:45Z"),
        ("2019-02-17T01:30Z", "23:30 -02"),
        ("2019-02-17T02:30Z", "23:30 -03"),
        ("2019-02-17T03:30Z", "00:30 -03"),
    ),
    v(
        "sao paulo fixed: no gap where the abolished rule had one (2026)",
        *(SAO_PAULO, "30 0 * * *", FIXED, NO_CHANGE, "2026-10-31T12:00Z"),
        ("2026-11-01T03:30Z", "00:30 -03"),
        ("2026-11-02T03:30Z", "00:30 -03"),
    ),
    v(
        "sao paulo wildcard: every half hour through the abolished gap (2026)",
        *(SAO_PAULO, "*/30 * * * *", WILDCARD, NO_CHANGE, "2026-11-01T02:45Z"),
        ("2026-11-01T03:00Z", "00:00 -03"),
        ("2026-11-01T03:30Z", "00:30 -03"),
        ("2026-11-01T04:00Z", "01:00 -03"),
    ),
    # --- Asia/Tokyo: no daylight saving ---------------------------------------------------------
    v(
        "tokyo fixed daily over New York's gap",
        *(TOKYO, "0 9 * * *", FIXED, NO_CHANGE, "2026-03-07T00:00Z"),
        ("2026-03-08T00:00Z", "09:00 JST"),
        ("2026-03-09T00:00Z", "09:00 JST"),
        ("2026-03-10T00:00Z", "09:00 JST"),
    ),
    v(
        "tokyo fixed 02:30 over Berlin's repeat",
        *(TOKYO, "30 2 * * *", FIXED, NO_CHANGE, "2026-10-24T12:00Z"),
        ("2026-10-24T17:30Z", "02:30 JST"),
        ("2026-10-25T17:30Z", "02:30 JST"),
    ),
    v(
        "tokyo quarter hours over New York's repeat",
        *(TOKYO, "*/15 * * * *", WILDCARD, NO_CHANGE, "2026-11-01T04:50Z"),
        ("2026-11-01T05:00Z", "14:00 JST"),
        ("2026-11-01T05:15Z", "14:15 JST"),
        ("2026-11-01T05:30Z", "14:30 JST"),
        ("2026-11-01T05:45Z", "14:45 JST"),
    ),
    v(
        "tokyo hourly at :30 over New York's gap",
        *(TOKYO, "30 * * * *", WILDCARD, NO_CHANGE, "2026-03-08T05:00Z"),
        ("2026-03-08T05:30Z", "14:30 JST"),
        ("2026-03-08T06:30Z", "15:30 JST"),
        ("2026-03-08T07:30Z", "16:30 JST"),
    ),
)

# What the table must cover: both kinds of job on both sides of every kind of change.
REQUIRED = {
    NEW_YORK: {GAP, REPEAT},
    BERLIN: {GAP, REPEAT},
    LORD_HOWE: {GAP, REPEAT},
    SAO_PAULO: {GAP, REPEAT, NO_CHANGE},
    TOKYO: {NO_CHANGE},
}
# The test's own reading of the macros, for the kind check (docs/schedules.md, "Macros").
MACROS = {"@hourly": "0 * * * *", "@daily": "0 0 * * *"}


def instant(text: str) -> datetime:
    assert text.endswith("Z"), f"write instants in UTC: {text}"
    return datetime.fromisoformat(text).astimezone(UTC)


def by_name(vectors: Sequence[Vector]) -> list[object]:
    return [pytest.param(vector, id=vector.name) for vector in vectors]


@pytest.mark.parametrize("vector", by_name(VECTORS))
def test_vector(vector: Vector) -> None:
    """Given the zone and expression, when the next runs are computed, then they are the table's."""
    cron = Cron(vector.expression, vector.zone)
    created = instant(vector.created)
    after = None if vector.after is None else instant(vector.after)
    runs: list[datetime] = []
    for _ in vector.runs:
        found = next_occurrence(cron, created_at=created, after=after)
        assert found is not None
        runs.append(found)
        after = found
    assert runs == [instant(utc) for utc, _ in vector.runs]


@pytest.mark.parametrize("vector", by_name(VECTORS))
def test_hand_arithmetic(vector: Vector) -> None:
    """The table itself: each UTC instant is the local wall time written next to it."""
    zone = ZoneInfo(vector.zone)
    for utc, local in vector.runs:
        assert instant(utc).astimezone(zone).strftime("%H:%M %Z") == local, utc


@pytest.mark.parametrize("vector", by_name(VECTORS))
def test_kind_follows_the_text_rule(vector: Vector) -> None:
    """Wildcard when the minute or the hour field starts with `*`; otherwise fixed-time."""
    minute, hour, *_ = MACROS.get(vector.expression, vector.expression).split()
    wildcard = minute.startswith("*") or hour.startswith("*")
    assert vector.kind == (WILDCARD if wildcard else FIXED)


def test_table_covers_every_zone_change_and_kind() -> None:
    for zone, situations in REQUIRED.items():
        for around in situations:
            kinds = {v.kind for v in VECTORS if v.zone == zone and v.around == around}
            assert kinds == {FIXED, WILDCARD}, (zone, around)
    assert {v.zone for v in VECTORS} == set(REQUIRED)
    assert len({v.name for v in VECTORS}) == len(VECTORS)
