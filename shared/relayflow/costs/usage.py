"""The AWS work a run caused, counted in each service's billing units.

Counts accumulate as the orchestrator works on the run and ride on the run's saves (no
write of their own), so the last save's own work is the only part a run never records.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class RunUsage(BaseModel):
    """Billing units of the AWS work done for one run (camelCase when serialised)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    #: DynamoDB write units, index writes included (one per started KB of each item written).
    dynamodb_write_units: float = Field(default=0, ge=0)
    #: DynamoDB read units (one per started 4 KB strongly consistent, half that eventually).
    dynamodb_read_units: float = Field(default=0, ge=0)
    #: DynamoDB requests (each call, a batch counting once).
    dynamodb_requests: int = Field(default=0, ge=0)
    #: Invocations of the orchestrator's drive function (and api function work done for the
    #: run) and their billed time.
    drive_invocations: int = Field(default=0, ge=0)
    #: Invocations of Lambda step hosts (worker functions) the run's steps were sent to.
    worker_invocations: int = Field(default=0, ge=0)
    #: Milliseconds the orchestrator's functions spent working for the run.
    orchestrator_ms: int = Field(default=0, ge=0)
    #: EventBridge Scheduler alarms that fired for the run (its API calls are free).
    scheduler_invocations: int = Field(default=0, ge=0)
    #: SQS requests (short-wait alarms sent and received).
    sqs_requests: int = Field(default=0, ge=0)
    #: S3 requests of the payload store and the bytes they moved.
    s3_puts: int = Field(default=0, ge=0)
    s3_gets: int = Field(default=0, ge=0)
    s3_bytes: int = Field(default=0, ge=0)

    def plus(self, other: RunUsage) -> RunUsage:
        """The sum of two usages."""
        fields = type(self).model_fields
        return RunUsage(**{name: getattr(self, name) + getattr(other, name) for name in fields})

    def packed(self) -> list[int | float]:
        """The counts in field order, trailing zeros left out: the compact form a run's stored
        record keeps (it rides in the run's header item, whose size is billed)."""
        values: list[int | float] = [
            int(v) if float(v).is_integer() else float(v)
            for v in (getattr(self, name) for name in type(self).model_fields)
        ]
        while values and not values[-1]:
            values.pop()
        return values

    @classmethod
    def unpacked(cls, values: list[int | float]) -> RunUsage:
        """The usage :meth:`packed` gave (fields added since read as zero)."""
        return cls(**dict(zip(cls.model_fields, values, strict=False)))

    @property
    def is_empty(self) -> bool:
        """True when nothing was counted."""
        return not any(getattr(self, name) for name in type(self).model_fields)
