"""The pure rules of issue 14's items 1 and 4: description and tags, the list filter, and what
a PATCH body does to a spec."""

from __future__ import annotations

from typing import Any

import pytest

from duetime.domain.errors import ValidationError
from duetime.domain.jobs import (
    PATCHABLE_FIELDS,
    JobFilter,
    parse_job_spec,
    rearms,
    spec_to_dict,
    updated_spec,
)

BODY: dict[str, Any] = {
    "schedule": {"rate_seconds": 60},
    "target": {"type": "handler", "name": "test.record"},
    "name": "nightly-close",
    "description": "closes the day",
    "tags": {"team": "payments", "env": "prod"},
}


def test_description_and_tags_are_parsed_and_shown() -> None:
    spec = parse_job_spec(BODY)
    assert (spec.description, spec.tags) == ("closes the day", {"team": "payments", "env": "prod"})
    shown = spec_to_dict(spec)
    assert (shown["description"], shown["tags"]) == (BODY["description"], BODY["tags"])
    assert parse_job_spec(shown) == spec


def test_without_description_and_tags_the_defaults_are_none_and_empty() -> None:
    spec = parse_job_spec({"schedule": BODY["schedule"], "target": BODY["target"]})
    assert (spec.description, spec.tags) == (None, {})


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"description": "x" * 1025}, "description"),
        ({"description": 5}, "description"),
        ({"tags": {f"k{i}": "v" for i in range(21)}}, "tags"),
        ({"tags": ["a"]}, "tags"),
        ({"tags": {"k" * 65: "v"}}, "tags." + "k" * 65),
        ({"tags": {"": "v"}}, "tags."),
        ({"tags": {"team:x": "v"}}, "tags.team:x"),
        ({"tags": {"a=b": "v"}}, "tags.a=b"),
        ({"tags": {"team": "v" * 257}}, "tags.team"),
        ({"tags": {"team": 1}}, "tags.team"),
    ],
)
def test_limits_of_description_and_tags(extra: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        parse_job_spec({**BODY, **extra})
    assert caught.value.field == field


def test_the_limits_themselves_are_accepted() -> None:
    tags = {f"k{i:02d}" + "x" * 61: "v" * 256 for i in range(20)}
    spec = parse_job_spec({**BODY, "description": "d" * 1024, "tags": tags})
    assert len(spec.tags) == 20


@pytest.mark.parametrize(
    ("match", "expected"),
    [
        (JobFilter(), True),
        (JobFilter((("team", "payments"),)), True),
        (JobFilter((("team", "payments"), ("env", "prod"))), True),
        (JobFilter((("team", "payments"), ("env", "dev"))), False),
        (JobFilter((("owner", ""),)), False),
        (JobFilter(name_prefix="nightly-"), True),
        (JobFilter(name_prefix="weekly-"), False),
        (JobFilter((("env", "prod"),), "nightly"), True),
    ],
)
def test_a_filter_needs_every_tag_and_the_name_prefix(match: JobFilter, expected: bool) -> None:
    assert match.matches(parse_job_spec(BODY)) is expected


def test_a_name_prefix_never_matches_a_job_without_a_name() -> None:
    spec = parse_job_spec({"schedule": BODY["schedule"], "target": BODY["target"]})
    assert not JobFilter(name_prefix="n").matches(spec)


def test_an_update_replaces_the_fields_given_and_keeps_the_rest() -> None:
    spec = parse_job_spec(BODY)
    changed = updated_spec(spec, {"name": "renamed", "tags": {"team": "core"}})
    assert (changed.name, changed.tags) == ("renamed", {"team": "core"})
    assert (changed.schedule, changed.description, changed.target) == (
        spec.schedule,
        spec.description,
        spec.target,
    )
    assert not rearms(spec, changed)


def test_null_resets_a_field_to_its_default_where_a_submission_accepts_null() -> None:
    spec = parse_job_spec({**BODY, "retry": {"max_attempts": 7}})
    changed = updated_spec(spec, {"description": None, "tags": None, "retry": None})
    assert (changed.description, changed.tags, changed.retry.max_attempts) == (None, {}, 3)
    with pytest.raises(ValidationError):
        updated_spec(spec, {"priority": None})  # as in a submission


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"schedule": {"cron": "0 * * * *"}}, True),
        ({"priority": "high"}, True),
        ({"runtime": "fargate"}, True),
        ({"payload": {"v": 2}}, False),
        ({"target": {"type": "handler", "name": "other"}}, False),
        ({"schedule": {"rate_seconds": 60}}, False),  # the same schedule
    ],
)
def test_a_new_schedule_or_queue_re_arms_the_job(change: dict[str, Any], expected: bool) -> None:
    spec = parse_job_spec(BODY)
    assert rearms(spec, updated_spec(spec, change)) is expected


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"status": "paused"}, "status"),
        ({"id": "x"}, "id"),
        ({"version": 3}, "version"),
        ({"created_at": "2026-01-01T00:00:00Z"}, "created_at"),
        ({"tenant": "other"}, "tenant"),
        ({"nope": 1}, "nope"),
        ({"schedule": None}, "schedule"),
        ({"schedule": {"cron": "nope"}}, "schedule.cron"),
        ({"timeout_seconds": 0}, "timeout_seconds"),
        ({"name": ""}, "name"),
    ],
)
def test_an_update_is_validated_as_a_submission_and_refuses_read_only_fields(
    body: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        updated_spec(parse_job_spec(BODY), body)
    assert caught.value.field == field


def test_every_patchable_field_is_a_submission_field() -> None:
    spec = parse_job_spec(BODY)
    shown = spec_to_dict(spec)
    assert set(PATCHABLE_FIELDS) <= set(shown)
    assert updated_spec(spec, {key: shown[key] for key in PATCHABLE_FIELDS}) == spec


@pytest.mark.parametrize(("key", "meant"), [("stauts", "status"), ("nmae", "name")])
def test_a_misspelt_patch_field_is_hinted_among_read_only_names_too(key: str, meant: str) -> None:
    # `stauts` suggested `tags` (HTTP contract, round six): the read-only names are known
    # names too, and the hint is what the user meant (its answer then says it is read-only).
    with pytest.raises(ValidationError) as caught:
        updated_spec(parse_job_spec(BODY), {key: "x"})
    assert caught.value.message == f"unknown field; did you mean {meant}?"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"status": "paused"}, "read-only field"),
        ({"stauts": "paused"}, "unknown field; did you mean status?"),
        ({"version": 3}, "read-only field"),
    ],
)
def test_a_submission_refuses_a_read_only_field_as_one(body: dict[str, Any], message: str) -> None:
    # `status` in a POST /jobs answered "unknown field; did you mean tags?" (HTTP contract,
    # round seven): it is a field the server sets, as a PATCH says.
    with pytest.raises(ValidationError) as caught:
        parse_job_spec({**BODY, **body})
    assert (caught.value.field, caught.value.message) == (next(iter(body)), message)
