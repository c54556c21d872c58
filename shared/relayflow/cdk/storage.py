"""Storage of relayflow: the runs and manifests tables and the payload bucket.

Key schemas, indexes and the TTL attribute come from `relayflow.adapters.aws.tables`, the same
definitions the AWS adapters and the local stack use, so the deployed tables cannot drift.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_s3 as s3
from constructs import Construct

from relayflow.adapters.aws import tables
from relayflow.cdk.suppressions import acknowledge

__all__ = ["PAYLOAD_PREFIX", "RelayflowStorage", "table_from_definition"]

PAYLOAD_PREFIX = "payloads/"
"""Key prefix of payload objects (`S3PayloadStore`'s default)."""

_ATTRIBUTE_TYPES = {
    "S": dynamodb.AttributeType.STRING,
    "N": dynamodb.AttributeType.NUMBER,
    "B": dynamodb.AttributeType.BINARY,
}
_PROJECTIONS = {
    "ALL": dynamodb.ProjectionType.ALL,
    "KEYS_ONLY": dynamodb.ProjectionType.KEYS_ONLY,
    "INCLUDE": dynamodb.ProjectionType.INCLUDE,
}


def _key(
    schema: Sequence[Mapping[str, str]], types: Mapping[str, str], key_type: str
) -> dynamodb.Attribute | None:
    for element in schema:
        if element["KeyType"] == key_type:
            name = element["AttributeName"]
            return dynamodb.Attribute(name=name, type=_ATTRIBUTE_TYPES[types[name]])
    return None


def table_from_definition(
    scope: Construct,
    construct_id: str,
    definition: Mapping[str, Any],
    *,
    ttl_attribute: str | None,
    removal_policy: RemovalPolicy,
) -> dynamodb.Table:
    """Create a table from `create_table` arguments (key schema, GSIs, billing, SSE).

    Always on-demand, with point-in-time recovery and encryption, whatever the definition says
    about throughput; the definition decides keys and indexes.
    """
    types = {a["AttributeName"]: a["AttributeType"] for a in definition["AttributeDefinitions"]}
    partition = _key(definition["KeySchema"], types, "HASH")
    if partition is None:
        raise ValueError(f"table definition {construct_id} has no partition key")
    table = dynamodb.Table(
        scope,
        construct_id,
        partition_key=partition,
        sort_key=_key(definition["KeySchema"], types, "RANGE"),
        billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
        encryption=dynamodb.TableEncryption.AWS_MANAGED,
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        ),
        time_to_live_attribute=ttl_attribute,
        removal_policy=removal_policy,
        deletion_protection=removal_policy == RemovalPolicy.RETAIN,
    )
    for index in definition.get("GlobalSecondaryIndexes", ()):
        projection = index.get("Projection", {"ProjectionType": "ALL"})
        table.add_global_secondary_index(
            index_name=index["IndexName"],
            partition_key=_key(index["KeySchema"], types, "HASH"),
            sort_key=_key(index["KeySchema"], types, "RANGE"),
            projection_type=_PROJECTIONS[projection["ProjectionType"]],
            non_key_attributes=projection.get("NonKeyAttributes"),
        )
    return table


class RelayflowStorage(Construct):
    """The runs table, the manifests table, the payload bucket and its access-log bucket.

    Manifests too large for an item are stored in the payload bucket, outside the payload
    prefix, so payload expiry never touches them.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        removal_policy: RemovalPolicy,
        payload_expiration: Duration | None,
    ) -> None:
        """Create the tables and buckets; payloads expire after `payload_expiration` if set."""
        super().__init__(scope, construct_id)
        # Grant log delivery through a bucket policy (not an ACL) whatever the app's feature
        # flags say, so the log bucket can keep ACLs disabled.
        self.node.set_context("@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy", True)
        self.runs_table = table_from_definition(
            self,
            "RunsTable",
            tables.RUNS_TABLE,
            ttl_attribute=tables.TTL_ATTRIBUTE,
            removal_policy=removal_policy,
        )
        self.manifests_table = table_from_definition(
            self,
            "ManifestsTable",
            tables.MANIFESTS_TABLE,
            ttl_attribute=None,
            removal_policy=removal_policy,
        )
        auto_delete = removal_policy == RemovalPolicy.DESTROY
        self.access_log_bucket = s3.Bucket(
            self,
            "AccessLogBucket",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            lifecycle_rules=[s3.LifecycleRule(id="ExpireAccessLogs", expiration=Duration.days(90))],
            removal_policy=removal_policy,
            auto_delete_objects=auto_delete,
        )
        acknowledge(
            self.access_log_bucket,
            "AwsSolutions-S1",
            "This bucket receives the payload bucket's server access logs; logging its own "
            "access would recurse.",
        )
        payload_rules = [
            s3.LifecycleRule(
                id="AbortIncompleteUploads",
                abort_incomplete_multipart_upload_after=Duration.days(1),
            )
        ]
        if payload_expiration is not None:
            payload_rules.append(
                s3.LifecycleRule(
                    id="ExpirePayloads", prefix=PAYLOAD_PREFIX, expiration=payload_expiration
                )
            )
        self.payload_bucket = s3.Bucket(
            self,
            "PayloadBucket",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            server_access_logs_bucket=self.access_log_bucket,
            server_access_logs_prefix="payload-bucket/",
            lifecycle_rules=payload_rules,
            removal_policy=removal_policy,
            auto_delete_objects=auto_delete,
        )
        if auto_delete:
            _acknowledge_auto_delete(Stack.of(self))

    @property
    def manifests_bucket(self) -> s3.Bucket:
        """Where manifests too large for an item go (the payload bucket)."""
        return self.payload_bucket


def _acknowledge_auto_delete(stack: Stack) -> None:
    # The auto-delete provider is a CDK singleton at stack level, outside this construct.
    provider = stack.node.try_find_child("Custom::S3AutoDeleteObjectsCustomResourceProvider")
    if provider is None:
        return
    reason = (
        "CDK's own provider that empties the buckets when a disposable stack is deleted "
        "(removal policy DESTROY only); its role and runtime are managed by CDK."
    )
    for rule in ("AwsSolutions-IAM4", "AwsSolutions-L1"):
        acknowledge(provider, rule, reason)
