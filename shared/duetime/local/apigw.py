"""What API Gateway's HTTP API does around a function, as the local gateway reproduces it: the
claims as strings in the event, the function's payload 2.0 answer read into a response, which
bodies travel as text."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/x-www-form")


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
