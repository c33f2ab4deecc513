"""Webhook signatures: the Standard Webhooks scheme, tenants' secrets and their rotation (on
the in-memory twins), and a real HTTP delivery verified by scripts/verify_webhook.py."""

from __future__ import annotations

import base64
import http.server
import json
import math
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from duetime.adapters.kms import KmsCipher, UnconfiguredCipher
from duetime.adapters.memory.secrets import MemoryCipher, MemorySecretStore
from duetime.domain.signing import (
    SECRET_PREFIX,
    SecretRecord,
    TenantSecrets,
    key_from_secret,
    rotated,
    sign,
    webhook_headers,
)
from duetime.domain.targets import HttpTarget
from duetime.ports import SecretsUnavailable
from duetime.services.webhook_secrets import DEFAULT_GRACE_SECONDS, WebhookSecrets
from duetime.targets import HttpDelivery, Invocation, TargetError
from tests.scripts import load_script

NOW_MS = 1_795_237_200_000  # 2026-11-21T05:00:00Z
HOUR_MS = 3_600_000


verifier = load_script("verify_webhook.py", "duetime_verify_webhook")


@dataclass
class Clocks:
    """Wall time (epoch ms) and monotonic time (s), moved together by the tests."""

    wall_ms: int = NOW_MS
    mono: float = 1000.0

    def advance(self, seconds: float) -> None:
        self.wall_ms += int(seconds * 1000)
        self.mono += seconds


@dataclass
class Secrets:
    store: MemorySecretStore = field(default_factory=MemorySecretStore)
    cipher: MemoryCipher = field(default_factory=MemoryCipher)
    clocks: Clocks = field(default_factory=Clocks)

    def service(self) -> WebhookSecrets:
        """One process's view (the API's, or a worker's) of the shared store."""
        return WebhookSecrets(
            self.store,
            self.cipher,
            clock=lambda: self.clocks.wall_ms,
            monotonic=lambda: self.clocks.mono,
        )


@pytest.fixture
def secrets() -> Secrets:
    return Secrets()


# --- the scheme ------------------------------------------------------------------------------


def test_the_standard_webhooks_reference_vector_is_reproduced() -> None:
    signature = sign(
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "msg_p5jXN8AQM9LWM0D4loKWxJek",
        1614265330,
        b'{"test": 2432232314}',
    )

    assert signature == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_the_receiver_example_verifies_the_reference_vector() -> None:
    headers = {
        "webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
        "webhook-timestamp": "1614265330",
        "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
    }

    verifier.verify(
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        headers,
        b'{"test": 2432232314}',
        now=1614265330,
    )


