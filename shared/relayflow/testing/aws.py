"""moto that applies each request atomically, for relayflow's tests and users' own.

moto's in-process backends take no lock: two threads (or two requests to a threaded moto
server) can both pass the same ``attribute_not_exists`` or version condition, and one write is
silently lost, which real DynamoDB never does. :func:`mock_aws` is a drop-in for moto's
``mock_aws`` that serializes each DynamoDB, EventBridge Scheduler, S3 and SQS request (one
re-entrant lock per service around its request handler), so a race test on moto passes or
fails for the reasons it would on AWS. It also sets fake credentials and a region, and can
model on purpose two things moto leaves out: global secondary indexes that lag behind their
table, and ``BatchWriteItem`` calls that leave items unprocessed.

Needs moto: ``pip install 'relayflow[testing]'``.
"""

from __future__ import annotations

import collections
import copy
import functools
import importlib
import inspect
import os
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar, cast, overload

from relayflow.errors import ValidationError
from relayflow.testing._moto_transactions import TransactionCopy, copy_each_table_once

__all__ = ["AtomicMockAWS", "atomic_requests", "mock_aws"]

P = ParamSpec("P")
T = TypeVar("T")

#: The region set for the mock unless one is given.
DEFAULT_REGION = "us-east-1"
_FAKE_ENVIRONMENT = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_SESSION_TOKEN": "testing",
}
#: Unset while mocked: a profile could lend real credentials, an endpoint would bypass the mock.
_UNSET_ENVIRONMENT = ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB")

#: One lock per service; a request handler holds its service's lock for the whole request.
#: Re-entrant because moto's S3 handlers call one another for one request.
_LOCKS: dict[str, Any] = {
    "dynamodb": threading.RLock(),
    "scheduler": threading.RLock(),
    "s3": threading.RLock(),
    "sqs": threading.RLock(),
}


def _locked(service: str, method: Callable[..., T]) -> Callable[..., T]:
    @functools.wraps(method)
    def serialized(*args: Any, **kwargs: Any) -> T:
        # Looked up per call, so the proof test can watch who waits for the lock.
        with _LOCKS[service]:
            return method(*args, **kwargs)

    return serialized


# ---- installing the patches (reference-counted: nested and concurrent mocks share them) --


@dataclass
class _Patch:
    owner: Any  # a class, or a module
    name: str
    replacement: Callable[[Callable[..., Any]], Callable[..., Any]]
    saved: dict[str, Any] = field(default_factory=dict)

    def apply(self) -> None:
        own = self.owner.__dict__
        self.saved = {"had": self.name in own, "value": own.get(self.name)}
        setattr(self.owner, self.name, self.replacement(getattr(self.owner, self.name)))

    def undo(self) -> None:
        if self.saved["had"]:
            setattr(self.owner, self.name, self.saved["value"])
        else:
            delattr(self.owner, self.name)


