"""Every delivery says whose job it is (docs/targets.md, docs/security.md): a receiver that
several tenants may target (an AWS resource on the deployment's shared allow-list) tells
theirs apart. Found by an outside audit: nothing in a delivery named the tenant."""

from __future__ import annotations

from urllib.parse import unquote

from duetime.domain.invocation import Invocation, delivery_metadata, envelope


def invocation(tenant: str) -> Invocation:
    return Invocation(tenant, "01JDUE", "01JDUE-1", 1, 1, {"a": 1}, 5.0)


def test_the_tenant_is_in_the_metadata_percent_encoded_and_in_the_envelope_as_is() -> None:
    tenant = "Acme Corp é/東京"
    metadata = delivery_metadata(invocation(tenant))
    assert metadata["duetime-tenant"] == "Acme%20Corp%20%C3%A9%2F%E6%9D%B1%E4%BA%AC"
    assert metadata["duetime-tenant"].isascii()  # an HTTP header carries it
    assert unquote(metadata["duetime-tenant"]) == tenant
    assert delivery_metadata(invocation("acme"))["duetime-tenant"] == "acme"
    assert envelope(invocation(tenant))["tenant"] == tenant
