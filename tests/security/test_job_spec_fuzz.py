"""Fuzzing the job body parser (`parse_job_spec`), the one door every submission goes through.

Properties:
- any JSON value, and any body shaped like a submission but broken anywhere, either parses or
  raises the documented ValidationError naming a field; never anything else (which the API
  would turn into a 500);
- a valid body round-trips: parse → spec_to_dict → JSON → parse gives the same spec.
"""

from __future__ import annotations

import json
import string
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from duetime.domain.errors import ValidationError
from duetime.domain.jobs import (
    MAX_NAME_CHARS,
    CatchupMode,
    JobSpec,
    Priority,
    Runtime,
    parse_job_spec,
    spec_to_dict,
)
from duetime.domain.schedule import MAX_DELAY_SECONDS, MAX_RATE_SECONDS, next_occurrence
from duetime.domain.targets import HTTP_METHODS
from duetime.domain.text import blank
from duetime.domain.timeutil import to_ms

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --- arbitrary JSON ----------------------------------------------------------------------------

JSON_LEAF = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
)
JSON_VALUE = st.recursive(
    JSON_LEAF,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)


def parse_or_field(raw: object) -> JobSpec | str:
    """The spec, or the field a ValidationError names. Any other exception fails the test."""
    try:
        return parse_job_spec(raw)
    except ValidationError as exc:
        error = exc
    assert isinstance(error.field, str)
    # Empty only when it names an unknown field spelt "" (which the API then leaves out).
    assert error.field or (isinstance(raw, dict) and "" in raw)
    assert error.message
    return error.field


@FUZZ
@given(JSON_VALUE)
def test_any_json_value_parses_or_is_a_validation_error_naming_a_field(raw: object) -> None:
    parse_or_field(raw)


# --- bodies shaped like submissions, broken anywhere -------------------------------------------

HOSTS = ["hooks.example.com", "127.0.0.1", "[::1]", "[::ffff:10.0.0.1]", "xn--bcher-kva.example"]
URL_PIECES = st.sampled_from(
    [
        "http://",
        "https://",
        "ftp://",
        "//",
        "[",
        "]",
        "[::1",
        "[abc]",
        "[v1.x]",
        "::1]",
        ":",
        ":80",
        ":99999",
        ":-1",
        ":abc",
        "@",
        "user:pw@",
        "/",
        "?",
        "#",
        "%",
        "%zz",
        "\\",
        " ",
        "\t",
        "\n",
        "\x00",
        "é",
        "\uff45\uff58\uff41\uff4d\uff50\uff4c\uff45",  # fullwidth "example"
        *HOSTS,
    ]
)
URLS = st.lists(URL_PIECES, max_size=6).map("".join) | st.text(max_size=40)

INSTANT_TEXT = st.sampled_from(
    [
        "2026-11-21T09:30:00Z",
        "2026-11-21T09:30:00.123456+05:30",
        "1970-01-01T00:00:00Z",
        "1969-12-31T23:59:59Z",
        "0001-01-01T00:00:00+23:59",
        "9999-12-31T23:59:59-23:59",
        "9999-12-31T23:59:59.999999Z",
        "2026-11-21T09:30:00",
        "2026-02-30T00:00:00Z",
        "2026-11-21t09:30:00z",
        "2026-W47-6T09:30:00Z",
        "T",
        "",
    ]
) | st.text(max_size=30)