def test_given_two_secrets_then_each_signs_and_either_verifies() -> None:
    new, old = "whsec_" + "A" * 43 + "=", "whsec_" + "B" * 43 + "="

    headers = webhook_headers([new, old], "01JDUE-1", NOW_MS // 1000, b"{}")

    entries = headers["webhook-signature"].split(" ")
    assert entries == [
        sign(new, "01JDUE-1", NOW_MS // 1000, b"{}"),
        sign(old, "01JDUE-1", NOW_MS // 1000, b"{}"),
    ]
    for secret in (new, old, [old, "whsec_" + "C" * 43 + "="]):
        verifier.verify(secret, headers, b"{}", now=NOW_MS / 1000)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"body": b'{"amount":1000}'}, "no signature matches"),
        ({"secret": "whsec_" + base64.b64encode(b"x" * 32).decode()}, "no signature matches"),
        ({"now": NOW_MS / 1000 + 301}, "outside the tolerance"),
        ({"now": NOW_MS / 1000 - 301}, "outside the tolerance"),
        ({"headers": {"webhook-id": "01JDUE-2"}}, "no signature matches"),
        ({"headers": {"webhook-timestamp": str(NOW_MS // 1000 + 1)}}, "no signature matches"),
        ({"headers": {"webhook-signature": "v2,abc"}}, "no signature matches"),
        ({"headers": {"webhook-signature": ""}}, "missing"),
        ({"headers": {"webhook-timestamp": "soon"}}, "not an integer"),
    ],
)
def test_the_receiver_rejects_what_duetime_did_not_send(
    change: dict[str, object], reason: str
) -> None:
    secret = "whsec_" + base64.b64encode(b"k" * 32).decode()
    headers = webhook_headers([secret], "01JDUE-1", NOW_MS // 1000, b'{"amount":10}')
    headers |= change.get("headers", {})  # type: ignore[arg-type]

    with pytest.raises(verifier.WebhookVerificationError, match=reason):
        verifier.verify(
            change.get("secret", secret),
            headers,
            change.get("body", b'{"amount":10}'),
            now=change.get("now", NOW_MS / 1000),
        )


# --- secrets and rotation (pure) ------------------------------------------------------------


def test_a_previous_secret_signs_until_its_grace_period_ends() -> None:
    secrets = TenantSecrets("whsec_new", "whsec_old", NOW_MS, NOW_MS + HOUR_MS)

    assert secrets.signing(NOW_MS) == ("whsec_new", "whsec_old")
    assert secrets.signing(NOW_MS + HOUR_MS - 1) == ("whsec_new", "whsec_old")
    assert secrets.signing(NOW_MS + HOUR_MS) == ("whsec_new",)
    assert "whsec" not in repr(secrets)  # a log line of the object shows no secret


def test_a_rotation_keeps_one_previous_secret_for_the_grace_period() -> None:
    first = SecretRecord("acme", b"one")
    second = rotated(first, b"two", NOW_MS, 3600)
    third = rotated(second, b"three", NOW_MS + 60_000, 3600)

    assert (second.current, second.previous, second.version) == (b"two", b"one", 2)
    assert second.previous_expires_ms == NOW_MS + HOUR_MS
    # Two rotations in a row: the first secret is dropped, at most two are valid.
    assert (third.current, third.previous, third.version) == (b"three", b"two", 3)
    assert (third.rotated_ms, third.previous_expires_ms) == (
        NOW_MS + 60_000,
        NOW_MS + 60_000 + HOUR_MS,
    )


# --- the service on the in-memory twins -----------------------------------------------------


def test_given_a_new_tenant_then_its_secret_is_made_on_first_read_and_kept(
    secrets: Secrets,
) -> None:
    api, worker = secrets.service(), secrets.service()

    created = api.get("acme")

    assert created.secret.startswith(SECRET_PREFIX)
    assert len(key_from_secret(created.secret)) == 32
    assert (created.previous_secret, created.rotated_ms, created.previous_expires_ms) == (
        None,
        None,
        None,
    )
    assert api.get("acme").secret == created.secret
    assert worker.signing_secrets("acme") == (created.secret,)
    assert api.get("globex").secret != created.secret


def test_given_a_first_delivery_then_the_worker_makes_the_secret_the_api_shows(
    secrets: Secrets,
) -> None:
    worker, api = secrets.service(), secrets.service()

    (signing,) = worker.signing_secrets("acme")

    assert api.get("acme").secret == signing


def test_given_a_rotation_then_both_secrets_sign_for_the_grace_period_only(
    secrets: Secrets,
) -> None:
    api = secrets.service()
    old = api.get("acme").secret

    after = api.rotate("acme")

    assert after.secret not in (old, None)
    assert after.previous_secret == old
    assert after.rotated_ms == NOW_MS
    assert after.previous_expires_ms == NOW_MS + DEFAULT_GRACE_SECONDS * 1000
    assert api.signing_secrets("acme") == (after.secret, old)
    secrets.clocks.advance(DEFAULT_GRACE_SECONDS)
    assert api.signing_secrets("acme") == (after.secret,)
    later = api.get("acme")
    assert (later.secret, later.previous_secret, later.rotated_ms) == (after.secret, None, NOW_MS)


def test_given_a_rotation_elsewhere_then_a_worker_signs_with_the_new_secret_within_15_minutes(
    secrets: Secrets,
) -> None:
    # 15 minutes, not one: each worker environment decrypted each tenant's secret every
    # minute, ~$0.31 a million runs at 600 environments and 100 tenants (the cost audit); the
    # 24-hour grace covers the wait.
    api, worker = secrets.service(), secrets.service()
    old = worker.signing_secrets("acme")[0]

    new = api.rotate("acme").secret

    assert worker.signing_secrets("acme") == (old,)  # cached: the old secret still signs
    secrets.clocks.advance(899)
    assert worker.signing_secrets("acme") == (old,)
    secrets.clocks.advance(1)
    assert worker.signing_secrets("acme") == (new, old)


def test_given_concurrent_rotations_then_the_loser_gets_a_conflict_and_nothing_is_lost(
    secrets: Secrets,
) -> None:
    api = secrets.service()
    first = api.get("acme")
    stale = secrets.store.get("acme")
    assert stale is not None
    api.rotate("acme")  # someone else rotates between the loser's read and write

    class StaleStore(MemorySecretStore):
        def get(self, tenant: str) -> SecretRecord | None:
            return stale

        def put(self, record: SecretRecord) -> None:
            secrets.store.put(record)

    loser = WebhookSecrets(StaleStore(), secrets.cipher, clock=lambda: NOW_MS)

    from duetime.services.webhook_secrets import RotationConflict

    with pytest.raises(RotationConflict):
        loser.rotate("acme")
    assert api.get("acme").previous_secret == first.secret


def test_a_ciphertext_opens_only_for_its_own_tenant() -> None:
    cipher = MemoryCipher()
    key, ciphertext = cipher.generate("acme")

    assert cipher.decrypt("acme", ciphertext) == key
    assert key not in ciphertext
    with pytest.raises(SecretsUnavailable):
        cipher.decrypt("globex", ciphertext)


def test_without_a_key_secrets_are_unavailable_and_say_why() -> None:
    service = WebhookSecrets(MemorySecretStore(), UnconfiguredCipher())

    with pytest.raises(SecretsUnavailable, match="DUETIME_SECRETS_KEY_ARN"):
        service.signing_secrets("acme")


class DeniedKms:
    """KMS answering AccessDenied, its message as AWS words it: the operator's account, role
    and key."""

    DENIED = (
        "User: arn:aws:sts::123456789012:assumed-role/duetime-Worker-1A2B/duetime-worker is "
        "not authorized to perform: kms:GenerateDataKey on resource: "
        "arn:aws:kms:eu-west-1:123456789012:key/0a1b2c3d"
    )

    def _denied(self, operation: str) -> ClientError:
        error = {"Error": {"Code": "AccessDeniedException", "Message": self.DENIED}}
        return ClientError(error, operation)  # type: ignore[arg-type]

    def generate_data_key(self, **_: object) -> object:
        raise self._denied("GenerateDataKey")

    def decrypt(self, **_: object) -> object:
        raise self._denied("Decrypt")


def test_when_aws_refuses_a_secret_call_then_the_tenant_reads_its_code_not_its_message() -> None:
    # Found by an outside audit: AWS's message, which names the operator's account, role and
    # key, went into the run's error (the tenant's to read). A refusal needs a person: it does
    # not pass (a run's attempt fails with it, where a throttle hands the run back).
    service = WebhookSecrets(MemorySecretStore(), KmsCipher("key", DeniedKms))

    with pytest.raises(SecretsUnavailable) as caught:
        service.signing_secrets("acme")

    assert str(caught.value) == "cannot make a webhook secret: AccessDeniedException"
    assert not caught.value.passing


class FailingKms:
    """KMS failing every call with `error`."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def generate_data_key(self, **_: object) -> object:
        raise self.error

    def decrypt(self, **_: object) -> object:
        raise self.error


@pytest.mark.parametrize(
    ("error", "passing"),
    [
        (ClientError({"Error": {"Code": "ThrottlingException"}}, "Decrypt"), True),
        (
            ClientError(
                {
                    "Error": {"Code": "KMSInternalException"},
                    "ResponseMetadata": {"HTTPStatusCode": 500},
                },
                "Decrypt",
            ),
            True,
        ),
        (EndpointConnectionError(endpoint_url="https://kms.eu-west-1.amazonaws.com"), True),
        (ClientError({"Error": {"Code": "DisabledException"}}, "Decrypt"), False),
    ],
)
def test_a_kms_failure_passes_only_when_time_may_mend_it(error: Exception, passing: bool) -> None:
    """A passing one hands the run back without spending an attempt (services.execute)."""
    service = WebhookSecrets(MemorySecretStore(), KmsCipher("key", lambda: FailingKms(error)))

    with pytest.raises(SecretsUnavailable) as caught:
        service.signing_secrets("acme")

    assert caught.value.passing is passing
    assert str(caught.value).startswith("cannot make a webhook secret: ")


def test_a_passing_secrets_fault_goes_through_the_http_delivery_untouched() -> None:
    """Not a TargetError (an attempt of the target's); one that needs a person is."""

    class Unavailable:
        def __init__(self, passing: bool) -> None:
            self.passing = passing

        def signing_secrets(self, tenant: str) -> tuple[str, ...]:
            raise SecretsUnavailable("cannot read the webhook secret: x", passing=self.passing)

    target = HttpTarget(url="http://127.0.0.1:9/hook")
    invocation = Invocation(
        "acme", "j", "r", scheduled_ms=0, attempt=1, payload=None, timeout_seconds=5
    )
    passing = HttpDelivery(allow_private=True, webhook_secrets=Unavailable(True))
    with pytest.raises(SecretsUnavailable):
        passing.deliver(target, invocation)
    stuck = HttpDelivery(allow_private=True, webhook_secrets=Unavailable(False))
    with pytest.raises(TargetError, match=r"^not sent: cannot read the webhook secret: x$"):
        stuck.deliver(target, invocation)


# --- a real delivery ------------------------------------------------------------------------


@dataclass
class Received:
    method: str
    headers: dict[str, str]
    body: bytes


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[Received]]]:
    received: list[Received] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            received.append(Received(self.command, dict(self.headers.items()), body))
            self.send_response(204)
            self.send_header("Connection", "close")
            self.end_headers()

        do_GET = do_POST = do_DELETE = _handle

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", received
    server.shutdown()
    server.server_close()


def invocation(payload: object = None) -> Invocation:
    return Invocation(
        tenant="acme",
        job_id="01JDUE",
        run_id="01JDUE-1795237200000",
        scheduled_ms=NOW_MS,
        attempt=2,
        payload=payload,
        timeout_seconds=5,
    )


@pytest.mark.parametrize(
    ("method", "payload"), [("POST", {"café": "☕", "n": 1}), ("GET", {"x": 1})]
)
def test_a_delivery_is_signed_and_the_receiver_example_verifies_it(
    secrets: Secrets, receiver: tuple[str, list[Received]], method: str, payload: object
) -> None:
    url, received = receiver
    service = secrets.service()
    sent_at = 1_795_237_201.75
    delivery = HttpDelivery(allow_private=True, webhook_secrets=service, wall_clock=lambda: sent_at)

    delivery.deliver(HttpTarget(url=url + "/hook", method=method), invocation(payload))

    [request] = received
    headers = {k.lower(): v for k, v in request.headers.items()}
    assert headers["webhook-id"] == headers["duetime-run-id"] == "01JDUE-1795237200000"
    assert headers["webhook-timestamp"] == "1795237201"
    if method == "GET":
        assert request.body == b""
    else:
        assert json.loads(request.body) == payload
    secret = service.get("acme").secret
    verifier.verify(secret, request.headers, request.body, now=sent_at)
    assert len(headers["webhook-signature"].split(" ")) == 1


def test_during_a_rotation_a_delivery_verifies_with_either_secret(
    secrets: Secrets, receiver: tuple[str, list[Received]]
) -> None:
    url, received = receiver
    service = secrets.service()
    old = service.get("acme").secret
    new = service.rotate("acme").secret
    delivery = HttpDelivery(
        allow_private=True, webhook_secrets=service, wall_clock=lambda: NOW_MS / 1000
    )

    delivery.deliver(HttpTarget(url=url), invocation({"n": 1}))

    [request] = received
    assert len(request.headers["webhook-signature"].split(" ")) == 2
    for secret in (old, new):
        verifier.verify(secret, request.headers, request.body, now=NOW_MS / 1000)


def test_without_webhook_secrets_a_delivery_is_unsigned(
    receiver: tuple[str, list[Received]],
) -> None:
    url, received = receiver

    HttpDelivery(allow_private=True).deliver(HttpTarget(url=url), invocation())

    assert not any(name.lower().startswith("webhook-") for name in received[0].headers)


def test_when_the_secret_cannot_be_read_the_attempt_fails_retryably_and_sends_nothing(
    receiver: tuple[str, list[Received]],
) -> None:
    url, received = receiver
    service = WebhookSecrets(MemorySecretStore(), UnconfiguredCipher())

    with pytest.raises(TargetError) as caught:
        HttpDelivery(allow_private=True, webhook_secrets=service).deliver(
            HttpTarget(url=url), invocation()
        )

    assert caught.value.retryable
    assert "DUETIME_SECRETS_KEY_ARN" in caught.value.message
    assert received == []


@pytest.mark.parametrize(
    ("length", "status"),
    [("-1", 400), ("abc", 400), ("1e3", 400), (str(verifier.MAX_BODY_BYTES + 1), 400), ("2", 401)],
)
def test_the_receiver_example_answers_a_bad_content_length_with_a_400(
    length: str, status: int
) -> None:
    # Found by an outside audit: -1 hung the handler (a read to the end), `abc` dropped the
    # connection with a traceback. (2: a length it reads, then an unsigned request, a 401.)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), verifier.handler("whsec_AA==", 300))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=5) as s:
            s.sendall(
                f"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n\r\n{{}}".encode()
            )
            answer = s.recv(4096).decode()
    finally:
        server.shutdown()
        server.server_close()
    assert answer.startswith(f"HTTP/1.0 {status} ") or answer.startswith(f"HTTP/1.1 {status} ")


@pytest.mark.parametrize("tolerance", [math.nan, math.inf, -1.0])
def test_the_receiver_example_refuses_a_tolerance_that_would_take_any_timestamp(
    tolerance: float,
) -> None:
    # NaN and infinity passed every timestamp: a signed request of 2001 was accepted (found
    # by an outside audit); targets.md tells receivers to copy `verify`.
    secret = "whsec_" + base64.b64encode(b"k" * 32).decode()
    with pytest.raises(ValueError, match="tolerance_seconds"):
        verifier.verify(secret, SIGNED_IN_2001, b"{}", tolerance, now=NOW_MS / 1000)


SIGNED_IN_2001 = {
    "webhook-id": "m",
    "webhook-timestamp": "1000000000",
    "webhook-signature": "v1,x",
}


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--tolerance-seconds", "nan"], "--tolerance-seconds must be a finite number"),
        (["--secret", "whsec_!!!"], "--secret: the secret is not whsec_<base64>"),
        (["--port", "70000"], "--port must be from 0 to 65535"),
    ],
)
def test_the_receiver_example_refuses_bad_flags_in_a_line(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = ["--secret", "whsec_" + base64.b64encode(b"k" * 32).decode()]
    with pytest.raises(SystemExit) as stopped:
        verifier.main([*secret, *argv])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert said in err
    assert "Traceback" not in err
