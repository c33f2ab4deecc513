"""Targets are validated strictly at submission: what is accepted can be delivered.

- HTTP URLs: no spaces or control characters anywhere (urlsplit silently drops tab, CR and LF,
  http.client refuses the rest), ASCII but for an internationalised host name, a host that is
  a DNS name or an IP address.
- HTTP headers: names are RFC 9110 tokens, values visible ASCII, SP and HTAB.
- AWS names (SQS queues, SNS topics, Lambda functions, EventBridge buses) in AWS's character
  sets, so a percent-encoded spelling of duetime's own resources cannot pass the own-resource
  check; that check decodes percent-encoding again for jobs stored before.
- `read_target` (stored jobs) keeps reading what older rules accepted.
"""

from __future__ import annotations

import http.client
import json
import string
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from duetime.adapters.codec import job_from_values, job_to_values
from duetime.domain.errors import ValidationError
from duetime.domain.invocation import TargetError
from duetime.domain.jobs import parse_job_spec
from duetime.domain.reach import OwnResources
from duetime.domain.targets import (
    EventBridgeTarget,
    HttpTarget,
    LambdaTarget,
    SnsTarget,
    SqsTarget,
    Target,
    parse_target,
    read_target,
    target_to_dict,
)
from duetime.targets.http import HttpDelivery, _host_and_port, _path
from tests.integration.test_contracts import make_job

OWN = OwnResources(
    frozenset({"duetime-lambda-normal", "duetime-lambda-normal-dlq"}), name_prefix="duetime"
)


def refused_field(target: dict[str, Any]) -> str:
    """The field a submission with `target` is refused on (through the whole job parser)."""
    with pytest.raises(ValidationError) as caught:
        parse_job_spec({"schedule": {"delay_seconds": 1}, "target": target})
    return caught.value.field


def http_target(url: str, **extra: Any) -> dict[str, Any]:
    return {"type": "http", "url": url, **extra}


def headers(**values: str) -> dict[str, Any]:
    return http_target("https://hooks.example.com/x", headers=values)


def deliverable(target: HttpTarget) -> None:
    """Build the request the worker would send, up to the socket: raises what the worker's
    client would raise (http.client buffers the request line and headers until endheaders)."""
    url = HttpDelivery()._parse_url(target.url)
    host, port = _host_and_port(url)
    connection = http.client.HTTPConnection(host, port)
    connection.putrequest(target.method, _path(url))
    for name, value in target.headers.items():
        connection.putheader(name, value)


# --- HTTP URLs ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:18099/a\r\nX-Injected: yes",  # header injection: urlsplit drops CR LF
        "http://x y/",
        "http://hooks.example.com/a b",
        "http://hooks.example.com/a?b=c d",
        "http://hooks.example.com/a\x00",
        "http://hooks.example.com/\tx",
        "http://hooks.example.com/x\x7f",
        "http://hooks.example.com/x\x85",  # C1 control (NEL)
        "http://hooks.example.com/x\u2028",  # line separator
        "http://hooks.example.com/x\u00a0",  # no-break space
        # U+FEFF: a space to the document's pattern (ECMA-262's \s), not to Python's; IDNA
        # drops it, so the host was sent as another name (a contract audit, round ten)
        "https://hooks.exa\ufeffmple.com/",
        "https://hooks.exa\u00admple.com/",  # a soft hyphen: IDNA drops it too (RFC 3454 B.1)
        "https://hooks.example\ufe0f.com/",  # a variation selector: the same
        " http://hooks.example.com/",  # urlsplit strips it; refused rather than rewritten
        "http://hooks.example.com/\n",
        "http://hooks.example.com/café",  # non-ASCII path: http.client sends ASCII only
        "http://hooks.example.com/?q=é",
        "http://hooks.example.com/#é",
        "http://a..b/",  # empty DNS label
        "http://.example.com/",
        "http://" + "a" * 64 + ".example/",  # label over 63
        "http://" + "a." * 127 + "a/",  # name over 253
        "http://%6c%6fcalhost/",  # percent-encoded host: no resolver decodes it
        "http://a<b/",
        "http://a\\b/",
        "http://ü!.example/",  # IDNA gives xn--!-…: not a DNS name
        # IDNA 2003 (Python's codec) and 2008 (browsers, curl) encode these to other domains:
        # `faß.de` was sent to fass.de (found by an outside audit)
        "https://faß.de/hook",
        "https://STRAẞE.example/",
        "https://σος.example/",
        "https://a\u200db.example/",
        "https://a\u200cb.example/",
        "https://[v1.hooks.example]/x",  # RFC 3986's IPvFuture: was resolved as a DNS name
        "https://[vF.localhost]/",
        "http://[fe80::1%25eth0]/",  # IPv6 zone
        "http://[::1/",
        "http://hooks.example.com:0/",  # no port: it read as the scheme's default (review)
    ],
)
def test_an_http_url_the_worker_cannot_send_is_refused_on_target_url(url: str) -> None:
    assert refused_field(http_target(url)) == "target.url"


