"""Context values (`-c duetime:key=value`, or cdk.json): each is read as its type or refused
with a message naming the key and the value, and `python3 infra/app.py` says so in one line.

Found by an outside audit: `retainData=ture` read as false (every table, bucket and log group
then deleted with the stack), numbers failing with a bare int() traceback, a fourth
concurrency value failing with a TypeError, and provisioned-only settings silently ignored."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from infra.app import Context, cdk_json_context, props_from_context
from infra.scheduler import PriorityConcurrency
from tests.infra.conftest import REPO_ROOT, SYNTH_TIMEOUT_SECONDS, Synth


def context(**values: Any) -> Context:
    """cdk.json's context with `duetime:<key>` values over it."""
    found = cdk_json_context() | {f"duetime:{k}": v for k, v in values.items()}
    return Context(found.get)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("true", True), ("TRUE", True), (" Yes ", True), ("on", True), ("1", True), (1, True),
        (True, True),
        ("false", False), ("False", False), ("NO", False), ("off", False), ("0", False),
        (0, False), (False, False),
    ],
)  # fmt: skip
def test_a_flag_reads_the_usual_words_in_any_case(value: Any, expected: bool) -> None:
    assert context(retainData=value).flag("retainData", not expected) is expected


@pytest.mark.parametrize("value", ["ture", "TRUE1", "y", "enabled", "2", 2, "none"])
def test_any_other_flag_value_is_refused_naming_the_key(value: Any) -> None:
    with pytest.raises(ValueError) as refused:
        context(retainData=value).flag("retainData", True)

    assert str(refused.value) == f"duetime:retainData must be true or false: {value!r}"


def test_an_absent_or_empty_flag_is_its_default() -> None:
    assert context().flag("fargateSpot", True) is True
    assert context(fargateSpot="").flag("fargateSpot", False) is False


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("timerShards", "abc"),
        ("claimLeadMs", "1.5"),
        ("hotWindowDays", 30.5),
        ("fargateMaxTasks", True),
        ("sweeperReservedConcurrency", "nothing"),
        ("apiReservedConcurrency", "1e3"),
        ("maxCapacity", "lots"),
    ],
)
def test_a_number_that_is_not_a_whole_number_is_refused_naming_the_key(
    key: str, value: Any
) -> None:
    extra = {"billingMode": "provisioned"} if key == "maxCapacity" else {}
    with pytest.raises(ValueError) as refused:
        props_from_context(context(**{key: value}, **extra))

    assert str(refused.value) == f"duetime:{key} must be a whole number: {value!r}"


@pytest.mark.parametrize("value", ["none", "None", "NONE", ""])
def test_none_in_any_case_is_no_reservation(value: str) -> None:
    props = props_from_context(context(profile="large", sweeperReservedConcurrency=value))
    assert props.sweeper_reserved_concurrency is None


def test_numbers_are_read_from_strings_and_json() -> None:
    props = props_from_context(context(timerShards=" 16 ", claimLeadMs=250))
    assert (props.timer_shards, props.claim_lead_ms) == (16, 250)


@pytest.mark.parametrize(
    "value",
    ["lambda/normal", "lambda/normal=2,lambda/high", '{"lambda/normal": 2', "[2]", ["x"], 3],
)
def test_malformed_queue_lanes_are_refused_naming_the_key(value: Any) -> None:
    with pytest.raises(ValueError, match=r"^duetime:queueLanes must be a JSON object or name="):
        props_from_context(context(queueLanes=value))


@pytest.mark.parametrize("value", ["lambda/normal=two", '{"lambda/normal": 2.5}'])
def test_a_lane_count_that_is_not_a_whole_number_is_refused_naming_the_queue(
    value: str,
) -> None:
    with pytest.raises(ValueError, match=r"^duetime:queueLanes\['lambda/normal'\] must be a whole"):
        props_from_context(context(queueLanes=value))


@pytest.mark.parametrize("value", ["100", "50,20", "50,20,5,1", [50, 20, 5, 1]])
def test_worker_max_concurrency_takes_exactly_three_values(value: Any) -> None:
    """(`100` alone was read as high=100 with the defaults for the others.)"""
    with pytest.raises(ValueError) as refused:
        props_from_context(context(workerMaxConcurrency=value))

    assert str(refused.value) == (
        f"duetime:workerMaxConcurrency must be three whole numbers, high,normal,low: {value!r}"
    )


def test_worker_max_concurrency_values_must_be_whole_numbers() -> None:
    with pytest.raises(ValueError, match=r"^duetime:workerMaxConcurrency must be a whole number"):
        props_from_context(context(workerMaxConcurrency="50,20,x"))
    assert props_from_context(
        context(workerMaxConcurrency=[60, 30, 10])
    ).worker_max_concurrency == PriorityConcurrency(high=60, normal=30, low=10)


