"""Webhook secrets on moto: KMS-encrypted records in the jobs table, the /webhook-secret routes,
and a job's HTTP delivery through the real worker handler, verified by the receiver example
(scripts/verify_webhook.py) with the secret the API shows."""

from __future__ import annotations

import http.server
import json
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import jsonschema
import pytest
from botocore.client import BaseClient
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from duetime import wiring
from duetime.adapters.dynamodb.secrets import RECORD_ID, DynamoSecretStore
from duetime.adapters.kms import KmsCipher
from duetime.adapters.memory.secrets import MemorySecretStore
from duetime.api.app import build_app
from duetime.api.openapi import OPENAPI
from duetime.domain.jobs import Priority, Runtime, parse_job_spec
from duetime.domain.signing import SECRET_BYTES, SecretRecord, key_from_secret
from duetime.entrypoints import worker as worker_handler
from duetime.local.lambda_runtime import FakeContext, SqsEventSource
from duetime.ports import ConditionFailed, SecretStore, SecretsUnavailable
from duetime.resources import create_resources
from duetime.wiring import Components, build
from infra.constructs import api as api_grants
from infra.constructs import engine as engine_grants
from infra.constructs import workers as worker_grants
from infra.constructs.data import SECRETS_KEY_ACTIONS
from tests.conftest import Aws
from tests.unit.test_webhook_signing import verifier

_REGISTRY: Registry[Any] = Registry().with_resource(
    "urn:duetime:openapi", Resource.from_contents(OPENAPI, default_specification=DRAFT202012)
)
WEBHOOK_SECRET_SCHEMA = jsonschema.Draft202012Validator(
    {"$ref": "urn:duetime:openapi#/components/schemas/WebhookSecret"}, registry=_REGISTRY
)


@dataclass
class Signed:
    aws: Aws
    kms: Any
    parts: Components


@pytest.fixture
def signed(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> Iterator[Signed]:
    """The moto account of `aws`, with the webhook secrets' key (as the local stack makes it)
    and components built on it; the worker handler uses them."""
    kms = aws.session.client("kms")
    settings = create_resources(
        aws.dynamodb,
        aws.sqs,
        kms=kms,
        timer_shards=4,
        allow_private_targets=True,
        require_https=False,
    )
    assert settings.secrets_key_arn.startswith("arn:aws:kms:")
    parts = build(settings, aws.session)
    monkeypatch.setattr(worker_handler, "components", lambda: parts)
    yield Signed(aws, kms, parts)
    wiring.components.cache_clear()


# --- the store: one contract, both implementations ------------------------------------------


@pytest.fixture(params=["dynamo", "memory"])
def store(request: pytest.FixtureRequest) -> SecretStore:
    if request.param == "memory":
        return MemorySecretStore()
    aws: Aws = request.getfixturevalue("aws")
    return DynamoSecretStore(aws.dynamodb, aws.settings.jobs_table)


def test_store_contract_first_write_then_versioned_writes(store: SecretStore) -> None:
    first = SecretRecord("acme", b"\x00one")
    assert store.get("acme") is None

    store.put(first)
    with pytest.raises(ConditionFailed):
        store.put(SecretRecord("acme", b"\x00other"))  # a second "first" write loses
    second = SecretRecord("acme", b"two", b"\x00one", 1000, 2000, version=2)
    store.put(second)
    with pytest.raises(ConditionFailed):
        store.put(replace(second, current=b"late"))  # written against version 1, now 2

    assert store.get("acme") == second
    assert store.get("globex") is None


# --- KMS and the stored item ----------------------------------------------------------------


def test_a_secret_is_stored_only_as_kms_ciphertext_bound_to_its_tenant(signed: Signed) -> None:
    secret = signed.parts.webhook_secrets.get("acme").secret

    item = signed.aws.dynamodb.get_item(
        TableName=signed.parts.settings.jobs_table,
        Key={"tenant": {"S": "acme"}, "id": {"S": RECORD_ID}},
    )["Item"]
    key = key_from_secret(secret)
    assert len(key) == SECRET_BYTES
    ciphertext = bytes(item["current"]["B"])
    assert key not in ciphertext
    assert secret.removeprefix("whsec_") not in str(item)
    assert "expires_at" not in item  # TTL never removes a secret
    cipher = KmsCipher(signed.parts.settings.secrets_key_arn, lambda: signed.kms)
    assert cipher.decrypt("acme", ciphertext) == key
    with pytest.raises(SecretsUnavailable) as refused:
        cipher.decrypt("globex", ciphertext)  # another tenant's context does not open it
    assert "InvalidCiphertextException" in str(refused.value)
    assert not refused.value.passing  # a person's to look at, not a passing fault


def test_the_secret_record_never_shows_up_as_a_job(signed: Signed) -> None:
    signed.parts.webhook_secrets.get("acme")
    job = signed.parts.service.create(
        "acme", parse_job_spec({"schedule": {"delay_seconds": 600}, "target": _HANDLER})
    )

    assert [view.job.id for view in signed.parts.service.list("acme", 50, None).items] == [job.id]
    assert signed.parts.jobs.get("acme", RECORD_ID) is None


# --- the API routes ---------------------------------------------------------------------------

_HANDLER = {"type": "handler", "name": "duetime.noop"}


def call(
    parts: Components,
    method: str,
    path: str,
    tenant: str = "acme",
    body: str | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any, Any]:
    app = build_app(parts.service, webhook_secrets=parts.webhook_secrets)
    event = {
        "body": body,
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": "",
        "headers": headers or {},
        "isBase64Encoded": False,
        "requestContext": {
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "::1"},
            "requestId": str(uuid.uuid4()),
            "routeKey": "$default",
            "stage": "$default",
            "authorizer": {"jwt": {"claims": {"sub": tenant}, "scopes": None}},
        },
    }
    response = app.resolve(event, FakeContext())
    return response["statusCode"], response["headers"], json.loads(response["body"])


