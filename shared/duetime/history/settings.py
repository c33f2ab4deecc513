"""The history functions' settings: the archiver's and the compactor's environment (they
need only the bucket, and a few values of their own, not the engine's settings)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from duetime.settings import Env, whole_number


@dataclass(frozen=True)
class ArchiverSettings:
    """The archiver function's environment: it needs only the bucket and the failure queue."""

    bucket: str
    failure_queue_url: str

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ArchiverSettings:
        env = os.environ if environ is None else environ
        names = (Env.HISTORY_BUCKET, Env.ARCHIVE_FAILURE_QUEUE_URL)
        missing = [name for name in names if not env.get(name)]
        if missing:
            raise RuntimeError(f"environment variable(s) not set: {', '.join(missing)}")
        return cls(env[Env.HISTORY_BUCKET], env[Env.ARCHIVE_FAILURE_QUEUE_URL])


@dataclass(frozen=True)
class CompactorSettings:
    """The compactor function's environment: the bucket, and the hot window (optional)."""

    bucket: str
    run_ttl_seconds: int = 30 * 86_400

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> CompactorSettings:
        env = os.environ if environ is None else environ
        if not env.get(Env.HISTORY_BUCKET):
            raise RuntimeError(f"environment variable(s) not set: {Env.HISTORY_BUCKET}")
        raw = env.get(Env.RUN_TTL_SECONDS, str(cls.run_ttl_seconds))
        if not whole_number(raw) or int(raw) < 1:
            raise RuntimeError(f"{Env.RUN_TTL_SECONDS} must be a whole number of seconds: {raw!r}")
        return cls(env[Env.HISTORY_BUCKET], int(raw))
