"""The synthesized template's resources, made in a moto server from their own definitions.

`OfflineStack` plays CloudFormation for the resources the functions reach: every table (key
schema, attribute definitions, indexes, stream, TTL), queue (its attributes, the redrive
policy resolved to the DLQ's ARN) and bucket of the template, and, when something refers to
them, the KMS keys, secrets (their generated string), IAM roles and function names. A name the
template gives is used; otherwise one is generated as CloudFormation does
(`<stack>-<logical id>-<suffix>`). `Ref`, `Fn::GetAtt` and `Fn::Join` resolve to what was
made, so `environment(...)` is a function's environment as the deployment would give it.
"""

from __future__ import annotations

import json
import secrets
import string
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import boto3

# The kinds made up front: what the functions read and write.
DATA_KINDS = ("AWS::DynamoDB::Table", "AWS::SQS::Queue", "AWS::S3::Bucket")
TABLE_PROPERTIES = frozenset(
    {
        "TableName",
        "KeySchema",
        "AttributeDefinitions",
        "BillingMode",
        "ProvisionedThroughput",
        "GlobalSecondaryIndexes",
        "LocalSecondaryIndexes",
        "StreamSpecification",
        "TimeToLiveSpecification",
    }
)
# Queue properties that are SQS queue attributes of the same name.
QUEUE_ATTRIBUTES = frozenset(
    {
        "ContentBasedDeduplication",
        "DeduplicationScope",
        "DelaySeconds",
        "FifoQueue",
        "FifoThroughputLimit",
        "KmsDataKeyReusePeriodSeconds",
        "KmsMasterKeyId",
        "MaximumMessageSize",
        "MessageRetentionPeriod",
        "ReceiveMessageWaitTimeSeconds",
        "RedriveAllowPolicy",
        "RedrivePolicy",
        "SqsManagedSseEnabled",
        "VisibilityTimeout",
    }
)
# GenerateSecretString fields that GetRandomPassword takes as they are.
PASSWORD_OPTIONS = frozenset(
    {
        "ExcludeCharacters",
        "ExcludeLowercase",
        "ExcludeNumbers",
        "ExcludePunctuation",
        "ExcludeUppercase",
        "IncludeSpace",
        "PasswordLength",
        "RequireEachIncludedType",
    }
)


@dataclass(frozen=True)
class Made:
    """A resource made for a logical id: what `Ref` and `Fn::GetAtt` of it give."""

    ref: str
    attributes: Mapping[str, str] = field(default_factory=dict)


