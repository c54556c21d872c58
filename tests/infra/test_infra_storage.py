"""The tables and buckets match the AWS adapters' own definitions and are locked down."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Template
from infra_asserts import resources

from relayflow.adapters.aws import tables

pytestmark = pytest.mark.slow


def _table(template: Template, definition: dict[str, Any]) -> dict[str, Any]:
    wanted = definition["KeySchema"]
    hits = [
        r["Properties"]
        for r in resources(template, "AWS::DynamoDB::Table").values()
        if r["Properties"]["KeySchema"] == wanted
        and len(r["Properties"].get("GlobalSecondaryIndexes", []))
        == len(definition.get("GlobalSecondaryIndexes", []))
    ]
    assert len(hits) == 1
    found: dict[str, Any] = hits[0]
    return found


@pytest.mark.parametrize("name", ["RUNS_TABLE", "MANIFESTS_TABLE"])
def test_table_keys_and_attributes_follow_the_adapter_definitions(
    any_template: Template, name: str
) -> None:
    definition = getattr(tables, name)
    table = _table(any_template, definition)
    assert table["KeySchema"] == definition["KeySchema"]
    assert sorted(table["AttributeDefinitions"], key=lambda a: a["AttributeName"]) == sorted(
        definition["AttributeDefinitions"], key=lambda a: a["AttributeName"]
    )


def test_runs_table_indexes_follow_the_adapter_definitions(any_template: Template) -> None:
    table = _table(any_template, tables.RUNS_TABLE)
    deployed = {i["IndexName"]: i for i in table["GlobalSecondaryIndexes"]}
    expected = {i["IndexName"]: i for i in tables.RUNS_TABLE["GlobalSecondaryIndexes"]}
    assert (
        set(deployed)
        == set(expected)
        == {
            tables.INDEX_BY_WORKFLOW,
            tables.INDEX_BY_STATUS,
            tables.INDEX_BY_ENVIRONMENT,
            tables.INDEX_BY_WAKE_TIME,
            tables.INDEX_BY_CODE_VERSION,
        }
    )
    for name, index in expected.items():
        assert deployed[name]["KeySchema"] == index["KeySchema"]
        assert (
            deployed[name]["Projection"]["ProjectionType"] == index["Projection"]["ProjectionType"]
        )
        assert sorted(deployed[name]["Projection"].get("NonKeyAttributes", [])) == sorted(
            index["Projection"].get("NonKeyAttributes", [])
        )


@pytest.mark.parametrize("name", ["RUNS_TABLE", "MANIFESTS_TABLE"])
def test_tables_are_on_demand_encrypted_and_recoverable(any_template: Template, name: str) -> None:
    table = _table(any_template, getattr(tables, name))
    assert table["BillingMode"] == "PAY_PER_REQUEST"
    assert table["SSESpecification"] == {"SSEEnabled": True}
    assert table["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}


def test_only_the_runs_table_expires_items_through_ttl(any_template: Template) -> None:
    runs = _table(any_template, tables.RUNS_TABLE)
    manifests = _table(any_template, tables.MANIFESTS_TABLE)
    assert runs["TimeToLiveSpecification"] == {
        "AttributeName": tables.TTL_ATTRIBUTE,
        "Enabled": True,
    }
    assert "TimeToLiveSpecification" not in manifests


def test_retained_deployments_protect_their_tables(
    sample_template: Template, variant_template: Template
) -> None:
    # The sample dev stage is disposable (destroy); the variant keeps its data (retain).
    for template, protected in ((sample_template, False), (variant_template, True)):
        for resource in resources(template, "AWS::DynamoDB::Table").values():
            assert resource["Properties"]["DeletionProtectionEnabled"] is protected
            assert resource["DeletionPolicy"] == ("Retain" if protected else "Delete")


def _payload_bucket(template: Template) -> dict[str, Any]:
    hits = [
        r["Properties"]
        for r in resources(template, "AWS::S3::Bucket").values()
        if "LoggingConfiguration" in r["Properties"]
    ]
    assert len(hits) == 1
    found: dict[str, Any] = hits[0]
    return found


def test_buckets_are_encrypted_private_and_owner_enforced(any_template: Template) -> None:
    buckets = resources(any_template, "AWS::S3::Bucket")
    assert len(buckets) == 2  # payloads (and large manifests) + their access logs
    for bucket in buckets.values():
        props = bucket["Properties"]
        assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"] == [
            {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
        ]
        assert props["PublicAccessBlockConfiguration"] == tables.BUCKET_PUBLIC_ACCESS_BLOCK
        assert props["OwnershipControls"] == {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}


def test_every_bucket_refuses_requests_without_tls(any_template: Template) -> None:
    buckets = set(resources(any_template, "AWS::S3::Bucket"))
    tls_only = set()
    for policy in resources(any_template, "AWS::S3::BucketPolicy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if statement["Effect"] == "Deny" and statement.get("Condition") == {
                "Bool": {"aws:SecureTransport": "false"}
            }:
                tls_only.add(policy["Properties"]["Bucket"]["Ref"])
    assert tls_only == buckets


def test_payload_bucket_logs_access_and_cleans_up_uploads(any_template: Template) -> None:
    bucket = _payload_bucket(any_template)
    log_buckets = set(resources(any_template, "AWS::S3::Bucket")) - {
        logical_id
        for logical_id, r in resources(any_template, "AWS::S3::Bucket").items()
        if "LoggingConfiguration" in r["Properties"]
    }
    assert bucket["LoggingConfiguration"]["DestinationBucketName"] == {"Ref": log_buckets.pop()}
    rules = {rule["Id"]: rule for rule in bucket["LifecycleConfiguration"]["Rules"]}
    assert rules["AbortIncompleteUploads"]["AbortIncompleteMultipartUpload"] == {
        "DaysAfterInitiation": 1
    }


def test_payload_expiry_is_opt_in_and_limited_to_the_payload_prefix(
    sample_template: Template, variant_template: Template
) -> None:
    sample_rules = _payload_bucket(sample_template)["LifecycleConfiguration"]["Rules"]
    assert [r["Id"] for r in sample_rules] == ["AbortIncompleteUploads"]
    variant_rules = {
        r["Id"]: r for r in _payload_bucket(variant_template)["LifecycleConfiguration"]["Rules"]
    }
    assert variant_rules["ExpirePayloads"]["Prefix"] == "payloads/"
    assert variant_rules["ExpirePayloads"]["ExpirationInDays"] == 400
