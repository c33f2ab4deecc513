"""IAM, checked offline: is each AWS call the deployed code made allowed by the identity policies
of the role that made it?

moto allows every call, so the offline deployment (tests/infra/test_deployed_offline.py)
records them (tests/infra/offline_driver.py) and this module judges them against the template:
each call becomes the IAM action(s) it needs and the ARN(s) it acts on (`needs`), and is
allowed when an `Allow` statement of the role's policies (`Synth.statements`, resolved to the
moto resources' ARNs) names the action and the resource, wildcards as IAM reads them.

What it does not judge: conditions (a statement with one counts as allowing), `Deny`
statements and resource policies (duetime's identity policies grant everything its roles use;
none relies on a key or bucket policy alone), and the logs Lambda writes itself (each function
may write to its own log group: no call of the code's).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from tests.infra.conftest import Synth, listed
from tests.infra.offline_template import OfflineStack

# IAM's service prefix where it is not the SDK's service name.
PREFIX = {"dynamodbstreams": "dynamodb", "monitoring": "cloudwatch"}
# The action a batch or differently named operation needs (IAM's Service Authorization
# Reference): SQS's batch operations need the single action; S3's HeadObject needs GetObject,
# listing needs ListBucket on the bucket.
ACTION = {
    "sqs:SendMessageBatch": "sqs:SendMessage",
    "sqs:DeleteMessageBatch": "sqs:DeleteMessage",
    "sqs:ChangeMessageVisibilityBatch": "sqs:ChangeMessageVisibility",
    "s3:HeadObject": "s3:GetObject",
    "s3:ListObjectsV2": "s3:ListBucket",
    "s3:ListObjects": "s3:ListBucket",
    "s3:DeleteObjects": "s3:DeleteObject",
    "s3:CreateMultipartUpload": "s3:PutObject",
    "s3:UploadPart": "s3:PutObject",
    "s3:CompleteMultipartUpload": "s3:PutObject",
    "lambda:Invoke": "lambda:InvokeFunction",
}
# TransactWriteItems needs, on each table, the action of each item's kind.
TRANSACT_ACTION = {
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "ConditionCheck": "dynamodb:ConditionCheckItem",
}
# Actions without resource-level permissions (IAM's reference): the resource is "*".
UNSCOPED = {"cloudwatch:GetMetricData", "cloudwatch:PutMetricData", "dynamodb:ListStreams"}


@dataclass(frozen=True)
class Need:
    action: str
    resource: str


def needs(call: Mapping[str, Any], region: str, account: str) -> list[Need]:
    """The (action, resource ARN) pairs one recorded call needs allowed."""
    service = str(call["service"])
    prefix = PREFIX.get(service, service)
    action = f"{prefix}:{call['operation']}"
    action = ACTION.get(action, action)
    if action in UNSCOPED:
        return [Need(action, "*")]
    if prefix == "dynamodb":
        if "transact" in call:
            return [
                Need(TRANSACT_ACTION[kind], _table(table, region, account))
                for kind, table in call["transact"]
            ]
        if "StreamArn" in call:
            return [Need(action, str(call["StreamArn"]))]
        tables = call.get("tables") or [call["TableName"]]
        index = f"/index/{call['IndexName']}" if "IndexName" in call else ""
        return [Need(action, _table(t, region, account) + index) for t in tables]
    if prefix == "sqs":
        name = str(call.get("QueueName") or urlparse(str(call["QueueUrl"])).path.split("/")[-1])
        return [Need(action, f"arn:aws:sqs:{region}:{account}:{name}")]
    if prefix == "s3":
        bucket = f"arn:aws:s3:::{call['Bucket']}"
        if action == "s3:ListBucket":
            return [Need(action, bucket)]
        keys = call.get("keys") or [call["Key"]]
        return [Need(action, f"{bucket}/{key}") for key in keys]
    if prefix == "kms":
        key = str(call["KeyId"])
        arn = key if key.startswith("arn:") else f"arn:aws:kms:{region}:{account}:key/{key}"
        return [Need(action, arn)]
    if prefix == "secretsmanager":
        return [Need(action, str(call["SecretId"]))]
    if prefix == "lambda":
        name = str(call["FunctionName"])
        function = f"arn:aws:lambda:{region}:{account}:function:{name}"
        return [Need(action, name if name.startswith("arn:") else function)]
    if prefix == "sts":
        return [Need(action, str(call["RoleArn"]))]
    raise AssertionError(f"no IAM mapping for {action} (tests/infra/offline_iam.py): {call}")


def _table(name: str, region: str, account: str) -> str:
    return name if name.startswith("arn:") else f"arn:aws:dynamodb:{region}:{account}:table/{name}"


def allows(statements: Sequence[Mapping[str, Any]], need: Need) -> bool:
    """Whether an Allow statement names the action and the resource (IAM's wildcards: `*` any
    run of characters, `?` one; actions case-insensitive)."""
    for statement in statements:
        if statement.get("Effect") != "Allow":
            continue
        actions = [str(a).lower() for a in listed(statement.get("Action", []))]
        if not any(fnmatch.fnmatchcase(need.action.lower(), a) for a in actions):
            continue
        resources = [str(r) for r in listed(statement.get("Resource", []))]
        if any(r == "*" or fnmatch.fnmatchcase(need.resource, r) for r in resources):
            return True
    return False


def refused(
    synth: Synth, stack: OfflineStack, role: str, calls: Sequence[Mapping[str, Any]]
) -> list[str]:
    """The calls role `role` (logical id) made that its policies do not allow, each with what
    it needed; calls signed by a role it assumed are judged against that role's policies.
    Empty when every call was allowed."""
    arns = {
        stack.made(logical_id).attributes["Arn"]: logical_id
        for logical_id in stack.of_type("AWS::IAM::Role")
    }
    assumed = {str(c["access_key"]): str(c["assumed"]) for c in calls if "assumed" in c}
    own = {c["access_key"] for c in calls if "operation" in c} - assumed.keys()
    assert len(own) <= 1, f"calls signed by unknown keys: {sorted(map(str, own))}"
    statements: dict[str, list[dict[str, Any]]] = {}
    problems: list[str] = []
    for call in calls:
        if "operation" not in call:
            continue
        signer = role
        if call["access_key"] in assumed:
            signer = arns[assumed[str(call["access_key"])]]
        if signer not in statements:
            statements[signer] = stack.resolve(synth.statements(signer))
        for need in needs(call, stack.region, stack.account):
            if not allows(statements[signer], need):
                problems.append(f"{signer}: {need.action} on {need.resource}")
    return sorted(set(problems))
