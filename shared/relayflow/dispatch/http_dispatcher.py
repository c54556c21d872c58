"""Delivers step requests to an HTTP(S) step host with ``requests``, signed, with retries.

Transport failures, timeouts, 429 and 5xx are retried with a short backoff and then raised as a
transient :class:`~relayflow.errors.DispatchError`; every other answer maps as in reference
§2.4 (a body that is not JSON becomes 502 ``tenant_invalid_response``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import requests
from urllib3.exceptions import NewConnectionError

from relayflow.clock import wall_s
from relayflow.dispatch.capabilities import CapabilitySigner
from relayflow.dispatch.signing import RequestSigner, SigningMode
from relayflow.errors import DispatchError, ValidationError

PROTOCOL_HEADER = "x-relayflow-protocol"
#: The longest wait for a deadline (a drive never lasts longer than a Lambda's 15 minutes).
MAX_WAIT_S = 900.0
VOYANT_PROTOCOL_HEADER = "x-voyant-protocol"


@dataclass(frozen=True)
class TransportRetry:
    """How often and how patiently a dispatcher retries transient failures.

    Attributes:
        retries: Extra attempts after the first (0 disables retrying).
        base_delay_s: Delay before the first retry; doubles for each later one.
        max_delay_s: Upper bound of one delay (also caps a host's ``Retry-After``).
        sleep: Waits the given seconds (a virtual clock in tests).
    """

    retries: int = 2
    base_delay_s: float = 0.2
    max_delay_s: float = 2.0
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)

    def delay(self, retry_index: int, hinted_s: float | None = None) -> float:
        """Seconds to wait before retry number ``retry_index`` (0-based)."""
        delay: float = self.base_delay_s * float(2**retry_index)
        if hinted_s is not None:
            delay = max(delay, hinted_s)
        return min(delay, self.max_delay_s)


def encode_request(request: dict[str, Any]) -> bytes:
    """The exact bytes sent (and signed) for a step request: compact UTF-8 JSON."""
    return json.dumps(request, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def is_transient_status(status: int) -> bool:
    """True for answers worth retrying: 429 and every 5xx."""
    return status == 429 or status >= 500


def interpret_answer(status: int, body: bytes | str | dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """Map a host's (status, body) to the dispatcher answer (reference §2.4).

    A body that is not a JSON object becomes 502 ``tenant_invalid_response``; a non-200 answer
    keeps the host's ``{error, message}`` when well formed, else ``tenant_error``.
    """
    if isinstance(body, dict):
        parsed: Any = body
    else:
        try:
            parsed = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            return 502, {
                "error": "tenant_invalid_response",
                "message": f"step host answered HTTP {status} with a body that is not JSON",
            }
    if status == 200:
        if isinstance(parsed, dict):
            return 200, parsed
        return 502, {
            "error": "tenant_invalid_response",
            "message": "step host answered HTTP 200 with JSON that is not an object",
        }
    if (
        isinstance(parsed, dict)
        and isinstance(parsed.get("error"), str)
        and isinstance(parsed.get("message"), str)
    ):
        return status, parsed
    return status, {"error": "tenant_error", "message": f"tenant returned HTTP {status}"}


def describe_answer(status: int, body: bytes | str | dict[str, Any]) -> str:
    """A short description of a host's answer for error messages."""
    _, answer = interpret_answer(status, body)
    code, detail = answer.get("error"), answer.get("message")
    if isinstance(code, str) and isinstance(detail, str) and not code.startswith("tenant_"):
        return f"HTTP {status} ({code}: {detail})"
    return f"HTTP {status}"


class HttpDispatcher:
    """A :class:`~relayflow.ports.Dispatcher` that POSTs step requests to one URL.

    Args:
        url: The step host's endpoint, used exactly as given.
        secret: Shared signing secret; requests are unsigned when None.
        mode: ``relayflow`` (``x-relayflow-signature``) or ``voyant`` (``x-voyant-dispatch-auth``).
        connect_timeout: Seconds to wait for a connection.
        read_timeout: Seconds the answer may come after the request's ``deadline``: the
            read timeout is the time left to the deadline plus this, so the dispatcher never
            gives up on a request its host may still be working on within its deadline.
        session: A ``requests.Session`` to reuse (one is created on first use otherwise).
        retry: Retry behaviour for transient failures.
        clock: Unix time in seconds for signature timestamps.
        checkpoint_url: The orchestrator API's base URL as the host reaches it: a request
            offering the checkpoint channel then also carries the run's checkpoint route and
            a capability for it, so the host makes each step durable through the
            orchestrator (needs ``secret``). Such a request is retried here only when it
            cannot have reached the host; any other failure is left to the engine, which
            first reads what the host made durable.
    """

    def __init__(
        self,
        url: str,
        *,
        secret: str | None = None,
        mode: SigningMode = "relayflow",
        connect_timeout: float = 3.05,
        read_timeout: float = 2.0,
        session: requests.Session | None = None,
        retry: TransportRetry | None = None,
        clock: Callable[[], float] = wall_s,
        checkpoint_url: str | None = None,
    ) -> None:
        self.url = url
        self.mode = mode
        self._signer = RequestSigner(secret, mode=mode, clock=clock) if secret else None
        if checkpoint_url and not secret:
            raise ValidationError("per-step checkpoints of HTTP hosts need the signing secret")
        self._checkpoint_url = checkpoint_url.rstrip("/") if checkpoint_url else None
        self._capabilities = CapabilitySigner(secret, clock=clock) if secret else None
        self._connect_timeout = connect_timeout
        self._read_grace = read_timeout
        self._clock = clock
        self._session = session
        self._retry = retry or TransportRetry()

    def _client(self) -> requests.Session:
        if self._session is None:
            self._session = requests.Session()
        return self._session

    def _headers(self, body: bytes, traceparent: str | None) -> dict[str, str]:
        headers = {"content-type": "application/json; charset=utf-8", PROTOCOL_HEADER: "1"}
        if traceparent:
            # The host's own server spans join the run's trace under this invocation.
            headers["traceparent"] = traceparent
        if self.mode == "voyant":
            headers[VOYANT_PROTOCOL_HEADER] = "1"
        if self._signer is not None:
            headers.update(self._signer.headers(body))
        return headers

    def dispatch(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """POST ``request`` and return the host's (status, body).

        Raises:
            DispatchError: ``transient=True`` after the retries when the host stayed
                unreachable, timed out, or answered 429/5xx; ``transient=False`` when the
                request cannot be sent at all (bad URL).
        """
        request, checkpointing = self._offer_checkpoints(request)
        body = encode_request(request)
        timeout = (self._connect_timeout, self.read_timeout_s(request))
        attempts = self._retry.retries + 1
        last = DispatchError(f"no attempt reached {self.url}", transient=True)
        for attempt in range(attempts):
            hinted: float | None = None
            try:
                # Re-sign on each attempt so a relayflow timestamp never goes stale in retries.
                response = self._client().post(
                    self.url,
                    data=body,
                    headers=self._headers(body, request.get("traceparent")),
                    timeout=timeout,
                    allow_redirects=False,
                )
            except requests.ReadTimeout as exc:
                # The host got the request and may still be running it: sending it again
                # here would run it twice at once. The engine retries after its backoff.
                raise DispatchError(
                    f"step host {self.url} did not answer within {timeout[1]:.1f} s "
                    f"(its deadline plus {self._read_grace} s): {exc}",
                    transient=True,
                    code="tenant_unreachable",
                ) from exc
            except requests.Timeout as exc:
                last = DispatchError(
                    f"step host {self.url} timed out: {exc}",
                    transient=True,
                    code="tenant_unreachable",
                )
            except requests.ConnectionError as exc:
                last = DispatchError(
                    f"step host {self.url} is unreachable: {exc}",
                    transient=True,
                    code="tenant_unreachable",
                )
                if checkpointing and not _never_sent(exc):
                    raise last from exc
            except requests.RequestException as exc:
                raise DispatchError(
                    f"cannot send a step request to {self.url}: {exc}",
                    transient=False,
                    code="tenant_unreachable",
                ) from exc
            else:
                status = response.status_code
                if not is_transient_status(status):
                    return interpret_answer(status, response.content)
                hinted = retry_after_s(response.headers.get("retry-after"))
                last = DispatchError(
                    f"step host {self.url} answered {describe_answer(status, response.content)}",
                    transient=True,
                    status=status,
                    code="tenant_error",
                )
                if checkpointing:
                    raise last
            if attempt + 1 < attempts:
                self._retry.sleep(self._retry.delay(attempt, hinted))
        last.message = f"{last.message} (after {attempts} attempts)"
        last.args = (last.message,)
        raise last

    def _offer_checkpoints(self, request: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """The request with the checkpoint route and capability added to its channel, and
        whether it has them (only with ``checkpoint_url`` and a channel the engine offered)."""
        channel = request.get("checkpoint")
        if self._checkpoint_url is None or self._capabilities is None:
            return request, False
        if not isinstance(channel, dict) or not isinstance(channel.get("seq"), int):
            return request, False
        run_id = str(request.get("runId", ""))
        deadline = request.get("deadline")
        if isinstance(deadline, bool) or not isinstance(deadline, int | float):
            deadline = int((self._clock() + MAX_WAIT_S) * 1000)
        offered = {
            **channel,
            "url": f"{self._checkpoint_url}/api/runs/{quote(run_id, safe='')}/checkpoints",
            "capability": self._capabilities.grant(run_id, channel["seq"], int(deadline)),
        }
        return {**request, "checkpoint": offered}, True

    def read_timeout_s(self, request: dict[str, Any]) -> float:
        """Seconds to wait for the answer to ``request``: to its deadline, plus the grace."""
        deadline = request.get("deadline")
        left = 0.0
        if isinstance(deadline, int | float) and not isinstance(deadline, bool):
            left = min(max(0.0, deadline / 1000 - self._clock()), MAX_WAIT_S)
        return left + self._read_grace


def _never_sent(exc: requests.ConnectionError) -> bool:
    """True when the connection was never made, so the host cannot have got the request."""
    if isinstance(exc, requests.ConnectTimeout):
        return True
    cause = exc.args[0] if exc.args else None
    return isinstance(getattr(cause, "reason", cause), NewConnectionError)


def retry_after_s(value: str | None) -> float | None:
    """Seconds of a ``Retry-After`` header given in seconds (None when absent or a date)."""
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if seconds >= 0 else None
