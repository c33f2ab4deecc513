"""The CDK app synthesized once per test session, the way the CDK CLI runs it: `python3
infra/app.py` in a subprocess, offline, context in CDK_CONTEXT_JSON (cdk.json's context plus
the test settings below). cdk-nag runs in that synth; the tests read the cloud assembly.

`synth` is the app with the default sizes; `large_synth` the same settings with
`-c profile=large` (infra/profiles.py), `console_synth` with an OpenID Connect client id for
the console, `lanes_synth` with queues spread over lanes (`queue_lanes`) and tenant-scoped
target names, `throwaway_synth`
with `retainData=false`, each synthesized on first use."""

from __future__ import annotations

import fcntl
import functools
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from duetime.domain.jobs import Priority, Runtime
from infra.app import cdk_json_context

if TYPE_CHECKING:
    from aws_cdk.assertions import Template

# Before aws_cdk starts its node process (here or in the subprocess): node 20 prints an
# end-of-life banner otherwise.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

REPO_ROOT = Path(__file__).resolve().parents[2]
STACK = "Duetime"
ISSUER = "https://login.example.org/tenant-a/"
AUDIENCE = ["duetime-api", "duetime-cli"]
TARGET_ARNS = [
    "arn:aws:sqs:eu-west-1:111122223333:orders",
    "arn:aws:sns:eu-west-1:111122223333:alerts",
    "arn:aws:events:eu-west-1:111122223333:event-bus/default",
    "arn:aws:lambda:eu-west-1:111122223333:function:report",
    # The operator's queue the offline deployment delivers to (moto's account: its IAM check,
    # tests/infra/test_deployed_offline.py, needs the target role to be granted it).
    "arn:aws:sqs:eu-west-1:123456789012:orders",
]
KMS_KEY_ARN = "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
# The consume actions the worker's event source mappings need (CDK grants them with the ESM).
ESM_CONSUME = {
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",
    "sqs:ChangeMessageVisibility",
    "sqs:GetQueueAttributes",
    "sqs:GetQueueUrl",
}
# What the tests deploy: cdk.json's context (the feature flags and defaults of `cdk synth`)
# with real-looking settings, an alarm e-mail and target resources.
CONTEXT_OVERRIDES: dict[str, Any] = {
    "duetime:jwtIssuer": ISSUER,
    "duetime:jwtAudience": AUDIENCE,
    "duetime:tenantClaim": "org_id",
    "duetime:alarmEmail": "oncall@example.com",
    "duetime:targetResourceArns": TARGET_ARNS,
    "duetime:targetKmsKeyArns": [KMS_KEY_ARN],
}
# What the CDK CLI adds to the context of every synth.
CLI_CONTEXT = {
    "aws:cdk:enable-path-metadata": True,
    "aws:cdk:enable-asset-metadata": True,
    "aws:cdk:version-reporting": False,
}
# `cdk synth -c profile=large`: the CLI passes the value as a string.
LARGE_PROFILE_CONTEXT: dict[str, Any] = {"profile": "large"}
# `cdk synth -c duetime:consoleClientId=... -c duetime:consoleScopes=...`: the console signs in
# with OpenID Connect at the JWT issuer.
CONSOLE_CLIENT_ID = "duetime-console"
CONSOLE_CONTEXT: dict[str, Any] = {
    "duetime:consoleClientId": CONSOLE_CLIENT_ID,
    "duetime:consoleScopes": "openid email",
    "duetime:alarmEmail": "",  # (and no alarm topic: the synth warns)
}
# `cdk synth -c duetime:queueLanes='{...}'`: queues spread over lanes, the most extra lanes
# the props allow (infra.props.MAX_EXTRA_LANES: 4 + 1 + 1).
LANES = {"lambda/normal": 5, "lambda/high": 2, "fargate/high": 2}
# With tenant-scoped target names too: every variable the API function may have.
LANES_CONTEXT: dict[str, Any] = {
    "duetime:queueLanes": json.dumps(LANES),
    "duetime:tenantTargetNames": "{tenant}-*",
    **CONSOLE_CONTEXT,
}
# `cdk synth -c duetime:retainData=false`: a stack that can be removed completely (with the
# alarm e-mail's topic and its key, as every synth here).
# With a Cognito custom attribute as the tenant claim, which the synth warns about.
THROWAWAY_CONTEXT: dict[str, Any] = {
    "duetime:retainData": "false",
    "duetime:tenantClaim": "custom:tenant",
}
SYNTH_TIMEOUT_SECONDS = 240


