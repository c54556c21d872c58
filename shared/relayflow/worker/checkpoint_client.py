"""An HTTP step host's checkpoint log: each entry POSTed to the orchestrator's checkpoint route.

Used when a step request's checkpoint channel carries a ``url`` and a ``capability`` (an HTTP
dispatcher configured with ``RELAYFLOW_HTTP_CHECKPOINT_URL``). Each entry is one request;
repeating it is safe because its slot makes a repeat detectable: the route answers an
identical entry already in the slot as a success, and a different one as 409
``checkpoint_slot_taken`` (a fence, a cancel, another writer), on which the host stops.
Transport failures, timeouts, 429 and 5xx are retried while the request's deadline allows;
every timeout is cut to the time left before it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import requests

from relayflow.clock import wall_ms
from relayflow.dispatch.capabilities import CAPABILITY_HEADER
from relayflow.dispatch.http_dispatcher import TransportRetry, is_transient_status, retry_after_s
from relayflow.errors import CheckpointSlotTakenError, CheckpointUnavailableError
from relayflow.protocol import CheckpointEntry, StepRequest

#: The longest one attempt waits to connect, and then for the answer (a PutItem's worth).
CONNECT_TIMEOUT_S = 3.05
READ_TIMEOUT_S = 10.0
SLOT_TAKEN = "checkpoint_slot_taken"


class HttpCheckpointLog:
    """A :class:`~relayflow.ports.CheckpointWriter` posting entries to one run's route.

    Args:
        url: ``<orchestrator>/api/runs/{runId}/checkpoints`` as the channel gave it.
        capability: The channel's capability (sent in ``x-relayflow-checkpoint-capability``).
        deadline_ms: The step request's deadline (epoch ms): no attempt outlives it.
        session: A ``requests.Session`` to reuse (one is created on first use otherwise).
        retry: Retries of transient failures (their delays count against the deadline).
        now_ms: The host's clock in epoch ms.
    """

    def __init__(
        self,
        url: str,
        capability: str,
        *,
        deadline_ms: int,
        session: requests.Session | None = None,
        retry: TransportRetry | None = None,
        now_ms: Callable[[], int] = wall_ms,
    ) -> None:
        self.url = url
        self._capability = capability
        self._deadline_ms = deadline_ms
        self._session = session
        self._retry = retry or TransportRetry()
        self._now_ms = now_ms

    def _client(self) -> requests.Session:
        if self._session is None:
            self._session = requests.Session()
        return self._session

    def append(self, run_id: str, entry: CheckpointEntry) -> None:
        """POST ``entry``; returns once the orchestrator stored it (or had it already).

        Raises:
            CheckpointSlotTakenError: The slot holds another entry (``taken`` says which kind).
            CheckpointUnavailableError: Refused (4xx), or still failing at the deadline.
        """
        body = json.dumps(entry.to_wire(), separators=(",", ":"), ensure_ascii=False).encode()
        headers = {"content-type": "application/json", CAPABILITY_HEADER: self._capability}
        problem = "no attempt was made before the deadline"
        for attempt in range(self._retry.retries + 1):
            left_s = (self._deadline_ms - self._now_ms()) / 1000
            if left_s <= 0:
                break
            hinted: float | None = None
            try:
                response = self._client().post(
                    self.url,
                    data=body,
                    headers=headers,
                    timeout=(min(CONNECT_TIMEOUT_S, left_s), min(READ_TIMEOUT_S, left_s)),
                    allow_redirects=False,
                )
            except requests.RequestException as exc:
                problem = f"{type(exc).__name__}: {exc}"
            else:
                status = response.status_code
                if status == 200:
                    return
                answer = _json(response.content)
                if status == 409 and answer.get("error") == SLOT_TAKEN:
                    raise CheckpointSlotTakenError(
                        f"checkpoint slot {entry.seq} of run {run_id} is taken",
                        taken=_taken(answer, entry.seq),
                    )
                problem = f"HTTP {status} {answer.get('error', '')}: {answer.get('message', '')}"
                if not is_transient_status(status):
                    break
                hinted = retry_after_s(response.headers.get("retry-after"))
            delay = self._retry.delay(attempt, hinted)
            if attempt == self._retry.retries or self._now_ms() + delay * 1000 >= self._deadline_ms:
                break
            self._retry.sleep(delay)
        raise CheckpointUnavailableError(
            f"checkpoint {entry.seq} of run {run_id} was not stored by {self.url}: {problem}"
        )


def _json(content: bytes) -> dict[str, Any]:
    try:
        parsed = json.loads(content)
    except (ValueError, UnicodeDecodeError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _taken(answer: dict[str, Any], seq: int) -> CheckpointEntry | None:
    """The kind of entry in the slot (the route says which: a cancel stops the body)."""
    details = answer.get("details")
    if not isinstance(details, dict) or not isinstance(details.get("kind"), str):
        return None
    try:
        return CheckpointEntry.model_validate({**details, "seq": seq})
    except ValueError:
        return None


def channel_log(
    request: StepRequest,
    *,
    session: requests.Session | None = None,
    now_ms: Callable[[], int] = wall_ms,
) -> HttpCheckpointLog | None:
    """The log of a request whose channel names the orchestrator's route, else None."""
    channel = request.checkpoint
    if channel is None or not channel.url or not channel.capability:
        return None
    return HttpCheckpointLog(
        channel.url,
        channel.capability,
        deadline_ms=request.deadline,
        session=session,
        now_ms=now_ms,
    )
