"""The `Scheduler` construct in someone else's CDK app: docs/deploy.md's example, as written, in
a plain `App()` with no context (none of cdk.json's feature flags), with cdk-nag's checks.

Found by an outside audit: the example synthesized only with cdk.json's
`@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy`; in a plain `App()` the history bucket's
access logging fell back to an ACL and the synth failed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from infra.app import cdk_json_context
from tests.infra.conftest import REPO_ROOT, SYNTH_TIMEOUT_SECONDS

DEPLOY_MD = REPO_ROOT / "docs" / "deploy.md"
SECTION = "## Embedding the `Scheduler` construct"
# What would hand the example context: the CDK CLI's variable, and its output directory's.
CLI_VARIABLES = ("CDK_CONTEXT_JSON", "CDK_OUTDIR")


def documented_example() -> str:
    """The first Python block of the section, verbatim."""
    section = DEPLOY_MD.read_text().split(SECTION, 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert found, f"no Python example under {SECTION!r} in docs/deploy.md"
    return found.group(1)


@pytest.fixture(scope="module")
def embedded(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """The example run as a script of its own (a fresh app, as a platform team's would be),
    the repository on PYTHONPATH as the docs say; its assembly goes to CDK_OUTDIR."""
    work = tmp_path_factory.mktemp("embedding")
    script = work / "platform_app.py"
    script.write_text(documented_example())
    outdir = work / "cdk.out"
    env = {k: v for k, v in os.environ.items() if k not in CLI_VARIABLES}
    env |= {
        "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), str(REPO_ROOT / "shared")]),
        "CDK_OUTDIR": str(outdir),  # where App() writes; not context
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }
    completed = subprocess.run(
        [sys.executable, str(script)],
        cwd=work,  # no cdk.json here (App() would not read one anyway)
        env=env,
        capture_output=True,
        text=True,
        timeout=SYNTH_TIMEOUT_SECONDS,
        check=False,
    )
    return outdir, completed


def test_the_documented_example_synthesizes_in_a_plain_app_and_passes_cdk_nag(
    embedded: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    outdir, completed = embedded
    assert "App()" in documented_example()
    assert completed.returncode == 0, completed.stdout + completed.stderr

    report = json.loads((outdir / "validation-report.json").read_text())
    (nag,) = [p for p in report["pluginReports"] if p["pluginName"] == "AwsSolutions"]
    assert nag["violations"] == []
    assert nag["suppressedViolations"], "the construct's own acknowledgements apply"


def test_the_embedded_history_bucket_logs_by_bucket_policy(
    embedded: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    """What the construct's own flags do in a host app without them: access logs and flow logs
    by the log bucket's policy (no ACL), the layers in cdk.json's order."""
    outdir, completed = embedded
    assert completed.returncode == 0, completed.stdout + completed.stderr
    resources: dict[str, Any] = json.loads((outdir / "Platform.template.json").read_text())[
        "Resources"
    ]
    buckets = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::S3::Bucket"]
    services = {
        principal
        for r in resources.values()
        if r["Type"] == "AWS::S3::BucketPolicy"
        for s in r["Properties"]["PolicyDocument"]["Statement"]
        if s["Effect"] == "Allow"
        for principal in [s["Principal"].get("Service")]
    }
    (archiver,) = [
        r["Properties"]
        for r in resources.values()
        if r["Type"] == "AWS::Lambda::Function"
        and r["Properties"].get("Handler") == "duetime.entrypoints.archiver.handler"
    ]

    assert all("AccessControl" not in b for b in buckets)
    assert {"logging.s3.amazonaws.com", "delivery.logs.amazonaws.com"} <= services
    assert "Powertools" in json.dumps(archiver["Layers"][-1])
    assert "Custom::VpcRestrictDefaultSG" in {r["Type"] for r in resources.values()}


def test_the_construct_s_flags_are_those_of_cdk_json() -> None:
    """The construct is tested (tests/infra) in the app with cdk.json's context: the flags it
    sets for itself must say the same."""
    from infra.scheduler import FEATURE_FLAGS  # (here: the other tests run without it)

    context = cdk_json_context()

    assert {flag: context.get(flag) for flag in FEATURE_FLAGS} == FEATURE_FLAGS
