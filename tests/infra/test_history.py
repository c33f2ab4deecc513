"""History: the bucket, the Glue table (its columns are the archiver's Parquet schema), Athena,
the archiver's stream mapping and the daily compaction."""

from __future__ import annotations

import fnmatch
from typing import Any

import pytest

from duetime.history.schema import (
    PARTITION_KEY,
    PREFIX,
    TABLE_NAME,
    glue_columns,
    partition_prefix,
)
from infra.app import Context, cdk_json_context, props_from_context
from tests.infra.conftest import Synth, _shared_synth, listed

GIB = 1024**3


def _glue_table(synth: Synth) -> dict[str, Any]:
    (table,) = synth.of_type("AWS::Glue::Table").values()
    properties: dict[str, Any] = table["Properties"]
    return properties


def test_glue_columns_are_the_parquet_schema(synth: Synth) -> None:
    table = _glue_table(synth)["TableInput"]
    columns = [(c["Name"], c["Type"]) for c in table["StorageDescriptor"]["Columns"]]

    assert table["Name"] == TABLE_NAME
    assert columns == glue_columns()
    assert table["PartitionKeys"] == [{"Name": PARTITION_KEY, "Type": "string"}]


def test_partition_projection_on_dt(synth: Synth) -> None:
    parameters = _glue_table(synth)["TableInput"]["Parameters"]
    bucket = synth.logical_id("Scheduler/History/Bucket")

    assert parameters["projection.enabled"] == "true"
    assert parameters[f"projection.{PARTITION_KEY}.type"] == "date"
    assert parameters[f"projection.{PARTITION_KEY}.format"] == "yyyy-MM-dd"
    assert parameters[f"projection.{PARTITION_KEY}.range"].endswith(",NOW")
    assert parameters["storage.location.template"] == {
        "Fn::Join": ["", ["s3://", {"Ref": bucket}, f"/{PREFIX}{PARTITION_KEY}=${{dt}}/"]]
    }


def test_parquet_storage_under_the_history_prefix(synth: Synth) -> None:
    table = _glue_table(synth)
    descriptor = table["TableInput"]["StorageDescriptor"]
    bucket = synth.logical_id("Scheduler/History/Bucket")
    (database,) = synth.of_type("AWS::Glue::Database").values()

    assert table["DatabaseName"] == database["Properties"]["DatabaseInput"]["Name"]
    assert descriptor["SerdeInfo"]["SerializationLibrary"] == (
        "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
    )
    assert descriptor["InputFormat"].endswith("MapredParquetInputFormat")
    assert descriptor["Location"] == {"Fn::Join": ["", ["s3://", {"Ref": bucket}, f"/{PREFIX}"]]}


def test_bucket_is_private_encrypted_tls_only_and_expires_history(synth: Synth) -> None:
    bucket_id = synth.logical_id("Scheduler/History/Bucket")
    bucket = synth.resources[bucket_id]["Properties"]

    assert bucket["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    encryption = bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]
    assert encryption["ServerSideEncryptionByDefault"]["SSEAlgorithm"] in ("AES256", "aws:kms")
    assert bucket["LoggingConfiguration"]["DestinationBucketName"] == {
        "Ref": synth.logical_id("Scheduler/History/AccessLogs")
    }
    rules = {r["Id"]: r for r in bucket["LifecycleConfiguration"]["Rules"]}
    assert rules["expire-history"]["Prefix"] == PREFIX
    assert rules["expire-history"]["ExpirationInDays"] == 365
    (policy,) = [
        p["Properties"]["PolicyDocument"]["Statement"]
        for p in synth.of_type("AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == {"Ref": bucket_id}
    ]
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        for s in policy
    )


def test_athena_workgroup_encrypts_results_and_caps_scans(synth: Synth) -> None:
    (workgroup,) = synth.of_type("AWS::Athena::WorkGroup").values()
    configuration = workgroup["Properties"]["WorkGroupConfiguration"]
    bucket = synth.logical_id("Scheduler/History/Bucket")

    assert configuration["EnforceWorkGroupConfiguration"] is True
    assert configuration["BytesScannedCutoffPerQuery"] == 10 * GIB  # the default (history.md)
    results = configuration["ResultConfiguration"]
    assert results["EncryptionConfiguration"] == {"EncryptionOption": "SSE_S3"}
    assert results["OutputLocation"] == {
        "Fn::Join": ["", ["s3://", {"Ref": bucket}, "/athena-results/"]]
    }


def test_the_athena_scan_cutoff_is_a_deploy_setting(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """`-c duetime:athenaBytesScannedCutoff=…` (bytes): until 2026-12-01 only an embedder of
    the construct could change the 10 GiB (found by an outside audit)."""
    context = {"duetime:athenaBytesScannedCutoff": str(50 * GIB)}  # as `-c` passes it
    larger = _shared_synth(tmp_path_factory, "duetime-athena", context)

    (workgroup,) = larger.of_type("AWS::Athena::WorkGroup").values()
    configuration = workgroup["Properties"]["WorkGroupConfiguration"]
    assert configuration["BytesScannedCutoffPerQuery"] == 50 * GIB
    assert configuration["EnforceWorkGroupConfiguration"] is True


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (9_999_999, "athena_bytes_scanned_cutoff must be at least 10000000 bytes"),
        ("10GiB", "duetime:athenaBytesScannedCutoff must be a whole number: '10GiB'"),
    ],
)
def test_a_scan_cutoff_athena_would_refuse_is_refused_at_synth(value: Any, message: str) -> None:
    found = cdk_json_context() | {"duetime:athenaBytesScannedCutoff": value}
    with pytest.raises(ValueError) as refused:
        props_from_context(Context(found.get))

    assert str(refused.value) == message


