"""Lambda functions: common settings, environment names, and least-privilege policies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from duetime.domain.jobs import Priority, Runtime
from duetime.domain.reach import TenantTargets
from duetime.settings import Env, Settings, queue_key
from infra import packaging
from tests.infra.conftest import ESM_CONSUME, KMS_KEY_ARN, TARGET_ARNS, Synth, listed

FUNCTIONS = ("api", "coordinator", "sweeper", "reconciler", "worker", "archiver", "compactor")
TASK_ROLE = "Scheduler/Workers/Task/TaskRole"
ENV_NAMES = {v for k, v in vars(Env).items() if k.isupper()}

# What each role's code calls, restated from the code (duetime.adapters.dynamodb,
# duetime.services.*, duetime.history.*), per table.
DYNAMODB: dict[str, dict[str, set[str]]] = {
    "api": {
        # jobs: create/claim idempotency key/replace (conditional puts), get, list (query),
        # a batch's fresh jobs (batch write), the recurring-job counter and an upstream's
        # dependents (updates), a new `after`'s chain (condition checks in its transaction)
        "jobs": {
            "dynamodb:PutItem",
            "dynamodb:GetItem",
            "dynamodb:Query",
            "dynamodb:BatchWriteItem",
            "dynamodb:UpdateItem",
            "dynamodb:ConditionCheckItem",
            "dynamodb:DeleteItem",  # the idempotency key of a refused request, freed
            "dynamodb:BatchGetItem",  # the `after` tree below a job run now or backfilled
        },
        # timers: write the first timer (put / batch write), read the sweep state and move
        # the cursor back (check after write); every shard's sweep state (GET /admin/stats)
        "timers": {
            "dynamodb:PutItem",
            "dynamodb:BatchWriteItem",
            "dynamodb:GetItem",
            "dynamodb:UpdateItem",
            "dynamodb:BatchGetItem",
        },
        # runs: get and list; a backfill's occurrences (batch get)
        "runs": {"dynamodb:GetItem", "dynamodb:Query", "dynamodb:BatchGetItem"},
    },
    "coordinator": {
        "jobs": set(),
        # timers: the shard count (get; raised by an update after a deployment added
        # shards), every shard's sweep state (batch get)
        "timers": {"dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:BatchGetItem"},
        "runs": set(),
    },
    "sweeper": {
        # jobs: batch get the due jobs, replace (next occurrence, completed chain: the
        # recurring-job counter updated, the job read again after a conflict)
        "jobs": {
            "dynamodb:BatchGetItem",
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
        },
        # timers: state, horizon/cursor/lease/watermark updates, partition states (batch
        # get), due timers and parked timers due again (query), next timers (put / batch
        # write), a parked timer re-keyed for its next attempt or handed over (delete)
        "timers": {
            "dynamodb:GetItem",
            "dynamodb:UpdateItem",
            "dynamodb:BatchGetItem",
            "dynamodb:Query",
            "dynamodb:PutItem",
            "dynamodb:BatchWriteItem",
            "dynamodb:DeleteItem",
        },
        "runs": set(),
    },
    "reconciler": {
        # jobs: the scheduled jobs (parallel scan), a chain whose schedule is over completed,
        # the tenants' recurring-job counters set
        "jobs": {"dynamodb:Scan", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"},
        # timers: shard count (get), stuck timers (query), each chain's live timer and the
        # shards' sweep states (batch get), a re-armed chain's timer (put / batch write) and
        # the cursor moved back (update)
        "timers": {
            "dynamodb:GetItem",
            "dynamodb:BatchGetItem",
            "dynamodb:Query",
            "dynamodb:PutItem",
            "dynamodb:BatchWriteItem",
            "dynamodb:UpdateItem",
        },
        # runs: whether the overdue one-offs have a record (batch get)
        "runs": {"dynamodb:BatchGetItem"},
    },
    "worker": {
        # the job and its dependents' item (batch get); the dependents' jobs; the overlap gate;
        # the tenant's webhook secret (read, made on first delivery)
        "jobs": {"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:PutItem"},
        "timers": set(),
        # claim and outcome: conditional puts of the run; the run holding an overlap gate; a
        # first attempt's claim withdrawn before its target starts (a conditional delete)
        "runs": {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:DeleteItem"},
    },
    "archiver": {"jobs": set(), "timers": set(), "runs": set()},
    "compactor": {"jobs": set(), "timers": set(), "runs": set()},
}


def test_deploy_md_lists_each_role_s_dynamodb_actions() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "deploy.md").read_text()
    table = text[text.index("| role | jobs table | timers table | runs table |") :]
    rows = {}
    for line in table.splitlines()[2:]:
        if not line.startswith("|"):
            break
        role, *cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows[role] = [
            set() if c == "-" else {f"dynamodb:{a}" for a in c.split(", ")} for c in cells
        ]
    granted = {
        name: [tables["jobs"], tables["timers"], tables["runs"]]
        for name, tables in DYNAMODB.items()
        if any(tables.values())
    }
    assert rows == granted


def _all_statements(synth: Synth) -> list[dict[str, Any]]:
    statements = []
    for policy in synth.of_type("AWS::IAM::Policy").values():
        statements += policy["Properties"]["PolicyDocument"]["Statement"]
    for role in synth.of_type("AWS::IAM::Role").values():
        for inline in role["Properties"].get("Policies", []):
            statements += inline["PolicyDocument"]["Statement"]
    return statements


@pytest.mark.parametrize("name", FUNCTIONS)
def test_common_settings(synth: Synth, name: str) -> None:
    _, function = synth.function(name)

    assert function["Architectures"] == ["arm64"]
    assert function["Runtime"] == "python3.12"
    assert function["TracingConfig"] == {"Mode": "Active"}
    assert function["LoggingConfig"]["LogFormat"] == "JSON"
    assert "LogGroup" in function["LoggingConfig"]  # a group with a retention, not the default
    # What the logs' bill rests on (docs/cost.md "Logs"): the application's INFO and above, and
    # none of Lambda's INFO records (START, END, REPORT) per invocation.
    assert function["LoggingConfig"]["ApplicationLogLevel"] == "INFO"
    assert function["LoggingConfig"]["SystemLogLevel"] == "WARN"
    layers = str(function["Layers"])
    assert ":017000801446:layer:AWSLambdaPowertoolsPythonV3-python312-arm64:" in layers
    with_pyarrow = ":336392948345:layer:AWSSDKPandas-Python312-Arm64:" in layers
    assert with_pyarrow == (name in ("archiver", "compactor"))


@pytest.mark.parametrize("name", FUNCTIONS)
def test_a_function_may_write_to_its_own_log_group_only(synth: Synth, name: str) -> None:
    # AWSLambdaBasicExecutionRole, the default, grants the log actions on every log group of
    # the account: a function could forge another's metric lines (found by an outside audit).
    _, function = synth.function(name)
    role = function["Role"]["Fn::GetAtt"][0]
    group = function["LoggingConfig"]["LogGroup"]["Ref"]

    assert "ManagedPolicyArns" not in synth.resources[role]["Properties"]
    logs = [
        s for s in synth.statements(role) if any(a.startswith("logs:") for a in listed(s["Action"]))
    ]
    assert logs, "its own log group"
    for statement in logs:
        assert set(listed(statement["Action"])) <= {"logs:CreateLogStream", "logs:PutLogEvents"}
        assert all(group in json.dumps(r) for r in listed(statement["Resource"]))


@pytest.mark.parametrize("name", FUNCTIONS)
def test_environment_names_come_from_duetime_config(synth: Synth, name: str) -> None:
    _, function = synth.function(name)
    names = set(function["Environment"]["Variables"])

    assert names <= ENV_NAMES | {n for n in names if n.startswith("POWERTOOLS_")}
    assert {"POWERTOOLS_SERVICE_NAME", "POWERTOOLS_METRICS_NAMESPACE"} <= names


@pytest.mark.parametrize("name", ["api", "coordinator", "sweeper", "reconciler", "worker"])
def test_engine_functions_get_settings_the_code_accepts(synth: Synth, name: str) -> None:
    _, function = synth.function(name)
    environ = {k: _render(v) for k, v in function["Environment"]["Variables"].items()}

    settings = Settings.from_env(environ)  # what the function does at cold start

    assert settings.jobs_table == f"ref:{synth.logical_id('Scheduler/Data/Jobs')}"
    assert settings.runs_table == f"ref:{synth.logical_id('Scheduler/Data/Runs')}"
    keys = [queue_key(r, p) for r in Runtime for p in Priority]
    # (a queue's Ref renders as ref:<id>, its QueueName as getatt:<id>: the DLQ, given by
    # name, is the queue's URL with its own name)
    assert {key: (urls.url, urls.dlq_url) for key, urls in settings.queues.items()} == {
        key: (f"{QUEUE_URL}/ref:{queue}", f"{QUEUE_URL}/getatt:{dlq}")
        for key, (queue, dlq) in zip(keys, synth.queue_ids(), strict=True)
    }
    assert settings.require_https is True
    assert settings.allow_private_targets is False
    assert settings.secrets_key_arn == f"getatt:{synth.logical_id('Scheduler/Data/SecretsKey')}"
    assert settings.webhook_secret_grace_seconds == 24 * 3600
    assert settings.timer_shards == 8


QUEUE_URL = "https://sqs.eu-west-1.amazonaws.com/111122223333"


def _render(value: Any) -> str:
    """A CloudFormation value as text, references as `ref:<logical id>` (a queue's, as the
    URL it is: QUEUE_URL/ref:<logical id>)."""
    if isinstance(value, str):
        return value
    if "Ref" in value:
        queue = "Queues" in value["Ref"]
        return f"{QUEUE_URL}/ref:{value['Ref']}" if queue else f"ref:{value['Ref']}"
    if "Fn::GetAtt" in value:
        return f"getatt:{value['Fn::GetAtt'][0]}"
    separator, parts = value["Fn::Join"]
    return str(separator).join(_render(part) for part in parts)


def test_the_workers_know_the_archive_failure_queue_as_their_own(synth: Synth) -> None:
    """Found by an outside audit: only the archiver was given the queue's URL, so the workers'
    check of a target against duetime's own resources (Settings.own_resources) knew it by the
    stack-name prefix alone. The Lambda worker and the Fargate task deliver: both name it."""
    failures = synth.logical_id("Scheduler/History/ArchiveFailures")
    _, worker = synth.function("worker")
    (task,) = synth.of_type("AWS::ECS::TaskDefinition").values()
    (container,) = task["Properties"]["ContainerDefinitions"]
    task_variables = {v["Name"]: v["Value"] for v in container["Environment"]}

    for variables in (worker["Environment"]["Variables"], task_variables):
        assert variables[Env.ARCHIVE_FAILURE_QUEUE_URL] == {"Ref": failures}
        environ = {k: _render(v) for k, v in variables.items()}
        own = Settings.from_env(environ).own_resources()  # what the worker refuses as a target
        assert f"ref:{failures}" in own.queue_names


@pytest.mark.parametrize("scoped", [False, True], ids=["default", "tenantTargetNames"])
def test_tenant_target_names_reach_the_api_and_both_workers(
    synth: Synth, lanes_synth: Synth, scoped: bool
) -> None:
    """`-c duetime:tenantTargetNames={tenant}-*` (the lanes synth has it): the API refuses
    another tenant's resource at submission, the Lambda worker and the Fargate task before
    each run; without it, no variable and every tenant may name every listed resource."""
    template = lanes_synth if scoped else synth
    (task,) = template.of_type("AWS::ECS::TaskDefinition").values()
    (container,) = task["Properties"]["ContainerDefinitions"]
    environments = [
        template.function(name)[1]["Environment"]["Variables"] for name in ("api", "worker")
    ] + [{v["Name"]: v["Value"] for v in container["Environment"]}]

    for variables in environments:
        environ = {k: _render(v) for k, v in variables.items()}
        wanted = TenantTargets("{tenant}-*") if scoped else TenantTargets()
        assert Settings.from_env(environ).tenant_targets() == wanted


def test_api_reads_the_tenant_claim_and_quotas(synth: Synth) -> None:
    _, function = synth.function("api")
    variables = function["Environment"]["Variables"]

    assert variables[Env.TENANT_CLAIM] == "org_id"
    assert {
        Env.MIN_RATE_SECONDS,
        Env.SUBMISSIONS_PER_SECOND,
        Env.SUBMISSION_BURST,
        Env.MAX_ACTIVE_RECURRING_JOBS,
    } <= set(variables)


def test_handlers_are_in_the_code_asset() -> None:
    asset = packaging.lambda_asset_dir()
    for name in FUNCTIONS:
        module = packaging.handler(name).rsplit(".", 1)[0]
        assert (asset / (module.replace(".", "/") + ".py")).is_file(), module
    assert (asset / "duetime" / "settings.py").is_file()
    assert not (asset / "duetime" / "local").exists()  # the local stack is not deployed
    assert (asset / "tzdata").is_dir()
    assert not (asset / "croniter").exists()  # the tests' cron reference, not deployed
    assert not (asset / "boto3").exists()  # the runtime's
    assert not (asset / "aws_lambda_powertools").exists()  # the layer's


def test_the_command_line_is_not_in_the_code_asset() -> None:
    asset = packaging.lambda_asset_dir()

    assert (asset / "duetime" / "entrypoints").is_dir()
    assert not (asset / "duetime" / "cli").exists()  # the `duetime` command is not deployed


@pytest.mark.parametrize("name", FUNCTIONS)
def test_dynamodb_actions_are_exactly_what_the_code_calls(synth: Synth, name: str) -> None:
    role = synth.role_of(name)
    for table_name, expected in DYNAMODB[name].items():
        table = synth.logical_id(f"Scheduler/Data/{table_name.capitalize()}")
        granted = {a for a in synth.actions_on(role, table) if a.startswith("dynamodb:")}
        assert granted == expected, f"{name} on {table_name}"


# The api function also reads the queues' and DLQs' counts (GET /admin/stats): its exact
# queue actions are asserted in tests/infra/test_api_stats.py.
@pytest.mark.parametrize("name", ["sweeper", "reconciler"])
def test_dispatchers_send_to_every_queue_and_no_dlq(synth: Synth, name: str) -> None:
    role = synth.role_of(name)
    # The API reads every queue's counts for the operators (GET /admin/stats), nothing more
    counts = {"sqs:GetQueueAttributes"} if name == "api" else set()
    for queue, dlq in synth.queue_ids():
        assert synth.actions_on(role, queue) == {"sqs:SendMessage"} | counts
        assert synth.actions_on(role, dlq) == counts


def test_only_the_api_reads_metrics_for_the_operators(synth: Synth) -> None:
    """GET /admin/stats: cloudwatch:GetMetricData (read only, no resource-level permissions)."""
    readers = {
        name
        for name in FUNCTIONS
        if any(
            statement["Effect"] == "Allow"
            and "cloudwatch:GetMetricData" in listed(statement["Action"])
            and statement["Resource"] == "*"
            for statement in synth.statements(synth.role_of(name))
        )
    }

    assert readers == {"api"}


def test_the_coordinator_touches_no_queue(synth: Synth) -> None:
    role = synth.role_of("coordinator")
    for queue, dlq in synth.queue_ids():
        assert synth.actions_on(role, queue) == set()
        assert synth.actions_on(role, dlq) == set()


def test_worker_queue_access(synth: Synth) -> None:
    role = synth.role_of("worker")
    for queue, dlq in synth.queue_ids(Runtime.LAMBDA):
        # retries (send), early/busy runs (visibility), and the event source's consume
        assert synth.actions_on(role, queue) == {"sqs:SendMessage"} | ESM_CONSUME
        assert synth.actions_on(role, dlq) == {"sqs:SendMessage"}
    for queue, dlq in synth.queue_ids(Runtime.FARGATE):
        assert synth.actions_on(role, queue) == {"sqs:SendMessage"}  # a dependent's run
        assert synth.actions_on(role, dlq) == set()


def test_fargate_task_role_access(synth: Synth) -> None:
    role = synth.logical_id(TASK_ROLE)

    assert synth.actions_on(role, synth.logical_id("Scheduler/Data/Jobs")) == {
        "dynamodb:GetItem",
        "dynamodb:BatchGetItem",
        "dynamodb:PutItem",
    }
    assert synth.actions_on(role, synth.logical_id("Scheduler/Data/Runs")) == {
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:DeleteItem",
    }
    assert synth.actions_on(role, synth.logical_id("Scheduler/Data/Timers")) == set()
    for queue, dlq in synth.queue_ids(Runtime.FARGATE):
        assert synth.actions_on(role, queue) == {
            "sqs:ReceiveMessage",
            "sqs:DeleteMessage",
            "sqs:ChangeMessageVisibility",
            "sqs:SendMessage",
        }
        assert synth.actions_on(role, dlq) == {"sqs:SendMessage"}
    for queue, dlq in synth.queue_ids(Runtime.LAMBDA):
        assert synth.actions_on(role, queue) == {"sqs:SendMessage"}  # a dependent's run
        assert synth.actions_on(role, dlq) == set()


def test_archive_functions_access(synth: Synth) -> None:
    bucket = synth.logical_id("Scheduler/History/Bucket")
    failures = synth.logical_id("Scheduler/History/ArchiveFailures")
    runs = synth.logical_id("Scheduler/Data/Runs")
    archiver, compactor = synth.role_of("archiver"), synth.role_of("compactor")

    archiver_s3 = synth.actions_on(archiver, bucket)
    assert "s3:PutObject" in archiver_s3
    assert not {a for a in archiver_s3 if a.startswith(("s3:Get", "s3:Delete", "s3:List"))}
    assert "sqs:SendMessage" in synth.actions_on(archiver, failures)
    assert {"dynamodb:GetRecords", "dynamodb:GetShardIterator"} <= synth.actions_on(
        archiver, runs, "StreamArn"
    )
    assert not synth.actions_on(archiver, runs)  # the stream, never the table

    compactor_s3 = synth.actions_on(compactor, bucket)
    assert {"s3:PutObject", "s3:GetObject", "s3:DeleteObject*", "s3:ListBucket"} <= compactor_s3
    assert synth.actions_on(compactor, failures) == set()


def test_object_grants_are_limited_to_the_history_prefix(synth: Synth) -> None:
    bucket = synth.logical_id("Scheduler/History/Bucket")
    for name in ("archiver", "compactor"):
        for statement in synth.statements(synth.role_of(name)):
            resources = statement["Resource"]
            for resource in resources if isinstance(resources, list) else [resources]:
                if isinstance(resource, dict) and "Fn::Join" in resource:
                    parts = resource["Fn::Join"][1]
                    if parts[0] == {"Fn::GetAtt": [bucket, "Arn"]}:
                        assert parts[1:] == ["/history/*"], name


TARGET_ROLE = "Scheduler/Functions/TargetRole"


def test_targets_are_reached_as_a_role_that_can_reach_the_operators_targets_only(
    synth: Synth,
) -> None:
    """Issue 12, item 7c: workers invoke AWS targets with the target role's credentials; that
    role may reach exactly the operator's target ARNs and nothing of duetime's own."""
    expected = {
        "sqs:SendMessage": TARGET_ARNS[0],
        "sns:Publish": TARGET_ARNS[1],
        "events:PutEvents": TARGET_ARNS[2],
        "lambda:InvokeFunction": TARGET_ARNS[3],
    }
    target_role = synth.logical_id(TARGET_ROLE)
    statements = synth.statements(target_role)
    for action, arn in expected.items():
        granted = [
            s for s in statements if action in listed(s["Action"]) and arn in listed(s["Resource"])
        ]
        assert granted, f"{action} on {arn}"
    kms = [s for s in statements if KMS_KEY_ARN in listed(s["Resource"])]
    assert {a for s in kms for a in listed(s["Action"])} == {"kms:GenerateDataKey", "kms:Decrypt"}
    # Only through SQS and SNS encrypting a message: not the key itself, directly (found by
    # an outside audit).
    for statement in kms:
        via = statement["Condition"]["StringEquals"]["kms:ViaService"]
        region = {"Ref": "AWS::Region"}
        assert via == [
            {"Fn::Join": ["", [f"{service}.", region, ".amazonaws.com"]]}
            for service in ("sqs", "sns")
        ]
    # Every resource it may touch is one the operator named: no duetime queue, function,
    # table, topic or key (those are references to resources of the template).
    for statement in statements:
        for resource in listed(statement["Resource"]):
            assert resource in (*TARGET_ARNS, KMS_KEY_ARN), statement

    # The workers assume it (and its ARN reaches them); they hold no target permission.
    task_role = synth.logical_id(TASK_ROLE)
    for role in (synth.role_of("worker"), task_role):
        assume = [s for s in synth.statements(role) if "sts:AssumeRole" in listed(s["Action"])]
        assert [listed(s["Resource"]) for s in assume] == [[{"Fn::GetAtt": [target_role, "Arn"]}]]
        assert not any(arn in str(synth.statements(role)) for arn in TARGET_ARNS), role
    _, worker = synth.function("worker")
    assert worker["Environment"]["Variables"]["DUETIME_TARGET_ROLE_ARN"] == {
        "Fn::GetAtt": [target_role, "Arn"]
    }
    # Its trust names those two roles and nothing else of the account: a principal whose own
    # policy allows sts:AssumeRole on it is still refused.
    [trust] = synth.resources[target_role]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Action"] == "sts:AssumeRole"
    assert trust["Effect"] == "Allow"
    assert "root" in str(trust["Principal"]["AWS"])  # the account, narrowed by the condition
    assert trust["Condition"] == {
        "ArnEquals": {
            "aws:PrincipalArn": [
                {"Fn::GetAtt": [synth.role_of("worker"), "Arn"]},
                {"Fn::GetAtt": [task_role, "Arn"]},
            ]
        }
    }
    # No other function may assume it or reach the targets.
    for name in ("api", "coordinator", "sweeper", "reconciler", "archiver", "compactor"):
        role_statements = str(synth.statements(synth.role_of(name)))
        assert "sts:AssumeRole" not in role_statements, name
        assert not any(arn in role_statements for arn in TARGET_ARNS), name


def test_the_run_signing_key_is_a_secret_only_the_engine_reads(synth: Synth) -> None:
    (secret_id,) = synth.of_type("AWS::SecretsManager::Secret")
    readers = {synth.role_of(name) for name in ("api", "sweeper", "reconciler", "worker")} | {
        synth.logical_id(TASK_ROLE)
    }
    for role in readers:
        actions = {
            a
            for s in synth.statements(role)
            if {"Ref": secret_id} in listed(s["Resource"])
            for a in listed(s["Action"])
        }
        assert "secretsmanager:GetSecretValue" in actions, role
    # The coordinator only starts sweeps: it signs and reads no run message (an outside audit
    # found it granted the key all the same).
    for name in ("coordinator", "archiver", "compactor"):
        assert secret_id not in str(synth.statements(synth.role_of(name))), name
    _, coordinator = synth.function("coordinator")
    assert "DUETIME_RUN_SIGNING_SECRET_ARN" not in coordinator["Environment"]["Variables"]
    _, worker = synth.function("worker")
    assert worker["Environment"]["Variables"]["DUETIME_RUN_SIGNING_SECRET_ARN"] == {
        "Ref": secret_id
    }


def test_no_wildcard_action_anywhere(synth: Synth) -> None:
    for statement in _all_statements(synth):
        actions = statement["Action"]
        for action in actions if isinstance(actions, list) else [actions]:
            assert action != "*", statement
            assert not action.endswith(":*"), statement


@pytest.mark.parametrize("name", ["api", "coordinator", "sweeper", "reconciler", "worker"])
def test_no_reserved_concurrency_by_default(synth: Synth, name: str) -> None:
    """A sweeper reservation must fit every shard's sweep: none unless one is asked for."""
    _, function = synth.function(name)
    assert function.get("ReservedConcurrentExecutions") is None


