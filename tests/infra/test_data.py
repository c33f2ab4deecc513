"""DynamoDB tables: key schemas, TTL, stream, recovery and encryption as the code expects."""

from __future__ import annotations

from typing import Any

import pytest

from duetime.resources import JOBS_TABLE, RUNS_TABLE, TIMERS_TABLE, TableDef
from tests.infra.conftest import Synth

TABLES = {"jobs": JOBS_TABLE, "timers": TIMERS_TABLE, "runs": RUNS_TABLE}


def _table(synth: Synth, name: str) -> dict[str, Any]:
    resource = synth.resources[synth.logical_id(f"Scheduler/Data/{name.capitalize()}")]
    properties: dict[str, Any] = resource["Properties"]
    return properties


@pytest.mark.parametrize("name", TABLES)
def test_key_schema_is_the_one_the_adapters_use(synth: Synth, name: str) -> None:
    definition: TableDef = TABLES[name]
    table = _table(synth, name)

    assert table["KeySchema"] == [
        {"AttributeName": definition.partition_key[0], "KeyType": "HASH"},
        {"AttributeName": definition.sort_key[0], "KeyType": "RANGE"},
    ]
    assert sorted(table["AttributeDefinitions"], key=lambda a: a["AttributeName"]) == sorted(
        [
            {"AttributeName": attribute, "AttributeType": kind}
            for attribute, kind in (definition.partition_key, definition.sort_key)
        ],
        key=lambda a: a["AttributeName"],
    )
    assert "GlobalSecondaryIndexes" not in table  # no index to pay for (docs/cost.md)


@pytest.mark.parametrize("name", TABLES)
def test_ttl_recovery_and_encryption(synth: Synth, name: str) -> None:
    table = _table(synth, name)

    assert table["TimeToLiveSpecification"] == {
        "AttributeName": TABLES[name].ttl_attribute,
        "Enabled": True,
    }
    assert table["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert table["SSESpecification"]["SSEEnabled"] is True
    assert table["BillingMode"] == "PAY_PER_REQUEST"
    assert table["DeletionProtectionEnabled"] is True


def test_runs_table_streams_the_old_images_the_archiver_reads(synth: Synth) -> None:
    assert RUNS_TABLE.stream is not None
    assert _table(synth, "runs")["StreamSpecification"] == {"StreamViewType": RUNS_TABLE.stream}
    assert "StreamSpecification" not in _table(synth, "jobs")
    assert "StreamSpecification" not in _table(synth, "timers")


def test_tables_are_retained_when_the_stack_goes(synth: Synth) -> None:
    for name in TABLES:
        resource = synth.resources[synth.logical_id(f"Scheduler/Data/{name.capitalize()}")]
        assert resource["DeletionPolicy"] == "Retain"
        assert resource["UpdateReplacePolicy"] == "Retain"
