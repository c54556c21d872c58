"""The AWS resources a deployment needs, as plain data, and ``create_resources`` for moto/dev.

The same definitions feed the infrastructure code: key schemas, indexes, TTL attribute and
billing mode of the tables; encryption and public-access settings of the buckets; the DLQ.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from relayflow.adapters.aws.errors import error_code, is_aws_error, reraise

if TYPE_CHECKING:
    from relayflow.adapters.aws.clients import AwsClients
    from relayflow.config import Settings

# ---- attribute and index names of the runs table ---------------------------------------------

PK = "pk"
SK = "sk"
TTL_ATTRIBUTE = "expiresAt"
#: Set on a run's header by a delivery that found the run held (``RunStore.mark_dirty``);
#: the holder's next save is conditional on its absence, and its ``PutItem`` removes it.
DELIVERY_MARK = "dm"
#: Sort key shared by the listing indexes: ``<startedAt, 15 digits>#<runId>``.
TIME_KEY = "gTime"
WORKFLOW_KEY = "gWorkflow"
STATUS_KEY = "gStatus"
ENVIRONMENT_KEY = "gEnvironment"
WAKE_SHARD_KEY = "gWake"
WAKE_AT = "wakeAt"
#: The wake-time index's sort key: the wake time rounded down to ``WAKE_BUCKET_MS``. The
#: index projects nothing else, so a run that parks again within the same bucket leaves its
#: entry as it is (no index write); the sweeper reads the exact ``wakeAt`` from the headers.
WAKE_BUCKET = "gWakeAt"
WAKE_BUCKET_MS = 15 * 60 * 1000
INDEX_BY_WORKFLOW = "byWorkflow"
INDEX_BY_STATUS = "byStatus"
INDEX_BY_ENVIRONMENT = "byEnvironment"
INDEX_BY_WAKE_TIME = "byWakeTime"
#: The qualified Lambda function a pinned run's body runs on (``name:7``): the partition of
#: the code-version index, which only pinned runs enter.
CODE_VERSION_KEY = "gCode"
#: The code-version index's sort key: ``live`` while the run has not ended, then
#: ``ended#<completedAt, 15 digits>`` (below ``live``), so the greatest key of a version says
#: whether a run still needs it, or when the last one ended.
CODE_VERSION_END = "gCodeEnd"
INDEX_BY_CODE_VERSION = "byCodeVersion"
#: Header attributes the listing indexes carry for their filters (environment, tag): only ones
#: that never change after the insert, so a save rewrites an index entry only when its key
#: changes. The run id is the table key every entry carries; a status filter runs on the
#: headers the listing reads anyway.
LISTING_FILTERS = [ENVIRONMENT_KEY, "tags"]
#: The status index's partition of running and waiting runs: a run moving between the two
#: (every wait) keeps its index entry.
LIVE_STATUS = "live"
#: The wake-time index is spread over this many partitions (``wake#0`` ...).
WAKE_SHARDS = 4


def _listing_index(name: str, partition: str) -> dict[str, Any]:
    filters = [attr for attr in LISTING_FILTERS if attr != partition]
    return {
        "IndexName": name,
        "KeySchema": [
            {"AttributeName": partition, "KeyType": "HASH"},
            {"AttributeName": TIME_KEY, "KeyType": "RANGE"},
        ],
        "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": filters},
    }


#: ``create_table`` arguments of the runs table (without ``TableName``).
RUNS_TABLE: dict[str, Any] = {
    "AttributeDefinitions": [
        {"AttributeName": PK, "AttributeType": "S"},
        {"AttributeName": SK, "AttributeType": "S"},
        {"AttributeName": TIME_KEY, "AttributeType": "S"},
        {"AttributeName": WORKFLOW_KEY, "AttributeType": "S"},
        {"AttributeName": STATUS_KEY, "AttributeType": "S"},
        {"AttributeName": ENVIRONMENT_KEY, "AttributeType": "S"},
        {"AttributeName": WAKE_SHARD_KEY, "AttributeType": "S"},
        {"AttributeName": WAKE_BUCKET, "AttributeType": "N"},
        {"AttributeName": CODE_VERSION_KEY, "AttributeType": "S"},
        {"AttributeName": CODE_VERSION_END, "AttributeType": "S"},
    ],
    "KeySchema": [
        {"AttributeName": PK, "KeyType": "HASH"},
        {"AttributeName": SK, "KeyType": "RANGE"},
    ],
    "GlobalSecondaryIndexes": [
        _listing_index(INDEX_BY_WORKFLOW, WORKFLOW_KEY),
        _listing_index(INDEX_BY_STATUS, STATUS_KEY),
        _listing_index(INDEX_BY_ENVIRONMENT, ENVIRONMENT_KEY),
        {
            # Sparse: only waiting/running runs with a wake time carry these attributes.
            "IndexName": INDEX_BY_WAKE_TIME,
            "KeySchema": [
                {"AttributeName": WAKE_SHARD_KEY, "KeyType": "HASH"},
                {"AttributeName": WAKE_BUCKET, "KeyType": "RANGE"},
            ],
            "Projection": {"ProjectionType": "KEYS_ONLY"},
        },
        {
            # Sparse: only runs pinned to a qualified Lambda version carry these attributes,
            # whose values change twice at most (pinned, ended), so saves rarely touch it.
            "IndexName": INDEX_BY_CODE_VERSION,
            "KeySchema": [
                {"AttributeName": CODE_VERSION_KEY, "KeyType": "HASH"},
                {"AttributeName": CODE_VERSION_END, "KeyType": "RANGE"},
            ],
            "Projection": {"ProjectionType": "KEYS_ONLY"},
        },
    ],
    "BillingMode": "PAY_PER_REQUEST",
    "SSESpecification": {"Enabled": True},
}

#: ``create_table`` arguments of the manifests table (without ``TableName``).
MANIFESTS_TABLE: dict[str, Any] = {
    "AttributeDefinitions": [
        {"AttributeName": PK, "AttributeType": "S"},
        {"AttributeName": SK, "AttributeType": "S"},
    ],
    "KeySchema": [
        {"AttributeName": PK, "KeyType": "HASH"},
        {"AttributeName": SK, "KeyType": "RANGE"},
    ],
    "BillingMode": "PAY_PER_REQUEST",
    "SSESpecification": {"Enabled": True},
}

#: Settings of both buckets: no public access, SSE-S3 by default, TLS only.
BUCKET_PUBLIC_ACCESS_BLOCK: dict[str, bool] = {
    "BlockPublicAcls": True,
    "IgnorePublicAcls": True,
    "BlockPublicPolicy": True,
    "RestrictPublicBuckets": True,
}
BUCKET_ENCRYPTION: dict[str, Any] = {
    "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
}


def tls_only_policy(bucket: str) -> dict[str, Any]:
    """A bucket policy refusing every request not made over TLS."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "TlsOnly",
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:*",
                "Resource": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"],
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            }
        ],
    }