def test_the_compactor_runs_one_at_a_time(synth: Synth) -> None:
    """Two compactions of one partition at once (the schedule's and a manual invoke) each
    merged part of it and duplicated rows: duetime.history.compaction relies on one."""
    _, function = synth.function("compactor")
    assert function["ReservedConcurrentExecutions"] == 1


def test_the_webhook_secrets_key_rotates_and_only_signers_may_use_it(synth: Synth) -> None:
    key = synth.logical_id("Scheduler/Data/SecretsKey")
    assert synth.resources[key]["Properties"]["EnableKeyRotation"] is True
    signers = {synth.role_of("api"), synth.role_of("worker"), synth.logical_id(TASK_ROLE)}

    for role in signers:
        # GenerateDataKey makes a secret, Decrypt reads it: never kms:Encrypt.
        assert synth.actions_on(role, key) == {"kms:GenerateDataKey", "kms:Decrypt"}, role
        [statement] = [
            s
            for s in synth.statements(role)
            if {"Fn::GetAtt": [key, "Arn"]} in listed(s["Resource"])
        ]
        assert statement["Condition"] == {
            "ForAllValues:StringEquals": {"kms:EncryptionContextKeys": ["tenant"]},
            "Null": {"kms:EncryptionContextKeys": "false"},
        }
    for name in ("coordinator", "sweeper", "reconciler", "archiver", "compactor"):
        assert synth.actions_on(synth.role_of(name), key) == set(), name
