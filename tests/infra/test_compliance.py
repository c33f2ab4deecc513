"""cdk-nag, cfn-lint, and the app as the CDK CLI runs it."""

from __future__ import annotations

import json

from cfnlint.api import lint  # type: ignore[import-untyped]

from tests.infra.conftest import STACK, Synth

# CDK writes DependsOn edges that a GetAtt already implies.
IGNORED_CFN_LINT_RULES = {"W3005"}


def test_cdk_nag_has_no_unacknowledged_findings(synth: Synth) -> None:
    """The synth would have raised on an error; warnings must not hide either."""
    report = synth.validation_report()
    nag = [p for p in report["pluginReports"] if p["pluginName"] == "AwsSolutions"]

    assert nag, "cdk-nag did not run"
    assert nag[0]["violations"] == []
    for finding in nag[0]["suppressedViolations"]:
        assert len(finding["reason"]) >= 40, finding["ruleName"]  # a reason, not a shrug


def test_cdk_nag_acknowledgements_are_specific(synth: Synth) -> None:
    report = synth.validation_report()
    (nag,) = [p for p in report["pluginReports"] if p["pluginName"] == "AwsSolutions"]
    rules = {f["ruleName"].split("[")[0] for f in nag["suppressedViolations"]}

    # Broad ones would hide real problems: the IAM5 findings are acknowledged one by one.
    assert "AwsSolutions-IAM5" in rules
    assert all("[" in f["ruleName"] for f in nag["suppressedViolations"] if "IAM" in f["ruleName"])


def test_cfn_lint_finds_no_errors_or_warnings(synth: Synth) -> None:
    template = (synth.outdir / f"{STACK}.template.json").read_text()

    findings = [
        f"{m.rule.id} {m.message}"
        for m in lint(template, regions=["us-east-1", "eu-west-1"])
        if m.rule.id not in IGNORED_CFN_LINT_RULES
    ]

    assert findings == []


def test_app_synthesizes_offline_as_the_cdk_cli_runs_it(synth: Synth) -> None:
    """The session's synth is `python3 infra/app.py` with the CLI's environment."""
    manifest = json.loads((synth.outdir / "manifest.json").read_text())
    (stack,) = [
        a for a in manifest["artifacts"].values() if a["type"] == "aws:cloudformation:stack"
    ]

    assert synth.returncode == 0
    assert stack["properties"]["stackName"] == "duetime"
    assert stack["environment"] == "aws://unknown-account/unknown-region"  # no lookups
    assert "Traceback" not in synth.output
    assert "end-of-life" not in synth.output  # JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION


def test_assets_are_the_lambda_code_and_the_worker_image(synth: Synth) -> None:
    assets = json.loads((synth.outdir / f"{STACK}.assets.json").read_text())
    images = list(assets["dockerImages"].values())
    code = {
        f["source"]["path"]
        for f in assets["files"].values()
        if f["source"]["packaging"] == "zip" and f["displayName"].startswith("Scheduler/")
    }

    assert len(images) == 1
    assert images[0]["source"]["dockerFile"] == "Dockerfile"
    assert images[0]["source"]["platform"] == "linux/arm64"
    image_dir = synth.outdir / images[0]["source"]["directory"]
    assert (image_dir / "pyproject.toml").is_file()
    assert not (image_dir / ".venv").exists()
    assert not (image_dir / "tests").exists()
    assert len(code) == 1  # one asset for every function
    code_dir = synth.outdir / code.pop()
    assert (code_dir / "duetime" / "entrypoints" / "worker.py").is_file()
    assert (code_dir / "duetime" / "settings.py").is_file()
    assert (code_dir / "tzdata").is_dir()


def test_outputs(synth: Synth) -> None:
    outputs = synth.json["Outputs"]
    for name in (
        "ApiUrl",
        "JobsTable",
        "TimersTable",
        "RunsTable",
        "HistoryBucket",
        "AthenaWorkGroup",
        "GlueDatabase",
        "QueueLambdaNormalUrl",
        "QueueFargateHighDlqUrl",
    ):
        assert name in outputs, name
