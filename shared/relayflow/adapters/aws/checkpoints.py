"""The checkpoint log on DynamoDB: one item per entry in the runs table, next to the header.

An entry is the item ``(pk=<runId>, sk=log#<seq, 10 digits>)`` written with one conditional
``PutItem`` (``attribute_not_exists``): the sequence number is the fencing token, so a slot
is written once, by the host that expected it or by a fence or cancel that took it first.
A step entry of 100-200 bytes of output is an item under 1 KB: one write unit. A group
(several entries that share one write) keeps its JSON compressed in a binary attribute, as
run headers are: its entries repeat the same names and keys, and a branch's step output and
the branch's result are often the same value, so the item is a fraction of its JSON (a write
costs one unit per KB). Entries over ``inline_limit`` bytes (after compression) keep their
JSON in the payload store and a reference in the item.

Entries are needed only until the invocation's answer is saved (the answer carries the same
journal into the run's pages) or until a new holder folds them after a crash; each carries
a TTL of ``ttl_days`` after it was written, so the log costs nothing to clear.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from relayflow.adapters.aws import attributes, branch_ends, compression, tables
from relayflow.adapters.aws.attributes import write_units
from relayflow.adapters.aws.errors import error_code, is_aws_error, reraise, unavailable
from relayflow.clock import SystemClock
from relayflow.costs.meter import UsageMeter
from relayflow.costs.usage import RunUsage
from relayflow.errors import CheckpointSlotTakenError, ValidationError
from relayflow.ports import Clock, PayloadStore
from relayflow.protocol import CheckpointEntry

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

LOG_PREFIX = "log#"
#: Entries whose JSON is larger than this keep it in the payload store.
INLINE_LIMIT = 32 * 1024
#: Days an entry is kept (it is folded into the run's pages long before).
DEFAULT_TTL_DAYS = 7


def log_sk(seq: int) -> str:
    """The sort key of slot ``seq``."""
    return f"{LOG_PREFIX}{seq:010d}"


class DynamoDBCheckpointLog:
    """A :class:`~relayflow.ports.CheckpointLog` in the runs table.

    Args:
        table_name: The runs table.
        client_factory: Returns the DynamoDB client (called on first use, then cached).
        payload_store: Holds entries over ``inline_limit`` (without one they are refused).
        clock: Time of the entries' TTL.
        ttl_days: Days an entry is kept after it was written.
        inline_limit: Largest entry JSON kept in the item itself.
        usage: Counts what each entry written cost, per run, for the host's answer to carry
            (``take_usage``): a step host in a process of its own reports its checkpoint
            writes this way. Leave it unset in the orchestrator's process, whose clients
            count every request already.
    """

    def __init__(
        self,
        table_name: str,
        *,
        client_factory: Callable[[], DynamoDBClient],
        payload_store: PayloadStore | None = None,
        clock: Clock | None = None,
        ttl_days: int = DEFAULT_TTL_DAYS,
        inline_limit: int = INLINE_LIMIT,
        usage: UsageMeter | None = None,
    ) -> None:
        self.table_name = table_name
        self._usage = usage
        self._client_factory = client_factory
        self._client: DynamoDBClient | None = None
        self._payloads = payload_store
        self._clock: Clock = clock or SystemClock()
        self._ttl_s = ttl_days * 86_400
        self._inline_limit = inline_limit

    def _db(self) -> DynamoDBClient:
        if self._client is None:
            self._client = self._client_factory()
        return self._client

    def append(self, run_id: str, entry: CheckpointEntry) -> None:
        """Write ``entry`` at its slot with one conditional ``PutItem``.

        A retried request whose first attempt was applied finds its own item (same write
        token) and counts as done.

        Raises:
            CheckpointSlotTakenError: The slot holds another entry (``taken`` is it).
            CheckpointUnavailableError: DynamoDB (or S3, for a large entry) failed in a way a
                later retry may not: the host ends the invocation with what it has, and the
                run is invoked again. The entry may have landed; its slot is never reused.
            AwsServiceError: Refused for good (a permission, a size limit).
        """
        action = f"writing checkpoint {entry.seq} of run {run_id}"
        try:
            item = self._item(run_id, entry)
            # A new item (the slot is written once), with no index key: its own size prices
            # it, whether the write lands or its condition fails.
            self._count(
                run_id,
                RunUsage(
                    dynamodb_requests=1, dynamodb_write_units=write_units(item, transactional=False)
                ),
            )
            self._db().put_item(
                TableName=self.table_name,
                Item=item,
                ConditionExpression="attribute_not_exists(#pk)",
                ExpressionAttributeNames={"#pk": tables.PK},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except Exception as exc:
            if not (is_aws_error(exc) and error_code(exc) == "ConditionalCheckFailedException"):
                failed = unavailable(exc, action)
                if failed is not None:
                    raise failed from exc
                reraise(exc, action)
            found = getattr(exc, "response", {}).get("Item")
            if found is not None and found.get("w") == item["w"]:
                return
            taken = self._entry(found) if found is not None else None
            raise CheckpointSlotTakenError(
                f"checkpoint slot {entry.seq} of run {run_id} is taken", taken=taken
            ) from None

    def take_usage(self, run_id: str) -> RunUsage | None:
        """What this log's writes for ``run_id`` cost since the last take (None when it
        counts nothing)."""
        return None if self._usage is None else self._usage.drop(run_id)

    def _count(self, run_id: str, usage: RunUsage) -> None:
        if self._usage is not None:
            self._usage.add(run_id, usage)

    def read(self, run_id: str, after_seq: int) -> list[CheckpointEntry]:
        """The entries after ``after_seq`` up to the first free slot (one ``Query`` per MB)."""
        params: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "#pk = :pk AND #sk BETWEEN :lo AND :hi",
            "ExpressionAttributeNames": {"#pk": tables.PK, "#sk": tables.SK},
            "ExpressionAttributeValues": {
                ":pk": attributes.s(run_id),
                ":lo": attributes.s(log_sk(after_seq + 1)),
                ":hi": attributes.s(log_sk(9_999_999_999)),
            },
            "ConsistentRead": True,
        }
        found: list[CheckpointEntry] = []
        expected = after_seq + 1
        while True:
            try:
                page = self._db().query(**params)
            except Exception as exc:
                reraise(exc, f"reading the checkpoints of run {run_id}")
            for item in page.get("Items", []):
                entry = self._entry(item)
                if entry.seq != expected:
                    return found
                found.append(entry)
                expected += 1
            if "LastEvaluatedKey" not in page:
                return found
            params["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    # ---- items ----------------------------------------------------------------------------

    def _item(self, run_id: str, entry: CheckpointEntry) -> dict[str, Any]:
        # Fields at their default are left out, as in a run's pages: reading fills them in.
        doc = entry.model_dump(
            by_alias=True, exclude_none=True, exclude_defaults=True, exclude={"seq"}
        )
        if entry.kind == "group" and doc.get("entries"):
            doc["entries"] = _folded(doc["entries"], entry.seq)
        body = attributes.encode(doc)
        item: dict[str, Any] = {
            tables.PK: attributes.s(run_id),
            tables.SK: attributes.s(log_sk(entry.seq)),
            # Tells this write from any other, so a retried request can recognise its own.
            "w": attributes.s(secrets.token_hex(4)),
            tables.TTL_ATTRIBUTE: attributes.n(self._clock.now_ms() // 1000 + self._ttl_s),
        }
        packed = compression.pack(body) if entry.kind == "group" else None
        if packed is not None and len(packed) <= self._inline_limit:
            item["z"] = {"B": packed}
        elif len(body) > self._inline_limit:
            if self._payloads is None:
                raise ValidationError(
                    f"checkpoint {entry.seq} of run {run_id} is {len(body)} bytes, too large "
                    "for a DynamoDB item; configure a payload store"
                )
            item["ref"] = attributes.s(self._payloads.put(body))
            self._count(run_id, RunUsage(s3_puts=1, s3_bytes=len(body)))
        else:
            item["e"] = attributes.s(body.decode("utf-8"))
        return item

    def _entry(self, item: dict[str, Any]) -> CheckpointEntry:
        if "z" in item:
            doc = json.loads(compression.unpack(item["z"]["B"]))
        elif "ref" in item:
            if self._payloads is None:
                raise ValidationError("this checkpoint is in the payload store; configure one")
            doc = json.loads(self._payloads.get(item["ref"]["S"]))
        else:
            doc = json.loads(item["e"]["S"])
        doc["seq"] = int(item[tables.SK]["S"][len(LOG_PREFIX) :])
        if doc.get("kind") == "group" and doc.get("entries"):
            doc["entries"] = list(_unfolded(doc["entries"]))
        return CheckpointEntry.model_validate(doc)


#: The fields of a group's step entry whose branch end it may carry, or that may be folded.
_PLAIN_STEP_FIELDS = frozenset({"seq", "kind", "key", "step"})


def _folded(entries: list[dict[str, Any]], seq: int) -> list[dict[str, Any]]:
    """A group's entries with each branch end its last step's entry can carry folded into it
    (see :mod:`relayflow.adapters.aws.branch_ends`)."""

    def key(entry: dict[str, Any]) -> str | None:
        return entry.get("key") if entry.get("kind") == "step" else None

    def value(entry: dict[str, Any]) -> dict[str, Any] | None:
        plain = entry.keys() <= _PLAIN_STEP_FIELDS and entry.get("seq") == seq
        step = entry.get("step")
        return step if plain and isinstance(step, dict) else None

    def carrying(entry: dict[str, Any], end: dict[str, Any]) -> dict[str, Any]:
        return {**entry, "step": {**entry["step"], branch_ends.END: end}}

    return branch_ends.fold(entries, key, value, carrying)


def _unfolded(entries: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """A group's entries as written, each branch end a step entry carries put back after it."""
    for entry in entries:
        step = entry.get("step")
        if entry.get("kind") != "step" or not isinstance(step, dict):
            yield entry
            continue
        for key, value in branch_ends.unfold(str(entry.get("key")), step):
            yield {**entry, "key": key, "step": value}