def test_a_host_idna_2003_and_2008_encode_apart_is_refused_with_its_xn_form_named() -> None:
    with pytest.raises(ValidationError, match="xn-- form"):
        parse_target(http_target("https://faß.de/hook"))
    parse_target(http_target("https://xn--fa-hia.de/hook"))  # as browsers send it


def test_a_stored_job_s_host_idna_2003_and_2008_encode_apart_is_not_delivered() -> None:
    # Stored before the check: the worker refuses it rather than send to fass.de.
    with pytest.raises(TargetError, match="differently") as caught:
        deliverable(HttpTarget("https://faß.de/hook"))
    assert not caught.value.retryable


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.example.com/billing/close-day",
        "http://127.0.0.1:18099/a?b=c&d=%20e%C3%A9#frag",
        "https://hooks.example.com:8443/x/y;z?a[]=1&b={2}|~",
        "https://[::1]:8443/x",
        "http://[::ffff:127.0.0.1]/",
        "http://2130706433/",
        "http://0x7f.1/",
        "https://example.com./",
        "https://under_score.example.com/",
        "https://bücher.example/a",  # IDN host: sent as xn--bcher-kva.example
        "https://xn--bcher-kva.example/",
        "https://\uff25\uff38\uff21\uff2d\uff30\uff2c\uff25.com/",  # fullwidth: IDNA maps it
        "https://hooks.example.com",
        "https://hooks.example.com:/",  # an empty port is the default one
    ],
)
def test_a_valid_http_url_is_accepted_and_deliverable(url: str) -> None:
    target = parse_target(http_target(url, headers={"Authorization": "Bearer 3xampl3"}))
    assert isinstance(target, HttpTarget)
    assert target.url == url  # kept as given
    deliverable(target)


@pytest.mark.parametrize("url", ["http://x y/", "http://127.0.0.1:18099/a\r\nX-Injected: yes"])
def test_the_refused_urls_are_those_the_worker_fails_to_send(url: str) -> None:
    # Why they are refused: stored as they are, every attempt would fail at delivery.
    with pytest.raises(http.client.InvalidURL, match="control characters"):
        deliverable(HttpTarget(url))


# --- HTTP headers ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "a\u2028b",  # not Latin-1: http.client cannot encode it
        "a\x00b",
        "a\x7fb",
        "a\rb",
        "a\nb",
        "a\r\n b",  # obsolete line folding
        "\x1b[31m",
        "a\x85b",  # C1
        "café",  # obs-text: receivers do not agree on its meaning
        "a\u00a0b",
        "x" * 4097,
    ],
)
def test_a_header_value_outside_visible_ascii_sp_and_htab_is_refused(value: str) -> None:
    assert refused_field(headers(**{"X-Key": value})) == "target.headers.X-Key"


def test_two_header_names_that_differ_only_in_case_are_refused() -> None:
    # Found by review: both were accepted and shown, and one replaced the other when sent.
    assert refused_field(headers(**{"X-A": "1", "x-a": "2"})) == "target.headers.x-a"