class _Installation:
    """The patched moto classes, applied while at least one user holds them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._patches: list[_Patch] = []
        self._saved_copy: Any = None

    def acquire(self) -> None:
        with self._lock:
            if self._users == 0:
                self._patches = _patches()
                for patch in self._patches:
                    patch.apply()
                self._swap_transaction_copy()
            self._users += 1

    def release(self) -> None:
        with self._lock:
            self._users -= 1
            if self._users == 0:
                for patch in reversed(self._patches):
                    patch.undo()
                self._patches = []
                self._restore_transaction_copy()

    def _swap_transaction_copy(self) -> None:
        models: Any = importlib.import_module("moto.dynamodb.models")
        self._saved_copy = models.copy
        models.copy = TransactionCopy()

    def _restore_transaction_copy(self) -> None:
        models: Any = importlib.import_module("moto.dynamodb.models")
        models.copy = self._saved_copy


_INSTALLATION = _Installation()


def _patches() -> list[_Patch]:
    import moto.backends
    import moto.core.responses
    from moto.core.serialize import BaseJSONSerializer
    from moto.dynamodb.comparisons import ConditionExpressionParser
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.table import Table
    from moto.dynamodb.responses import DynamoHandler
    from moto.s3.responses import S3Response
    from moto.scheduler.responses import EventBridgeSchedulerResponse
    from moto.sqs.responses import SQSResponse

    def lock(service: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        return lambda method: _locked(service, method)

    return [
        _Patch(DynamoHandler, "call_action", lock("dynamodb")),
        _Patch(EventBridgeSchedulerResponse, "call_action", lock("scheduler")),
        _Patch(SQSResponse, "call_action", lock("sqs")),
        _Patch(S3Response, "bucket_response", lock("s3")),
        _Patch(S3Response, "key_response", lock("s3")),
        _Patch(DynamoDBBackend, "transact_write_items", copy_each_table_once),
        _Patch(DynamoHandler, "batch_write_item", _leaving_items_unprocessed),
        _Patch(Table, "query", _lagging_index_read),
        _Patch(Table, "query", _one_partition_query),
        _Patch(Table, "scan", _lagging_index_read),
        _Patch(moto.backends, "list_of_moto_modules", _listed_once),
        _Patch(moto.core.responses, "method_names_from_class", _once_per_class),
        _Patch(BaseJSONSerializer, "_serialize_type_structure", _attribute_values_as_they_are),
        _Patch(ConditionExpressionParser, "_lex_condition_expression", _lexed_once),
    ]


@contextmanager
def atomic_requests() -> Iterator[None]:
    """Serialize moto's request handlers while the block runs (nothing else is mocked).

    What :func:`mock_aws` applies, for a moto server (``ThreadedMotoServer``) serving
    requests from its own threads in this process.
    """
    _INSTALLATION.acquire()
    try:
        yield
    finally:
        _INSTALLATION.release()


# ---- fast reads: a query reads its partition, the server looks things up once ----------


def _one_partition_query(original: Callable[..., T]) -> Callable[..., T]:
    """A query of the table itself that looks its partition up.

    moto 5 sorts every item of the table for each such query and keeps the queried
    partition's, so a query costs more the more the table holds (the local stack's table
    only grows); DynamoDB reads the one partition.
    """
    signature = inspect.signature(original)

    @functools.wraps(original)
    def query(self: Any, *args: Any, **kwargs: Any) -> T:
        called = signature.bind(self, *args, **kwargs).arguments
        hash_key = called.get("hash_key")
        if called.get("index_name") or hash_key is None:
            return original(self, *args, **kwargs)
        # Runs under the DynamoDB request lock, so the narrowed items are seen by no one else.
        current = self.items
        partition = current.get(hash_key)
        self.items = {} if partition is None else {hash_key: partition}
        try:
            return original(self, *args, **kwargs)
        finally:
            self.items = current

    return query


def _listed_once(original: Callable[[], Any]) -> Callable[[], tuple[str, ...]]:
    """moto's server lists its package folder on every request to find the request's service
    (hundreds of ``stat`` calls, under its dispatcher's lock); the folder does not change."""
    modules = tuple(original())
    return lambda: modules


def _once_per_class(original: Callable[[Any], list[str]]) -> Callable[[Any], list[str]]:
    """moto lists a handler class's methods (``inspect.getmembers``) on every request to
    check the action; the list is made once per class."""
    return functools.cache(original)


def _attribute_values_as_they_are(original: Callable[..., None]) -> Callable[..., None]:
    """moto 5's response serializer looks each of the ten members of every DynamoDB attribute
    value up through its generic attribute picker, the better part of a query's time; an
    attribute value moto holds in wire form is written as the serializer would write it."""

    @functools.wraps(original)
    def serialize(self: Any, serialized: Any, value: Any, shape: Any, key: str) -> None:
        if shape.name == "AttributeValue" and not self._value_picker.response_transformers:
            wire = _attribute_value(value, self._base64)
            if wire is not None:
                self._default_serialize(serialized, wire, shape, key)
                return
        original(self, serialized, value, shape, key)

    return serialize


#: Condition expressions whose tokens are kept (an app writes with a few dozen).
_LEXED_EXPRESSIONS = 1_024


def _lexed_once(original: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """moto lexes a condition expression with a dozen regular expressions each time it
    parses one, twice per conditional write; an expression's tokens are always the same
    (immutable named tuples whose children nothing changes), so each is lexed once."""
    lexed: dict[str, tuple[Any, ...]] = {}

    @functools.wraps(original)
    def lex(self: Any) -> Any:
        expression = self.condition_expression
        tokens = lexed.get(expression)
        if tokens is None:
            tokens = tuple(original(self))
            if len(lexed) < _LEXED_EXPRESSIONS:
                lexed[expression] = tokens
        return collections.deque(tokens)

    return lex


_SCALAR_KINDS: dict[str, type] = {"S": str, "N": str, "BOOL": bool, "NULL": bool}


def _attribute_value(value: Any, base64: Callable[[Any], str]) -> dict[str, Any] | None:
    """The JSON form of an attribute value in wire form (None: leave it to the serializer)."""
    if not isinstance(value, dict):
        return None
    wire: dict[str, Any] = {}
    for kind, item in value.items():
        if item is None:
            continue
        if isinstance(item, _SCALAR_KINDS.get(kind, ())):
            wire[kind] = item
        elif kind == "B" and isinstance(item, str | bytes):
            wire[kind] = base64(item)
        elif (
            kind in ("SS", "NS")
            and isinstance(item, list)
            and all(isinstance(one, str) for one in item)
        ):
            wire[kind] = list(item)
        elif (
            kind == "BS"
            and isinstance(item, list)
            and all(isinstance(one, str | bytes) for one in item)
        ):
            wire[kind] = [base64(one) for one in item]
        elif kind == "M" and isinstance(item, dict):
            members = {name: _attribute_value(one, base64) for name, one in item.items()}
            if any(one is None for one in members.values()):
                return None
            wire[kind] = members
        elif kind == "L" and isinstance(item, list):
            elements = [_attribute_value(one, base64) for one in item]
            if any(one is None for one in elements):
                return None
            wire[kind] = elements
        else:
            return None
    return wire


# ---- what moto does not model, on purpose ------------------------------------------------


@dataclass
class _Modelled:
    """The behaviours of AWS that the active mock models (see :func:`mock_aws`)."""

    gsi_lag: int = 0
    unprocessed_items: int = 0
    #: Per index partition: the table's items at each of its last ``gsi_lag`` + 1 reads.
    snapshots: dict[str, deque[Any]] = field(default_factory=dict)


_modelled: _Modelled | None = None
_modelled_lock = threading.Lock()


def _lagging_index_read(original: Callable[..., T]) -> Callable[..., T]:
    """A global secondary index read served from the table as it was ``gsi_lag`` reads of
    the same index partition earlier."""
    signature = inspect.signature(original)

    @functools.wraps(original)
    def read(self: Any, *args: Any, **kwargs: Any) -> T:
        modelled = _modelled
        if modelled is None or modelled.gsi_lag == 0:
            return original(self, *args, **kwargs)
        called = signature.bind(self, *args, **kwargs).arguments
        index_name = called.get("index_name")
        if index_name not in {index.name for index in self.global_indexes}:
            return original(self, *args, **kwargs)
        # Runs under the DynamoDB request lock, so swapping the items is seen by no one else.
        partition = f"{self.table_arn}/{index_name}/{called.get('hash_key')!r}"
        history = modelled.snapshots.get(partition)
        if history is None:
            empty = copy.deepcopy(self.items)
            empty.clear()
            history = deque([empty] * modelled.gsi_lag, maxlen=modelled.gsi_lag + 1)
            modelled.snapshots[partition] = history
        history.append(copy.deepcopy(self.items))
        current = self.items
        self.items = history[0]
        try:
            return original(self, *args, **kwargs)
        finally:
            self.items = current

    return read


def _leaving_items_unprocessed(original: Callable[..., Any]) -> Callable[..., Any]:
    """``BatchWriteItem`` that applies all but the last ``unprocessed_items`` requests."""

    @functools.wraps(original)
    def batch_write_item(self: Any) -> Any:
        modelled = _modelled
        if modelled is None or modelled.unprocessed_items == 0:
            return original(self)
        requests = [
            (table, request)
            for table, table_requests in self.body["RequestItems"].items()
            for request in table_requests
        ]
        # At least one request is applied, as DynamoDB always makes progress.
        keep = max(1, len(requests) - modelled.unprocessed_items)
        applied: dict[str, list[Any]] = {}
        left: dict[str, list[Any]] = {}
        for position, (table, request) in enumerate(requests):
            (applied if position < keep else left).setdefault(table, []).append(request)
        self.body["RequestItems"] = applied
        answer = original(self)
        answer.result["UnprocessedItems"] = left
        return answer

    return batch_write_item


# ---- the mock ------------------------------------------------------------------------------


class AtomicMockAWS:
    """moto's ``mock_aws`` with atomic requests, fake credentials and a region.

    Use it as a context manager or a decorator, like moto's (see :func:`mock_aws`).
    """

    def __init__(
        self,
        config: dict[str, Any] | None = None,
        *,
        region: str = DEFAULT_REGION,
        gsi_lag: int = 0,
        unprocessed_items: int = 0,
    ) -> None:
        if gsi_lag < 0 or unprocessed_items < 0:
            raise ValidationError("gsi_lag and unprocessed_items must not be negative")
        self.config = config
        self.region = region
        self.gsi_lag = gsi_lag
        self.unprocessed_items = unprocessed_items
        self._active: list[tuple[Any, dict[str, str | None], _Modelled | None]] = []

    def start(self) -> None:
        """Start mocking (nestable: every ``start`` needs its ``stop``)."""
        from moto import mock_aws as moto_mock_aws

        saved = self._set_environment()
        modelled = self._model()
        _INSTALLATION.acquire()
        mock = moto_mock_aws(config=cast(Any, self.config))
        try:
            mock.start()
        except BaseException:
            _INSTALLATION.release()
            self._unmodel(modelled)
            _restore_environment(saved)
            raise
        self._active.append((mock, saved, modelled))

    def stop(self) -> None:
        """Stop the most recent ``start``: moto's data is dropped, the environment restored."""
        mock, saved, modelled = self._active.pop()
        try:
            mock.stop()
        finally:
            _INSTALLATION.release()
            self._unmodel(modelled)
            _restore_environment(saved)

    def __enter__(self) -> AtomicMockAWS:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __call__(self, func: Callable[P, T]) -> Callable[P, T]:
        """Run ``func`` inside a fresh mock (each call starts and stops one)."""

        @functools.wraps(func)
        def mocked(*args: P.args, **kwargs: P.kwargs) -> T:
            with self:
                return func(*args, **kwargs)

        return mocked

    def _set_environment(self) -> dict[str, str | None]:
        wanted: dict[str, str | None] = {
            **_FAKE_ENVIRONMENT,
            "AWS_DEFAULT_REGION": self.region,
            **dict.fromkeys(_UNSET_ENVIRONMENT),
        }
        saved = {name: os.environ.get(name) for name in wanted}
        _restore_environment(wanted)
        return saved

    def _model(self) -> _Modelled | None:
        global _modelled
        if self.gsi_lag == 0 and self.unprocessed_items == 0:
            return None
        with _modelled_lock:
            if _modelled is not None:
                raise ValidationError("another mock already models index lag or unprocessed items")
            _modelled = _Modelled(gsi_lag=self.gsi_lag, unprocessed_items=self.unprocessed_items)
            return _modelled

    @staticmethod
    def _unmodel(modelled: _Modelled | None) -> None:
        global _modelled
        if modelled is None:
            return
        with _modelled_lock:
            if _modelled is modelled:
                _modelled = None


def _restore_environment(values: dict[str, str | None]) -> None:
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@overload
def mock_aws(func: Callable[P, T], /) -> Callable[P, T]: ...


@overload
def mock_aws(
    func: None = None,
    /,
    *,
    config: dict[str, Any] | None = None,
    region: str = DEFAULT_REGION,
    gsi_lag: int = 0,
    unprocessed_items: int = 0,
) -> AtomicMockAWS: ...


def mock_aws(
    func: Callable[P, T] | None = None,
    /,
    *,
    config: dict[str, Any] | None = None,
    region: str = DEFAULT_REGION,
    gsi_lag: int = 0,
    unprocessed_items: int = 0,
) -> AtomicMockAWS | Callable[P, T]:
    """moto's ``mock_aws``, with each request applied atomically as AWS does.

    While it is active, each DynamoDB, EventBridge Scheduler, S3 and SQS request holds its
    service's lock from parsing to answer, so two concurrent conditional writes (an
    ``attribute_not_exists`` put, a version-conditioned update, an S3 ``IfNoneMatch`` put, a
    second ``CreateSchedule`` of a name) can never both pass their condition. Fake
    credentials and ``AWS_DEFAULT_REGION`` are set (and ``AWS_PROFILE``/``AWS_ENDPOINT_URL``
    unset) for its duration; moto's data is dropped at the end.

    Args:
        func: A function to decorate (``@mock_aws``); omit it for a context manager or
            ``@mock_aws(...)``.
        config: moto's configuration, as for moto's ``mock_aws`` (e.g.
            ``{"core": {"reset_boto3_session": False}}``).
        region: The ``AWS_DEFAULT_REGION`` set while mocking.
        gsi_lag: Make global secondary index reads eventually consistent: a ``Query`` of a
            GSI partition (or a ``Scan`` of a GSI) sees the table as it was this many reads
            of that partition earlier (0: always current, as moto is). A write is thus
            invisible to the next ``gsi_lag`` reads of each partition, visible from then on;
            reads of the table itself stay strongly consistent.
        unprocessed_items: Make every ``BatchWriteItem`` leave its last requests this many
            unwritten and return them in ``UnprocessedItems`` (at least one request is always
            written), as DynamoDB does under throttling.

    Returns:
        An :class:`AtomicMockAWS` (context manager and decorator), or ``func`` decorated.

    Raises:
        ValidationError: A negative count, or a second active mock that models lag or
            unprocessed items.

    Example:
        >>> with mock_aws(region="eu-west-1"):
        ...     boto3.client("dynamodb").list_tables()
        {'TableNames': [], ...}
    """
    mock = AtomicMockAWS(
        config, region=region, gsi_lag=gsi_lag, unprocessed_items=unprocessed_items
    )
    if func is not None:
        return mock(func)
    return mock