@pytest.mark.parametrize(
    "value", ['["api", "cli"', {"aud": "api"}, 5]
)  # fmt: skip
def test_a_list_that_is_not_a_list_is_refused_naming_the_key(value: Any) -> None:
    with pytest.raises(ValueError, match=r"^duetime:jwtAudience must be a JSON list or values"):
        props_from_context(context(jwtAudience=value))


@pytest.mark.parametrize("key", ["readCapacity", "writeCapacity", "maxCapacity"])
def test_provisioned_only_settings_are_refused_with_on_demand(key: str) -> None:
    """cdk.json sets none of them (its billing mode is on_demand)."""
    assert not {f"duetime:{k}" for k in ("readCapacity", "writeCapacity", "maxCapacity")} & set(
        cdk_json_context()
    )
    with pytest.raises(ValueError) as refused:
        props_from_context(context(**{key: "400"}))

    assert str(refused.value).startswith(f"duetime:{key}: provisioned mode only")
    assert "duetime:billingMode is on_demand" in str(refused.value)
    props = props_from_context(context(**{key: "4000", "billingMode": "provisioned"}))
    assert props.billing_mode == "provisioned"


def _app(outdir: Path, **values: Any) -> subprocess.CompletedProcess[str]:
    """`python3 infra/app.py` as the CDK CLI runs it, cdk.json's context with `values` over it."""
    found = cdk_json_context() | {f"duetime:{k}": v for k, v in values.items()}
    env = os.environ | {"CDK_CONTEXT_JSON": json.dumps(found), "CDK_OUTDIR": str(outdir)}
    return subprocess.run(
        [sys.executable, "infra/app.py"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=SYNTH_TIMEOUT_SECONDS,
        check=False,
    )


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"timerShards": "abc"}, "duetime:timerShards must be a whole number: 'abc'"),
        ({"retainData": "ture"}, "duetime:retainData must be true or false: 'ture'"),
        ({"hotWindowDays": "4000"}, "hot_window_days must be 1..3650"),
        # (An outside audit: a typo was ignored without a word, no alarm topic, say; bad
        # values of these were jsii tracebacks, or went through.)
        (
            {"alarmEmial": "oncall@example.com"},
            "duetime:alarmEmial is no setting of duetime: did you mean duetime:alarmEmail?",
        ),
        ({"tenantTargetName": "{tenant}-*"}, "duetime:tenantTargetName is no setting of"),
        ({"stackName": "my_stack"}, "duetime:stackName must start with a letter"),
        ({"alarmEmail": "not-an-email"}, "duetime:alarmEmail must be an email address"),
        (
            {"billingMode": "provisioned", "readCapacity": "10", "maxCapacity": "5"},
            "duetime:maxCapacity (5) must be at least readCapacity (10)",
        ),
        (
            {"billingMode": "provisioned", "readCapacity": "0"},
            "duetime:readCapacity must be at least 1: 0",
        ),
    ],
)
def test_the_app_names_a_refused_setting_in_one_line(
    values: dict[str, str], message: str, tmp_path: Path
) -> None:
    """No traceback: one line on stderr, exit status 1, nothing synthesized."""
    completed = _app(tmp_path / "cdk.out", **values)

    assert completed.returncode == 1
    assert "Traceback" not in completed.stderr
    (line,) = completed.stderr.strip().splitlines()
    assert line.startswith(f"duetime: {message}")
    assert not (tmp_path / "cdk.out" / "Duetime.template.json").exists()


def test_a_custom_attribute_as_the_tenant_claim_is_warned_about(
    throwaway_synth: Synth, synth: Synth
) -> None:
    """Found by an outside audit: a Cognito user may write their own `custom:` attributes by
    default, so `-c duetime:tenantClaim=custom:tenant` let any user be any tenant unless the
    app client cannot write it. The synth says so (docs/api.md, "Authentication and tenants")."""
    (warning,) = [w for w in throwaway_synth.warnings if "custom:tenant" in w]
    assert "users must not be able to write" in warning
    assert not [w for w in synth.warnings if "tenantClaim" in w]  # org_id: no warning


def test_no_alarm_email_is_warned_about(console_synth: Synth, synth: Synth) -> None:
    """The alarms then notify nobody (an outside audit: nothing said so)."""
    (warning,) = [w for w in console_synth.warnings if "alarmEmail" in w]
    assert "the alarms notify nobody" in warning
    assert not [w for w in synth.warnings if "alarmEmail" in w]
