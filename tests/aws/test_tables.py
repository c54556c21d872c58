"""The resource definitions create working tables, buckets, schedule group and DLQ on moto."""

from __future__ import annotations

import json

import boto3

from relayflow.adapters.aws import tables
from relayflow.adapters.aws.clients import AwsClients
from relayflow.config import Settings

SETTINGS = Settings(
    table_name="runs",
    manifests_table="manifests",
    payload_bucket="payloads",
    manifests_bucket="manifest-bodies",
    schedule_group="relayflow",
    dlq_arn="arn:aws:sqs:eu-west-1:123456789012:relayflow-dlq",
    region="eu-west-1",
)


def test_create_resources_builds_everything_once(aws: None) -> None:
    clients = AwsClients(region="eu-west-1")
    first = tables.create_resources(clients, SETTINGS)
    assert sorted(first.created) == [
        "bucket:manifest-bodies",
        "bucket:payloads",
        "queue:relayflow-dlq",
        "schedule-group:relayflow",
        "table:manifests",
        "table:runs",
    ]
    again = tables.create_resources(clients, SETTINGS)
    assert again.created == []
    assert sorted(again.existing) == sorted(first.created)
    assert again.dlq_url == first.dlq_url


def test_runs_table_has_its_indexes_ttl_and_on_demand_billing(aws: None) -> None:
    clients = AwsClients(region="eu-west-1")
    tables.create_resources(clients, SETTINGS)
    dynamodb = clients.dynamodb()
    table = dynamodb.describe_table(TableName="runs")["Table"]
    assert table["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    assert {i["IndexName"] for i in table["GlobalSecondaryIndexes"]} == {
        tables.INDEX_BY_WORKFLOW,
        tables.INDEX_BY_STATUS,
        tables.INDEX_BY_ENVIRONMENT,
        tables.INDEX_BY_WAKE_TIME,
        tables.INDEX_BY_CODE_VERSION,
    }
    ttl = dynamodb.describe_time_to_live(TableName="runs")["TimeToLiveDescription"]
    assert ttl == {"TimeToLiveStatus": "ENABLED", "AttributeName": tables.TTL_ATTRIBUTE}
    backups = dynamodb.describe_continuous_backups(TableName="runs")
    pitr = backups["ContinuousBackupsDescription"]["PointInTimeRecoveryDescription"]
    assert pitr["PointInTimeRecoveryStatus"] == "ENABLED"


def test_buckets_block_public_access_encrypt_and_require_tls(aws: None) -> None:
    clients = AwsClients(region="eu-west-1")
    tables.create_resources(clients, SETTINGS, enforce_tls=True)
    s3 = clients.s3()
    block = s3.get_public_access_block(Bucket="payloads")["PublicAccessBlockConfiguration"]
    assert all(block.values())
    rules = s3.get_bucket_encryption(Bucket="payloads")["ServerSideEncryptionConfiguration"]
    assert rules["Rules"][0]["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    policy = json.loads(s3.get_bucket_policy(Bucket="payloads")["Policy"])
    assert policy["Statement"][0]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_unset_settings_create_nothing(aws: None) -> None:
    assert tables.create_resources(AwsClients(region="eu-west-1"), Settings()).created == []


def test_clients_are_created_lazily_and_cached(aws: None) -> None:
    session = boto3.Session(region_name="eu-west-1")
    clients = AwsClients(session=session)
    assert clients.dynamodb() is clients.dynamodb()
    assert clients.s3() is not clients.dynamodb()
    assert clients.lambda_().meta.config.read_timeout == 905


def test_buckets_stay_usable_on_moto_without_the_tls_policy(aws: None) -> None:
    clients = AwsClients(region="eu-west-1")
    tables.create_resources(clients, SETTINGS)
    clients.s3().put_object(Bucket="payloads", Key="k", Body=b"v")
    assert clients.s3().get_object(Bucket="payloads", Key="k")["Body"].read() == b"v"
