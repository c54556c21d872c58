"""Counts the AWS work each run causes, from the requests the orchestrator's clients send.

botocore hooks on every client ``AwsClients`` builds see each request and its answer; what a
request costs in its service's billing units goes into the :class:`UsageMeter` under the run
being worked on (``relayflow.costs.meter``), which the run store's next save of that run
carries. Nothing here writes: the counting rides on the saves that happen anyway.

What counts (docs/operations/costs.md): every DynamoDB request with its write units (index
writes included) and read units, priced by ``billing``; S3 requests of the payload store and
the bytes they move. (Invocations are counted where they are made: the engine counts its own,
the Lambda dispatcher a worker's; an alarm's Scheduler invocation or SQS requests are counted
by the drive it fires, not when it is armed.) The run store prices its own writes before it
sends them and stores them with the save (:meth:`AwsUsageRecorder.prepaid`): those requests
are not counted again when they succeed. Checkpoint log items are
counted for the run whose partition they are in, whichever thread writes them (a step host
in the orchestrator's process writes them while its steps run).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from relayflow.adapters.aws import tables
from relayflow.adapters.aws.billing import DynamoDBPricer, TableSpec
from relayflow.adapters.aws.checkpoints import LOG_PREFIX
from relayflow.costs.meter import UsageMeter, current_run
from relayflow.costs.usage import RunUsage

_PARAMS = "relayflow_usage_params"


@dataclass
class PrepaidWrites:
    """DynamoDB requests about to be sent whose cost a save already carries: their quotes in
    the order they are sent, and what those that succeeded were quoted."""

    quotes: list[RunUsage]
    consumed: RunUsage = field(default_factory=RunUsage)


_PREPAID: ContextVar[PrepaidWrites | None] = ContextVar("relayflow_prepaid", default=None)
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

    def quote(self, operation: str, params: Mapping[str, Any]) -> RunUsage:
        """What a DynamoDB write request about to be sent costs if it succeeds."""
        priced = self.pricer.quote(operation, params)
        return RunUsage(
            dynamodb_requests=1,
            dynamodb_write_units=priced.table_write_units + priced.index_write_units,
        )

    @contextlib.contextmanager
    def prepaid(self, quotes: list[RunUsage]) -> Iterator[PrepaidWrites]:
        """The DynamoDB requests sent inside were priced ahead (``quotes``, in order) and are
        carried by the save that sends them: one that succeeds is not counted again. One that
        fails is counted as usual (DynamoDB bills a failed conditional write), and so is any
        request beyond the quoted ones (a batch's retry of unprocessed items: one request,
        its items' units quoted already)."""
        prepaid = PrepaidWrites(quotes=list(quotes))
        token = _PREPAID.set(prepaid)
        try:
            yield prepaid
        finally:
            _PREPAID.reset(token)

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
        prepaid = _PREPAID.get()
        if prepaid is not None and service == "dynamodb" and not failed:
            if prepaid.quotes:
                prepaid.consumed = prepaid.consumed.plus(prepaid.quotes.pop(0))
                return
            usage = RunUsage(dynamodb_requests=1)
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