CRON_TOKENS = st.sampled_from(
    [*"0123456789*-/,?LW#", "mon", "FRI", "jan", "dec", "H", "R", "H(0-5)", "60", "32"]
)
CRON_FIELD = st.lists(CRON_TOKENS, min_size=1, max_size=5).map("".join)
CRONS = (
    st.lists(CRON_FIELD, min_size=0, max_size=7).map(" ".join)
    | st.sampled_from(["@daily", "@reboot", "@HOURLY", " @weekly ", "0 9 * * 1-5", "0 0 30 2 *"])
    | st.text(max_size=30)
)
ZONES = (
    st.sampled_from(
        [
            "UTC",
            "Europe/Berlin",
            "localtime",
            "right/UTC",
            "../../etc/passwd",
            "/etc/localtime",
            "Europe",
            "zone.tab",
            "tzdata.zi",
            "Europe/Berlin\x00",
            "a" * 300,
            "Etc/GMT+5",
            "",
            "\ud800",
        ]
    )
    | st.text(max_size=20)
    | JSON_LEAF
)


def maybe(value: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """The value, or anything at all in its place."""
    return value | JSON_VALUE


SCHEDULE_LIKE = st.fixed_dictionaries(
    {},
    optional={
        "at": maybe(INSTANT_TEXT),
        "delay_seconds": maybe(st.integers(-5, MAX_DELAY_SECONDS + 5)),
        "rate_seconds": maybe(st.integers(-5, MAX_RATE_SECONDS + 5)),
        "cron": maybe(CRONS),
        "timezone": ZONES,
        "start_at": maybe(INSTANT_TEXT),
        "end_at": maybe(INSTANT_TEXT),
    },
)
HEADER_NAMES = st.sampled_from(
    ["Authorization", "X-Key", "Host", "duetime-run-id", "Webhook-Signature", "bad name", "", "é"]
) | st.text(max_size=10)
TARGET_LIKE = st.fixed_dictionaries(
    {
        "type": maybe(
            st.sampled_from(["http", "sqs", "sns", "eventbridge", "lambda", "handler", "HTTP"])
        )
    },
    optional={
        "url": maybe(URLS),
        "method": maybe(st.sampled_from([*HTTP_METHODS, "get", "TRACE", "CONNECT", ""])),
        "headers": maybe(st.dictionaries(HEADER_NAMES, maybe(st.text(max_size=20)), max_size=3)),
        "queue_url": maybe(URLS),
        "topic_arn": maybe(st.sampled_from(["arn:aws:sns:us-east-1:123456789012:t", "arn:", ""])),
        "function_arn": maybe(
            st.sampled_from(["arn:aws:lambda:us-east-1:123456789012:function:f", "x"])
        ),
        "source": maybe(st.text(max_size=5)),
        "detail_type": maybe(st.text(max_size=5)),
        "event_bus": maybe(st.text(max_size=5)),
        "name": maybe(st.sampled_from(["duetime.noop", "1bad", "a" * 129, ""])),
    },
)
BODY_LIKE = st.fixed_dictionaries(
    {},
    optional={
        "schedule": maybe(SCHEDULE_LIKE),
        "target": maybe(TARGET_LIKE),
        "payload": JSON_VALUE,
        "name": maybe(st.text(max_size=MAX_NAME_CHARS + 2)),
        "priority": maybe(st.sampled_from([p.value for p in Priority])),
        "runtime": maybe(st.sampled_from([r.value for r in Runtime])),
        "retry": maybe(
            st.fixed_dictionaries(
                {},
                optional={
                    "max_attempts": maybe(st.integers(-1, 22)),
                    "backoff_seconds": maybe(st.floats(-1, 1000) | st.integers(-1, 1000)),
                    "max_backoff_seconds": maybe(st.floats(-1, 1000) | st.integers(-1, 1000)),
                },
            )
        ),
        "timeout_seconds": maybe(st.integers(-1, 1000)),
        "catchup": maybe(
            st.sampled_from(["latest", "all", "none", "some"])
            | st.fixed_dictionaries(
                {},
                optional={
                    "mode": maybe(st.sampled_from([m.value for m in CatchupMode])),
                    "window_seconds": maybe(st.integers(-1, 700_000)),
                },
            )
        ),
        "id": st.text(max_size=5),  # server-owned: always refused
    },
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(BODY_LIKE)
@example({"schedule": {"delay_seconds": 1}, "target": {"type": "http", "url": "http://[::1/"}})
@example({"schedule": {"delay_seconds": 1}, "target": {"type": "http", "url": "http://[abc]/"}})
@example({"schedule": {"delay_seconds": 1}, "target": {"type": "http", "url": "http://x:99999/"}})
@example({"schedule": {"delay_seconds": 1}, "target": {"type": "sqs", "queue_url": "https://[q"}})
def test_a_body_broken_anywhere_parses_or_is_a_validation_error_naming_a_field(
    body: dict[str, Any],
) -> None:
    result = parse_or_field(body)
    if "id" in body:
        assert result == "id"  # no mass assignment, whatever else is in the body


@pytest.mark.parametrize(
    ("target", "field"),
    [
        ({"type": "http", "url": "http://[::1/"}, "target.url"),  # unclosed bracket
        ({"type": "http", "url": "http://[abc]/"}, "target.url"),  # bracketed non-address
        ({"type": "http", "url": "http://hooks.example.com:99999/"}, "target.url"),  # port
        ({"type": "http", "url": "http://hooks.example.com:abc/"}, "target.url"),
        ({"type": "sqs", "queue_url": "https://[::1/"}, "target.queue_url"),
        ({"type": "sqs", "queue_url": "https://[queue]/"}, "target.queue_url"),
    ],
)
def test_a_url_urlsplit_refuses_is_a_validation_error_not_a_crash(
    target: dict[str, str], field: str
) -> None:
    # Found by the fuzz above: urlsplit raised a bare ValueError, which the API answers as 500.
    assert parse_or_field({"schedule": {"delay_seconds": 1}, "target": target}) == field


@FUZZ
@given(CRONS, ZONES)
def test_a_cron_schedule_parses_or_is_refused_and_a_parsed_one_can_be_planned(
    cron: object, zone: object
) -> None:
    raw = {"schedule": {"cron": cron, "timezone": zone}, "target": {"type": "handler", "name": "x"}}
    result = parse_or_field(raw)
    if isinstance(result, JobSpec):
        created = datetime(2026, 11, 21, 10, tzinfo=UTC)
        found = next_occurrence(result.schedule, created_at=created, after=None)
        assert found is None or found >= created
    else:
        assert result.startswith("schedule")


# --- valid bodies round-trip -------------------------------------------------------------------

OFFSETS = st.sampled_from(
    [UTC, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-23, minutes=-59))]
)
INSTANTS = st.datetimes(
    min_value=datetime(1970, 1, 2), max_value=datetime(9998, 12, 30), timezones=OFFSETS
).map(lambda d: d.isoformat())


