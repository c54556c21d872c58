"""The ``runs get`` lines of a run's cost: its total and parts in dollars, then its usage."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Usage fields shown, with their labels, in this order (zero ones are left out).
_USAGE_LABELS = (
    ("dynamodbWriteUnits", "DynamoDB write units"),
    ("dynamodbReadUnits", "DynamoDB read units"),
    ("dynamodbRequests", "DynamoDB requests"),
    ("driveInvocations", "drive invocations"),
    ("workerInvocations", "worker invocations"),
    ("orchestratorMs", "orchestrator ms"),
    ("schedulerInvocations", "Scheduler alarms"),
    ("sqsRequests", "SQS requests"),
    ("s3Puts", "S3 PUTs"),
    ("s3Gets", "S3 GETs"),
    ("s3Bytes", "S3 bytes"),
)


def dollars(value: float) -> str:
    """``value`` in dollars, with the digits a run's small cost needs."""
    return f"${value:,.2f}" if value >= 1 else f"${value:.6f}"


def _number(value: Any) -> str:
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.1f}"
    return f"{int(value):,}"


def cost_lines(run: Mapping[str, Any]) -> list[str]:
    """``cost`` with its parts by service and ``usage`` with its units (none when the run
    has no recorded usage)."""
    cost = run.get("cost")
    usage = run.get("usage")
    lines: list[str] = []
    if isinstance(cost, Mapping) and isinstance(cost.get("total"), int | float):
        given = cost.get("parts")
        parts: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
        shown = ", ".join(
            f"{name} {dollars(float(value))}"
            for name, value in sorted(parts.items(), key=lambda item: -float(item[1]))
            if isinstance(value, int | float) and value > 0
        )
        lines.append(
            f"cost      {dollars(float(cost['total']))}" + (f" ({shown})" if shown else "")
        )
    if isinstance(usage, Mapping):
        counted = [
            f"{_number(usage[key])} {label}"
            for key, label in _USAGE_LABELS
            if isinstance(usage.get(key), int | float) and usage[key]
        ]
        if counted:
            lines.append(f"usage     {', '.join(counted)}")
    return lines
