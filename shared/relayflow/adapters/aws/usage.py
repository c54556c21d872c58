"""Counts the AWS work each run causes, from the requests the orchestrator's clients send.

botocore hooks on every client ``AwsClients`` builds see each request and its answer; what a
request costs in its service's billing units goes into the :class:`UsageMeter` under the run
being worked on (``relayflow.costs.meter``), which the run store's next save of that run
carries. Nothing here writes: the counting rides on the saves that happen anyway.

What counts (docs/operations/costs.md): every DynamoDB request with its write units (index
writes included) and read units, priced by ``billing``; S3 requests of the payload store and
the bytes they move; each Scheduler alarm armed (billed when it fires); each SQS request.
(Invocations are counted where they are made: the engine counts its own, the Lambda
dispatcher a worker's.) Checkpoint log items are
counted for the run whose partition they are in, whichever thread writes them (a step host
in the orchestrator's process writes them while its steps run).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from relayflow.adapters.aws import tables
from relayflow.adapters.aws.billing import DynamoDBPricer, TableSpec
from relayflow.adapters.aws.checkpoints import LOG_PREFIX
from relayflow.costs.meter import UsageMeter, current_run
from relayflow.costs.usage import RunUsage

_PARAMS = "relayflow_usage_params"
#: S3 requests billed at the PUT, COPY, POST, LIST rate; the others at the GET rate.
_S3_PUT_CLASS = frozenset(
    {"PutObject", "CopyObject", "CreateMultipartUpload", "UploadPart", "ListObjects"}
)


class AwsUsageRecorder:
    """Reports what each request of the clients it is attached to costs into ``meter``.

    Args:
        meter: Where usage is counted per run.
        tables: The schema of each DynamoDB table by name (for index writes and the items
            an overwrite replaces).
        runs_table: The runs table, whose checkpoint log items name their run.
    """

    def __init__(
        self, meter: UsageMeter, tables: Mapping[str, TableSpec], runs_table: str | None
    ) -> None:
        self.meter = meter
        self.pricer = DynamoDBPricer(tables)
        self._runs_table = runs_table
        self._attached: set[int] = set()

    def attach(self, client: Any) -> None:
        """Count the requests of ``client`` from now on (once per client; a client that is not
        botocore's, such as the local stack's in-process Lambda, is left alone)."""
        events = getattr(getattr(client, "meta", None), "events", None)
        if events is None or id(client) in self._attached:
            return
        self._attached.add(id(client))
        events.register("before-parameter-build", self._keep_params)
        events.register("after-call", self._after_call)

    def _keep_params(self, params: Any, context: Any, **kwargs: Any) -> None:
        if isinstance(context, dict):
            context[_PARAMS] = dict(params)

    def _after_call(self, event_name: str, parsed: Any, context: Any, **kwargs: Any) -> None:
        _, service, operation = event_name.split(".", 2)
        kept = context.get(_PARAMS) if isinstance(context, dict) else None
        params: dict[str, Any] = kept if isinstance(kept, dict) else {}
        run_id = current_run() or self._checkpoint_run(service, params)
        answer = parsed if isinstance(parsed, dict) else {}
        failed = "Error" in answer
        usage = self._usage(service, operation, params, answer, failed)
        if run_id is not None and usage is not None:
            self.meter.add(run_id, usage)

    def _usage(
        self,
        service: str,
        operation: str,
        params: Mapping[str, Any],
        answer: Mapping[str, Any],
        failed: bool,
    ) -> RunUsage | None:
        if service == "dynamodb":
            # Priced for every request, so that the items an overwrite replaces are known.
            priced = self.pricer.price(operation, params, answer, failed=failed)
            return RunUsage(
                dynamodb_requests=1,
                dynamodb_write_units=priced.table_write_units + priced.index_write_units,
                dynamodb_read_units=priced.read_units,
            )
        if service == "s3":
            moved = _s3_bytes(operation, params, answer)
            if operation in _S3_PUT_CLASS:
                return RunUsage(s3_puts=1, s3_bytes=moved)
            return RunUsage(s3_gets=1, s3_bytes=moved)
        if service == "scheduler" and operation == "CreateSchedule" and not failed:
            return RunUsage(scheduler_invocations=1)
        if service == "sqs":
            return RunUsage(sqs_requests=1)
        return None

    def _checkpoint_run(self, service: str, params: Mapping[str, Any]) -> str | None:
        """The run whose checkpoint log item a request names (outside any work on a run)."""
        if service != "dynamodb" or params.get("TableName") != self._runs_table:
            return None
        item = params.get("Item") or params.get("Key") or {}
        sk = item.get(tables.SK, {}).get("S", "")
        pk = item.get(tables.PK, {}).get("S")
        return pk if isinstance(pk, str) and sk.startswith(LOG_PREFIX) else None


def _s3_bytes(operation: str, params: Mapping[str, Any], answer: Mapping[str, Any]) -> int:
    if operation == "PutObject":
        body = params.get("Body", b"")
        return len(body) if isinstance(body, bytes | str) else 0
    if operation == "GetObject":
        length = answer.get("ContentLength", 0)
        return length if isinstance(length, int) else 0
    return 0