#: Attributes of the alarm dead-letter queue (14 days retention, SQS-managed encryption).
DLQ_ATTRIBUTES: dict[str, str] = {
    "MessageRetentionPeriod": "1209600",
    "SqsManagedSseEnabled": "true",
}


@dataclass
class CreatedResources:
    """What :func:`create_resources` made (names and ARNs), and what already existed."""

    created: list[str] = field(default_factory=list)
    existing: list[str] = field(default_factory=list)
    dlq_url: str | None = None


def create_resources(
    clients: AwsClients, settings: Settings, *, enforce_tls: bool = False
) -> CreatedResources:
    """Create every resource ``settings`` names that does not exist yet (idempotent).

    Used by tests and the local dev stack on moto; deployments create the same resources
    from the same definitions with CDK. Settings left unset are skipped.

    Args:
        clients: Where to create them.
        settings: Names of the resources.
        enforce_tls: Attach :func:`tls_only_policy` to the buckets. Off by default: moto does
            not evaluate the policy's condition and would refuse every request (deployments
            attach it through CDK).
    """
    result = CreatedResources()
    if settings.table_name:
        _create_table(clients, settings.table_name, RUNS_TABLE, result, ttl=True)
    if settings.manifests_table:
        _create_table(clients, settings.manifests_table, MANIFESTS_TABLE, result, ttl=False)
    for bucket in {settings.payload_bucket, settings.manifests_bucket} - {None}:
        assert bucket is not None
        _create_bucket(clients, bucket, settings.region, result, enforce_tls=enforce_tls)
    for group in (settings.schedule_group, settings.recurring_schedule_group):
        if group:
            _create_schedule_group(clients, group, result)
    if settings.alarm_queue_url:
        _create_queue(clients, settings.alarm_queue_url.rstrip("/").rsplit("/", 1)[-1], result)
    if settings.dlq_arn:
        result.dlq_url = _create_queue(clients, settings.dlq_arn.rsplit(":", 1)[-1], result)
    return result


