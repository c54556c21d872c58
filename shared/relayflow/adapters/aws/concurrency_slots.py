"""DynamoDB concurrency slots: one partition per (workflow, key) in the runs table.

The partition (``#slots#<workflow>#<key>``) holds:

- the state item (``#state``): the holders (a map of run id to since when), the number of
  queued runs and the key's arrival counter;
- one entry per queued run (``q#<priority>#<arrival>``), so a query of the partition lists
  the queue in the order it is served: highest priority first, then arrival;
- one marker per queued run (``r#<run id>``) naming its entry, so a repeated acquire finds
  the place it already has.

Every change is a conditional write. A slot is taken only while the holders number fewer
than the limit and nobody is queued; queueing is one transaction (state, entry, marker); a
release that hands slots to the queue is one transaction that also removes their entries.
"""

from __future__ import annotations

from typing import Any

from relayflow.adapters.aws.errors import reraise
from relayflow.adapters.aws.flow_table import (
    MAX_ATTEMPTS,
    FlowTable,
    cancellation_codes,
    item_key,
    lost_too_often,
    refused,
    scope_partition,
)
from relayflow.flow.declarations import MAX_PRIORITY
from relayflow.flow.ports import QueuedRun, SlotGrant, SlotHolder, SlotScope

PARTITION_PREFIX = "#slots#"
STATE_SK = "#state"
ENTRY_PREFIX = "q#"
MARKER_PREFIX = "r#"
#: Queue entries a release hands slots to in one transaction (2 items each, plus the state).
_PROMOTIONS_PER_WRITE = 24


def entry_sort_key(priority: int, arrival: int) -> str:
    """Sorts by priority, highest first, then by arrival."""
    return f"{ENTRY_PREFIX}{MAX_PRIORITY - priority:04d}#{arrival:012d}"


def _n(value: int) -> dict[str, str]:
    return {"N": str(value)}


