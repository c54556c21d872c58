"""The ManifestStore port contract: validated, idempotent registration that moves the current
pointer, copies that do not alias the caller's data, separate environments and bounded
retention. One factory per store; each gets the test's clock and ``keep``."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

import pytest

from relayflow.adapters.aws import tables
from relayflow.adapters.aws.clients import AwsClients
from relayflow.adapters.aws.manifests import DynamoDBManifestStore
from relayflow.adapters.memory.manifests import InMemoryManifestStore
from relayflow.config import Settings
from relayflow.errors import ValidationError
from relayflow.events import ManifestValidationError, build_manifest
from relayflow.ports import Clock
from tests.moto_support import moto_backend, use_fake_credentials

START_MS = 1_767_225_600_000


class RetainingStore(Protocol):
    """The port plus the retention reads both stores offer."""

    def register(self, environment: str, manifest: dict[str, Any]) -> str: ...

    def get_current(self, environment: str) -> dict[str, Any] | None: ...

    def get_version(self, environment: str, version_id: str) -> dict[str, Any] | None: ...

    def versions(self, environment: str) -> list[str]: ...


class ManualClock:
    """Stands still until the test moves it (registrations may share a millisecond)."""

    def __init__(self) -> None:
        self.now = START_MS

    def now_ms(self) -> int:
        return self.now


def dynamodb_manifest_store(clock: Clock, keep: int) -> RetainingStore:
    """A DynamoDB manifest store with an S3 bucket on moto (inside an active moto backend)."""
    clients = AwsClients(region="eu-west-1")
    settings = Settings(
        manifests_table="manifests", manifests_bucket="manifest-bodies", region="eu-west-1"
    )
    tables.create_resources(clients, settings)
    return DynamoDBManifestStore(
        "manifests",
        client_factory=clients.dynamodb,
        bucket="manifest-bodies",
        s3_factory=clients.s3,
        keep=keep,
        clock=clock,
    )


def memory_manifest_store(clock: Clock, keep: int) -> RetainingStore:
    return InMemoryManifestStore(keep=keep, clock=clock)


STORE_FACTORIES: dict[str, Callable[[Clock, int], RetainingStore]] = {
    "memory": memory_manifest_store,
    "dynamodb-moto": dynamodb_manifest_store,
}
ON_MOTO = {"dynamodb-moto"}


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture(params=sorted(STORE_FACTORIES))
def make_store(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, clock: ManualClock
) -> Iterator[Callable[..., RetainingStore]]:
    """``make_store(keep=3)``: a fresh store of the parametrised kind on the test's clock."""

    def build(keep: int = 3) -> RetainingStore:
        return STORE_FACTORIES[request.param](clock, keep)

    if request.param not in ON_MOTO:
        yield build
        return
    use_fake_credentials(monkeypatch)
    with moto_backend():
        yield build


def manifest(*workflow_ids: str, environment: str = "production") -> dict[str, Any]:
    return build_manifest(
        environment=environment, workflows=list(workflow_ids), event_filters=[], built_at=1
    )


def test_register_makes_the_manifest_current_with_its_version_id(
    make_store: Callable[..., RetainingStore],
) -> None:
    store = make_store()
    body = manifest("a")
    version = store.register("production", body)
    assert store.get_current("production") == {**body, "versionId": version}
    assert store.get_version("production", version) == {**body, "versionId": version}


def test_no_manifest_registered_reads_none(make_store: Callable[..., RetainingStore]) -> None:
    store = make_store()
    assert store.get_current("production") is None
    assert store.get_version("production", "v-unknown") is None
    assert store.versions("production") == []


def test_registering_the_same_content_again_is_idempotent(
    make_store: Callable[..., RetainingStore], clock: ManualClock
) -> None:
    store = make_store()
    first = store.register("production", manifest("a"))
    clock.now += 10
    store.register("production", manifest("b"))
    clock.now += 10
    again = store.register("production", manifest("a"))
    assert again == first
    assert store.get_current("production")["versionId"] == first  # type: ignore[index]
    assert store.versions("production")[0] == first


def test_a_version_id_that_does_not_match_the_content_is_refused(
    make_store: Callable[..., RetainingStore],
) -> None:
    store = make_store()
    with pytest.raises(ManifestValidationError):
        store.register("production", {**manifest("a"), "versionId": "not-its-hash"})
    assert store.get_current("production") is None