def test_get_makes_the_secret_on_first_read_then_answers_the_same(signed: Signed) -> None:
    status, headers, first = call(signed.parts, "GET", "/webhook-secret")

    assert status == 200
    WEBHOOK_SECRET_SCHEMA.validate(first)
    assert headers["Cache-Control"] == "no-store"
    assert first["secret"].startswith("whsec_")
    assert (first["previous_secret"], first["rotated_at"], first["previous_expires_at"]) == (
        None,
        None,
        None,
    )
    assert call(signed.parts, "GET", "/webhook-secret")[2] == first
    assert (
        call(signed.parts, "GET", "/webhook-secret", tenant="globex")[2]["secret"]
        != (first["secret"])
    )


def test_a_rotation_with_an_idempotency_key_is_a_400_and_rotates_nothing(signed: Signed) -> None:
    # The key was ignored: a rotation retried with it rotated twice, and dropped at once the
    # secret receivers still used (a contract audit, round three).
    before = call(signed.parts, "GET", "/webhook-secret")[2]
    keyed = {"Idempotency-Key": "rotate-1"}
    status, _, answer = call(signed.parts, "POST", "/webhook-secret/rotate", headers=keyed)
    assert (status, answer["error"]["field"]) == (400, "Idempotency-Key")
    assert call(signed.parts, "GET", "/webhook-secret")[2] == before


def test_rotate_keeps_the_old_secret_for_24_hours(signed: Signed) -> None:
    before = call(signed.parts, "GET", "/webhook-secret")[2]

    status, headers, rotated = call(signed.parts, "POST", "/webhook-secret/rotate")

    assert status == 200
    WEBHOOK_SECRET_SCHEMA.validate(rotated)
    assert headers["Cache-Control"] == "no-store"
    assert rotated["secret"] != before["secret"]
    assert rotated["previous_secret"] == before["secret"]
    rotated_at = _epoch(rotated["rotated_at"])
    assert abs(rotated_at - time.time()) < 60
    assert _epoch(rotated["previous_expires_at"]) - rotated_at == 24 * 3600
    assert call(signed.parts, "GET", "/webhook-secret")[2] == rotated
    assert call(signed.parts, "GET", "/webhook-secret", tenant="globex")[2]["rotated_at"] is None


@pytest.mark.parametrize(
    ("body", "field"), [("junk", "body"), ("[]", "body"), ('{"grace_seconds": 0}', "grace_seconds")]
)
def test_a_rotation_with_a_body_is_a_400_and_rotates_nothing(
    signed: Signed, body: str, field: str
) -> None:
    # Given the tenant's secret
    before = call(signed.parts, "GET", "/webhook-secret")[2]

    # When a rotation comes with a body (the route takes none, as pause or cancel)
    status, _, answer = call(signed.parts, "POST", "/webhook-secret/rotate", body=body)

    # Then it is refused naming what is wrong, and the secret is as it was
    assert (status, answer["error"]["field"]) == (400, field)
    assert call(signed.parts, "GET", "/webhook-secret")[2] == before
    # `{}` or no body rotates
    assert call(signed.parts, "POST", "/webhook-secret/rotate", body="{}")[0] == 200


def test_a_rotation_without_a_previous_read_makes_the_secret_first(signed: Signed) -> None:
    status, _, rotated = call(signed.parts, "POST", "/webhook-secret/rotate", tenant="new")

    assert status == 200
    assert rotated["previous_secret"] is not None
    assert rotated["previous_secret"] != rotated["secret"]


def test_without_a_key_the_routes_answer_a_json_500(aws: Aws) -> None:
    parts = build(aws.settings, aws.session)  # no DUETIME_SECRETS_KEY_ARN

    status, _, body = call(parts, "GET", "/webhook-secret")

    assert (status, body["error"]["code"]) == (500, "internal")
    assert "whsec" not in json.dumps(body)


def _epoch(rfc3339: str) -> float:
    from duetime.domain.timeutil import parse_rfc3339

    return parse_rfc3339(rfc3339).timestamp()


