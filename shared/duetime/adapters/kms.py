"""The KMS side of webhook secrets (the SecretCipher port): keys made and opened by KMS, and the
cipher of a deployment that has no key configured."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from duetime.adapters.aws_errors import is_transient
from duetime.domain.signing import SECRET_BYTES
from duetime.observability import logger
from duetime.ports import SecretsUnavailable


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
        with _unavailable("cannot make a webhook secret"):
            reply = self._kms().generate_data_key(
                KeyId=self.key_id, NumberOfBytes=SECRET_BYTES, EncryptionContext={"tenant": tenant}
            )
        return bytes(reply["Plaintext"]), bytes(reply["CiphertextBlob"])

    def decrypt(self, tenant: str, ciphertext: bytes) -> bytes:
        with _unavailable("cannot decrypt the webhook secret"):
            reply = self._kms().decrypt(
                KeyId=self.key_id, CiphertextBlob=ciphertext, EncryptionContext={"tenant": tenant}
            )
        return bytes(reply["Plaintext"])


@contextmanager
def _unavailable(what: str) -> Iterator[None]:
    """A KMS call's failure as SecretsUnavailable, `passing` if time may mend it (a throttle, a
    5xx, no answer: until 2026-12-01 a run spent its attempts on it; an outside fault audit).
    AWS's error code only: a tenant reads it in a run's error, and AWS's message can name the
    operator's account, roles and keys (the operator's log has it; it never holds key material).
    """
    try:
        yield
    except (ClientError, BotoCoreError) as exc:
        error = exc.response.get("Error", {}) if isinstance(exc, ClientError) else {}
        code = str(error.get("Code", type(exc).__name__))
        logger.warning(
            "a webhook secret call to KMS failed",
            extra={"code": code, "aws_message": error.get("Message", str(exc))},
        )
        raise SecretsUnavailable(f"{what}: {code}", passing=is_transient(exc)) from exc


class UnconfiguredCipher:
    """No key configured (DUETIME_SECRETS_KEY_ARN): secrets can be neither made nor read."""

    def generate(self, tenant: str) -> tuple[bytes, bytes]:
        raise SecretsUnavailable("no key for webhook secrets: DUETIME_SECRETS_KEY_ARN is not set")

    def decrypt(self, tenant: str, ciphertext: bytes) -> bytes:
        raise SecretsUnavailable("no key for webhook secrets: DUETIME_SECRETS_KEY_ARN is not set")
