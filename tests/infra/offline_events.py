"""The events AWS hands the functions, shaped from the template's definitions.

- `HttpApi`: API Gateway's HTTP API (payload format 2.0): the template's route that matches
  the request, and for a route behind the JWT authorizer the claims of a token it accepted
  (its issuer and audience, the tenant in the claim the API function is told to read).
- `scheduled_event`: what an EventBridge schedule rule sends its target.
- `sqs_event`: what an SQS event source mapping delivers (ReceiveMessage results).
- `stream_event`: what a DynamoDB stream event source mapping delivers (GetRecords results),
  after the mapping's filter (`matches`).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

TTL_IDENTITY = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}


class HttpApi:
    def __init__(
        self,
        resources: Mapping[str, Mapping[str, Any]],
        tenant_claim: str,
        region: str,
        account: str,
    ) -> None:
        self._resources = resources
        self._tenant_claim = tenant_claim
        self._region = region
        self._account = account
        self._routes = [
            r["Properties"] for r in resources.values() if r["Type"] == "AWS::ApiGatewayV2::Route"
        ]

    def event(
        self,
        method: str,
        path: str,
        *,
        tenant: str | None = None,
        body: Any = None,
        now: float | None = None,
    ) -> dict[str, Any]:
        """The event of `method path` (JSON `body`), as `tenant` when the route needs a token,
        received at `now` (epoch seconds; default: the time of day)."""
        route, parameters = self._route(method, path)
        now = time.time() if now is None else now
        context: dict[str, Any] = {
            "accountId": self._account,
            "apiId": "offline",
            "domainName": f"offline.execute-api.{self._region}.amazonaws.com",
            "domainPrefix": "offline",
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "192.0.2.1",
                "userAgent": "offline-test",
            },
            "requestId": str(uuid.uuid4()),
            "routeKey": route["RouteKey"],
            "stage": "$default",
            "time": datetime.fromtimestamp(now, UTC).strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "timeEpoch": int(now * 1000),
        }
        headers = {"content-type": "application/json", "user-agent": "offline-test"}
        if route.get("AuthorizationType") == "JWT":
            if tenant is None:
                raise ValueError(f"{route['RouteKey']} needs a token: API Gateway answers 401")
            context["authorizer"] = {"jwt": {"claims": self._claims(route, tenant, now)}}
            headers["authorization"] = "Bearer offline-token"
        event: dict[str, Any] = {
            "version": "2.0",
            "routeKey": route["RouteKey"],
            "rawPath": path,
            "rawQueryString": "",
            "headers": headers,
            "requestContext": context,
            "isBase64Encoded": False,
        }
        if parameters:
            event["pathParameters"] = parameters
        if body is not None:
            event["body"] = json.dumps(body)
        return event

    def _route(self, method: str, path: str) -> tuple[Mapping[str, Any], dict[str, str]]:
        """The route taking the request. As API Gateway does, a trailing slash is ignored
        when matching (`/console/` takes `GET /console`); `rawPath` keeps it."""
        fallback = None
        matched = path.rstrip("/") or "/"
        for route in self._routes:
            key = route["RouteKey"]
            if key == "$default":
                fallback = route
                continue
            route_method, template = key.split(" ", 1)
            pattern = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(template))
            found = re.fullmatch(pattern, matched)
            if route_method == method and found:
                return route, found.groupdict()
        if fallback is None:
            raise LookupError(f"no route of the template takes {method} {path}")
        return fallback, {}

    def _claims(self, route: Mapping[str, Any], tenant: str, now: float) -> dict[str, str]:
        """What the authorizer passes on: the claims, as strings, of a token it verified."""
        authorizer_id = route["AuthorizerId"]["Ref"]
        jwt = self._resources[authorizer_id]["Properties"]["JwtConfiguration"]
        return {
            "iss": jwt["Issuer"],
            "aud": jwt["Audience"][0],
            "sub": f"user-of-{tenant}",
            self._tenant_claim: tenant,
            "iat": str(int(now)),
            "exp": str(int(now) + 3600),
        }


def scheduled_event(
    rule_arn: str, region: str, account: str, *, now: float | None = None
) -> dict[str, Any]:
    """The rule's event at `now` (epoch seconds; default: the time of day)."""
    now = time.time() if now is None else now
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": account,
        "time": datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": region,
        "resources": [rule_arn],
        "detail": {},
    }


def sqs_event(messages: Sequence[Mapping[str, Any]], queue_arn: str, region: str) -> dict[str, Any]:
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": dict(m.get("Attributes", {})),
                "messageAttributes": {
                    name: {
                        "stringValue": value.get("StringValue"),
                        "binaryValue": value.get("BinaryValue"),
                        "stringListValues": [],
                        "binaryListValues": [],
                        "dataType": value["DataType"],
                    }
                    for name, value in m.get("MessageAttributes", {}).items()
                },
                "md5OfBody": hashlib.md5(m["Body"].encode()).hexdigest(),
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": region,
            }
            for m in messages
        ]
    }


def stream_event(
    records: Sequence[Mapping[str, Any]],
    stream_arn: str,
    region: str,
    ttl_deletes: Sequence[Mapping[str, Any]],
) -> list[dict[str, Any]]:
    """GetRecords results in Lambda's shape; the REMOVEs of `ttl_deletes` (their keys) carry
    the identity of DynamoDB's TTL process, as its deletes do."""
    shaped = []
    for record in records:
        change = dict(record["dynamodb"])
        created = change.get("ApproximateCreationDateTime")
        if isinstance(created, datetime):
            change["ApproximateCreationDateTime"] = int(created.timestamp())
        lambda_record: dict[str, Any] = {
            "eventID": record["eventID"],
            "eventName": record["eventName"],
            "eventVersion": record.get("eventVersion", "1.1"),
            "eventSource": "aws:dynamodb",
            "awsRegion": record.get("awsRegion", region),
            "dynamodb": change,
            "eventSourceARN": stream_arn,
        }
        if record["eventName"] == "REMOVE" and change.get("Keys") in ttl_deletes:
            lambda_record["userIdentity"] = dict(TTL_IDENTITY)
        shaped.append(lambda_record)
    return shaped


def matches(record: Mapping[str, Any], pattern: Mapping[str, Any]) -> bool:
    """Whether an event source mapping's filter pattern (exact values only) keeps `record`."""
    for key, wanted in pattern.items():
        value = record.get(key)
        if isinstance(wanted, Mapping):
            if not isinstance(value, Mapping) or not matches(value, wanted):
                return False
        elif any(not isinstance(w, str | int | float | bool) for w in wanted):
            raise NotImplementedError(f"filter operator in {wanted!r}")
        elif value not in wanted:
            return False
    return True
