"""DynamoDB concurrency slots: one partition per (workflow, key) in the runs table.

The partition (``#slots#<workflow>#<key>``) holds:

- the state item (``#state``): the holders (a map of run id to since when), the number of
  queued runs and the key's arrival counter;
- one entry per queued run (``q#<priority>#<arrival>``), so a query of the partition lists
  the queue in the order it is served: highest priority first, then arrival;
- one marker per queued run (``r#<run id>``) naming its entry, so a repeated acquire finds
  the place it already has.

When runs queue under a rotation key (``round-robin``), their entries also carry the key, the
state is marked rotating (``rot``) and keeps the key served last (``rr``): a release reads the
whole queue, picks the runs the rotation serves next, and moves ``rr`` in the same
conditional write that hands them the slots.

Every change is a conditional write. A slot is taken only while the holders number fewer
than the limit and nobody is queued; queueing is one transaction (state, entry, marker); a
release that hands slots to the queue is one transaction that also removes their entries.
"""

from __future__ import annotations

from dataclasses import dataclass
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
from relayflow.flow.rules import rotation_order

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


def _served_last(state: dict[str, Any]) -> str | None:
    return state["rr"]["S"] if "rr" in state else None


@dataclass(frozen=True)
class _Head:
    """A queued run a release hands a slot to: its entry's sort key, id and rotation key."""

    entry: str
    run_id: str
    key: str = ""


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
        rotation_key: str | None = None,
    ) -> SlotGrant:
        """Hold a slot if one is free and nobody is queued, else queue (see the port)."""
        pk = scope_partition(PARTITION_PREFIX, scope)
        try:
            for _ in range(MAX_ATTEMPTS):
                held = self._take_free_slot(pk, run_id, limit, now_ms, rotation_key)
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
                    return self._queued_grant(pk, marker["q"]["S"], run_id, len(holders))
                if len(holders) < limit and queued == 0:
                    continue  # a slot freed since: take it
                if not wait:
                    return SlotGrant(held=False, position=None, in_use=len(holders))
                entry = self._enqueue(pk, run_id, limit, priority, now_ms, rotation_key)
                if entry is not None:
                    return self._queued_grant(pk, entry, run_id, len(holders))
        except Exception as exc:
            reraise(exc, "acquiring a concurrency slot")
        raise lost_too_often("acquiring a concurrency slot")

    def _take_free_slot(
        self, pk: str, run_id: str, limit: int, now_ms: int, rotation_key: str | None
    ) -> int | None:
        """Hold a slot with one conditional update; the number of holders, or None. A run
        with a rotation key makes its key the one served last, in the same update."""
        serving = "" if rotation_key is None else ", rr = :key"
        served = {} if rotation_key is None else {":key": {"S": rotation_key}}
        try:
            answer = self._db().update_item(
                TableName=self.table_name,
                Key=item_key(pk, STATE_SK),
                UpdateExpression="SET h.#run = :now" + serving,
                ConditionExpression=(
                    "attribute_exists(h) AND size(h) < :limit AND qn = :zero "
                    "AND attribute_not_exists(h.#run)"
                ),
                ExpressionAttributeNames={"#run": run_id},
                ExpressionAttributeValues={
                    ":now": _n(now_ms),
                    ":limit": _n(limit),
                    ":zero": _n(0),
                    **served,
                },
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

    def _enqueue(
        self,
        pk: str,
        run_id: str,
        limit: int,
        priority: int,
        now_ms: int,
        rotation_key: str | None,
    ) -> str | None:
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
        counting = "ADD qn :one"
        flag: dict[str, Any] = {}
        keyed: dict[str, Any] = {}
        if rotation_key is not None:
            counting += " SET rot = :yes"
            flag = {":yes": {"BOOL": True}}
            keyed = {"k": {"S": rotation_key}}
        try:
            self._db().transact_write_items(
                TransactItems=[
                    {
                        "Update": {
                            "TableName": self.table_name,
                            "Key": item_key(pk, STATE_SK),
                            "UpdateExpression": counting,
                            "ConditionExpression": (
                                "(size(h) >= :limit OR qn > :zero) AND attribute_not_exists(h.#run)"
                            ),
                            "ExpressionAttributeNames": {"#run": run_id},
                            "ExpressionAttributeValues": {
                                ":one": _n(1),
                                ":limit": _n(limit),
                                ":zero": _n(0),
                                **flag,
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
                                **keyed,
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

    def _queued_grant(self, pk: str, entry: str, run_id: str, in_use: int) -> SlotGrant:
        state = self._get(item_key(pk, STATE_SK))
        if state is not None and "rot" in state:
            order = [q.run_id for q in rotation_order(self._queued(pk), _served_last(state))]
            position = order.index(run_id) + 1 if run_id in order else None
            return SlotGrant(held=False, position=position, in_use=in_use)
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
                count = min(free, queued, _PROMOTIONS_PER_WRITE)
                rotating = "rot" in state
                heads = self._next_in_turn(pk, state, count) if rotating else self._heads(pk, count)
                if not holder and not heads:
                    return started
                handed = self._hand_over(
                    pk, leaving if holder else None, heads, state, now_ms, rotating
                )
                if handed:
                    started.extend(head.run_id for head in heads)
                    leaving = None
        except Exception as exc:
            reraise(exc, "releasing a concurrency slot")
        raise lost_too_often("releasing a concurrency slot")

    def _heads(self, pk: str, count: int) -> list[_Head]:
        if count <= 0:
            return []
        page = self._db().query(
            TableName=self.table_name,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :q)",
            ExpressionAttributeValues={":pk": {"S": pk}, ":q": {"S": ENTRY_PREFIX}},
            Limit=count,
            ConsistentRead=True,
        )
        return [_Head(item["sk"]["S"], item["run"]["S"]) for item in page.get("Items", [])]

    def _next_in_turn(self, pk: str, state: dict[str, Any], count: int) -> list[_Head]:
        if count <= 0:
            return []
        turns = rotation_order(self._queued(pk), _served_last(state))[:count]
        return [_Head(entry_sort_key(q.priority, q.arrival), q.run_id, q.key) for q in turns]

    def _hand_over(
        self,
        pk: str,
        leaving: str | None,
        heads: list[_Head],
        state: dict[str, Any],
        now_ms: int,
        rotating: bool = False,
    ) -> bool:
        """Remove ``leaving`` from the holders and make ``heads`` holders, if the state is
        still the one read (same holders count and queue length, and when ``rotating`` the
        same key served last, which moves to the last head's key)."""
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
        for index, head in enumerate(heads):
            names[f"#p{index}"] = head.run_id
            sets.append(f"h.#p{index} = :now")
        if rotating and heads:
            last = _served_last(state)
            if last is None:
                conditions.append("attribute_not_exists(rr)")
            else:
                values[":last"] = {"S": last}
                conditions.append("rr = :last")
            values[":served"] = {"S": heads[-1].key}
            sets.append("rr = :served")
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
            for head in heads:
                for sort_key in (head.entry, MARKER_PREFIX + head.run_id):
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
        pk = scope_partition(PARTITION_PREFIX, scope)
        try:
            found = self._queued(pk)
            if any(q.key for q in found):
                state = self._get(item_key(pk, STATE_SK))
                return rotation_order(found, _served_last(state or {}))
            return found
        except Exception as exc:
            reraise(exc, "listing a concurrency queue")

    def _queued(self, pk: str) -> list[QueuedRun]:
        """The queue's entries, in priority-then-arrival order."""
        params: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :q)",
            "ExpressionAttributeValues": {":pk": {"S": pk}, ":q": {"S": ENTRY_PREFIX}},
            "ConsistentRead": True,
        }
        found: list[QueuedRun] = []
        while True:
            page = self._db().query(**params)
            for item in page.get("Items", []):
                found.append(
                    QueuedRun(
                        run_id=item["run"]["S"],
                        priority=int(item["pr"]["N"]),
                        arrival=int(item["arr"]["N"]),
                        queued_at_ms=int(item["at"]["N"]),
                        key=item.get("k", {}).get("S", ""),
                    )
                )
            if "LastEvaluatedKey" not in page:
                return found
            params["ExclusiveStartKey"] = page["LastEvaluatedKey"]
