"""`duetime schedule preview` against the fake API of tests/unit/test_cli_jobs.py: the body it
sends for each schedule flag, the instants printed in UTC and in the zone, and errors as one line
with a non-zero exit code."""

from __future__ import annotations

import argparse

import pytest

from duetime.cli import schedule
from tests.unit.test_cli_jobs import (  # noqa: F401 - fixtures
    TOKEN,
    FakeApi,
    api,
    clean_env,
    server_url,
)

OCCURRENCES = ["2026-11-23T08:00:00.000Z", "2026-11-24T08:00:00.000Z"]


def preview(api: FakeApi, *argv: str) -> int:  # noqa: F811
    parser = argparse.ArgumentParser(prog="duetime")
    schedule.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["schedule", "preview", "--api-url", api.url, "--token", TOKEN, *argv])
    code: int = args.run(args)
    return code


def test_cron_preview_prints_each_instant_in_utc_and_in_the_zone(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    api.answer(200, {"occurrences": OCCURRENCES})

    code = preview(api, "0 9 * * 1-5", "--timezone", "Europe/Berlin", "--count", "2")

    assert code == 0
    assert (api.last.method, api.last.path) == ("POST", "/schedules/preview")
    assert api.last.body == {
        "schedule": {"cron": "0 9 * * 1-5", "timezone": "Europe/Berlin"},
        "count": 2,
    }
    assert capsys.readouterr().out.splitlines() == [
        "2026-11-23T08:00:00.000Z  2026-11-23 09:00:00 CET (Europe/Berlin)",
        "2026-11-24T08:00:00.000Z  2026-11-24 09:00:00 CET (Europe/Berlin)",
    ]


@pytest.mark.parametrize(
    ("argv", "sent"),
    [
        (("--rate", "60"), {"rate_seconds": 60}),
        (("--rate", "0"), {"rate_seconds": 0}),  # the API names what is wrong with it
        (("--at", "2026-12-01T00:00:00Z"), {"at": "2026-12-01T00:00:00Z"}),
        (("--delay", "60"), {"delay_seconds": 60}),  # (the API's preview took it; the CLI not)
        (
            ("--rate", "3600", "--start-at", "2026-12-01T00:00:00Z", "--timezone", "Asia/Tokyo"),
            {"rate_seconds": 3600, "start_at": "2026-12-01T00:00:00Z"},
        ),
        (
            ("* * * * *", "--end-at", "2027-01-01T00:00:00Z"),
            {"cron": "* * * * *", "end_at": "2027-01-01T00:00:00Z"},
        ),
    ],
)
def test_each_schedule_flag_builds_its_schedule(
    api: FakeApi,  # noqa: F811
    argv: tuple[str, ...],
    sent: dict[str, object],
) -> None:
    api.answer(200, {"occurrences": []})
    assert preview(api, *argv) == 0
    assert api.last.body == {"schedule": sent, "count": 5}


def test_without_a_zone_only_utc_and_an_ended_schedule_says_so(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    api.answer(200, {"occurrences": OCCURRENCES[:1]})
    assert preview(api, "--rate", "60") == 0
    assert capsys.readouterr().out == "2026-11-23T08:00:00.000Z\n"
    api.answer(200, {"occurrences": []})
    assert preview(api, "--rate", "60") == 0
    assert "no occurrences" in capsys.readouterr().out


def test_the_api_s_refusal_is_one_line_naming_the_field(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    error = {"code": "invalid", "message": "minute: 61 is out of range", "field": "schedule.cron"}
    api.answer(400, {"error": error})

    assert preview(api, "61 * * * *") == 1
    err = capsys.readouterr().err
    assert err == "duetime: 400 invalid: minute: 61 is out of range (field: schedule.cron)\n"


@pytest.mark.parametrize(
    "argv",
    [
        (),  # no schedule
        ("0 9 * * *", "--rate", "60"),  # two
        ("--rate", "60", "--timezone", "Mars/Olympus"),  # a zone to show that does not exist
    ],
)
def test_what_cannot_be_sent_is_a_usage_error_before_any_call(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    argv: tuple[str, ...],
) -> None:
    assert preview(api, *argv) == 2
    assert api.requests == []
    assert capsys.readouterr().err.startswith("duetime: ")


@pytest.mark.parametrize("count", ["0", "21"])
def test_a_count_the_api_does_not_answer_is_a_usage_error_before_any_call(
    api: FakeApi,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    count: str,
) -> None:
    with pytest.raises(SystemExit) as exited:  # argparse's: exit status 2
        preview(api, "--rate", "60", "--count", count)
    assert exited.value.code == 2
    assert api.requests == []
    assert "--count: must be from 1 to 20" in capsys.readouterr().err


def test_an_instant_with_no_local_time_before_year_10000_is_shown_in_utc_only() -> None:
    # 9999-12-31T23:59Z is 10000-01-01 in Tokyo, past what a datetime holds: it raised
    # OverflowError (a traceback).
    text = schedule.format_occurrences(
        {"occurrences": ["9999-12-31T23:59:00.000Z"]}, schedule._zone("Asia/Tokyo")
    )
    assert text == "9999-12-31T23:59:00.000Z"
