"""The CDK app: `npx aws-cdk@2 synth` (cdk.json runs `python3 infra/app.py`) or plain
`python3 infra/app.py` (then cdk.json's context is read here). Works offline, no account.

Settings come from context keys `duetime:*` (cdk.json, or `-c duetime:jwtIssuer=...`); see
docs/deploy.md. `-c duetime:profile=large` (or `-c profile=large`) starts from a named size of
infra/profiles.py instead of the defaults; the other settings still apply over it. cdk-nag's
AwsSolutions checks run on every synth: an unacknowledged finding makes the synth fail.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

# Before aws_cdk starts its node process: node 20 prints an end-of-life banner otherwise.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
REPO_ROOT = Path(__file__).resolve().parent.parent
# Run as a script, Python puts infra/ first on sys.path, where infra/constructs would shadow
# the `constructs` library: import from the repository root (and shared/ for duetime).
_INFRA = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _INFRA]
for _path in (REPO_ROOT / "shared", REPO_ROOT):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import aws_cdk as cdk  # noqa: E402
from cdk_nag import AwsSolutionsChecks  # noqa: E402

from infra.profiles import DEFAULT  # noqa: E402
from infra.scheduler import PriorityConcurrency, SchedulerProps  # noqa: E402
from infra.stack import DuetimeStack  # noqa: E402

PREFIX = "duetime:"
PLACEHOLDER_ISSUER = "https://auth.example.com/"
STACK_NAME = re.compile(r"[A-Za-z][A-Za-z0-9-]{0,127}")
EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
# The context keys that name a profile (infra/profiles.py): the prefixed one, or the short one.
PROFILE_KEYS = (PREFIX + "profile", "profile")
# What a flag accepts (any case), besides JSON true and false.
TRUE_WORDS = ("true", "1", "yes", "on")
FALSE_WORDS = ("false", "0", "no", "off")
# DynamoDB settings with a meaning in provisioned mode only (`billingMode`).
PROVISIONED_ONLY_KEYS = ("readCapacity", "writeCapacity", "maxCapacity")


def cdk_json_context(path: Path = REPO_ROOT / "cdk.json") -> dict[str, Any]:
    context: dict[str, Any] = json.loads(path.read_text())["context"]
    return context


class Context:
    """Typed reads of `duetime:*` context values (strings from `-c`, JSON from cdk.json). A
    value that does not read as its type is refused with a ValueError naming the key and the
    value (found by an outside audit: a bare int() traceback, or a typo read as false)."""

    def __init__(self, lookup: Callable[[str], Any]) -> None:
        self._lookup = lookup  # app.node.try_get_context, or a dict's get
        self.read: set[str] = set()  # the keys asked for: every setting there is

    def raw(self, key: str) -> Any:
        self.read.add(key)
        return self._lookup(PREFIX + key)

    def refuse_unknown(self, keys: Iterable[str]) -> None:
        """A `duetime:` key no setting reads is a typo: `alarmEmial` silently made no alarm
        topic, a misspelt `tenantTargetNames` no tenant scoping (found by an outside audit)."""
        for key in sorted(k.removeprefix(PREFIX) for k in keys if k.startswith(PREFIX)):
            if key not in self.read and PREFIX + key not in PROFILE_KEYS:
                close = difflib.get_close_matches(key, sorted(self.read), n=1)
                hint = f": did you mean {PREFIX}{close[0]}?" if close else ""
                raise ValueError(f"{PREFIX}{key} is no setting of duetime{hint} (docs/deploy.md)")

    def profile(self) -> str:
        """The profile named by `duetime:profile` or `profile` ("default" when neither)."""
        names = {
            str(value).strip()
            for value in (self._lookup(key) for key in PROFILE_KEYS)
            if value not in (None, "")
        }
        if len(names) > 1:
            raise ValueError(f"{' and '.join(PROFILE_KEYS)} name different profiles: {names}")
        return names.pop() if names else DEFAULT.name

    def text(self, key: str, default: str) -> str:
        value = self.raw(key)
        return default if value in (None, "") else str(value)

    def optional_text(self, key: str) -> str | None:
        value = self.raw(key)
        return None if value in (None, "") else str(value)

    def number(self, key: str, default: int) -> int:
        value = self.raw(key)
        return default if value in (None, "") else whole_number(PREFIX + key, value)

    def optional_number(self, key: str) -> int | None:
        """A whole number, or None: absent, empty or "none" (any case)."""
        value = self.raw(key)
        if value in (None, "") or (isinstance(value, str) and value.strip().lower() == "none"):
            return None
        return whole_number(PREFIX + key, value)

    def reservation(self, key: str, default: int | None) -> int | None:
        """A reserved concurrency: absent → the default; "none" → no reservation."""
        return default if self.raw(key) is None else self.optional_number(key)

    def flag(self, key: str, default: bool) -> bool:
        """true/false, 1/0, yes/no, on/off (any case); anything else is refused, not read as
        false (`retainData=ture` would drop every table's deletion protection)."""
        value = self.raw(key)
        if value in (None, ""):
            return default
        if isinstance(value, bool):
            return value
        word = str(value).strip().lower()
        if word not in TRUE_WORDS + FALSE_WORDS:
            raise ValueError(f"{PREFIX}{key} must be true or false: {value!r}")
        return word in TRUE_WORDS

    def counts(self, key: str) -> dict[str, int]:
        """A {name: number} object: JSON (cdk.json, or `-c key='{"lambda/normal": 2}'`) or
        `name=number` pairs joined by commas (`-c key=lambda/normal=2,lambda/high=2`)."""
        value = self.raw(key)
        if value in (None, ""):
            return {}
        refused = ValueError(
            f"{PREFIX}{key} must be a JSON object or name=number pairs joined by commas: {value!r}"
        )
        found = value
        if isinstance(value, str):
            text = value.strip()
            pairs = [p.split("=", 1) for p in text.split(",") if p.strip()]
            try:
                found = json.loads(text) if text.startswith("{") else dict(pairs)
            except ValueError:  # malformed JSON, or a pair without "="
                raise refused from None
        if not isinstance(found, dict):
            raise refused
        return {
            str(k).strip(): whole_number(f"{PREFIX}{key}[{str(k).strip()!r}]", v)
            for k, v in found.items()
        }

    def strings(self, key: str) -> tuple[str, ...]:
        value = self.raw(key)
        if value in (None, ""):
            return ()
        found = value
        if isinstance(value, str):
            try:
                found = json.loads(value) if value.lstrip().startswith("[") else value.split(",")
            except ValueError:
                found = None
        if not isinstance(found, list):
            raise ValueError(
                f"{PREFIX}{key} must be a JSON list or values joined by commas: {value!r}"
            )
        return tuple(str(v).strip() for v in found if str(v).strip())


def props_from_context(context: Context) -> SchedulerProps:
    """The props of the chosen profile (SchedulerProps.profile), with the context's settings
    over them."""
    defaults = SchedulerProps.profile(
        context.profile(), jwt_issuer=PLACEHOLDER_ISSUER, jwt_audience=("duetime",)
    )
    billing = context.text("billingMode", defaults.billing_mode)
    if billing not in ("on_demand", "provisioned"):
        raise ValueError(f"{PREFIX}billingMode must be on_demand or provisioned: {billing!r}")
    ignored = [PREFIX + k for k in PROVISIONED_ONLY_KEYS if context.raw(k) not in (None, "")]
    if billing == "on_demand" and ignored:
        raise ValueError(
            f"{', '.join(ignored)}: provisioned mode only, and {PREFIX}billingMode is "
            "on_demand (set it to provisioned, or leave these out)"
        )
    if billing == "provisioned":
        _check_capacities(context, defaults)
    python_version = context.text("pythonVersion", defaults.python_version)
    if python_version not in ("3.12", "3.13"):
        raise ValueError(f"{PREFIX}pythonVersion must be 3.12 or 3.13: {python_version!r}")
    return replace(
        defaults,
        jwt_issuer=context.text("jwtIssuer", defaults.jwt_issuer),
        jwt_audience=context.strings("jwtAudience") or defaults.jwt_audience,
        tenant_claim=context.text("tenantClaim", defaults.tenant_claim),
        operator_claim=context.text("operatorClaim", defaults.operator_claim),
        operator_scope=context.text("operatorScope", defaults.operator_scope),
        console_client_id=context.optional_text("consoleClientId"),
        # Scopes as OpenID Connect writes them ("openid email") or as a list.
        console_scopes=tuple(s for v in context.strings("consoleScopes") for s in v.split())
        or defaults.console_scopes,
        billing_mode=billing,  # type: ignore[arg-type]
        read_capacity=context.number("readCapacity", defaults.read_capacity),
        write_capacity=context.number("writeCapacity", defaults.write_capacity),
        max_capacity=context.optional_number("maxCapacity"),
        timer_shards=context.number("timerShards", defaults.timer_shards),
        job_partitions=context.number("jobPartitions", defaults.job_partitions),
        hot_window_days=context.number("hotWindowDays", defaults.hot_window_days),
        history_retention_days=context.number(
            "historyRetentionDays", defaults.history_retention_days
        ),
        athena_bytes_scanned_cutoff=context.number(
            "athenaBytesScannedCutoff", defaults.athena_bytes_scanned_cutoff
        ),
        python_version=python_version,  # type: ignore[arg-type]
        powertools_layer_version=context.number(
            "powertoolsLayerVersion", defaults.powertools_layer_version
        ),
        pandas_layer_version=context.number("pandasLayerVersion", defaults.pandas_layer_version),
        powertools_layer_arn=context.optional_text("powertoolsLayerArn"),
        pandas_layer_arn=context.optional_text("pandasLayerArn"),
        worker_max_concurrency=_worker_max_concurrency(context, defaults.worker_max_concurrency),
        sweeper_reserved_concurrency=context.reservation(
            "sweeperReservedConcurrency", defaults.sweeper_reserved_concurrency
        ),
        api_reserved_concurrency=context.reservation(
            "apiReservedConcurrency", defaults.api_reserved_concurrency
        ),
        worker_reserved_concurrency=context.reservation(
            "workerReservedConcurrency", defaults.worker_reserved_concurrency
        ),
        queue_lanes=context.counts("queueLanes") or defaults.queue_lanes,
        claim_lead_ms=context.number("claimLeadMs", defaults.claim_lead_ms),
        target_resource_arns=context.strings("targetResourceArns"),
        target_kms_key_arns=context.strings("targetKmsKeyArns"),
        tenant_target_names=context.optional_text("tenantTargetNames"),
        fargate_min_tasks=context.number("fargateMinTasks", defaults.fargate_min_tasks),
        fargate_max_tasks=context.number("fargateMaxTasks", defaults.fargate_max_tasks),
        fargate_spot=context.flag("fargateSpot", defaults.fargate_spot),
        retain_data=context.flag("retainData", defaults.retain_data),
    )


def _check_capacities(context: Context, defaults: SchedulerProps) -> None:
    """Provisioned capacities: at least 1 (0 was taken for the default, 5), and a maximum not
    below them (the auto scaling's jsii traceback; found by an outside audit)."""
    read = context.number("readCapacity", defaults.read_capacity)
    write = context.number("writeCapacity", defaults.write_capacity)
    for key, value in (("readCapacity", read), ("writeCapacity", write)):
        if value < 1:
            raise ValueError(f"{PREFIX}{key} must be at least 1: {value}")
    most = context.optional_number("maxCapacity")
    if most is not None and most < max(read, write):
        raise ValueError(
            f"{PREFIX}maxCapacity ({most}) must be at least readCapacity ({read}) and "
            f"writeCapacity ({write})"
        )


def _worker_max_concurrency(context: Context, default: PriorityConcurrency) -> PriorityConcurrency:
    """`high,normal,low`: three whole numbers, each for its priority."""
    key = "workerMaxConcurrency"
    values = context.strings(key)
    if not values:
        return default
    if len(values) != len(fields(PriorityConcurrency)):
        raise ValueError(
            f"{PREFIX}{key} must be three whole numbers, high,normal,low: {context.raw(key)!r}"
        )
    return PriorityConcurrency(*(whole_number(PREFIX + key, v) for v in values))


def whole_number(name: str, value: Any) -> int:
    """A context value as a whole number: a JSON integer, or its digits (`-c key=12`)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise ValueError(f"{name} must be a whole number: {value!r}")


def build_app(
    context: Mapping[str, Any] | None = None, outdir: str | None = None
) -> tuple[cdk.App, DuetimeStack]:
    """The app with its one stack and the cdk-nag checks registered (not yet synthesized)."""
    app = cdk.App(context=dict(context) if context is not None else None, outdir=outdir)
    settings = Context(app.node.try_get_context)
    props = props_from_context(settings)
    stack_name = settings.text("stackName", "duetime")
    if not STACK_NAME.fullmatch(stack_name):  # (CloudFormation's rule; it was a jsii traceback)
        raise ValueError(
            f"{PREFIX}stackName must start with a letter and hold letters, digits and hyphens, "
            f"at most 128: {stack_name!r}"
        )
    alarm_email = settings.optional_text("alarmEmail")
    if alarm_email is not None and not EMAIL.fullmatch(alarm_email):
        raise ValueError(f"{PREFIX}alarmEmail must be an email address: {alarm_email!r}")
    settings.refuse_unknown(app.node.get_all_context())
    stack = DuetimeStack(
        app,
        "Duetime",
        props,
        stack_name=stack_name,
        description="duetime: serverless job scheduler (DynamoDB, SQS, Lambda, Fargate)",
        alarm_email=alarm_email,
    )
    if alarm_email is None:
        cdk.Annotations.of(stack).add_warning_v2(
            "duetime:no-alarm-topic",
            f"{PREFIX}alarmEmail is not set: the alarms notify nobody (they show in the "
            "CloudWatch console only); set it, or subscribe to them yourself",
        )
    if props.jwt_issuer == PLACEHOLDER_ISSUER:
        cdk.Annotations.of(stack).add_warning_v2(
            "duetime:placeholder-issuer",
            f"{PREFIX}jwtIssuer is the placeholder {PLACEHOLDER_ISSUER}: every API call will "
            "be refused until it names your identity provider (see docs/deploy.md)",
        )
    if props.tenant_claim.startswith("custom:"):
        cdk.Annotations.of(stack).add_warning_v2(
            "duetime:tenant-claim-writable",
            f"{PREFIX}tenantClaim is {props.tenant_claim}: Cognito users may write their own "
            "custom attributes unless the app client's write attributes leave it out; users "
            "must not be able to write the claim naming their tenant (docs/api.md)",
        )
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app, stack


def main() -> None:
    # Under the CDK CLI, context (cdk.json, cdk.context.json, -c) arrives in CDK_CONTEXT_JSON.
    context = None if "CDK_CONTEXT_JSON" in os.environ else cdk_json_context()
    # ...and the output directory in CDK_OUTDIR; without the CLI, cdk.out as the CLI's default
    # (the CDK's own default is a temporary directory).
    outdir = None if "CDK_OUTDIR" in os.environ else "cdk.out"
    try:
        app, _ = build_app(context, outdir)
    except ValueError as refused:  # a setting the props or the context refuse: say which
        sys.exit(f"duetime: {refused}")
    app.synth()


if __name__ == "__main__":
    main()
