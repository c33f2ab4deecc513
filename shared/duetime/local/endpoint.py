"""How to reach a local stack's moto server: where `duetime local` tells other commands
(`duetime history …`, `duetime dlq …`) its endpoint and bucket, <state dir>/local.json, written
at start and removed at stop; and the credentials every client of it uses.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from duetime.local.keys import DEFAULT_STATE_DIR, ensure_state_dir

if TYPE_CHECKING:
    import boto3

ENDPOINT_FILE = "local.json"
CREDENTIALS = "duetime-local"  # moto takes any
# The region moto gives a request that names none (no signature: moto reads a request's region
# from its signature's scope, else takes this one; its account comes from the access key, and
# is its default account for duetime-local's, signed or not).
MOTO_DEFAULT_REGION = "us-east-1"
# The services of the engine's hot path, whose calls go unsigned to moto (in that region):
# SigV4 signing costs the client ~0.45 ms of CPU a call, a sixth of it; moto's CPU is the same
# either way (scripts/emulator_bench.py, `local_unsigned`; docs/local.md).
UNSIGNED_SERVICES = ("dynamodb", "dynamodb-streams", "sqs")


@dataclass(frozen=True)
class LocalEndpoint:
    """How to reach a running local stack's moto server and history bucket."""

    endpoint_url: str
    region: str
    history_bucket: str


def write_endpoint_file(state_dir: Path, endpoint: LocalEndpoint) -> Path:
    """Tell the commands run with `state_dir` where this stack is; returns the file."""
    path = state_dir / ENDPOINT_FILE
    ensure_state_dir(state_dir)
    # Written whole under a name of its own, then renamed over the old one: a command reading
    # it meanwhile reads the old file or the new, never half of one (until 2026-11-30 it was
    # written in place).
    draft = path.with_name(f".{ENDPOINT_FILE}.{os.getpid()}")
    draft.write_text(json.dumps(asdict(endpoint)) + "\n", encoding="utf-8")
    os.replace(draft, path)
    return path


def read_local_endpoint(state_dir: Path = DEFAULT_STATE_DIR) -> LocalEndpoint | None:
    """What the local stack running with `state_dir` wrote at start (None: none running)."""
    try:
        raw = json.loads((state_dir / ENDPOINT_FILE).read_text(encoding="utf-8"))
        return LocalEndpoint(raw["endpoint_url"], raw["region"], raw["history_bucket"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def moto_session(region: str, *, unsigned_hot_path: bool = True) -> boto3.Session:
    """boto3 with moto's credentials and `region`, whatever the user's environment holds (keys,
    a profile: AWS_PROFILE is not read); build each client with the moto server's endpoint.
    In moto's default region the calls of UNSIGNED_SERVICES are not signed, unless
    `unsigned_hot_path` is False (a measurement of what a call costs on AWS)."""
    import boto3
    import botocore.session
    from botocore.handlers import disable_signing

    core = botocore.session.Session(session_vars={"profile": (None, None, None, None)})
    if unsigned_hot_path and region == MOTO_DEFAULT_REGION:
        for service in UNSIGNED_SERVICES:
            core.register(f"choose-signer.{service}", disable_signing)
    return boto3.Session(
        aws_access_key_id=CREDENTIALS,
        aws_secret_access_key=CREDENTIALS,
        aws_session_token=CREDENTIALS,
        region_name=region,
        botocore_session=core,
    )