def _create_table(
    clients: AwsClients, name: str, spec: dict[str, Any], result: CreatedResources, *, ttl: bool
) -> None:
    dynamodb = clients.dynamodb()
    try:
        dynamodb.create_table(TableName=name, **spec)
    except Exception as exc:
        if is_aws_error(exc) and error_code(exc) == "ResourceInUseException":
            result.existing.append(f"table:{name}")
            return
        reraise(exc, f"creating table {name}")
    dynamodb.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 1})
    if ttl:
        dynamodb.update_time_to_live(
            TableName=name,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE},
        )
    dynamodb.update_continuous_backups(
        TableName=name,
        PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True},
    )
    result.created.append(f"table:{name}")


def _create_bucket(
    clients: AwsClients,
    bucket: str,
    region: str | None,
    result: CreatedResources,
    *,
    enforce_tls: bool,
) -> None:
    s3 = clients.s3()
    params: dict[str, Any] = {"Bucket": bucket}
    if region and region != "us-east-1":
        params["CreateBucketConfiguration"] = {"LocationConstraint": region}
    try:
        s3.create_bucket(**params)
    except Exception as exc:
        if is_aws_error(exc) and error_code(exc) in ("BucketAlreadyOwnedByYou",):
            result.existing.append(f"bucket:{bucket}")
            return
        reraise(exc, f"creating bucket {bucket}")
    s3.put_public_access_block(
        Bucket=bucket,
        PublicAccessBlockConfiguration=BUCKET_PUBLIC_ACCESS_BLOCK,  # type: ignore[arg-type]
    )
    s3.put_bucket_encryption(
        Bucket=bucket,
        ServerSideEncryptionConfiguration=BUCKET_ENCRYPTION,  # type: ignore[arg-type]
    )
    if enforce_tls:
        s3.put_bucket_policy(Bucket=bucket, Policy=json.dumps(tls_only_policy(bucket)))
    result.created.append(f"bucket:{bucket}")


def _create_schedule_group(clients: AwsClients, group: str, result: CreatedResources) -> None:
    scheduler = clients.scheduler()
    try:
        scheduler.get_schedule_group(Name=group)
    except Exception as exc:
        if not is_aws_error(exc) or error_code(exc) != "ResourceNotFoundException":
            reraise(exc, f"looking up schedule group {group}")
    else:
        result.existing.append(f"schedule-group:{group}")
        return
    try:
        scheduler.create_schedule_group(Name=group)
    except Exception as exc:
        if is_aws_error(exc) and error_code(exc) == "ConflictException":
            result.existing.append(f"schedule-group:{group}")
            return
        reraise(exc, f"creating schedule group {group}")
    result.created.append(f"schedule-group:{group}")


def _create_queue(clients: AwsClients, name: str, result: CreatedResources) -> str:
    sqs = clients.sqs()
    try:
        url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
    except Exception as exc:
        if not is_aws_error(exc) or error_code(exc) not in (
            "AWS.SimpleQueueService.NonExistentQueue",
            "QueueDoesNotExist",
        ):
            reraise(exc, f"looking up queue {name}")
    else:
        result.existing.append(f"queue:{name}")
        return url
    url = sqs.create_queue(QueueName=name, Attributes=DLQ_ATTRIBUTES)["QueueUrl"]  # type: ignore[arg-type]
    result.created.append(f"queue:{name}")
    return url