# --- a job's delivery, signed by the worker -------------------------------------------------


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[Received]]]:
    received: list[Received] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            received.append(Received({k.lower(): v for k, v in self.headers.items()}, body))
            self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", received
    server.shutdown()
    server.server_close()


def deliver_due_runs(signed: Signed) -> None:
    """What the SQS event source mapping does for the lambda queues, until they are empty."""
    sources = [
        SqsEventSource(
            signed.aws.sqs,
            signed.parts.settings.queue(Runtime.LAMBDA, p).url,
            worker_handler.handler,
            wait_seconds=0,
        )
        for p in Priority
    ]
    while sum(source.poll_once() for source in sources):
        pass


def submit(signed: Signed, url: str, tenant: str = "acme") -> str:
    spec = {
        "schedule": {"delay_seconds": 0},
        "target": {"type": "http", "url": url},
        "payload": {"invoice": 42, "note": "café"},
    }
    return signed.parts.service.create(tenant, parse_job_spec(spec)).id


def test_a_delivery_verifies_with_the_secret_the_api_shows(
    signed: Signed, receiver: tuple[str, list[Received]]
) -> None:
    url, received = receiver
    job_id = submit(signed, url)  # the tenant has no secret yet: the worker makes it

    deliver_due_runs(signed)

    [request] = received
    assert request.headers["webhook-id"] == request.headers["duetime-run-id"]
    assert request.headers["duetime-job-id"] == job_id
    assert abs(int(request.headers["webhook-timestamp"]) - time.time()) < 30
    secret = call(signed.parts, "GET", "/webhook-secret")[2]["secret"]
    verifier.verify(secret, request.headers, request.body)
    assert json.loads(request.body) == {"invoice": 42, "note": "café"}
    with pytest.raises(verifier.WebhookVerificationError):
        verifier.verify(
            call(signed.parts, "GET", "/webhook-secret", tenant="globex")[2]["secret"],
            request.headers,
            request.body,
        )


def test_after_a_rotation_a_delivery_verifies_with_the_old_and_the_new_secret(
    signed: Signed, receiver: tuple[str, list[Received]]
) -> None:
    url, received = receiver
    rotated = call(signed.parts, "POST", "/webhook-secret/rotate")[2]
    submit(signed, url)

    deliver_due_runs(signed)

    [request] = received
    assert len(request.headers["webhook-signature"].split()) == 2
    for secret in (rotated["secret"], rotated["previous_secret"]):
        verifier.verify(secret, request.headers, request.body)


# --- the calls against what infra grants (moto allows every call; AWS would not) -------------


def test_the_secrets_calls_are_the_ones_the_roles_are_granted(
    signed: Signed, receiver: tuple[str, list[Received]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker makes a tenant's secret at its first signed delivery and reads it after; the
    API shows and rotates it. Their KMS calls must be the actions infra grants them, on the
    deployment's key, each with the only encryption context the key's grant allows (`tenant`);
    their calls on the jobs table, where the records live, must be in the roles' grants."""
    made: dict[str, list[tuple[str, str, dict[str, Any]]]] = {"worker": [], "api": []}
    role = ["worker"]
    original = BaseClient._make_api_call

    def recording(client: BaseClient, operation: str, params: dict[str, Any]) -> Any:
        made[role[0]].append((client.meta.service_model.service_name, operation, params))
        return original(client, operation, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", recording)
    url, received = receiver
    for tenant in ("acme", "acme", "globex"):  # a first delivery makes, the next one reads
        submit(signed, url, tenant)
        deliver_due_runs(signed)
    role[0] = "api"
    assert call(signed.parts, "GET", "/webhook-secret")[0] == 200
    assert call(signed.parts, "POST", "/webhook-secret/rotate")[0] == 200
    assert call(signed.parts, "GET", "/webhook-secret", tenant="initech")[0] == 200

    assert len(received) == 3
    grants = {
        "worker": set(engine_grants.WORKER_JOBS_ACTIONS) & set(worker_grants.TASK_JOBS_ACTIONS),
        "api": set(api_grants.API_JOBS_ACTIONS),
    }
    jobs_table = signed.parts.settings.jobs_table
    for who, calls in made.items():
        kms = [(op, params) for service, op, params in calls if service == "kms"]
        assert {f"kms:{op}" for op, _ in kms} <= set(SECRETS_KEY_ACTIONS), who
        assert {"GenerateDataKey", "Decrypt"} <= {op for op, _ in kms}, who  # both exercised
        for op, params in kms:
            assert list(params["EncryptionContext"]) == ["tenant"], (who, op)
            if op == "GenerateDataKey":
                assert params["KeyId"] == signed.parts.settings.secrets_key_arn
        on_jobs = {
            f"dynamodb:{op}"
            for service, op, params in calls
            if service == "dynamodb"
            and jobs_table in (params.get("TableName"), *params.get("RequestItems", {}))
        }
        assert on_jobs <= grants[who], (who, sorted(on_jobs - grants[who]))
