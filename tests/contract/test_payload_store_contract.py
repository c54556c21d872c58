"""The PayloadStore port contract: content-addressed references, exact bytes back, a typed
error for a reference nothing was stored under. One factory per store."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from relayflow.adapters.aws import tables
from relayflow.adapters.aws.clients import AwsClients
from relayflow.adapters.aws.payloads import S3PayloadStore
from relayflow.adapters.memory import InMemoryPayloadStore
from relayflow.config import Settings
from relayflow.errors import PayloadNotFoundError, ValidationError
from relayflow.ports import PayloadStore
from tests.moto_support import moto_backend, use_fake_credentials

BUCKET = "payloads"


def s3_payload_store() -> PayloadStore:
    """An S3 payload store on moto (call inside an active moto backend)."""
    clients = AwsClients(region="eu-west-1")
    tables.create_resources(clients, Settings(payload_bucket=BUCKET, region="eu-west-1"))
    return S3PayloadStore(BUCKET, client_factory=clients.s3)


STORE_FACTORIES: dict[str, Callable[[], PayloadStore]] = {
    "memory": InMemoryPayloadStore,
    "s3-moto": s3_payload_store,
}
ON_MOTO = {"s3-moto"}


@pytest.fixture(params=sorted(STORE_FACTORIES))
def store(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[PayloadStore]:
    if request.param not in ON_MOTO:
        yield STORE_FACTORIES[request.param]()
        return
    use_fake_credentials(monkeypatch)
    with moto_backend():
        yield STORE_FACTORIES[request.param]()


def ref_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize(
    "data",
    [b'{"a": 1}', b"", bytes(range(256)), "é ✓ 🎉".encode(), b"x" * (1024 * 1024 + 7)],
    ids=["json", "empty", "binary", "utf8", "over-1mb"],
)
def test_put_returns_the_content_address_and_get_the_exact_bytes(
    store: PayloadStore, data: bytes
) -> None:
    ref = store.put(data)
    assert ref == ref_of(data)
    assert store.get(ref) == data


def test_equal_data_is_one_reference_and_different_data_another(store: PayloadStore) -> None:
    first = store.put(b"same")
    assert store.put(b"same") == first
    other = store.put(b"other")
    assert other != first
    assert (store.get(first), store.get(other)) == (b"same", b"other")


def test_concurrent_puts_of_equal_data_all_succeed_with_one_reference(store: PayloadStore) -> None:
    data = b'{"big": "' + b"v" * 50_000 + b'"}'
    with ThreadPoolExecutor(max_workers=6) as pool:
        refs = set(pool.map(lambda _: store.put(data), range(12)))
    assert refs == {ref_of(data)}
    assert store.get(ref_of(data)) == data


def test_the_stored_bytes_do_not_follow_the_callers_buffer(store: PayloadStore) -> None:
    buffer = bytearray(b"original")
    ref = store.put(bytes(buffer))
    buffer[:] = b"changed!"
    assert store.get(ref) == b"original"


def test_a_reference_nothing_was_stored_under_raises_payload_not_found(
    store: PayloadStore,
) -> None:
    with pytest.raises(PayloadNotFoundError):
        store.get(ref_of(b"never stored"))


@pytest.mark.parametrize(
    "ref", ["", "sha256:", "sha256:xyz", "md5:" + "0" * 32, "sha256:" + "A" * 64, "../etc"]
)
def test_a_string_that_is_not_a_reference_is_refused(store: PayloadStore, ref: str) -> None:
    with pytest.raises(ValidationError):
        store.get(ref)
