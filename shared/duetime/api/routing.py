"""Which methods a path has, and HEAD: the HTTP method rules of the API's routes.

- **A literal path is never an `{id}`.** `/jobs/batch` is the route `POST /jobs/batch`, not
  the job `batch` of `/jobs/{id}` (job ids are ULIDs: no literal segment is one). The
  resolver (Powertools) tries static routes before dynamic ones, but only among the routes of
  the request's method, so `GET /jobs/batch` would reach `GET /jobs/{id}`: `shadowed` names
  the methods a literal path must refuse itself (405, `Allow` its own methods).
- **HEAD wherever GET** (RFC 9110 §9.3.2): a GET route is registered for HEAD too, and
  `HeadResolver` answers a HEAD as the GET would, status and headers, without the body;
  its `Content-Length` says how long the body would have been.
- **A method is its exact name** (RFC 9110 §9.1: case-sensitive): `delete` is not `DELETE`
  but a method no route has, a `405` (until 2026-12-01 the resolver, which upper-cases it,
  cancelled the job; found by an outside contract audit).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from aws_lambda_powertools.event_handler.api_gateway import ResponseBuilder
from aws_lambda_powertools.utilities.typing import LambdaContext

Route = tuple[str, str]  # (method, path template with "{id}")


def methods_of(method: str) -> list[str]:
    """The methods a route of `method` is registered for: HEAD goes with GET."""
    return [method, "HEAD"] if method == "GET" else [method]


def allowed_methods(routes: Iterable[Route], path: str) -> list[str]:
    """The methods served on the request path `path`, sorted (an `Allow` header's list); empty
    when no route has this path. A literal route's path answers only its own methods."""
    routes = tuple(routes)
    literal = [method for method, template in routes if template == path]
    found = literal or [
        method
        for method, template in routes
        if "{" in template and _pattern(template).fullmatch(path)
    ]
    return sorted({served for method in found for served in methods_of(method)})


def shadowed(routes: Iterable[Route]) -> dict[str, list[str]]:
    """For each literal path that a template's route also matches, the methods of those
    templates that the literal path does not have: the resolver would hand them to the
    template's handler with the literal segment as its `{id}`, so they must be refused first."""
    routes = tuple(routes)
    out: dict[str, list[str]] = {}
    for path in sorted({template for _, template in routes if "{" not in template}):
        own = allowed_methods(routes, path)
        caught = {
            served
            for method, template in routes
            if "{" in template and _pattern(template).fullmatch(path)
            for served in methods_of(method)
        }
        if caught - set(own):
            out[path] = sorted(caught - set(own))
    return out


def _pattern(template: str) -> re.Pattern[str]:
    return re.compile(re.escape(template).replace(r"\{id\}", "[^/]+"))


class HeadResolver(APIGatewayHttpResolver):
    """The resolver, answering HEAD without the body its GET route produced, and marking every
    answer that does not say otherwise (the console's files do) `Cache-Control: no-store`: each
    is one tenant's, and a job holds credentials (an http target's headers); and
    `X-Content-Type-Options: nosniff`: a JSON answer is never read as a page or a script."""

    def resolve(self, event: Mapping[str, Any], context: LambdaContext) -> dict[str, Any]:
        answer = super().resolve(event, context)
        headers = {"X-Content-Type-Options": "nosniff", **(answer.get("headers") or {})}
        if not any(name.lower() == "cache-control" for name in headers):
            headers["Cache-Control"] = "no-store"
        answer = {**answer, "headers": headers}
        return without_body(answer) if _method(event) == "HEAD" else answer

    def _resolve(self) -> ResponseBuilder[Any]:
        method = self.current_event.http_method
        if method != method.upper():  # no route's: the not-found handler answers (405)
            return self._handle_not_found(method, self._remove_prefix(self.current_event.path))
        return super()._resolve()


def without_body(answer: dict[str, Any]) -> dict[str, Any]:
    """A payload-2.0 response without its body, with the body's length as Content-Length
    (what API Gateway would have sent for the GET)."""
    body = answer.get("body") or ""
    if answer.get("isBase64Encoded"):
        try:
            length = len(base64.b64decode(str(body), validate=True))
        except binascii.Error:
            length = len(str(body).encode())
    else:
        length = len(str(body).encode())
    headers = {
        name: value
        for name, value in (answer.get("headers") or {}).items()
        if name.lower() != "content-length"
    }
    if answer.get("statusCode") != 304:  # (RFC 9110 8.6: a 304's length would be the 200's)
        headers["Content-Length"] = str(length)
    return {**answer, "headers": headers, "body": "", "isBase64Encoded": False}


def _method(event: Mapping[str, Any]) -> str:
    context = event.get("requestContext")
    http = context.get("http") if isinstance(context, Mapping) else None
    method = http.get("method") if isinstance(http, Mapping) else None
    return method if isinstance(method, str) else ""
