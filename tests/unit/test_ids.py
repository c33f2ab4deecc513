"""Identifiers and keys: SQS message groups derived from tenants."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from duetime.domain.ids import message_group_id, valid_message_group_id

# Anything the API accepts as a tenant: a printable claim value of up to 256 characters.
TENANTS = st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=256)


@given(TENANTS)
def test_every_tenant_gets_a_group_id_sqs_accepts_and_always_the_same(tenant: str) -> None:
    group = message_group_id(tenant)
    assert valid_message_group_id(group)
    assert message_group_id(tenant) == group


@given(TENANTS, TENANTS)
def test_distinct_tenants_get_distinct_group_ids(first: str, second: str) -> None:
    if first != second:
        assert message_group_id(first) != message_group_id(second)


def test_a_valid_tenant_is_its_own_group_and_others_are_hashed() -> None:
    assert message_group_id("acme-corp") == "acme-corp"
    assert message_group_id("a" * 128) == "a" * 128
    for refused in ("Acme Corp", "a" * 129, "zoë", "tab\there", ""):
        assert not valid_message_group_id(refused)
    for tenant in ("Acme Corp", "a" * 129, "zoë"):
        hashed = message_group_id(tenant)
        assert hashed.startswith("~")
        assert len(hashed) == 65
    # A tenant that looks like a hashed id is hashed too: no collision with another tenant.
    lookalike = message_group_id("Acme Corp")
    assert message_group_id(lookalike) != lookalike