def test_archiver_reads_the_runs_stream(synth: Synth) -> None:
    archiver, _ = synth.function("archiver")
    runs = synth.logical_id("Scheduler/Data/Runs")
    failures = synth.logical_id("Scheduler/History/ArchiveFailures")
    (mapping,) = [
        m["Properties"]
        for m in synth.of_type("AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["FunctionName"] == {"Ref": archiver}
    ]

    assert mapping["EventSourceArn"] == {"Fn::GetAtt": [runs, "StreamArn"]}
    assert mapping["StartingPosition"] == "TRIM_HORIZON"
    # Bisecting would rename retried halves and duplicate archived rows.
    assert mapping.get("BisectBatchOnFunctionError", False) is False
    # Retried until the records are 23 h old (the stream keeps 24 h), not dropped after a
    # few tries (found by an outside audit: 5 tries, then up to 1,000 runs never archived)
    assert mapping.get("MaximumRetryAttempts", -1) == -1
    assert mapping["MaximumRecordAgeInSeconds"] == 23 * 3600
    assert mapping["DestinationConfig"] == {
        "OnFailure": {"Destination": {"Fn::GetAtt": [failures, "Arn"]}}
    }
    (pattern,) = mapping["FilterCriteria"]["Filters"]
    assert '"eventName":["REMOVE"]' in pattern["Pattern"]


def test_archive_functions_know_their_bucket_and_failure_queue(synth: Synth) -> None:
    bucket = {"Ref": synth.logical_id("Scheduler/History/Bucket")}
    _, archiver = synth.function("archiver")
    _, compactor = synth.function("compactor")

    assert archiver["Environment"]["Variables"]["DUETIME_HISTORY_BUCKET"] == bucket
    assert archiver["Environment"]["Variables"]["DUETIME_ARCHIVE_FAILURE_QUEUE_URL"] == {
        "Ref": synth.logical_id("Scheduler/History/ArchiveFailures")
    }
    assert compactor["Environment"]["Variables"]["DUETIME_HISTORY_BUCKET"] == bucket


def test_compactor_runs_daily(synth: Synth) -> None:
    compactor, _ = synth.function("compactor")
    (rule,) = [
        r["Properties"]
        for r in synth.of_type("AWS::Events::Rule").values()
        if any(t["Arn"] == {"Fn::GetAtt": [compactor, "Arn"]} for t in r["Properties"]["Targets"])
    ]

    assert rule["ScheduleExpression"] == "cron(30 1 * * ? *)"


def test_the_compactor_reads_and_lists_the_history_prefix_only(synth: Synth) -> None:
    """Found by an outside audit: grant_read gave it s3:List* and s3:GetBucket* on the bucket,
    so it could list every key (the operators' Athena results too) and read the bucket's
    configuration. It reads objects under history/ and lists that prefix (HistoryBucket.list:
    ListObjectsV2 with Prefix history/dt=<day>/), nothing else of the bucket."""
    bucket = synth.logical_id("Scheduler/History/Bucket")
    statements = synth.statements(synth.role_of("compactor"))
    on_bucket = [s for s in statements if s["Resource"] == {"Fn::GetAtt": [bucket, "Arn"]}]
    on_objects = [
        s
        for s in statements
        if s["Resource"] == {"Fn::Join": ["", [{"Fn::GetAtt": [bucket, "Arn"]}, f"/{PREFIX}*"]]}
    ]
    reads = {a for s in on_objects for a in listed(s["Action"]) if a.startswith("s3:Get")}

    assert on_bucket == [
        {
            "Action": "s3:ListBucket",
            "Condition": {"StringLike": {"s3:prefix": [f"{PREFIX}*"]}},
            "Effect": "Allow",
            "Resource": {"Fn::GetAtt": [bucket, "Arn"]},
        }
    ]
    assert reads == {"s3:GetObject"}
    (condition,) = on_bucket[0]["Condition"]["StringLike"]["s3:prefix"]
    assert fnmatch.fnmatchcase(partition_prefix("2026-11-30"), condition)