@pytest.mark.parametrize(
    "value", ["Bearer 3xampl3", "", "a\tb", " spaced ", string.printable.strip("\n\r\x0b\x0c")]
)
def test_a_header_value_of_visible_ascii_sp_and_htab_is_accepted(value: str) -> None:
    target = parse_target(headers(**{"X-Key": value}))
    assert isinstance(target, HttpTarget)
    assert target.headers == {"X-Key": value}
    deliverable(target)


@pytest.mark.parametrize(
    "name", ["X-Key\n", "X-Key\r\n", "bad name", "X:Y", "é", "", "X\x00", "(x)", "a" * 65]
)
def test_a_header_name_that_is_not_an_rfc_9110_token_is_refused(name: str) -> None:
    assert refused_field(headers(**{name: "v"})) == f"target.headers.{name}"


def test_a_header_name_made_of_every_token_character_is_accepted() -> None:
    name = "!#$%&'*+.^_`|~0-9A-Za-z-"
    target = parse_target(headers(**{name: "v"}))
    assert isinstance(target, HttpTarget)
    deliverable(target)


def test_a_handler_name_with_a_trailing_newline_is_refused() -> None:
    assert refused_field({"type": "handler", "name": "duetime.noop\n"}) == "target.name"


# Pieces of URLs and header values, valid and not, put together at random.
URL_PIECES = st.sampled_from(
    [
        "http://",
        "https://",
        "hooks.example.com",
        "127.0.0.1",
        "[::1]",
        "bücher.example",
        "\uff45\uff58\uff41\uff4d\uff50\uff4c\uff45",  # fullwidth example
        "a..b",
        "[",
        "]",
        ":",
        ":8443",
        ":99999",
        "@",
        "/",
        "?",
        "#",
        "%",
        "%zz",
        "%20",
        "\\",
        " ",
        "\t",
        "\r",
        "\n",
        "\x00",
        "\x7f",
        "\x85",
        "\u2028",
        "é",
        "\u202e",
        "<",
        "|",
    ]
)
URLS = st.lists(URL_PIECES, min_size=1, max_size=8).map("".join)
VALUES = st.text(
    st.sampled_from(["a", " ", "\t", "\r", "\n", "\x00", "\x7f", "é", "\u2028", "ÿ", "~"]),
    max_size=6,
)
NAMES = st.sampled_from(["X-Key", "X-Key\n", "bad name", "é", "a:b", "!#$%&'*+.^_`|~"])


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(URLS, st.dictionaries(NAMES, VALUES, max_size=2))
@example("http://127.0.0.1:18099/a\r\nX-Injected: yes", {})
@example("http://x y/", {})
@example("https://hooks.example.com/", {"X-Key": "a\u2028b"})
def test_every_http_target_accepted_is_deliverable(url: str, values: dict[str, str]) -> None:
    try:
        target = parse_target(http_target(url, headers=values))
    except ValidationError as error:
        refused: str | None = error.field
    else:
        refused = None
        assert isinstance(target, HttpTarget)
        deliverable(target)
    assert refused is None or refused == "target.url" or refused.startswith("target.headers.")


# --- AWS names ---------------------------------------------------------------------------------

QUEUE = "https://sqs.us-east-1.amazonaws.com/123456789012"


@pytest.mark.parametrize(
    ("target", "field"),
    [
        # Percent-encoded spellings of duetime's own resources (the outside test's findings).
        (
            {
                "type": "lambda",
                "function_arn": "arn:aws:lambda:us-east-1:123456789012:function:%64uetime-worker",
            },
            "target.function_arn",
        ),
        (
            {
                "type": "eventbridge",
                "source": "s",
                "detail_type": "d",
                "event_bus": "arn:aws:events:us-east-1:123456789012:event-bus/%64uetime-bus",
            },
            "target.event_bus",
        ),
        (
            {
                "type": "eventbridge",
                "source": "s",
                "detail_type": "d",
                "event_bus": "%64uetime-bus",
            },
            "target.event_bus",
        ),
        ({"type": "sqs", "queue_url": f"{QUEUE}/%2564uetime-lambda-normal"}, "target.queue_url"),
        ({"type": "sqs", "queue_url": f"{QUEUE}/%64uetime-lambda-normal"}, "target.queue_url"),
        (
            {"type": "sns", "topic_arn": "arn:aws:sns:us-east-1:123456789012:%64uetime-alarms"},
            "target.topic_arn",
        ),
    ],
)
def test_a_percent_encoded_aws_name_is_refused(target: dict[str, Any], field: str) -> None:
    assert refused_field(target) == field


