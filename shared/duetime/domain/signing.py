"""Webhook signatures (Standard Webhooks), and the tenants' secrets that make them. Pure: no
clock, no I/O.

Every HTTP delivery carries `webhook-id`, `webhook-timestamp` and `webhook-signature`: one
`v1,<base64 HMAC-SHA256>` of `"{id}.{timestamp}.{body}"` per secret of the tenant that is
currently valid. A secret is `whsec_<base64 of 32 random bytes>`; the HMAC key is the bytes
after the prefix. Rotating makes a new secret and keeps the old one valid (it signs too) for
a grace period, so receivers can switch whenever they like within it.

Here: `sign` and `webhook_headers`; `TenantSecrets` (what is valid at an instant); and
`SecretRecord` with `rotated` (what a secret store holds: ciphertext only, and the next record
after a rotation). The service that makes, stores and caches secrets is
duetime.services.webhook_secrets.

Secret material never goes into a log line, an exception message or a repr.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

SECRET_PREFIX = "whsec_"  # noqa: S105 (the format's prefix, not a secret)
SECRET_BYTES = 32  # Standard Webhooks: 24 to 64 bytes
SIGNATURE_VERSION = "v1"

HEADER_ID = "webhook-id"
HEADER_TIMESTAMP = "webhook-timestamp"
HEADER_SIGNATURE = "webhook-signature"


# --- signing --------------------------------------------------------------------------------


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