def _ms(instant: str) -> int:
    return to_ms(datetime.fromisoformat(instant))


@st.composite
def bounds(draw: st.DrawFn) -> dict[str, str]:
    out: dict[str, str] = {}
    if draw(st.booleans()):
        out["start_at"] = draw(INSTANTS)
    if draw(st.booleans()):
        end = draw(INSTANTS)
        start = out.get("start_at")
        # Instants are kept to the millisecond: an end 0.4 ms after the start is no later.
        if start is None or _ms(end) > _ms(start):
            out["end_at"] = end
    return out


VALID_SCHEDULES = st.one_of(
    INSTANTS.map(lambda at: {"at": at}),
    st.integers(0, MAX_DELAY_SECONDS).map(lambda s: {"delay_seconds": s}),
    st.builds(lambda s, b: {"rate_seconds": s, **b}, st.integers(1, MAX_RATE_SECONDS), bounds()),
    st.builds(
        lambda c, z, b: {"cron": c, **({"timezone": z} if z else {}), **b},
        st.sampled_from(["*/5 * * * *", "30 9 * * mon-fri", "@daily", "0 0 29 2 *", "5-5 * * * *"]),
        st.sampled_from([None, "UTC", "Europe/Berlin", "America/St_Johns", "Asia/Kathmandu"]),
        bounds(),
    ),
)
HEADER_NAME = st.text(string.ascii_letters + string.digits + "-_", min_size=1, max_size=20).filter(
    lambda n: (
        n.lower() not in {"host", "connection", "content-length", "transfer-encoding"}
        and not n.lower().startswith(("duetime-", "webhook-"))
    )
)
VALID_TARGETS = st.one_of(
    st.fixed_dictionaries(
        {
            "type": st.just("http"),
            "url": st.builds(
                lambda scheme, host, path: f"{scheme}://{host}/{path}",
                st.sampled_from(["http", "https"]),
                st.sampled_from([*HOSTS, "hooks.example.com:8443"]),
                st.text(string.ascii_letters + string.digits + "-._~/?=&", max_size=30),
            ),
        },
        optional={
            "method": st.sampled_from([*HTTP_METHODS, "post", "Get"]),
            "headers": st.dictionaries(
                HEADER_NAME,
                # RFC 9110 field values: visible ASCII, SP and HTAB.
                st.text(
                    st.characters(min_codepoint=0x20, max_codepoint=0x7E) | st.just("\t"),
                    max_size=30,
                ),
                max_size=5,
            ).filter(  # names are case-insensitive: `N` and `n` are one name twice (a 400)
                lambda headers: len({name.lower() for name in headers}) == len(headers)
            ),
        },
    ),
    st.just({"type": "sqs", "queue_url": "https://sqs.eu-west-1.amazonaws.com/1/q"}),
    st.just({"type": "sns", "topic_arn": "arn:aws:sns:eu-west-1:123456789012:t"}),
    st.fixed_dictionaries(
        {"type": st.just("eventbridge"), "source": st.just("s"), "detail_type": st.just("d")},
        optional={"event_bus": st.just("bus")},
    ),
    st.just({"type": "lambda", "function_arn": "arn:aws:lambda:eu-west-1:123456789012:function:f"}),
    st.just({"type": "handler", "name": "duetime.noop"}),
)
# Any text but control characters, line and paragraph separators, and bidirectional overrides
# and isolates (refused in names).
TEXT_CHARACTERS = st.characters(
    exclude_categories=("Cc", "Cs"),
    exclude_characters="\u2028\u2029\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069",
)
VALID_BODIES = st.fixed_dictionaries(
    {"schedule": VALID_SCHEDULES, "target": VALID_TARGETS},
    optional={
        "payload": JSON_VALUE,
        # (A name of invisible characters alone is blank, and refused, since 2026-11-30.)
        "name": st.text(TEXT_CHARACTERS, min_size=1, max_size=MAX_NAME_CHARS).filter(
            lambda name: not blank(name)
        ),
        "priority": st.sampled_from([p.value for p in Priority]),
        "runtime": st.sampled_from([r.value for r in Runtime]),
        "retry": st.builds(
            lambda attempts, backoff, extra: {
                "max_attempts": attempts,
                "backoff_seconds": backoff,
                "max_backoff_seconds": min(900, backoff + extra),
            },
            st.integers(1, 20),
            st.integers(0, 900) | st.floats(0, 900),
            st.integers(0, 900),
        ),
        "timeout_seconds": st.integers(1, 900),
        "catchup": st.sampled_from(["latest", "all", "none"])
        | st.fixed_dictionaries(
            {"mode": st.sampled_from(["latest", "all", "none"])},
            optional={"window_seconds": st.integers(0, 604_800)},
        ),
    },
)


@FUZZ
@given(VALID_BODIES)
def test_a_valid_body_round_trips_through_its_json_form(body: dict[str, Any]) -> None:
    spec = parse_job_spec(body)

    shown = json.loads(json.dumps(spec_to_dict(spec)))
    again = parse_job_spec(shown)

    assert again == spec
    assert spec_to_dict(again) == shown
