"""The DynamoDB manifest store behaves like the in-memory one, and keeps large bodies in S3."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from relayflow.adapters.aws import tables
from relayflow.adapters.aws.clients import AwsClients
from relayflow.adapters.aws.manifests import DynamoDBManifestStore
from relayflow.adapters.memory.manifests import InMemoryManifestStore
from relayflow.config import Settings
from relayflow.errors import ValidationError
from relayflow.events import ManifestValidationError, build_manifest

TABLE = "manifests"
BUCKET = "manifest-bodies"


class StepClock:
    """A clock that moves one millisecond per reading (registrations are ordered)."""

    def __init__(self) -> None:
        self.now = 1_767_225_600_000

    def now_ms(self) -> int:
        self.now += 1
        return self.now


@pytest.fixture
def clients(aws: None) -> Iterator[AwsClients]:
    built = AwsClients(region="eu-west-1")
    tables.create_resources(
        built,
        Settings(manifests_table=TABLE, manifests_bucket=BUCKET, region="eu-west-1"),
    )
    yield built


def dynamo(clients: AwsClients, **kwargs: Any) -> DynamoDBManifestStore:
    return DynamoDBManifestStore(
        TABLE,
        client_factory=clients.dynamodb,
        bucket=BUCKET,
        s3_factory=clients.s3,
        clock=kwargs.pop("clock", StepClock()),
        **kwargs,
    )


def manifest(*workflow_ids: str) -> dict[str, Any]:
    return build_manifest(
        environment="production", workflows=list(workflow_ids), event_filters=[], built_at=1
    )


def test_register_makes_current_and_is_idempotent(clients: AwsClients) -> None:
    store = dynamo(clients)
    first = store.register("production", manifest("a"))
    assert store.register("production", manifest("a")) == first
    current = store.get_current("production")
    assert current is not None and current["versionId"] == first
    assert store.get_current("preview") is None
    assert store.versions("production") == [first]


@pytest.mark.parametrize("keep", [1, 2, 3])
def test_retention_matches_the_in_memory_store(clients: AwsClients, keep: int) -> None:
    store = dynamo(clients, keep=keep)
    memory = InMemoryManifestStore(keep=keep, clock=StepClock())
    sequence = ["a", "b", "c", "a", "d", "b", "b", "e", "c"]
    for name in sequence:
        body = manifest(name)
        assert store.register("development", body) == memory.register("development", body)
        assert store.get_current("development") == memory.get_current("development")
        assert store.versions("development") == memory.versions("development")
        assert len(store.versions("development")) <= keep


def test_environments_are_separate(clients: AwsClients) -> None:
    store = dynamo(clients)
    production = store.register("production", manifest("a"))
    preview = store.register("preview", manifest("b"))
    assert store.get_current("production")["versionId"] == production  # type: ignore[index]
    assert store.get_current("preview")["versionId"] == preview  # type: ignore[index]


def test_invalid_manifests_and_environments_are_refused(clients: AwsClients) -> None:
    store = dynamo(clients)
    with pytest.raises(ManifestValidationError):
        store.register("production", {"schemaVersion": 1})
    with pytest.raises(ValidationError):
        store.register("staging", manifest("a"))
    assert store.get_current("production") is None


def big_manifest() -> dict[str, Any]:
    return build_manifest(
        environment="production",
        workflows=[
            {"id": f"wf-{i:04d}", "inputSchema": {"description": "x" * 400}} for i in range(1000)
        ],
        event_filters=[],
        built_at=1,
    )


def test_large_manifests_live_in_s3(clients: AwsClients) -> None:
    store = dynamo(clients, keep=1)
    body = big_manifest()
    version = store.register("production", body)
    assert store.get_current("production") == {**body, "versionId": version}
    keys = [o["Key"] for o in clients.s3().list_objects_v2(Bucket=BUCKET).get("Contents", [])]
    assert keys == [f"manifests/production/{version}.json"]
    store.register("production", manifest("small"))
    assert clients.s3().list_objects_v2(Bucket=BUCKET).get("Contents", []) == []


def test_large_manifests_need_a_bucket(clients: AwsClients) -> None:
    store = DynamoDBManifestStore(TABLE, client_factory=clients.dynamodb)
    with pytest.raises(ValidationError, match="manifests bucket"):
        store.register("production", big_manifest())


def test_from_settings_reads_table_bucket_and_keep(clients: AwsClients) -> None:
    settings = Settings(manifests_table=TABLE, manifests_bucket=BUCKET, manifest_keep=5)
    store = DynamoDBManifestStore.from_settings(
        settings, client_factory=clients.dynamodb, s3_factory=clients.s3
    )
    assert (store.table_name, store.bucket, store.keep) == (TABLE, BUCKET, 5)


class RacedClient:
    """The DynamoDB client, with ``rivals`` registrations committed just before each of the
    store's first commits: each commit of the store then finds the environment changed."""

    def __init__(self, inner: Any, rival: DynamoDBManifestStore, rivals: int) -> None:
        self._inner = inner
        self._rival = rival
        self._left = rivals

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def transact_write_items(self, **params: Any) -> Any:
        if self._left > 0 and "Put" in params["TransactItems"][-1]:
            self._left -= 1
            self._rival.register("production", manifest(f"rival-{self._left}"))
        return self._inner.transact_write_items(**params)


def test_a_registration_outlasts_many_registrations_committing_first(
    clients: AwsClients,
) -> None:
    rival = dynamo(clients, keep=20)
    raced = RacedClient(clients.dynamodb(), rival, rivals=12)
    store = DynamoDBManifestStore(
        TABLE,
        client_factory=lambda: raced,
        clock=StepClock(),
        keep=20,
    )
    version = store.register("production", manifest("mine"))
    assert store.get_current("production")["versionId"] == version  # type: ignore[index]
    assert len(store.versions("production")) == 13
