"""Prices of the AWS work a run causes, and what a run's usage costs at them.

The defaults are AWS list prices in us-east-1 (December 2026); an account with other prices
(another region, savings plans) sets its own table (``RELAYFLOW_PRICE_TABLE``).
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from relayflow.costs.usage import RunUsage
from relayflow.errors import ValidationError as RelayflowValidationError


class PriceTable(BaseModel):
    """Dollars per billing unit (camelCase when serialised)."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )

    dynamodb_write_unit: float = Field(default=0.625 / 1e6, ge=0)
    dynamodb_read_unit: float = Field(default=0.125 / 1e6, ge=0)
    lambda_request: float = Field(default=0.20 / 1e6, ge=0)
    #: arm64, per GB-second.
    lambda_gb_second: float = Field(default=0.0000133334, ge=0)
    #: Memory of the orchestrator's functions, in GB (the CDK construct's default).
    lambda_memory_gb: float = Field(default=1.0, gt=0)
    scheduler_invocation: float = Field(default=1.00 / 1e6, ge=0)
    sqs_request: float = Field(default=0.40 / 1e6, ge=0)
    s3_put: float = Field(default=0.005 / 1000, ge=0)
    s3_get: float = Field(default=0.0004 / 1000, ge=0)
    #: Peers, for comparison: Step Functions Standard per state transition, Lambda durable
    #: functions per durable operation.
    step_functions_transition: float = Field(default=25.0 / 1e6, ge=0)
    durable_operation: float = Field(default=8.0 / 1e6, ge=0)
    #: API Gateway HTTP API, per request (the first 300 million a month): what an HTTP step
    #: host's checkpoint through the API costs on top (not part of a run's usage).
    api_gateway_request: float = Field(default=1.00 / 1e6, ge=0)


def parse_price_table(text: str, *, where: str) -> PriceTable:
    """A price table from a JSON object of its fields (camelCase or snake_case; the fields
    left out keep their list prices), or from the path of a file holding one.

    Raises:
        ValidationError: Neither valid JSON nor a readable file, or a field is unknown or
            negative (the message names ``where``).
    """
    source = text.strip()
    if not source.startswith("{"):
        try:
            source = Path(source).read_text(encoding="utf-8")
        except OSError as exc:
            raise RelayflowValidationError(
                f"{where} is neither a JSON object nor a readable file: {exc}"
            ) from None
    try:
        fields = json.loads(source)
    except json.JSONDecodeError as exc:
        raise RelayflowValidationError(f"{where} is not valid JSON: {exc.msg}") from None
    if not isinstance(fields, dict):
        raise RelayflowValidationError(f"{where} must be a JSON object of prices")
    try:
        return PriceTable.model_validate(fields)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"
            for error in exc.errors()
        )
        raise RelayflowValidationError(f"{where}: {problems}") from None


class RunCost(BaseModel):
    """A run's cost in dollars, in total and by service."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    total: float
    parts: dict[str, float]


def cost_of(usage: RunUsage, prices: PriceTable | None = None) -> RunCost:
    """What ``usage`` costs at ``prices`` (list prices by default)."""
    p = prices or PriceTable()
    gb_seconds = p.lambda_memory_gb * usage.orchestrator_ms / 1000
    parts = {
        "dynamodb": usage.dynamodb_write_units * p.dynamodb_write_unit
        + usage.dynamodb_read_units * p.dynamodb_read_unit,
        "lambda": (usage.drive_invocations + usage.worker_invocations) * p.lambda_request
        + gb_seconds * p.lambda_gb_second,
        "scheduler": usage.scheduler_invocations * p.scheduler_invocation,
        "sqs": usage.sqs_requests * p.sqs_request,
        "s3": usage.s3_puts * p.s3_put + usage.s3_gets * p.s3_get,
    }
    return RunCost(total=sum(parts.values()), parts=parts)
