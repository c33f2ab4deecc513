"""Webhook signatures (Standard Webhooks) and the per-tenant secrets that make them.

Every HTTP delivery carries `webhook-id`, `webhook-timestamp` and `webhook-signature`: one
`v1,<base64 HMAC-SHA256>` of `"{id}.{timestamp}.{body}"` per secret of the tenant that is
currently valid. A secret is `whsec_<base64 of 32 random bytes>`; the HMAC key is the bytes
after the prefix. Rotating makes a new secret and keeps the old one valid (it signs too) for
a grace period, so receivers can switch whenever they like within it.

Layers:
- pure: `sign`, `webhook_headers`, `TenantSecrets` (what is valid at an instant) and
  `rotated` (the next stored record); no clock, no I/O;
- `SecretStore` (where the records live: DynamoDB, in the jobs table under the sort key
  `!whsec`, and an in-memory twin) and `SecretCipher` (KMS, and an in-memory twin): the
  stored records hold only ciphertext;
- `WebhookSecrets`: the service the API and the workers use; it creates a tenant's secret on
  first use and caches decrypted secrets for signing for `cache_seconds`.

Secret material never goes into a log line, an exception message or a repr.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets as random_source
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from botocore.exceptions import ClientError

from duetime.domain.errors import DomainError
from duetime.ports import ConditionFailed, StoreError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

SECRET_PREFIX = "whsec_"  # noqa: S105 (the format's prefix, not a secret)
SECRET_BYTES = 32  # Standard Webhooks: 24 to 64 bytes
SIGNATURE_VERSION = "v1"
DEFAULT_GRACE_SECONDS = 24 * 3600  # the old secret keeps signing this long after a rotation
DEFAULT_CACHE_SECONDS = 60.0  # how long a worker signs with secrets it decrypted
# The jobs-table sort key of a tenant's secret record. It sorts before every job id (ULIDs
# start with a digit), so job listings never meet it, and no job id can name it.
RECORD_ID = "!whsec"

HEADER_ID = "webhook-id"
HEADER_TIMESTAMP = "webhook-timestamp"
HEADER_SIGNATURE = "webhook-signature"


class SecretsUnavailable(Exception):
    """The secrets cannot be read or made (no key configured, KMS or the store failed)."""


class RotationConflict(DomainError):
    """Two rotations of one tenant's secret raced; the other one won."""

    code = "conflict"


# --- signing (pure) -------------------------------------------------------------------------


def secret_from_key(key: bytes) -> str:
    return SECRET_PREFIX + base64.b64encode(key).decode("ascii")


def key_from_secret(secret: str) -> bytes:
    """The HMAC key: the base64 after `whsec_` (a secret without the prefix is accepted)."""
    encoded = secret.removeprefix(SECRET_PREFIX)
    try:
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("not a webhook secret (whsec_<base64>)") from None


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """One signature, `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`."""
    content = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(key_from_secret(secret), content, hashlib.sha256).digest()
    return f"{SIGNATURE_VERSION},{base64.b64encode(digest).decode('ascii')}"


def webhook_headers(
    secrets: Sequence[str], msg_id: str, timestamp: int, body: bytes
) -> dict[str, str]:
    """The three Standard Webhooks headers, signed with every secret given (in order)."""
    return {
        HEADER_ID: msg_id,
        HEADER_TIMESTAMP: str(timestamp),
        HEADER_SIGNATURE: " ".join(sign(s, msg_id, timestamp, body) for s in secrets),
    }


@dataclass(frozen=True)
class TenantSecrets:
    """A tenant's secrets in plain text. `previous_secret` is valid until
    `previous_expires_ms` (both None when there has been no rotation)."""

    secret: str = field(repr=False)
    previous_secret: str | None = field(default=None, repr=False)
    rotated_ms: int | None = None
    previous_expires_ms: int | None = None

    def previous_valid(self, now_ms: int) -> bool:
        return (
            self.previous_secret is not None
            and self.previous_expires_ms is not None
            and now_ms < self.previous_expires_ms
        )

    def signing(self, now_ms: int) -> tuple[str, ...]:
        """The secrets that sign at `now_ms`: the current one, then the previous one while
        its grace period lasts."""
        if self.previous_valid(now_ms):
            assert self.previous_secret is not None
            return (self.secret, self.previous_secret)
        return (self.secret,)


