"""What the drive function does with each event it receives: a run alarm or hand-off
``{"runId", "wakeAt"}`` drives that run; a schedule firing ``{"kind": "schedule", ...}``
starts the schedule's run; an SQS batch of either is processed with Powertools' batch
utility, reporting only the failed messages so SQS redelivers just those.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from relayflow.api import metrics as m
from relayflow.api.metrics import MetricsSink
from relayflow.drive.delivery import delivery_of
from relayflow.drivers import WorkflowDriver
from relayflow.errors import ValidationError
from relayflow.schedules.service import is_schedule_firing

_log = Logger(service="relayflow")


def handle_one(
    driver: WorkflowDriver, payload: Mapping[str, Any], sink: MetricsSink, *, queued: bool = False
) -> dict[str, Any]:
    """Handle one alarm, hand-off or schedule firing (``queued``: a message of an SQS batch);
    returns what happened."""
    if is_schedule_firing(payload):
        if driver.schedules is None:
            raise ValidationError(
                "a schedule fired but this deployment hosts no schedules "
                "(RELAYFLOW_RECURRING_SCHEDULE_GROUP is unset)"
            )
        result = driver.schedules.handle_firing(payload)
        answer: dict[str, Any] = result.to_json()
        _log.info("schedule fired", extra=answer)
        return answer
    sink.count(m.ALARMS_FIRED)
    record = driver.engine.drive_from_event(payload, delivery=delivery_of(payload, queued=queued))
    status = record.status if record is not None else "not_found"
    _log.info("alarm handled", extra={"run_id": payload.get("runId"), "status": status})
    return {"runId": payload.get("runId"), "status": status}


def is_sqs_batch(event: Any) -> bool:
    """Whether ``event`` is an SQS event source mapping's batch."""
    return isinstance(event, Mapping) and isinstance(event.get("Records"), list)


def handle_drive_event(
    driver: WorkflowDriver, event: Any, context: Any, sink: MetricsSink
) -> dict[str, Any]:
    """The drive function's answer to ``event`` (a payload or an SQS batch of payloads).

    For a batch the answer carries ``batchItemFailures`` (the messages to redeliver) and
    ``driven`` (what each handled message did).

    Raises:
        ValidationError: A direct invocation whose payload is not an object.
    """
    if not is_sqs_batch(event):
        if not isinstance(event, Mapping):
            raise ValidationError("the drive function expects {runId, wakeAt}")
        return {"driven": [handle_one(driver, event, sink)]}
    driven: list[dict[str, Any]] = []

    def record_handler(record: SQSRecord) -> None:
        try:
            payload = json.loads(record.body)
        except (TypeError, ValueError) as exc:
            raise ValidationError("an SQS drive message must hold a JSON object") from exc
        if not isinstance(payload, Mapping):
            raise ValidationError("an SQS drive message must hold a JSON object")
        driven.append(handle_one(driver, payload, sink, queued=True))

    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    answer = process_partial_response(
        event=dict(event), record_handler=record_handler, processor=processor, context=context
    )
    return {"batchItemFailures": list(answer.get("batchItemFailures", [])), "driven": driven}
