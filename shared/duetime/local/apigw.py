"""What API Gateway's HTTP API does around a function, as the local gateway reproduces it: the
payload 2.0 event of a request (claims as strings in it), the function's payload 2.0 answer
read into a response, which bodies travel as text."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from email.utils import formatdate
from typing import Any
from urllib.parse import parse_qsl

from duetime.clock import wall_ms
from duetime.local.keys import scopes_of

ACCOUNT_ID = "123456789012"
API_ID = "duetime-local"
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/x-www-form")


@dataclass(frozen=True)
class Request:
    """What the gateway read of a request, besides its headers and body."""

    method: str
    path: str
    query: str
    protocol: str  # HTTP/1.1
    source_ip: str


def request_event(
    request: Request,
    raw_headers: Iterable[tuple[str, str]],
    body: bytes,
    claims: Mapping[str, Any] | None,
    *,
    route_key: str,
    request_id: str,
) -> dict[str, Any]:
    """The payload 2.0 event API Gateway gives the function for a request: repeated headers
    and query parameters joined by commas, cookies apart, claims as strings, a body as text
    when its type is text and it is UTF-8 (else base64)."""
    headers: dict[str, str] = {}
    for raw_name, value in raw_headers:
        name = raw_name.lower()
        headers[name] = f"{headers[name]},{value}" if name in headers else value
    cookie_header = headers.pop("cookie", None)
    now_ms = wall_ms()
    context: dict[str, Any] = {
        "accountId": ACCOUNT_ID,
        "apiId": API_ID,
        "domainName": headers.get("host", ""),
        "domainPrefix": headers.get("host", "").split(".")[0],
        "http": {
            "method": request.method,
            "path": request.path,
            "protocol": request.protocol,
            "sourceIp": request.source_ip,
            "userAgent": headers.get("user-agent", ""),
        },
        "requestId": request_id,
        "routeKey": route_key,
        "stage": "$default",
        "time": formatdate(now_ms / 1000, usegmt=True),
        "timeEpoch": now_ms,
    }
    if claims is not None:
        context["authorizer"] = {
            "jwt": {"claims": claim_strings(claims), "scopes": scopes_of(claims)}
        }
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route_key,
        "rawPath": request.path,
        "rawQueryString": request.query,
        "headers": headers,
        "requestContext": context,
        "isBase64Encoded": False,
    }
    if cookie_header:
        event["cookies"] = [c.strip() for c in cookie_header.split(";") if c.strip()]
    if request.query:
        params: dict[str, str] = {}
        for name, value in parse_qsl(request.query, keep_blank_values=True):
            params[name] = f"{params[name]},{value}" if name in params else value
        event["queryStringParameters"] = params
    if body:
        if is_text(headers.get("content-type", "")):
            try:
                event["body"] = body.decode()
            except UnicodeDecodeError:
                event["body"] = base64.b64encode(body).decode()
                event["isBase64Encoded"] = True
        else:
            event["body"] = base64.b64encode(body).decode()
            event["isBase64Encoded"] = True
    return event


def response_parts(result: Any) -> tuple[int, dict[str, str], list[str], bytes]:
    """API Gateway's reading of a payload 2.0 response: a dict with statusCode is used as is;
    anything else is a 200 with the value as its JSON body."""
    if not isinstance(result, dict) or "statusCode" not in result:
        return 200, {"content-type": "application/json"}, [], json.dumps(result).encode()
    headers = {str(k): str(v) for k, v in (result.get("headers") or {}).items()}
    for name, values in (result.get("multiValueHeaders") or {}).items():
        headers[str(name)] = ",".join(str(v) for v in values)
    cookies = [str(c) for c in result.get("cookies") or []]
    raw = result.get("body")
    if raw is None:
        payload = b""
    elif result.get("isBase64Encoded"):
        try:
            payload = base64.b64decode(str(raw), validate=True)
        except binascii.Error as exc:
            raise ValueError(f"the handler's base64 body does not decode: {exc}") from None
    else:
        payload = str(raw).encode()
    return int(result["statusCode"]), headers, cookies, payload


def content_length(method: str, headers: Mapping[str, str], payload: bytes) -> int:
    """The body's length; for HEAD, the length the handler declares (the API answers HEAD
    without the body, with its GET body's length), else the body it gave anyway."""
    if method == "HEAD":
        for name, value in headers.items():
            if name.lower() == "content-length" and value.strip().isdigit():
                return int(value.strip())
    return len(payload)


def claim_strings(claims: Mapping[str, Any]) -> dict[str, str]:
    """API Gateway hands claims to the function as strings (arrays as "[a b]")."""
    out: dict[str, str] = {}
    for name, value in claims.items():
        if value is None:  # no value: no claim (not the text "None", a tenant's name)
            continue
        if isinstance(value, str):
            out[name] = value
        elif isinstance(value, bool):
            out[name] = str(value).lower()
        elif isinstance(value, list):
            out[name] = "[" + " ".join(str(v) for v in value) + "]"
        elif isinstance(value, dict):
            out[name] = json.dumps(value, separators=(",", ":"))
        else:
            out[name] = str(value)
    return out


def is_text(content_type: str) -> bool:
    kind = content_type.split(";", maxsplit=1)[0].strip().lower()
    return not kind or kind.startswith(_TEXT_TYPES) or kind.endswith(("+json", "+xml"))