# --- stored records (ciphertext only) -------------------------------------------------------


@dataclass(frozen=True)
class SecretRecord:
    """What the store holds for one tenant. `version` grows by one with every write, so a
    write can require that nobody else wrote since it read (version 1: the first write)."""

    tenant: str
    current: bytes = field(repr=False)  # ciphertext of the current secret's key
    previous: bytes | None = field(default=None, repr=False)
    rotated_ms: int | None = None
    previous_expires_ms: int | None = None
    version: int = 1


def rotated(record: SecretRecord, new: bytes, now_ms: int, grace_seconds: int) -> SecretRecord:
    """The record after a rotation at `now_ms`: `new` is current, the current one becomes the
    previous one until the grace period ends. A previous secret still in its own grace period
    is dropped: at most two secrets are ever valid."""
    return replace(
        record,
        current=new,
        previous=record.current,
        rotated_ms=now_ms,
        previous_expires_ms=now_ms + grace_seconds * 1000,
        version=record.version + 1,
    )


class SecretStore(Protocol):
    def get(self, tenant: str) -> SecretRecord | None: ...

    def put(self, record: SecretRecord) -> None:
        """Write `record` if the stored one has version `record.version - 1` (none at all
        for version 1); ConditionFailed otherwise."""
        ...


class SecretCipher(Protocol):
    """Makes and opens secret keys. `generate` returns a fresh random key and its
    ciphertext; the tenant is bound to the ciphertext (KMS encryption context), so one
    tenant's ciphertext does not decrypt as another's."""

    def generate(self, tenant: str) -> tuple[bytes, bytes]: ...

    def decrypt(self, tenant: str, ciphertext: bytes) -> bytes: ...


class SigningSecrets(Protocol):
    """What an HTTP delivery needs: the secrets that sign a tenant's requests now."""

    def signing_secrets(self, tenant: str) -> tuple[str, ...]: ...


# --- the service ----------------------------------------------------------------------------


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