def queue_name(runtime: Runtime, priority: Priority) -> str:
    """The construct id of a run queue (infra.constructs.queues)."""
    return f"{runtime.value.capitalize()}{priority.value.capitalize()}"


@dataclass
class Synth:
    outdir: Path
    returncode: int
    output: str
    seconds: float

    @functools.cached_property
    def json(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.outdir / f"{STACK}.template.json").read_text())
        return data

    @functools.cached_property
    def template(self) -> Template:
        from aws_cdk.assertions import Template

        return Template.from_json(self.json)

    @functools.cached_property
    def warnings(self) -> list[str]:
        """The synth's warnings (cdk.Annotations), as the CDK CLI prints them (the stack's
        metadata is a file of its own in the cloud assembly)."""
        metadata = json.loads((self.outdir / f"{STACK}.metadata.json").read_text())
        return [
            str(entry["data"])
            for entries in metadata.values()
            for entry in entries
            if entry["type"] == "aws:cdk:warning"
        ]

    @property
    def resources(self) -> dict[str, dict[str, Any]]:
        resources: dict[str, dict[str, Any]] = self.json["Resources"]
        return resources

    def of_type(self, kind: str) -> dict[str, dict[str, Any]]:
        return {k: r for k, r in self.resources.items() if r["Type"] == kind}

    @functools.cached_property
    def _paths(self) -> dict[str, str]:
        return {
            r["Metadata"]["aws:cdk:path"]: k
            for k, r in self.resources.items()
            if "aws:cdk:path" in r.get("Metadata", {})
        }

    def logical_id(self, path: str) -> str:
        """The logical id of the resource at a construct path below the stack, e.g.
        `Scheduler/Data/Jobs` (an L2 construct: its `Resource`) or `.../Task/TaskRole`."""
        for candidate in (f"{STACK}/{path}/Resource", f"{STACK}/{path}"):
            if candidate in self._paths:
                return self._paths[candidate]
        raise KeyError(path)

    def under(self, path: str, kind: str) -> dict[str, dict[str, Any]]:
        """The resources of one type below a construct path."""
        prefix = f"{STACK}/{path}/"
        return {
            k: r
            for k, r in self.of_type(kind).items()
            if r.get("Metadata", {}).get("aws:cdk:path", "").startswith(prefix)
        }

    def queue_ids(self, runtime: Runtime | None = None) -> list[tuple[str, str]]:
        """(queue, DLQ) logical ids of the run queues, of one runtime or all."""
        return [
            (
                self.logical_id(f"Scheduler/Queues/{queue_name(r, p)}"),
                self.logical_id(f"Scheduler/Queues/{queue_name(r, p)}Dlq"),
            )
            for r in Runtime
            for p in Priority
            if runtime in (None, r)
        ]

    def function(self, name: str) -> tuple[str, dict[str, Any]]:
        """(logical id, properties) of the function running duetime.entrypoints.<name>."""
        handler = f"duetime.entrypoints.{name}.handler"
        found = [
            (k, r["Properties"])
            for k, r in self.of_type("AWS::Lambda::Function").items()
            if r["Properties"].get("Handler") == handler
        ]
        assert len(found) == 1, f"one function for {name}, found {len(found)}"
        return found[0]

    def role_of(self, name: str) -> str:
        _, properties = self.function(name)
        role: str = properties["Role"]["Fn::GetAtt"][0]
        return role

    def statements(self, role: str) -> list[dict[str, Any]]:
        """Every statement of the policies attached to `role` (logical id)."""
        found: list[dict[str, Any]] = []
        for policy in self.of_type("AWS::IAM::Policy").values():
            if {"Ref": role} in policy["Properties"]["Roles"]:
                found += policy["Properties"]["PolicyDocument"]["Statement"]
        for inline in self.resources[role]["Properties"].get("Policies", []):
            found += inline["PolicyDocument"]["Statement"]
        return found

    def actions_on(self, role: str, logical_id: str, attribute: str = "Arn") -> set[str]:
        """The actions `role` is allowed on one resource (its ARN, or objects under it)."""
        actions: set[str] = set()
        for statement in self.statements(role):
            if statement["Effect"] == "Allow" and any(
                _refers(r, logical_id, attribute) for r in listed(statement["Resource"])
            ):
                actions |= set(listed(statement["Action"]))
        return actions

    def validation_report(self) -> dict[str, Any]:
        report: dict[str, Any] = json.loads((self.outdir / "validation-report.json").read_text())
        return report


def listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _refers(resource: Any, logical_id: str, attribute: str) -> bool:
    """Whether a policy resource is `Fn::GetAtt [logical_id, attribute]`, or a join that
    starts with it (object ARNs: `<bucket ARN>/history/*`)."""
    if resource in ({"Fn::GetAtt": [logical_id, attribute]}, {"Ref": logical_id}):
        return True
    if isinstance(resource, dict) and "Fn::Join" in resource:
        parts = resource["Fn::Join"][1]
        return bool(parts) and _refers(parts[0], logical_id, attribute)
    return False


@pytest.fixture(scope="session")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return _shared_synth(tmp_path_factory, "duetime", {})


@pytest.fixture(scope="session")
def large_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return _shared_synth(tmp_path_factory, "duetime-large", LARGE_PROFILE_CONTEXT)


@pytest.fixture(scope="session")
def lanes_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return _shared_synth(tmp_path_factory, "duetime-lanes", LANES_CONTEXT)


@pytest.fixture(scope="session")
def throwaway_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return _shared_synth(tmp_path_factory, "duetime-throwaway", THROWAWAY_CONTEXT)


@pytest.fixture(scope="session")
def console_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return _shared_synth(tmp_path_factory, "duetime-console", CONSOLE_CONTEXT)


def _shared_synth(
    tmp_path_factory: pytest.TempPathFactory, name: str, context: dict[str, Any]
) -> Synth:
    """One synth of a context per test run: pytest-xdist workers share it (the first one to
    get the lock synthesizes; the others read its cloud assembly)."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    outdir = shared / f"{name}-cdk-out"
    record = shared / f"{name}-cdk-synth.json"
    with (shared / f"{name}-cdk-synth.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not record.exists():
            record.write_text(json.dumps(_synthesize(outdir, context)))
    result = Synth(outdir=outdir, **json.loads(record.read_text()))
    if result.returncode != 0:
        pytest.fail(f"synth failed (cdk-nag findings fail it too):\n{result.output}")
    return result


def _synthesize(outdir: Path, extra_context: dict[str, Any]) -> dict[str, Any]:
    context = {**cdk_json_context(), **CLI_CONTEXT, **CONTEXT_OVERRIDES, **extra_context}
    env = {**os.environ, "CDK_OUTDIR": str(outdir), "CDK_CONTEXT_JSON": json.dumps(context)}
    started = time.monotonic()
    completed = subprocess.run(
        [sys.executable, "infra/app.py"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=SYNTH_TIMEOUT_SECONDS,
        check=False,
    )
    return {
        "returncode": completed.returncode,
        "output": completed.stdout + completed.stderr,
        "seconds": time.monotonic() - started,
    }
