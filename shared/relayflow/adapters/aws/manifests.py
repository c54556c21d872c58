"""DynamoDB manifest store: versions per environment, a ``current`` pointer, and retention.

Items: ``pk = env#<environment>``; ``sk = current`` (the pointer and a registration counter)
and ``sk = v#<versionId>`` (registration time and the body, or its S3 key when too large).
Validation and retention are the shared pure helpers of ``relayflow.events``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from relayflow.adapters.aws.attributes import ITEM_BUDGET, n, s
from relayflow.adapters.aws.errors import error_code, is_aws_error, reraise
from relayflow.clock import wall_ms
from relayflow.errors import StaleRunError, ValidationError
from relayflow.events import (
    DEFAULT_KEEP,
    ManifestVersion,
    plan_retention,
    prepare_manifest,
    record_registration,
    validate_environment,
)
from relayflow.ports import Clock

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_s3 import S3Client

    from relayflow.config import Settings

CURRENT_SK = "current"
VERSION_PREFIX = "v#"
#: Bodies larger than this go to the manifests bucket.
BODY_BUDGET = ITEM_BUDGET - 2_000
#: Registration attempts. A lost attempt means another registration of the environment
#: committed, so N registrations at once all succeed within N attempts.
_ROUNDS = 25


class _SystemClock:
    def now_ms(self) -> int:
        return wall_ms()


class DynamoDBManifestStore:
    """A :class:`~relayflow.ports.ManifestStore` on DynamoDB (bodies over ~350 KB in S3).

    Registering is idempotent (same content, same ``versionId``, first body kept) and makes
    the version current and newest; the newest ``keep`` versions by registration time are
    kept and the current one is never pruned.

    Args:
        table_name: The manifests table (see ``tables.MANIFESTS_TABLE``).
        client_factory: Returns the DynamoDB client.
        bucket: The manifests bucket for large bodies (large manifests are refused without).
        s3_factory: Returns the S3 client (needed with ``bucket``).
        keep: Versions kept per environment (at least 1).
        clock: Registration times.
    """

    def __init__(
        self,
        table_name: str,
        *,
        client_factory: Callable[[], DynamoDBClient],
        bucket: str | None = None,
        s3_factory: Callable[[], S3Client] | None = None,
        keep: int = DEFAULT_KEEP,
        clock: Clock | None = None,
    ) -> None:
        plan_retention([], None, keep)  # validates keep
        if bucket is not None and s3_factory is None:
            raise ValidationError("a manifests bucket needs an S3 client factory")
        self.table_name = table_name
        self.bucket = bucket
        self.keep = keep
        self._db_factory = client_factory
        self._s3_factory = s3_factory
        self._clock: Clock = clock or _SystemClock()

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        client_factory: Callable[[], DynamoDBClient],
        s3_factory: Callable[[], S3Client] | None = None,
        clock: Clock | None = None,
    ) -> DynamoDBManifestStore:
        """A store on ``RELAYFLOW_MANIFESTS_TABLE`` (and ``RELAYFLOW_MANIFESTS_BUCKET``)."""
        return cls(
            settings.require("manifests_table"),
            client_factory=client_factory,
            bucket=settings.manifests_bucket,
            s3_factory=s3_factory if settings.manifests_bucket else None,
            keep=settings.manifest_keep,
            clock=clock,
        )

    def register(self, environment: str, manifest: dict[str, Any]) -> str:
        """Validate and store ``manifest`` as the environment's current one.

        Returns:
            The manifest's ``versionId``.

        Raises:
            ValidationError: Unknown environment, or a body too large without a bucket.
            ManifestValidationError: The manifest is refused (see ``prepare_manifest``).
        """
        validate_environment(environment)
        version_id, prepared = prepare_manifest(manifest)
        body = json.dumps(prepared, separators=(",", ":"), ensure_ascii=False)
        body_key = None
        if len(body.encode("utf-8")) > BODY_BUDGET:
            body_key = self._put_body(environment, version_id, body)
        for _ in range(_ROUNDS):
            history, seq = self._history(environment)
            history = record_registration(history, version_id, self._clock.now_ms())
            if self._commit(environment, version_id, history[-1], seq, body, body_key):
                plan = plan_retention(history, version_id, self.keep)
                for pruned in plan.pruned:
                    self._prune(environment, pruned)
                return version_id
        raise StaleRunError(f"manifests of {environment} kept changing during registration")

    def get_current(self, environment: str) -> dict[str, Any] | None:
        """The environment's current manifest, or None when none is registered."""
        pointer = self._get(environment, CURRENT_SK)
        if pointer is None or "versionId" not in pointer:
            return None
        return self.get_version(environment, pointer["versionId"]["S"])

    def get_version(self, environment: str, version_id: str) -> dict[str, Any] | None:
        """A retained version of the environment's manifest, or None."""
        item = self._get(environment, VERSION_PREFIX + version_id)
        if item is None:
            return None
        text = self._read_body(item["bodyKey"]["S"]) if "bodyKey" in item else item["body"]["S"]
        manifest: dict[str, Any] = json.loads(text)
        return manifest

    def versions(self, environment: str) -> list[str]:
        """The retained version ids, newest registration first (the current one first)."""
        history, _ = self._history(environment)
        pointer = self._get(environment, CURRENT_SK)
        current = pointer["versionId"]["S"] if pointer and "versionId" in pointer else None
        return list(plan_retention(history, current, max(1, len(history))).kept)

    # ---- storage --------------------------------------------------------------------------

    def _db(self) -> DynamoDBClient:
        return self._db_factory()

    def _get(self, environment: str, sk: str) -> dict[str, Any] | None:
        try:
            answer = self._db().get_item(
                TableName=self.table_name,
                Key={"pk": s(f"env#{environment}"), "sk": s(sk)},
                ConsistentRead=True,
            )
        except Exception as exc:
            reraise(exc, f"reading manifests of {environment}")
        item: dict[str, Any] | None = answer.get("Item")
        return item

    def _history(self, environment: str) -> tuple[list[ManifestVersion], int]:
        """Registered versions, oldest first, and the registration counter."""
        params: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": s(f"env#{environment}")},
            "ProjectionExpression": "sk, versionId, registeredAt, seq",
            "ConsistentRead": True,
        }
        versions: list[tuple[int, int, str]] = []
        seq = 0
        while True:
            try:
                page = self._db().query(**params)
            except Exception as exc:
                reraise(exc, f"listing manifests of {environment}")
            for item in page.get("Items", []):
                if item["sk"]["S"] == CURRENT_SK:
                    seq = int(item["seq"]["N"])
                elif item["sk"]["S"].startswith(VERSION_PREFIX):
                    versions.append(
                        (
                            int(item["registeredAt"]["N"]),
                            int(item["seq"]["N"]),
                            item["versionId"]["S"],
                        )
                    )
            if "LastEvaluatedKey" not in page:
                break
            params["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        history = [ManifestVersion(v, at) for at, _, v in sorted(versions)]
        return history, seq

    def _commit(
        self,
        environment: str,
        version_id: str,
        registration: ManifestVersion,
        seq: int,
        body: str,
        body_key: str | None,
    ) -> bool:
        """Write the version and the pointer atomically; False when another write won."""
        pk = s(f"env#{environment}")
        names = {"#r": "registeredAt", "#s": "seq", "#v": "versionId", "#b": "body"}
        values: dict[str, Any] = {
            ":r": n(registration.registered_at),
            ":s": n(seq + 1),
            ":v": s(version_id),
        }
        if body_key is not None:
            names["#b"] = "bodyKey"
            values[":b"] = s(body_key)
        else:
            values[":b"] = s(body)
        pointer_condition = "attribute_not_exists(pk)" if seq == 0 else "#s = :old"
        pointer: dict[str, Any] = {
            "TableName": self.table_name,
            "Item": {"pk": pk, "sk": s(CURRENT_SK), "versionId": s(version_id), "seq": n(seq + 1)},
            "ConditionExpression": pointer_condition,
        }
        if seq:
            pointer["ExpressionAttributeNames"] = {"#s": "seq"}
            pointer["ExpressionAttributeValues"] = {":old": n(seq)}
        try:
            self._db().transact_write_items(
                TransactItems=[
                    {
                        "Update": {
                            "TableName": self.table_name,
                            "Key": {"pk": pk, "sk": s(VERSION_PREFIX + version_id)},
                            "UpdateExpression": (
                                "SET #r = :r, #s = :s, #v = :v, #b = if_not_exists(#b, :b)"
                            ),
                            "ExpressionAttributeNames": names,
                            "ExpressionAttributeValues": values,
                        }
                    },
                    {"Put": pointer},  # type: ignore[typeddict-item]
                ]
            )
        except Exception as exc:
            if is_aws_error(exc) and error_code(exc) == "TransactionCanceledException":
                return False
            reraise(exc, f"registering manifest {version_id} in {environment}")
        return True

    def _prune(self, environment: str, version_id: str) -> None:
        """Delete a version unless it became current meanwhile (checked in the same write)."""
        pk = s(f"env#{environment}")
        key = {"pk": pk, "sk": s(VERSION_PREFIX + version_id)}
        item = self._get(environment, VERSION_PREFIX + version_id)
        try:
            self._db().transact_write_items(
                TransactItems=[
                    {
                        "ConditionCheck": {
                            "TableName": self.table_name,
                            "Key": {"pk": pk, "sk": s(CURRENT_SK)},
                            "ConditionExpression": "versionId <> :v",
                            "ExpressionAttributeValues": {":v": s(version_id)},
                        }
                    },
                    {"Delete": {"TableName": self.table_name, "Key": key}},
                ]
            )
        except Exception as exc:
            if is_aws_error(exc) and error_code(exc) == "TransactionCanceledException":
                return
            reraise(exc, f"pruning manifest {version_id} of {environment}")
        if item is not None and "bodyKey" in item and self.bucket is not None:
            try:
                self._s3().delete_object(Bucket=self.bucket, Key=item["bodyKey"]["S"])
            except Exception as exc:
                reraise(exc, f"deleting the body of manifest {version_id}")

    def _s3(self) -> S3Client:
        if self._s3_factory is None or self.bucket is None:
            raise ValidationError(
                "this manifest is larger than a DynamoDB item; configure a manifests bucket"
            )
        return self._s3_factory()

    def _put_body(self, environment: str, version_id: str, body: str) -> str:
        key = f"manifests/{environment}/{version_id}.json"
        s3 = self._s3()
        try:
            s3.put_object(
                Bucket=str(self.bucket),
                Key=key,
                Body=body.encode("utf-8"),
                IfNoneMatch="*",
                ServerSideEncryption="AES256",
                ContentType="application/json",
            )
        except Exception as exc:
            if not (is_aws_error(exc) and error_code(exc) == "PreconditionFailed"):
                reraise(exc, f"storing the body of manifest {version_id}")
        return key

    def _read_body(self, key: str) -> str:
        try:
            answer = self._s3().get_object(Bucket=str(self.bucket), Key=key)
        except Exception as exc:
            reraise(exc, f"reading manifest body {key}")
        return answer["Body"].read().decode("utf-8")
