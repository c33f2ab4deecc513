"""The local stack's JWT signing key and dev tokens.

On AWS an identity provider issues the tokens and API Gateway's JWT authorizer checks them
(issuer and audience pinned). Locally one HS256 key, created on first use under the state
directory (`.duetime/` in the current directory) with mode 0600, plays the identity provider
(`duetime token`) and the authorizer (the gateway) at once.
"""

from __future__ import annotations

import os
import re
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jwt

from duetime.clock import wall_ms

ISSUER = "duetime-local"
AUDIENCE = "duetime"
ALGORITHM = "HS256"
DEFAULT_STATE_DIR = Path(".duetime")
KEY_FILE_NAME = "jwt-hs256.key"
# The key that signs run messages (duetime.domain.messages.MessageAuth): `duetime local` and the
# commands that send runs to its queues (`duetime dlq redrive`, `duetime timers stuck --retry`)
# share it through this file.
MESSAGE_KEY_FILE_NAME = "run-messages.key"
MAX_TTL_SECONDS = 366 * 86_400
# The tenant becomes the JWT `sub` and the SQS MessageGroupId of its runs (≤ 128 characters).
_TENANT = re.compile(r"[A-Za-z0-9!#$%&'()*+,\-./:;<=>?@\[\]^_`{|}~]{1,128}")
_MIN_KEY_BYTES = 32  # RFC 7518: an HS256 key is at least as long as the hash


class KeyFileError(RuntimeError):
    """The key file, or the state directory holding it, cannot be created or read (the CLI
    shows the message)."""


class InvalidToken(Exception):
    """A bearer token that the local authorizer refuses; the message says why."""


def ensure_state_dir(state_dir: Path) -> None:
    """`state_dir` made (mode 0700: it holds the keys) if it is not there; a path that cannot
    be one is a KeyFileError saying so, in words (the CLI shows it)."""
    try:
        state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    except FileExistsError:  # a file, or a link to one
        raise KeyFileError(f"the state directory {state_dir} is not a directory") from None
    except OSError as exc:
        raise KeyFileError(
            f"cannot create the state directory {state_dir}: {exc.strerror}"
        ) from None


def key_path(state_dir: Path = DEFAULT_STATE_DIR, name: str = KEY_FILE_NAME) -> Path:
    return state_dir / name


def load_or_create_key(
    state_dir: Path = DEFAULT_STATE_DIR, name: str = KEY_FILE_NAME
) -> tuple[bytes, bool]:
    """The key `name` under `state_dir`, created (mode 0600) if there is none yet.
    Returns (key, created)."""
    path = key_path(state_dir, name)
    key = secrets.token_urlsafe(48).encode()
    ensure_state_dir(state_dir)
    try:
        # Written whole under a name of its own, then linked to its name, which fails if the
        # name exists: two processes starting together agree on one key (the loser reads it),
        # and none ever reads a key half written (until 2026-11-30 the loser could read the
        # file between the winner's create and write: "shorter than 32 bytes").
        draft = path.with_name(f".{name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(key + b"\n")
            out.flush()
            os.fsync(out.fileno())
        try:
            os.link(draft, path)
        finally:
            draft.unlink()
    except FileExistsError:
        return _read_key(path), False
    except OSError as exc:
        raise KeyFileError(f"cannot create the signing key {path}: {exc.strerror}") from None
    return key, True


def message_key(state_dir: Path = DEFAULT_STATE_DIR) -> str:
    """The local stack's run-message key (created on first use)."""
    key, _ = load_or_create_key(state_dir, MESSAGE_KEY_FILE_NAME)
    return key.decode()


def _read_key(path: Path) -> bytes:
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
        key = path.read_bytes().strip()
    except OSError as exc:
        raise KeyFileError(f"cannot read the signing key {path}: {exc.strerror}") from None
    if mode & 0o077:  # whoever reads it signs tokens for any tenant (refused as ssh does)
        raise KeyFileError(
            f"the signing key {path} is open to other users (mode {mode:04o}): chmod 600 "
            "it, or delete it and a new one is created"
        )
    if len(key) < _MIN_KEY_BYTES:
        raise KeyFileError(
            f"the signing key {path} is shorter than {_MIN_KEY_BYTES} bytes: "
            "delete it and a new one is created"
        )
    return key


def issue_token(
    tenant: str,
    ttl_seconds: int,
    key: bytes,
    *,
    now: int | None = None,
    scopes: tuple[str, ...] = (),
) -> str:
    """A dev token for `tenant` (its `sub`), valid for `ttl_seconds`."""
    if not _TENANT.fullmatch(tenant) or (tenant.startswith("[") and tenant.endswith("]")):
        raise ValueError(
            "the tenant must be 1 to 128 visible ASCII characters, no spaces, not in brackets "
            "(the API reads `[...]` as a list claim)"
        )
    if not 1 <= ttl_seconds <= MAX_TTL_SECONDS:
        raise ValueError(f"the token lifetime must be 1 to {MAX_TTL_SECONDS} seconds")
    issued = wall_ms() // 1000 if now is None else now
    claims: dict[str, Any] = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": tenant,
        "iat": issued,
        "exp": issued + ttl_seconds,
    }
    if scopes:
        claims["scope"] = " ".join(scopes)
    return jwt.encode(claims, key, algorithm=ALGORITHM)


def bearer_token(authorization: str | None) -> str:
    """The token of an `Authorization: Bearer <token>` header."""
    if not authorization:
        raise InvalidToken("missing bearer token (Authorization: Bearer <token>)")
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise InvalidToken("the Authorization header must be 'Bearer <token>'")
    return token.strip()


def verify_token(token: str, key: bytes) -> dict[str, Any]:
    """The token's claims, if it is signed with `key`, issued by ISSUER for AUDIENCE and not
    expired (as API Gateway's JWT authorizer checks); otherwise InvalidToken."""
    try:
        claims: dict[str, Any] = jwt.decode(
            token,
            key,
            algorithms=[ALGORITHM],
            audience=AUDIENCE,
            issuer=ISSUER,
            options={"require": ["exp", "iss", "aud"]},
        )
    except jwt.ExpiredSignatureError:
        raise InvalidToken("the token has expired") from None
    except jwt.InvalidAudienceError:
        raise InvalidToken(f"the token's audience is not {AUDIENCE!r}") from None
    except jwt.InvalidIssuerError:
        raise InvalidToken(f"the token's issuer is not {ISSUER!r}") from None
    except jwt.InvalidSignatureError:
        raise InvalidToken(
            "the token's signature does not match the local key: it was made with another key;"
            " run `duetime token` where `duetime local` runs, or give both the same --state-dir"
        ) from None
    except jwt.MissingRequiredClaimError as exc:
        raise InvalidToken(f"the token has no {exc.claim!r} claim") from None
    except jwt.InvalidTokenError as exc:
        raise InvalidToken(f"invalid token: {exc}") from None
    for name in ("exp", "nbf", "iat"):  # NumericDates (RFC 7519): PyJWT takes "123" too
        value = claims.get(name)
        if name in claims and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise InvalidToken(f"the token's {name!r} claim must be a number")
    return claims


def scopes_of(claims: Mapping[str, Any]) -> list[str] | None:
    """Scopes as API Gateway reports them: from `scope` (space-separated) or `scp`."""
    raw = claims.get("scope", claims.get("scp"))
    if isinstance(raw, str):
        return raw.split() or None
    if isinstance(raw, list):
        return [str(s) for s in raw] or None
    return None
