"""Tenants' webhook secrets: made on first use, rotated on request, cached for signing.

The secrets and their signatures are duetime.domain.signing; the records live behind the
`SecretStore` port (DynamoDB: duetime.adapters.dynamodb.secrets) and hold only ciphertext made
and opened by the `SecretCipher` port (KMS: duetime.adapters.kms). The API and the workers
use `WebhookSecrets`; it caches decrypted secrets for signing for `cache_seconds`.

Secret material never goes into a log line, an exception message or a repr.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from duetime.clock import wall_ms
from duetime.domain.errors import DomainError
from duetime.domain.signing import SecretRecord, TenantSecrets, rotated, secret_from_key
from duetime.ports import (
    ConditionFailed,
    SecretCipher,
    SecretStore,
    SecretsUnavailable,
    StoreError,
)

DEFAULT_GRACE_SECONDS = 24 * 3600  # the old secret keeps signing this long after a rotation
# How long a worker signs with secrets it decrypted: a rotation reaches its signatures this
# late (the 24-hour grace covers it). 15 minutes, not one (until 2026-11-30): each worker
# environment decrypted each tenant's secret every minute, ~$0.31 a million runs at 600
# environments and 100 webhook tenants (scripts/scale_model.py; an outside cost audit).
DEFAULT_CACHE_SECONDS = 900.0


class RotationConflict(DomainError):
    """Two rotations of one tenant's secret raced; the other one won."""

    code = "conflict"


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
        clock: Callable[[], int] = wall_ms,
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
        _, ciphertext = self._cipher.generate(tenant)
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
        _, ciphertext = self._cipher.generate(tenant)
        record = SecretRecord(tenant, ciphertext)
        try:
            self._store.put(record)
        except ConditionFailed:
            # Another process created it first: everyone uses that one.
            record = self._read(tenant)
            if record is None:
                raise SecretsUnavailable("the webhook secret vanished after it was made") from None
        except StoreError as exc:  # a write without an answer: the next read finds it, or not
            raise SecretsUnavailable(
                f"cannot write the webhook secret: {exc}", passing=exc.transient
            ) from exc
        return record

    def _read(self, tenant: str) -> SecretRecord | None:
        try:
            return self._store.get(tenant)
        except StoreError as exc:
            raise SecretsUnavailable(
                f"cannot read the webhook secret: {exc}", passing=exc.transient
            ) from exc

    def _decrypted(self, record: SecretRecord) -> TenantSecrets:
        def open_(ciphertext: bytes) -> str:
            return secret_from_key(self._cipher.decrypt(record.tenant, ciphertext))

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
