"""Schedule states in the manifests table: ``pk = sched#<environment>``, ``sk = <scheduleId>``,
written with a condition on their version."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from relayflow.adapters.aws.errors import error_code, is_aws_error, reraise
from relayflow.errors import StaleScheduleError
from relayflow.schedules.state import ScheduleState

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from relayflow.config import Settings

_OPTIONAL_INTS = ("last_scheduled_ms", "claimed_at_ms", "queued_ms")


def _pk(environment: str) -> dict[str, str]:
    return {"S": f"sched#{environment}"}


def to_item(state: ScheduleState) -> dict[str, Any]:
    """The DynamoDB item of ``state``."""
    item: dict[str, Any] = {
        "pk": _pk(state.environment),
        "sk": {"S": state.schedule_id},
        "anchorMs": {"N": str(state.anchor_ms)},
        "paused": {"BOOL": state.paused},
        "fired": {"BOOL": state.fired},
        "version": {"N": str(state.version)},
    }
    for attr in _OPTIONAL_INTS:
        value = getattr(state, attr)
        if value is not None:
            item[attr] = {"N": str(value)}
    if state.active_run_id is not None:
        item["activeRunId"] = {"S": state.active_run_id}
    if state.last_run_id is not None:
        item["lastRunId"] = {"S": state.last_run_id}
    return item


def from_item(item: dict[str, Any]) -> ScheduleState:
    """The state an item holds."""
    ints: dict[str, Any] = {a: int(item[a]["N"]) if a in item else None for a in _OPTIONAL_INTS}
    return ScheduleState(
        environment=item["pk"]["S"].split("#", 1)[1],
        schedule_id=item["sk"]["S"],
        anchor_ms=int(item["anchorMs"]["N"]),
        paused=bool(item["paused"]["BOOL"]),
        fired=bool(item.get("fired", {}).get("BOOL", False)),
        active_run_id=item["activeRunId"]["S"] if "activeRunId" in item else None,
        last_run_id=item["lastRunId"]["S"] if "lastRunId" in item else None,
        version=int(item["version"]["N"]),
        **ints,
    )


class DynamoDBScheduleStateStore:
    """A :class:`~relayflow.schedules.ScheduleStateStore` in the manifests table."""

    def __init__(self, table_name: str, *, client_factory: Callable[[], DynamoDBClient]) -> None:
        self.table_name = table_name
        self._client_factory = client_factory

    @classmethod
    def from_settings(
        cls, settings: Settings, *, client_factory: Callable[[], DynamoDBClient]
    ) -> DynamoDBScheduleStateStore:
        """A store in ``RELAYFLOW_MANIFESTS_TABLE``."""
        return cls(settings.require("manifests_table"), client_factory=client_factory)

    def get(self, environment: str, schedule_id: str) -> ScheduleState | None:
        """The stored state (strongly consistent), or None."""
        try:
            answer = self._client_factory().get_item(
                TableName=self.table_name,
                Key={"pk": _pk(environment), "sk": {"S": schedule_id}},
                ConsistentRead=True,
            )
        except Exception as exc:
            reraise(exc, f"reading schedule {schedule_id}")
        item = answer.get("Item")
        return from_item(item) if item else None

    def list(self, environment: str) -> list[ScheduleState]:
        """Every state of ``environment``."""
        out: list[ScheduleState] = []
        params: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": _pk(environment)},
            "ConsistentRead": True,
        }
        while True:
            try:
                page = self._client_factory().query(**params)
            except Exception as exc:
                reraise(exc, f"listing schedules of {environment}")
            out.extend(from_item(item) for item in page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                return out
            params["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def save(self, state: ScheduleState, *, expected_version: int) -> ScheduleState:
        """Conditional put: absent when ``expected_version`` is 0, else that version."""
        saved = state.but(version=expected_version + 1)
        params: dict[str, Any] = {"TableName": self.table_name, "Item": to_item(saved)}
        if expected_version == 0:
            params["ConditionExpression"] = "attribute_not_exists(pk)"
        else:
            params["ConditionExpression"] = "#v = :v"
            params["ExpressionAttributeNames"] = {"#v": "version"}
            params["ExpressionAttributeValues"] = {":v": {"N": str(expected_version)}}
        try:
            self._client_factory().put_item(**params)
        except Exception as exc:
            if is_aws_error(exc) and error_code(exc) == "ConditionalCheckFailedException":
                raise StaleScheduleError(self.get(state.environment, state.schedule_id)) from exc
            reraise(exc, f"saving schedule {state.schedule_id}")
        return saved