def test_an_invalid_manifest_leaves_the_current_one_in_place(
    make_store: Callable[..., RetainingStore],
) -> None:
    store = make_store()
    version = store.register("production", manifest("a"))
    with pytest.raises(ManifestValidationError):
        store.register("production", {"schemaVersion": 1})
    assert store.get_current("production")["versionId"] == version  # type: ignore[index]
    assert store.versions("production") == [version]


def test_an_unknown_environment_is_refused(make_store: Callable[..., RetainingStore]) -> None:
    store = make_store()
    with pytest.raises(ValidationError):
        store.register("staging", manifest("a"))


def test_environments_are_separate(make_store: Callable[..., RetainingStore]) -> None:
    store = make_store()
    production = store.register("production", manifest("a"))
    preview = store.register("preview", manifest("b", environment="preview"))
    assert store.get_current("production")["versionId"] == production  # type: ignore[index]
    assert store.get_current("preview")["versionId"] == preview  # type: ignore[index]
    assert store.get_current("development") is None
    assert store.versions("production") == [production]


def test_stored_manifests_do_not_alias_the_callers_data(
    make_store: Callable[..., RetainingStore],
) -> None:
    store = make_store()
    body = manifest("a")
    kept = copy.deepcopy(body)
    version = store.register("production", body)
    body["workflows"].append({"id": "sneaked-in"})
    read = store.get_current("production")
    assert read == {**kept, "versionId": version}
    assert read is not None
    read["workflows"].clear()
    assert store.get_current("production") == {**kept, "versionId": version}


@pytest.mark.parametrize("keep", [1, 2, 3])
def test_retention_keeps_the_newest_versions_and_never_the_current_one_out(
    make_store: Callable[..., RetainingStore], clock: ManualClock, keep: int
) -> None:
    store = make_store(keep=keep)
    registered: list[str] = []
    for name in ["a", "b", "c", "d", "e"]:
        clock.now += 1
        registered.append(store.register("production", manifest(name)))
    newest_first = registered[::-1]
    assert store.versions("production") == newest_first[:keep]
    for pruned in newest_first[keep:]:
        assert store.get_version("production", pruned) is None
    assert store.get_current("production")["versionId"] == registered[-1]  # type: ignore[index]


def test_registrations_in_the_same_millisecond_keep_their_order(
    make_store: Callable[..., RetainingStore],
) -> None:
    store = make_store(keep=2)
    a = store.register("production", manifest("a"))
    b = store.register("production", manifest("b"))
    c = store.register("production", manifest("c"))
    assert store.versions("production") == [c, b]
    assert store.get_version("production", a) is None
    assert store.register("production", manifest("b")) == b
    assert store.versions("production") == [b, c]


def test_a_clock_that_steps_back_cannot_make_a_new_registration_old(
    make_store: Callable[..., RetainingStore], clock: ManualClock
) -> None:
    store = make_store(keep=2)
    a = store.register("production", manifest("a"))
    clock.now += 60_000
    b = store.register("production", manifest("b"))
    clock.now -= 120_000  # another host's clock, two minutes behind
    c = store.register("production", manifest("c"))
    assert store.get_current("production")["versionId"] == c  # type: ignore[index]
    assert store.versions("production") == [c, b]
    assert store.get_version("production", a) is None


def test_a_manifest_too_large_for_one_item_still_round_trips(
    make_store: Callable[..., RetainingStore],
) -> None:
    store = make_store(keep=1)
    workflows = [
        {"id": f"wf-{i:04d}", "inputSchema": {"description": "é" * 400}} for i in range(500)
    ]
    body = build_manifest(
        environment="production", workflows=workflows, event_filters=[], built_at=1
    )
    version = store.register("production", body)
    assert store.get_current("production") == {**body, "versionId": version}


def test_concurrent_registrations_are_all_kept_and_one_is_current(
    make_store: Callable[..., RetainingStore], clock: ManualClock
) -> None:
    store = make_store(keep=10)
    names = [f"wf-{i}" for i in range(6)]
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        versions = list(pool.map(lambda name: store.register("production", manifest(name)), names))
    current = store.get_current("production")
    assert current is not None and current["versionId"] in versions
    assert sorted(store.versions("production")) == sorted(versions)
    assert store.versions("production")[0] == current["versionId"]
