"""DynamoDB hourly rollups of finished runs, in the runs table.

One item per (environment, workflow, hour) under ``#stats#<environment>#<len>:<workflow>``,
sort key the hour's start in epoch ms (15 digits), with top-level number attributes that
only ever grow: ``n_<status>`` (runs by terminal status), ``durSum``, ``costN``, ``costSum``,
and one ``d<bucket>`` / ``c<bucket>`` per histogram bucket a run fell in (DynamoDB's ``ADD``
works on top-level attributes only). The item expires :data:`ROLLUP_RETENTION_DAYS` after
its hour.

A run's end is counted by one write: the ``ADD`` of the run's counts to its hour, sent as a
transaction of that one update with a client request token derived from the end (its run id
and end time). ``ADD`` is not idempotent, but DynamoDB applies a transaction once per token
for ten minutes, so a request repeated after a lost answer or a throttling (by botocore's
retries or ours) counts the end once. The engine reports an end once, from the save that
made the run terminal, so no later repeat exists. Cost: one request and 2 write units per
finished run (a rollup item stays under 1 KB), none per step.
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Iterator
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from relayflow.adapters.aws import tables as t
from relayflow.adapters.aws.errors import reraise
from relayflow.adapters.aws.flow_table import FlowTable, cancellation_codes, item_key
from relayflow.stats.rollup import HOUR_MS, HourRollup, RunEnd, hour_of, increments_of

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

ROLLUP_PREFIX = "#stats#"
#: Rollups are kept this long after their hour (the figures reach back that far).
ROLLUP_RETENTION_DAYS = 400
_DAY_MS = 24 * HOUR_MS
#: Tries of an end's transaction that DynamoDB cancels because another transaction on the
#: same hour's item was in flight (many runs of one workflow ending at once); each try is
#: safe to repeat (the token).
CONFLICT_TRIES = 6
_CONFLICT_BACKOFF_S = 0.02


def rollup_partition(environment: str, workflow_id: str) -> str:
    """The partition of one workflow's rollups (the id's length keeps ids holding ``#``
    apart)."""
    return f"{ROLLUP_PREFIX}{environment}#{len(workflow_id)}:{workflow_id}"


def end_token(end: RunEnd) -> str:
    """The client request token of ``end``'s write: the same for every report of one end."""
    return hashlib.sha256(end.end_key.encode("utf-8")).hexdigest()[:36]


def _hour_key(hour: int) -> str:
    return f"{hour:015d}"


def _number(value: float | int) -> dict[str, str]:
    """A DynamoDB number written in plain decimals (no exponent)."""
    return {"N": format(Decimal(repr(value)), "f")}


def _increments(rollup: HourRollup) -> dict[str, float | int]:
    """The attributes of a rollup item and what ``rollup`` adds to each."""
    adds: dict[str, float | int] = {f"n_{status}": n for status, n in rollup.by_status.items()}
    adds["durSum"] = rollup.duration_ms_sum
    if rollup.costed_runs:
        adds["costN"] = rollup.costed_runs
        adds["costSum"] = rollup.cost_usd_sum
    adds.update({f"d{index}": n for index, n in rollup.durations.items()})
    adds.update({f"c{index}": n for index, n in rollup.costs.items()})
    return adds


def _rollup_of(item: dict[str, Any]) -> HourRollup:
    """The :class:`HourRollup` a stored item holds."""
    rollup = HourRollup(hour=int(item[t.SK]["S"]))
    for name, value in item.items():
        number = value.get("N")
        if number is None or name == t.TTL_ATTRIBUTE:
            continue
        if name.startswith("n_"):
            rollup.by_status[name[2:]] = int(number)
        elif name == "durSum":
            rollup.duration_ms_sum = int(Decimal(number))
        elif name == "costN":
            rollup.costed_runs = int(number)
        elif name == "costSum":
            rollup.cost_usd_sum = float(number)
        elif name[0] in "dc" and name[1:].isdigit():
            histogram = rollup.durations if name[0] == "d" else rollup.costs
            histogram[int(name[1:])] = int(number)
    return rollup


class DynamoDBRunStatistics(FlowTable):
    """The :class:`~relayflow.stats.rollup.RunStatistics` port on the runs table."""

    def record_end(self, end: RunEnd) -> None:
        """Add ``end`` to its hour with one write (see the module). A transaction cancelled by
        a conflicting one on the same hour is tried again, up to :data:`CONFLICT_TRIES`
        times."""
        items = self._end_items(end)
        token = end_token(end)
        attempt = 1
        while True:
            try:
                self._db().transact_write_items(TransactItems=items, ClientRequestToken=token)
                return
            except Exception as exc:
                codes = cancellation_codes(exc) or []
                if "TransactionConflict" not in codes or attempt >= CONFLICT_TRIES:
                    reraise(exc, "recording a run's end in its workflow's statistics")
            time.sleep(random.uniform(0, _CONFLICT_BACKOFF_S * 2**attempt))
            attempt += 1

    def _end_items(self, end: RunEnd) -> list[TransactWriteItemTypeDef]:
        """The transaction of ``end``: its hour's update."""
        hour = hour_of(end.ended_at)
        names: dict[str, str] = {"#ttl": t.TTL_ATTRIBUTE}
        values: dict[str, Any] = {":ttl": _number((hour + ROLLUP_RETENTION_DAYS * _DAY_MS) // 1000)}
        clauses = []
        for position, (attribute, amount) in enumerate(_increments(increments_of(end)).items()):
            names[f"#a{position}"] = attribute
            values[f":a{position}"] = _number(amount)
            clauses.append(f"#a{position} :a{position}")
        return [
            {
                "Update": {
                    "TableName": self.table_name,
                    "Key": item_key(
                        rollup_partition(end.environment, end.workflow_id), _hour_key(hour)
                    ),
                    "UpdateExpression": f"SET #ttl = :ttl ADD {', '.join(clauses)}",
                    "ExpressionAttributeNames": names,
                    "ExpressionAttributeValues": values,
                }
            },
        ]

    def hours(
        self, environment: str, workflow_id: str, since_ms: int, until_ms: int
    ) -> list[HourRollup]:
        """The workflow's rollups from the hour of ``since_ms`` to that of ``until_ms``."""
        try:
            return [
                _rollup_of(item)
                for item in self._items(environment, workflow_id, since_ms, until_ms)
            ]
        except Exception as exc:
            reraise(exc, "reading a workflow's statistics")

    def _items(
        self, environment: str, workflow_id: str, since_ms: int, until_ms: int
    ) -> Iterator[dict[str, Any]]:
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "#pk = :pk AND #sk BETWEEN :first AND :last",
            "ExpressionAttributeNames": {"#pk": t.PK, "#sk": t.SK},
            "ExpressionAttributeValues": {
                ":pk": {"S": rollup_partition(environment, workflow_id)},
                ":first": {"S": _hour_key(hour_of(since_ms))},
                ":last": {"S": _hour_key(hour_of(until_ms))},
            },
        }
        while True:
            page = self._db().query(**request)
            yield from page.get("Items", [])
            last = page.get("LastEvaluatedKey")
            if not last:
                return
            request["ExclusiveStartKey"] = last