class WebhookSecrets:
    """Reads, creates and rotates tenants' secrets; `signing_secrets` is what workers call.

    `get` and `rotate` always read the store (the API answers what is stored);
    `signing_secrets` reuses what it decrypted for `cache_seconds` (monotonic time), which
    saves a store read and one or two KMS Decrypt calls per delivery. A rotation made by
    another process therefore reaches a worker's signatures within `cache_seconds`; the old
    secret keeps signing meanwhile, so receivers with either secret still verify.
    """

    def __init__(
        self,
        store: SecretStore,
        cipher: SecretCipher,
        *,
        grace_seconds: int = DEFAULT_GRACE_SECONDS,
        cache_seconds: float = DEFAULT_CACHE_SECONDS,
        clock: Callable[[], int] = _wall_ms,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._cipher = cipher
        self.grace_seconds = grace_seconds
        self._cache_seconds = cache_seconds
        self._clock = clock
        self._monotonic = monotonic
        self._cache: dict[str, tuple[float, TenantSecrets]] = {}
        self._lock = threading.Lock()

    def get(self, tenant: str) -> TenantSecrets:
        """The tenant's secrets, created on first use."""
        found = self._decrypted(self._read_or_create(tenant))
        self._remember(tenant, found)
        return found

    def rotate(self, tenant: str) -> TenantSecrets:
        """A new current secret; the old one signs too until the grace period ends."""
        record = self._read_or_create(tenant)
        _, ciphertext = self._generate(tenant)
        new = rotated(record, ciphertext, self._clock(), self.grace_seconds)
        try:
            self._store.put(new)
        except ConditionFailed:
            raise RotationConflict(
                "the webhook secret was changed by another request at the same time; "
                "read it again (GET /webhook-secret) before rotating"
            ) from None
        found = self._decrypted(new)
        self._remember(tenant, found)
        return found

    def signing_secrets(self, tenant: str) -> tuple[str, ...]:
        now = self._monotonic()
        with self._lock:
            cached = self._cache.get(tenant)
        if cached is None or now - cached[0] >= self._cache_seconds:
            found = self._decrypted(self._read_or_create(tenant))
            self._remember(tenant, found)
        else:
            found = cached[1]
        # Validity is judged now, not when cached: a previous secret stops signing on time.
        return found.signing(self._clock())

    def _remember(self, tenant: str, found: TenantSecrets) -> None:
        with self._lock:
            self._cache[tenant] = (self._monotonic(), found)

    def _read_or_create(self, tenant: str) -> SecretRecord:
        record = self._read(tenant)
        if record is not None:
            return record
        _, ciphertext = self._generate(tenant)
        record = SecretRecord(tenant, ciphertext)
        try:
            self._store.put(record)
        except ConditionFailed:
            # Another process created it first: everyone uses that one.
            record = self._read(tenant)
            if record is None:
                raise SecretsUnavailable("the webhook secret vanished after it was made") from None
        return record

    def _read(self, tenant: str) -> SecretRecord | None:
        try:
            return self._store.get(tenant)
        except StoreError as exc:
            raise SecretsUnavailable(f"cannot read the webhook secret: {exc}") from exc

    def _generate(self, tenant: str) -> tuple[bytes, bytes]:
        try:
            return self._cipher.generate(tenant)
        except SecretsUnavailable:
            raise
        except ClientError as exc:
            raise SecretsUnavailable(f"cannot make a webhook secret: {_aws_error(exc)}") from exc

    def _decrypted(self, record: SecretRecord) -> TenantSecrets:
        def open_(ciphertext: bytes) -> str:
            try:
                return secret_from_key(self._cipher.decrypt(record.tenant, ciphertext))
            except SecretsUnavailable:
                raise
            except ClientError as exc:
                raise SecretsUnavailable(
                    f"cannot decrypt the webhook secret: {_aws_error(exc)}"
                ) from exc

        previous = None
        now = self._clock()
        if record.previous is not None and (record.previous_expires_ms or 0) > now:
            previous = open_(record.previous)  # an expired one is not worth a KMS call
        return TenantSecrets(
            secret=open_(record.current),
            previous_secret=previous,
            rotated_ms=record.rotated_ms,
            previous_expires_ms=record.previous_expires_ms if previous is not None else None,
        )


def _aws_error(exc: ClientError) -> str:
    # The code and AWS's message only: neither ever holds key material.
    error = exc.response.get("Error", {})
    return f"{error.get('Code', 'error')}: {error.get('Message', '')}".rstrip(": ")


# --- KMS and DynamoDB -----------------------------------------------------------------------


class KmsClient(Protocol):
    """The two KMS calls used (boto3's KMS client has them)."""

    def generate_data_key(self, **kwargs: Any) -> Any: ...

    def decrypt(self, **kwargs: Any) -> Any: ...


class KmsCipher:
    """Secret keys made by KMS `GenerateDataKey` (32 random bytes and their ciphertext under
    the key) and opened with `Decrypt`, both with the encryption context {"tenant": tenant}.
    Making a secret therefore needs no `kms:Encrypt`: the plain key is never sent to KMS.

    `client` returns the KMS client, called on each use: the composition root passes
    `AwsClients.kms`, which builds it once, on first use, so a function that never signs
    never builds it."""

    def __init__(self, key_id: str, client: Callable[[], KmsClient]) -> None:
        self.key_id = key_id
        self._kms = client

    def generate(self, tenant: str) -> tuple[bytes, bytes]:
        reply = self._kms().generate_data_key(
            KeyId=self.key_id, NumberOfBytes=SECRET_BYTES, EncryptionContext={"tenant": tenant}
        )
        return bytes(reply["Plaintext"]), bytes(reply["CiphertextBlob"])

    def decrypt(self, tenant: str, ciphertext: bytes) -> bytes:
        reply = self._kms().decrypt(
            KeyId=self.key_id, CiphertextBlob=ciphertext, EncryptionContext={"tenant": tenant}
        )
        return bytes(reply["Plaintext"])


class UnconfiguredCipher:
    """No key configured (DUETIME_SECRETS_KEY_ARN): secrets can be neither made nor read."""

    def generate(self, tenant: str) -> tuple[bytes, bytes]:
        raise SecretsUnavailable("no key for webhook secrets: DUETIME_SECRETS_KEY_ARN is not set")

    def decrypt(self, tenant: str, ciphertext: bytes) -> bytes:
        raise SecretsUnavailable("no key for webhook secrets: DUETIME_SECRETS_KEY_ARN is not set")


class DynamoSecretStore:
    """Records in the jobs table: (tenant, `!whsec`), with binary ciphertexts. They carry no
    `expires_at`, so TTL never removes them."""

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client = client
        self._table = table

    def get(self, tenant: str) -> SecretRecord | None:
        try:
            item = self._client.get_item(
                TableName=self._table,
                Key={"tenant": {"S": tenant}, "id": {"S": RECORD_ID}},
                ConsistentRead=True,
            ).get("Item")
        except ClientError as exc:
            raise StoreError(_aws_error(exc)) from exc
        if item is None:
            return None
        values: dict[str, Any] = item
        return SecretRecord(
            tenant=tenant,
            current=bytes(values["current"]["B"]),
            previous=bytes(values["previous"]["B"]) if "previous" in values else None,
            rotated_ms=int(values["rotated_ms"]["N"]) if "rotated_ms" in values else None,
            previous_expires_ms=(
                int(values["previous_until_ms"]["N"]) if "previous_until_ms" in values else None
            ),
            version=int(values["version"]["N"]),
        )

    def put(self, record: SecretRecord) -> None:
        item: dict[str, Any] = {
            "tenant": {"S": record.tenant},
            "id": {"S": RECORD_ID},
            "current": {"B": record.current},
            "version": {"N": str(record.version)},
        }
        if record.previous is not None:
            item["previous"] = {"B": record.previous}
        if record.rotated_ms is not None:
            item["rotated_ms"] = {"N": str(record.rotated_ms)}
        if record.previous_expires_ms is not None:
            item["previous_until_ms"] = {"N": str(record.previous_expires_ms)}
        condition: dict[str, Any] = (
            {"ConditionExpression": "attribute_not_exists(id)"}
            if record.version == 1
            else {
                "ConditionExpression": "version = :v",
                "ExpressionAttributeValues": {":v": {"N": str(record.version - 1)}},
            }
        )
        try:
            self._client.put_item(TableName=self._table, Item=item, **condition)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                raise ConditionFailed(f"webhook secret of {record.tenant} changed") from exc
            raise StoreError(_aws_error(exc)) from exc


# --- in-memory twins (tests, and the readable reference) ------------------------------------


class MemorySecretStore:
    def __init__(self) -> None:
        self._records: dict[str, SecretRecord] = {}
        self._lock = threading.Lock()

    def get(self, tenant: str) -> SecretRecord | None:
        with self._lock:
            return self._records.get(tenant)

    def put(self, record: SecretRecord) -> None:
        with self._lock:
            stored = self._records.get(record.tenant)
            expected = None if record.version == 1 else record.version - 1
            if (stored.version if stored is not None else None) != expected:
                raise ConditionFailed(f"webhook secret of {record.tenant} changed")
            self._records[record.tenant] = record


class MemoryCipher:
    """KMS's contract without cryptography: a ciphertext is an opaque random handle that
    opens only for the tenant it was made for."""

    def __init__(self) -> None:
        self._keys: dict[bytes, tuple[str, bytes]] = {}
        self._lock = threading.Lock()

    def generate(self, tenant: str) -> tuple[bytes, bytes]:
        key = random_source.token_bytes(SECRET_BYTES)
        handle = random_source.token_bytes(16)
        with self._lock:
            self._keys[handle] = (tenant, key)
        return key, handle

    def decrypt(self, tenant: str, ciphertext: bytes) -> bytes:
        with self._lock:
            found = self._keys.get(ciphertext)
        if found is None or found[0] != tenant:
            raise SecretsUnavailable("the ciphertext does not open for this tenant")
        return found[1]
