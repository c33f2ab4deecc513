"""The in-memory SecretStore and SecretCipher (duetime.ports): webhook secrets without
DynamoDB or KMS."""

from __future__ import annotations

import secrets as random_source
import threading

from duetime.domain.signing import SECRET_BYTES, SecretRecord
from duetime.ports import ConditionFailed, SecretsUnavailable


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