LAMBDA = "arn:aws:lambda:us-east-1:123456789012:function"
SNS = "arn:aws:sns:us-east-1:123456789012"
BUS = "arn:aws:events:us-east-1:123456789012:event-bus"


@pytest.mark.parametrize(
    "arn",
    [
        f"{LAMBDA}:billing report",
        f"{LAMBDA}:billing.report",
        f"{LAMBDA}:" + "f" * 65,
        f"{LAMBDA}:",
        f"{LAMBDA}:f:",  # empty qualifier
        f"{LAMBDA}:f:live:extra",
        f"{LAMBDA}:ƒ",  # a look-alike
        f"{LAMBDA}:f\n",
        "arn:aws:lambda:us-east-1:123456789012:f",  # no `function:`
        "arn:aws:lambda:us-east-1:123456789012:layer:f",
        "arn:aws:lambda::123456789012:function:f",  # no region
        "arn:aws:lambda:us-east-1:1234567890123:function:f",  # account over 12 digits
        "arn:aws:sns:us-east-1:123456789012:function:lambda:x",  # `:lambda:` elsewhere
        "arn:other:lambda:us-east-1:123456789012:function:f",
    ],
)
def test_a_lambda_function_arn_outside_awss_format_is_refused(arn: str) -> None:
    assert refused_field({"type": "lambda", "function_arn": arn}) == "target.function_arn"


@pytest.mark.parametrize(
    "arn",
    [f"{SNS}:reports now", f"{SNS}:reports.txt", f"{SNS}:" + "t" * 257, f"{SNS}:", f"{SNS}:t:x"],
)
def test_an_sns_topic_arn_outside_awss_format_is_refused(arn: str) -> None:
    assert refused_field({"type": "sns", "topic_arn": arn}) == "target.topic_arn"


@pytest.mark.parametrize(
    "bus", ["my bus", "bus\n", "bus:x", "b" * 257, f"{BUS}/", f"{BUS}/a b", "arn:aws:events:x"]
)
def test_an_event_bus_outside_awss_format_is_refused(bus: str) -> None:
    target = {"type": "eventbridge", "source": "s", "detail_type": "d", "event_bus": bus}
    assert refused_field(target) == "target.event_bus"


@pytest.mark.parametrize(
    ("source", "detail_type", "field"),
    [
        ("aws.ec2", "d", "target.source"),  # reserved: PutEvents fails the entry
        ("aws.", "d", "target.source"),
        ("s" * 257, "d", "target.source"),
        ("acme\nbilling", "d", "target.source"),
        ("acme.billing", "Close\u202eDay", "target.detail_type"),
        ("acme.billing", "d" * 129, "target.detail_type"),
        ("acme.billing", "   ", "target.detail_type"),
    ],
)
def test_an_event_source_or_detail_type_eventbridge_would_refuse_is_refused(
    source: str, detail_type: str, field: str
) -> None:
    target = {"type": "eventbridge", "source": source, "detail_type": detail_type}
    assert refused_field(target) == field


def test_an_event_source_that_only_looks_like_awss_is_kept() -> None:
    target = {"type": "eventbridge", "source": "awsome.app", "detail_type": "Close Day"}
    assert parse_target(target) == EventBridgeTarget(source="awsome.app", detail_type="Close Day")


