"""The local stand-in for the drive function's SQS event source mapping: polls the alarm
queue on moto (which honours ``DelaySeconds``), hands each batch to the drive handler as an
SQS event, and deletes the messages the handler did not report as failed (a failed one comes
back after its visibility timeout, as on AWS). Like the mapping, it has several batches
driven at once, so a run whose drive takes long holds up no other run.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from relayflow.local.polling import PollingThread

_log = logging.getLogger("relayflow.local")

Deliver = Callable[[dict[str, Any]], Any]


def sqs_event(messages: list[dict[str, Any]], queue_arn: str) -> dict[str, Any]:
    """The Lambda SQS event for received ``messages``."""
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m.get("Attributes", {}),
                "messageAttributes": {},
                "md5OfBody": m.get("MD5OfBody", ""),
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": queue_arn.split(":")[3] if queue_arn.count(":") >= 5 else "",
            }
            for m in messages
        ]
    }


class LocalQueuePoller:
    """Polls ``queue_url`` and delivers batches to ``deliver`` (the drive handler).

    Args:
        client: A boto3 SQS client (on moto).
        queue_url: The alarm queue.
        deliver: Called with an SQS event; returns the handler's answer
            (``batchItemFailures`` names the messages to keep).
        interval_s: Pause between empty polls (short polls keep local timers precise).
        wait_turn: Called before each poll; may block (see :class:`PollingThread`).
        batch_size: Messages per batch (the mapping's batch size).
        concurrency: How many batches are driven at once in the background (a mapping
            starts with five and scales up).
    """

    def __init__(
        self,
        *,
        client: Any,
        queue_url: str,
        deliver: Deliver,
        interval_s: float = 0.05,
        wait_turn: Callable[[], object] = lambda: None,
        batch_size: int = 10,
        concurrency: int = 5,
    ) -> None:
        self._client = client
        self._url = queue_url
        self._deliver = deliver
        self._batch_size = batch_size
        self._arn = self._queue_arn()
        self._free = threading.BoundedSemaphore(concurrency)
        self._driving: set[threading.Thread] = set()
        self._driving_lock = threading.Lock()
        self._polling = PollingThread(
            "relayflow-queue", self._poll_in_background, interval_s, wait_turn=wait_turn
        )

    def _queue_arn(self) -> str:
        attrs = self._client.get_queue_attributes(QueueUrl=self._url, AttributeNames=["QueueArn"])
        return str(attrs["Attributes"]["QueueArn"])

    def start(self) -> None:
        """Poll in a background thread until :meth:`stop`."""
        self._polling.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop polling, then wait (up to ``timeout_s`` in all) for the batches being driven."""
        self._polling.stop()
        with self._driving_lock:
            driving = list(self._driving)
        deadline = time.monotonic() + timeout_s
        for thread in driving:
            thread.join(max(0.0, deadline - time.monotonic()))

    def poll(self) -> int:
        """Receive one batch and deliver it here; returns how many messages it held."""
        messages = self._receive()
        if messages:
            self._settle(messages)
        return len(messages)

    def _poll_in_background(self) -> bool:
        """Receive a batch when a driver is free and have it driven on its own thread;
        True when one was received (the next poll follows at once)."""
        if not self._free.acquire(blocking=False):
            return False  # every driver is busy: received messages would only wait
        try:
            messages = self._receive()
        except BaseException:
            self._free.release()
            raise
        if not messages:
            self._free.release()
            return False
        thread = threading.Thread(
            target=self._settle_then_free, args=(messages,), name="relayflow-drive", daemon=True
        )
        with self._driving_lock:
            self._driving.add(thread)
        thread.start()
        return True

    def _settle_then_free(self, messages: list[dict[str, Any]]) -> None:
        try:
            self._settle(messages)
        except Exception:
            _log.exception("the drive handler's batch could not be settled")
        finally:
            with self._driving_lock:
                self._driving.discard(threading.current_thread())
            self._free.release()

    def _receive(self) -> list[dict[str, Any]]:
        answer = self._client.receive_message(
            QueueUrl=self._url, MaxNumberOfMessages=self._batch_size, WaitTimeSeconds=0
        )
        messages: list[dict[str, Any]] = answer.get("Messages", [])
        return messages

    def _settle(self, messages: list[dict[str, Any]]) -> None:
        """Deliver ``messages``; delete those the handler did not report as failed."""
        try:
            result = self._deliver(sqs_event(messages, self._arn))
        except Exception:
            _log.exception("the drive handler failed a whole batch")
            return  # nothing deleted: every message comes back
        failed = {
            item.get("itemIdentifier")
            for item in (result or {}).get("batchItemFailures", [])
            if isinstance(item, dict)
        }
        done = [m for m in messages if m["MessageId"] not in failed]
        if done:
            self._client.delete_message_batch(
                QueueUrl=self._url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)
                ],
            )