class OfflineStack:
    def __init__(
        self, template: Mapping[str, Any], stack_name: str, session: boto3.Session, endpoint: str
    ) -> None:
        self.resources: Mapping[str, Mapping[str, Any]] = template["Resources"]
        self.stack_name = stack_name
        self.region = str(session.region_name)
        self._session = session
        self._endpoint = endpoint
        self.account = self.client("sts").get_caller_identity()["Account"]
        self._made: dict[str, Made] = {}
        self._makers: dict[str, Callable[[str, Mapping[str, Any]], Made]] = {
            "AWS::DynamoDB::Table": self._table,
            "AWS::SQS::Queue": self._queue,
            "AWS::S3::Bucket": self._bucket,
            "AWS::KMS::Key": self._key,
            "AWS::SecretsManager::Secret": self._secret,
            "AWS::IAM::Role": self._role,
            "AWS::Lambda::Function": self._function,
            "AWS::Logs::LogGroup": self._log_group,
        }

    def client(self, service: str) -> Any:
        """A client of the moto server."""
        return self._session.client(service, endpoint_url=self._endpoint)  # type: ignore[call-overload]

    def create(self, kinds: tuple[str, ...] = DATA_KINDS) -> None:
        for logical_id, resource in self.resources.items():
            if resource["Type"] in kinds:
                self.made(logical_id)

    def made(self, logical_id: str) -> Made:
        """The resource of `logical_id`, made on first use (with what it refers to). From one
        thread: two first uses at once would make it twice."""
        if logical_id not in self._made:
            resource = self.resources[logical_id]
            maker = self._makers.get(resource["Type"])
            if maker is None:
                raise NotImplementedError(f"{logical_id}: no offline {resource['Type']}")
            self._made[logical_id] = maker(logical_id, resource.get("Properties", {}))
        return self._made[logical_id]

    def of_type(self, kind: str) -> dict[str, Mapping[str, Any]]:
        return {k: r for k, r in self.resources.items() if r["Type"] == kind}

    def environment(self, logical_id: str) -> dict[str, str]:
        """A function's environment variables, as the template gives them."""
        properties = self.resources[logical_id]["Properties"]
        variables = self.resolve(properties.get("Environment", {}).get("Variables", {}))
        return {name: str(value) for name, value in variables.items()}

    def resolve(self, value: Any) -> Any:
        """`value` with its intrinsic functions replaced by what they name."""
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if not isinstance(value, dict):
            return value
        if set(value) == {"Ref"}:
            return self._ref(value["Ref"])
        if set(value) == {"Fn::GetAtt"}:
            logical_id, attribute = value["Fn::GetAtt"]
            return self.made(logical_id).attributes[attribute]
        if set(value) == {"Fn::Join"}:
            separator, parts = value["Fn::Join"]
            return separator.join(str(p) for p in self.resolve(parts))
        unknown = [k for k in value if k.startswith("Fn::")]
        if unknown:
            raise NotImplementedError(f"intrinsic function {unknown[0]} is not resolved offline")
        return {k: self.resolve(v) for k, v in value.items()}

    def _used(self, properties: Mapping[str, Any], names: Collection[str]) -> dict[str, Any]:
        """The named properties, resolved (the others are not made: nothing here uses them)."""
        return {k: self.resolve(v) for k, v in properties.items() if k in names}

    def _ref(self, name: str) -> str:
        pseudo = {
            "AWS::AccountId": self.account,
            "AWS::Partition": "aws",
            "AWS::Region": self.region,
            "AWS::StackName": self.stack_name,
            "AWS::URLSuffix": "amazonaws.com",
        }
        return pseudo[name] if name.startswith("AWS::") else self.made(name).ref

    def _name(self, logical_id: str, given: str | None, limit: int, *, tail: str = "") -> str:
        """The name the template gives, or one as CloudFormation makes it:
        `<stack>-<logical id>-<random suffix><tail>`, at most `limit` characters."""
        if given:
            return given
        suffix = "".join(secrets.choice(string.ascii_uppercase + string.digits) for _ in range(12))
        room = limit - len(self.stack_name) - len(suffix) - len(tail) - 2
        return f"{self.stack_name}-{logical_id[:room]}-{suffix}{tail}"

    def _table(self, logical_id: str, properties: Mapping[str, Any]) -> Made:
        client = self.client("dynamodb")
        optional = ("GlobalSecondaryIndexes", "LocalSecondaryIndexes", "ProvisionedThroughput")
        props = self._used(properties, TABLE_PROPERTIES)
        name = self._name(logical_id, props.get("TableName"), 255)
        params = {k: props[k] for k in optional if k in props}
        if "StreamSpecification" in props:
            view = props["StreamSpecification"]["StreamViewType"]
            params["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": view}
        client.create_table(
            TableName=name,
            KeySchema=props["KeySchema"],
            AttributeDefinitions=props["AttributeDefinitions"],
            BillingMode=props.get("BillingMode", "PROVISIONED"),
            **params,
        )
        ttl = props.get("TimeToLiveSpecification")
        if ttl:
            client.update_time_to_live(TableName=name, TimeToLiveSpecification=ttl)
        table = client.describe_table(TableName=name)["Table"]
        attributes = {"Arn": table["TableArn"]}
        if "LatestStreamArn" in table:
            attributes["StreamArn"] = table["LatestStreamArn"]
        return Made(name, attributes)

    def _queue(self, logical_id: str, properties: Mapping[str, Any]) -> Made:
        client = self.client("sqs")
        props = self._used(properties, QUEUE_ATTRIBUTES)
        tail = ".fifo" if props.get("FifoQueue") else ""
        name = self._name(
            logical_id, self._used(properties, {"QueueName"}).get("QueueName"), 80, tail=tail
        )
        attributes = {k: _attribute(v) for k, v in props.items()}
        url = client.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
        arn = client.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
        return Made(url, {"Arn": arn["Attributes"]["QueueArn"], "QueueName": name, "QueueUrl": url})

    def _bucket(self, logical_id: str, properties: Mapping[str, Any]) -> Made:
        given = self._used(properties, {"BucketName"}).get("BucketName")
        name = given or self._name(logical_id, None, 63).lower()
        where = {} if self.region == "us-east-1" else {"LocationConstraint": self.region}
        self.client("s3").create_bucket(Bucket=name, CreateBucketConfiguration=where)
        return Made(name, {"Arn": f"arn:aws:s3:::{name}"})

    def _key(self, logical_id: str, properties: Mapping[str, Any]) -> Made:
        options = self._used(properties, {"Description", "KeySpec", "KeyUsage"})
        key = self.client("kms").create_key(**options)["KeyMetadata"]
        return Made(key["KeyId"], {"Arn": key["Arn"], "KeyId": key["KeyId"]})

    def _secret(self, logical_id: str, properties: Mapping[str, Any]) -> Made:
        client = self.client("secretsmanager")
        props = self._used(
            properties, {"Name", "Description", "SecretString", "GenerateSecretString"}
        )
        # With neither a string nor options, CloudFormation generates one with the defaults.
        generate: dict[str, Any] = props.get("GenerateSecretString", {})
        if set(generate) - PASSWORD_OPTIONS:
            raise NotImplementedError(f"{logical_id}: GenerateSecretString {sorted(generate)}")
        value = (
            props.get("SecretString") or client.get_random_password(**generate)["RandomPassword"]
        )
        arn = client.create_secret(
            Name=self._name(logical_id, props.get("Name"), 512),
            Description=props.get("Description", ""),
            SecretString=value,
        )["ARN"]
        return Made(arn, {"Id": arn})

    def _role(self, logical_id: str, properties: Mapping[str, Any]) -> Made:
        props = self._used(properties, {"RoleName", "Path", "AssumeRolePolicyDocument"})
        role = self.client("iam").create_role(
            RoleName=self._name(logical_id, props.get("RoleName"), 64),
            Path=props.get("Path", "/"),
            AssumeRolePolicyDocument=json.dumps(props["AssumeRolePolicyDocument"]),
        )["Role"]
        return Made(role["RoleName"], {"Arn": role["Arn"], "RoleId": role["RoleId"]})

    def _log_group(self, logical_id: str, properties: Mapping[str, Any]) -> Made:
        """Only named: what a role's grant to write to it names (the handlers log locally)."""
        given = self._used(properties, {"LogGroupName"}).get("LogGroupName")
        name = self._name(logical_id, given, 512)
        arn = f"arn:aws:logs:{self.region}:{self.account}:log-group:{name}:*"
        return Made(name, {"Arn": arn})

    def _function(self, logical_id: str, properties: Mapping[str, Any]) -> Made:
        """Only named: the functions run in clean interpreters, never in moto."""
        given = self._used(properties, {"FunctionName"}).get("FunctionName")
        name = self._name(logical_id, given, 64)
        arn = f"arn:aws:lambda:{self.region}:{self.account}:function:{name}"
        return Made(name, {"Arn": arn})


def _attribute(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return json.dumps(value) if isinstance(value, dict) else str(value)