@pytest.mark.parametrize(
    "url",
    [
        f"{QUEUE}/orders now",
        f"{QUEUE}/orders\r\n",
        f"{QUEUE}/orders.txt",
        f"{QUEUE}/" + "q" * 81,
        f"{QUEUE}/" + "q" * 76 + ".fifo",  # 81 with the suffix
        f"{QUEUE}/orders?x=1",
        f"{QUEUE}/orders#x",
        f"{QUEUE}//orders",
        "https://sqs.us-east-1.amazonaws.com",  # no queue
        # No account: AWS would refuse every run (found by an outside audit)
        "https://sqs.eu-west-1.amazonaws.com/reports",
        "https://sqs/q",
        "https://u:p@sqs.us-east-1.amazonaws.com/1/q",
        "ftp://sqs.us-east-1.amazonaws.com/1/q",
        "https://sqs us-east-1/1/q",
        "https://sqs.us-east-1.amazon\ufeffaws.com/123456789012/q",
        # Another host's path too: only its last segment was read as the queue, so a tenant
        # could name another's queue before it (a security audit, round five).
        "https://x.example/123456789012/tenB_orders/tenA_x",
        "http://localhost:4566/a/b/orders",
    ],
)
def test_an_sqs_queue_url_outside_awss_format_is_refused(url: str) -> None:
    assert refused_field({"type": "sqs", "queue_url": url}) == "target.queue_url"


@pytest.mark.parametrize(
    "target",
    [
        # Every AWS target the other tests and the documentation use.
        SqsTarget(f"{QUEUE}/q"),
        SqsTarget(f"{QUEUE}/reports"),
        SqsTarget(f"{QUEUE}/reports/"),
        SqsTarget("https://sqs.eu-west-1.amazonaws.com/1/q"),
        SqsTarget(f"{QUEUE}/orders.fifo"),
        SqsTarget(f"{QUEUE}/" + "q" * 80),
        SqsTarget(f"{QUEUE}/" + "q" * 75 + ".fifo"),
        SqsTarget(f"{QUEUE}/Under_score-and-dash"),
        SqsTarget("http://localhost:4566/000000000000/orders"),
        SqsTarget("http://sqs.us-east-1.localhost.localstack.cloud:4566/000000000000/reports"),
        SqsTarget("http://localhost:9324/queue/reports"),
        SnsTarget(f"{SNS}:t"),
        SnsTarget("arn:aws:sns:eu-west-1:111122223333:alerts"),
        SnsTarget(f"{SNS}:orders.fifo"),
        SnsTarget(f"{SNS}:" + "t" * 256),
        SnsTarget("arn:aws-us-gov:sns:us-gov-west-1:123456789012:Reports_2"),
        SnsTarget("arn:aws-cn:sns:cn-north-1:123456789012:reports"),
        LambdaTarget(f"{LAMBDA}:f"),
        LambdaTarget(f"{LAMBDA}:" + "f" * 64),
        LambdaTarget(f"{LAMBDA}:billing_report-2:live"),
        LambdaTarget(f"{LAMBDA}:billing:7"),
        LambdaTarget(f"{LAMBDA}:billing:$LATEST"),
        EventBridgeTarget("acme.billing", "CloseDay"),
        EventBridgeTarget("s", "d", "default"),
        EventBridgeTarget("s", "d", "ops"),
        EventBridgeTarget("s", "d", "bus"),
        EventBridgeTarget("s", "d", "aws.partner/saas.com/123/name_1-x"),
        EventBridgeTarget("s", "d", "b" * 256),
        EventBridgeTarget("s", "d", f"{BUS}/default"),
        EventBridgeTarget("s", "d", "arn:aws:events:eu-west-1:111122223333:event-bus/b"),
    ],
)
def test_every_valid_aws_target_is_still_accepted(target: Target) -> None:
    assert parse_target(target_to_dict(target)) == target


@pytest.mark.parametrize(
    ("target", "field"),
    [
        # As stored before submissions refused `%`: the worker's check decodes them (repeatedly).
        (LambdaTarget(f"{LAMBDA}:%64uetime-worker"), "function_arn"),
        (LambdaTarget(f"{LAMBDA}:%2564uetime-worker:live"), "function_arn"),
        (LambdaTarget("arn:aws:lambda:us-east-1:1:function%3Aduetime-worker"), "function_arn"),
        (SnsTarget(f"{SNS}:%64uetime-alarms"), "topic_arn"),
        (EventBridgeTarget("s", "d", f"{BUS}/%64uetime-bus"), "event_bus"),
        (EventBridgeTarget("s", "d", "%2564uetime-bus"), "event_bus"),
        (SqsTarget(f"{QUEUE}/%2564uetime-lambda-normal"), "queue_url"),
        (SqsTarget(f"{QUEUE}/%25%36%34uetime-lambda-normal-dlq"), "queue_url"),
    ],
)
def test_the_own_resource_check_decodes_percent_encoding_of_every_name(
    target: Target, field: str
) -> None:
    refused = OWN.refusal(target)
    assert refused is not None
    assert refused[0] == field


