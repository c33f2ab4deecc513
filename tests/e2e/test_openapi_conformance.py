"""schemathesis against the local stack: the OpenAPI document served at /openapi.json is
true. For generated requests on every route: no 5xx, status codes, content types, headers
and bodies as documented."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from duetime.api.openapi import OPENAPI
from tests.e2e.conftest import Stack

pytestmark = pytest.mark.slow

schema = schemathesis.openapi.from_dict(OPENAPI)
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


def test_the_served_document_is_the_one_tested(stack: Stack) -> None:
    with urllib.request.urlopen(stack.url + "/openapi.json", timeout=10) as reply:
        assert json.loads(reply.read()) == json.loads(json.dumps(OPENAPI))


@schema.parametrize()
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_route_conforms_to_the_openapi_document(case: Any, stack: Stack) -> None:
    case.call_and_validate(
        base_url=stack.url,
        headers={"authorization": f"Bearer {stack.token('fuzz-tenant')}"},
        checks=CHECKS,
    )