class DynamoDBConcurrencySlots(FlowTable):
    """The :class:`~relayflow.flow.ports.ConcurrencySlots` port on the runs table."""

    def acquire(
        self,
        scope: SlotScope,
        run_id: str,
        *,
        limit: int,
        priority: int,
        now_ms: int,
        wait: bool = True,
    ) -> SlotGrant:
        """Hold a slot if one is free and nobody is queued, else queue (see the port)."""
        pk = scope_partition(PARTITION_PREFIX, scope)
        try:
            for _ in range(MAX_ATTEMPTS):
                held = self._take_free_slot(pk, run_id, limit, now_ms)
                if held is not None:
                    return SlotGrant(held=True, position=None, in_use=held)
                state = self._get(item_key(pk, STATE_SK))
                if state is None:
                    self._create_state(pk)
                    continue
                holders = state["h"]["M"]
                if run_id in holders:
                    return SlotGrant(held=True, position=None, in_use=len(holders))
                queued = int(state["qn"]["N"])
                marker = self._get(item_key(pk, MARKER_PREFIX + run_id)) if queued else None
                if marker is not None:
                    return self._queued_grant(pk, marker["q"]["S"], len(holders))
                if len(holders) < limit and queued == 0:
                    continue  # a slot freed since: take it
                if not wait:
                    return SlotGrant(held=False, position=None, in_use=len(holders))
                entry = self._enqueue(pk, run_id, limit, priority, now_ms)
                if entry is not None:
                    return self._queued_grant(pk, entry, len(holders))
        except Exception as exc:
            reraise(exc, "acquiring a concurrency slot")
        raise lost_too_often("acquiring a concurrency slot")

    def _take_free_slot(self, pk: str, run_id: str, limit: int, now_ms: int) -> int | None:
        """Hold a slot with one conditional update; the number of holders, or None."""
        try:
            answer = self._db().update_item(
                TableName=self.table_name,
                Key=item_key(pk, STATE_SK),
                UpdateExpression="SET h.#run = :now",
                ConditionExpression=(
                    "attribute_exists(h) AND size(h) < :limit AND qn = :zero "
                    "AND attribute_not_exists(h.#run)"
                ),
                ExpressionAttributeNames={"#run": run_id},
                ExpressionAttributeValues={":now": _n(now_ms), ":limit": _n(limit), ":zero": _n(0)},
                ReturnValues="ALL_NEW",
            )
        except Exception as exc:
            if refused(exc):
                return None
            raise
        return len(answer["Attributes"]["h"]["M"])

    def _create_state(self, pk: str) -> None:
        try:
            self._db().put_item(
                TableName=self.table_name,
                Item={**item_key(pk, STATE_SK), "h": {"M": {}}, "qn": _n(0), "arr": _n(0)},
                ConditionExpression="attribute_not_exists(sk)",
            )
        except Exception as exc:
            if not refused(exc):
                raise

    def _enqueue(self, pk: str, run_id: str, limit: int, priority: int, now_ms: int) -> str | None:
        """Queue the run; its entry's sort key, or None when the state changed under it."""
        counted = self._db().update_item(
            TableName=self.table_name,
            Key=item_key(pk, STATE_SK),
            UpdateExpression="ADD arr :one",
            ExpressionAttributeValues={":one": _n(1)},
            ReturnValues="UPDATED_NEW",
        )
        arrival = int(counted["Attributes"]["arr"]["N"])
        entry = entry_sort_key(priority, arrival)
        try:
            self._db().transact_write_items(
                TransactItems=[
                    {
                        "Update": {
                            "TableName": self.table_name,
                            "Key": item_key(pk, STATE_SK),
                            "UpdateExpression": "ADD qn :one",
                            "ConditionExpression": (
                                "(size(h) >= :limit OR qn > :zero) AND attribute_not_exists(h.#run)"
                            ),
                            "ExpressionAttributeNames": {"#run": run_id},
                            "ExpressionAttributeValues": {
                                ":one": _n(1),
                                ":limit": _n(limit),
                                ":zero": _n(0),
                            },
                        }
                    },
                    {
                        "Put": {
                            "TableName": self.table_name,
                            "Item": {
                                **item_key(pk, entry),
                                "run": {"S": run_id},
                                "pr": _n(priority),
                                "arr": _n(arrival),
                                "at": _n(now_ms),
                            },
                            "ConditionExpression": "attribute_not_exists(sk)",
                        }
                    },
                    {
                        "Put": {
                            "TableName": self.table_name,
                            "Item": {**item_key(pk, MARKER_PREFIX + run_id), "q": {"S": entry}},
                            "ConditionExpression": "attribute_not_exists(sk)",
                        }
                    },
                ]
            )
        except Exception as exc:
            if cancellation_codes(exc) is None:
                raise
            return None  # a slot freed, or the run was queued meanwhile: look again
        return entry

    def _queued_grant(self, pk: str, entry: str, in_use: int) -> SlotGrant:
        ahead = self._db().query(
            TableName=self.table_name,
            KeyConditionExpression="pk = :pk AND sk BETWEEN :first AND :entry",
            ExpressionAttributeValues={
                ":pk": {"S": pk},
                ":first": {"S": ENTRY_PREFIX},
                ":entry": {"S": entry},
            },
            Select="COUNT",
            ConsistentRead=True,
        )
        return SlotGrant(held=False, position=int(ahead["Count"]), in_use=in_use)

    def release(self, scope: SlotScope, run_id: str, *, limit: int, now_ms: int) -> list[str]:
        """Free the run's slot or queue place, then fill free slots from the queue."""
        pk = scope_partition(PARTITION_PREFIX, scope)
        started: list[str] = []
        leaving: str | None = run_id
        try:
            for _ in range(MAX_ATTEMPTS):
                state = self._get(item_key(pk, STATE_SK))
                if state is None:
                    return started
                holders = state["h"]["M"]
                queued = int(state["qn"]["N"])
                holder = leaving is not None and leaving in holders
                if leaving is not None and not holder and queued:
                    marker = self._get(item_key(pk, MARKER_PREFIX + leaving))
                    if marker is not None:
                        self._dequeue(pk, leaving, marker["q"]["S"])
                        continue
                free = limit - len(holders) + (1 if holder else 0)
                heads = self._heads(pk, min(free, queued, _PROMOTIONS_PER_WRITE))
                if not holder and not heads:
                    return started
                if self._hand_over(pk, leaving if holder else None, heads, state, now_ms):
                    started.extend(run for _, run in heads)
                    leaving = None
        except Exception as exc:
            reraise(exc, "releasing a concurrency slot")
        raise lost_too_often("releasing a concurrency slot")

    def _heads(self, pk: str, count: int) -> list[tuple[str, str]]:
        if count <= 0:
            return []
        page = self._db().query(
            TableName=self.table_name,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :q)",
            ExpressionAttributeValues={":pk": {"S": pk}, ":q": {"S": ENTRY_PREFIX}},
            Limit=count,
            ConsistentRead=True,
        )
        return [(item["sk"]["S"], item["run"]["S"]) for item in page.get("Items", [])]

    def _hand_over(
        self,
        pk: str,
        leaving: str | None,
        heads: list[tuple[str, str]],
        state: dict[str, Any],
        now_ms: int,
    ) -> bool:
        """Remove ``leaving`` from the holders and make ``heads`` holders, if the state is
        still the one read (same holders count and queue length)."""
        names: dict[str, str] = {}
        values: dict[str, Any] = {
            ":size": _n(len(state["h"]["M"])),
            ":qn": _n(int(state["qn"]["N"])),
        }
        conditions = ["size(h) = :size", "qn = :qn"]
        sets: list[str] = []
        if leaving is not None:
            names["#leaving"] = leaving
            conditions.append("attribute_exists(h.#leaving)")
        for index, (_, run) in enumerate(heads):
            names[f"#p{index}"] = run
            sets.append(f"h.#p{index} = :now")
        if heads:
            values[":now"] = _n(now_ms)
            values[":taken"] = _n(len(heads))
            sets.append("qn = qn - :taken")
        expression = ("SET " + ", ".join(sets)) if sets else ""
        if leaving is not None:
            expression += " REMOVE h.#leaving"
        state_update: dict[str, Any] = {
            "TableName": self.table_name,
            "Key": item_key(pk, STATE_SK),
            "UpdateExpression": expression.strip(),
            "ConditionExpression": " AND ".join(conditions),
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }
        try:
            if not heads:
                self._db().update_item(**state_update)
                return True
            removals: list[Any] = []
            for entry, run in heads:
                for sort_key in (entry, MARKER_PREFIX + run):
                    removals.append(
                        {
                            "Delete": {
                                "TableName": self.table_name,
                                "Key": item_key(pk, sort_key),
                                "ConditionExpression": "attribute_exists(sk)",
                            }
                        }
                    )
            items: list[Any] = [{"Update": state_update}, *removals]
            self._db().transact_write_items(TransactItems=items)
        except Exception as exc:
            if refused(exc) or cancellation_codes(exc) is not None:
                return False
            raise
        return True

    def _dequeue(self, pk: str, run_id: str, entry: str) -> None:
        try:
            self._db().transact_write_items(
                TransactItems=[
                    {
                        "Delete": {
                            "TableName": self.table_name,
                            "Key": item_key(pk, MARKER_PREFIX + run_id),
                            "ConditionExpression": "attribute_exists(sk)",
                        }
                    },
                    {"Delete": {"TableName": self.table_name, "Key": item_key(pk, entry)}},
                    {
                        "Update": {
                            "TableName": self.table_name,
                            "Key": item_key(pk, STATE_SK),
                            "UpdateExpression": "ADD qn :minus",
                            "ExpressionAttributeValues": {":minus": _n(-1)},
                        }
                    },
                ]
            )
        except Exception as exc:
            if cancellation_codes(exc) is None:
                raise

    def holders(self, scope: SlotScope) -> list[SlotHolder]:
        """The runs holding a slot, oldest first."""
        try:
            state = self._get(item_key(scope_partition(PARTITION_PREFIX, scope), STATE_SK))
        except Exception as exc:
            reraise(exc, "listing concurrency slots")
        held = [(run, int(v["N"])) for run, v in (state or {}).get("h", {}).get("M", {}).items()]
        return [SlotHolder(run, since) for run, since in sorted(held, key=lambda h: (h[1], h[0]))]

    def queue(self, scope: SlotScope) -> list[QueuedRun]:
        """The queued runs, next first."""
        params: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :q)",
            "ExpressionAttributeValues": {
                ":pk": {"S": scope_partition(PARTITION_PREFIX, scope)},
                ":q": {"S": ENTRY_PREFIX},
            },
            "ConsistentRead": True,
        }
        found: list[QueuedRun] = []
        try:
            while True:
                page = self._db().query(**params)
                for item in page.get("Items", []):
                    found.append(
                        QueuedRun(
                            run_id=item["run"]["S"],
                            priority=int(item["pr"]["N"]),
                            arrival=int(item["arr"]["N"]),
                            queued_at_ms=int(item["at"]["N"]),
                        )
                    )
                if "LastEvaluatedKey" not in page:
                    return found
                params["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        except Exception as exc:
            reraise(exc, "listing a concurrency queue")