# --- stored targets ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "target",
    [
        HttpTarget("http://x y/"),
        HttpTarget("https://hooks.example.com/café", headers={"X-Key": "café", "X-Nul": "\x00"}),
        SqsTarget(f"{QUEUE}/%64uetime-lambda-normal"),
        SnsTarget(f"{SNS}:%64uetime-alarms"),
        LambdaTarget(f"{LAMBDA}:%64uetime-worker"),
        EventBridgeTarget("s", "d", "%64uetime-bus"),
    ],
)
def test_a_target_stored_under_older_rules_still_reads_back(target: Target) -> None:
    stored = target_to_dict(target)
    with pytest.raises(ValidationError):
        parse_target(stored)
    assert read_target(stored) == target


def test_reading_a_stored_target_still_checks_its_structure() -> None:
    with pytest.raises(ValidationError) as caught:
        read_target({"type": "http", "url": "ftp://x/"})
    assert caught.value.field == "target.url"
    with pytest.raises(ValidationError) as caught:
        read_target({"type": "sns", "topic_arn": "x"})
    assert caught.value.field == "target.topic_arn"


@pytest.mark.parametrize(
    "stored",
    [
        {"type": "http", "url": "http://example.com/a b", "method": "POST", "headers": {}},
        {"type": "http", "url": "http://example.com/", "method": "POST", "headers": {"X": "é"}},
        {"type": "lambda", "function_arn": "arn:aws:lambda:us-east-1:1:function:%64uetime-w"},
    ],
)
def test_a_job_stored_under_older_rules_is_still_read(stored: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        parse_target(stored)
    values = job_to_values(make_job())
    spec = json.loads(values["spec"])
    values["spec"] = json.dumps({**spec, "target": stored})
    job = job_from_values(values)
    assert target_to_dict(job.spec.target) == target_to_dict(read_target(stored))
    assert job == replace(make_job(), spec=replace(make_job().spec, target=job.spec.target))


@pytest.mark.parametrize(
    ("target", "field", "service"),
    [
        ({"type": "lambda", "function_arn": "my-function"}, "target.function_arn", "lambda"),
        ({"type": "sns", "topic_arn": "arn:aws:sqs:us-east-1:1:q"}, "target.topic_arn", "sns"),
    ],
)
def test_given_a_value_that_is_no_arn_of_its_service_then_the_refusal_shows_the_form(
    target: dict[str, str], field: str, service: str
) -> None:
    # It said "must be an lambda ARN" (a new user's walk, round four).
    with pytest.raises(ValidationError) as refused:
        parse_job_spec({"schedule": {"delay_seconds": 5}, "target": target})
    assert refused.value.field == field
    assert refused.value.message == f"must be an ARN of {service}: arn:aws:{service}:<region>:..."


@pytest.mark.parametrize(
    ("target", "field", "message"),
    [
        ({"name": "x"}, "target.type", "is required: one of eventbridge, handler, http, lambda"),
        ({"type": "pigeon"}, "target.type", "must be one of eventbridge, handler, http, lambda"),
        (
            {"type": "sqs", "queue_url": "arn:aws:sqs:us-east-1:123456789012:orders"},
            "target.queue_url",
            "must be the queue's URL (https://...), not its ARN",
        ),
    ],
)
def test_given_a_common_slip_then_the_refusal_says_what_to_give(
    target: dict[str, str], field: str, message: str
) -> None:
    # A missing `type` said "must be one of"; a queue's ARN "an absolute http(s) URL" (a new
    # user's walk, round four).
    with pytest.raises(ValidationError) as refused:
        parse_job_spec({"schedule": {"delay_seconds": 5}, "target": target})
    assert refused.value.field == field
    assert refused.value.message.startswith(message)
