"""Fault injection for boto3 clients and dispatchers: kill the process at the N-th call, or
answer a call with a throttling/5xx error.

Every fault has one of two explicit modes (:data:`FAULT_MODES`): ``"refused"``, the service
never applies the request (it was throttled, or the process died before sending it), and
``"applied"``, the service applied it and then the answer was lost (a 5xx or a crash after
the write). With moto the difference is real: a refused request never reaches moto's backend.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from botocore.awsrequest import AWSResponse

Phase = Literal["before", "after"]
#: Whether the service applied the request the fault answers (see the module docstring).
FaultMode = Literal["refused", "applied"]
FAULT_MODES: tuple[FaultMode, ...] = ("refused", "applied")
#: Where each mode strikes: before the request is sent, or once the service answered.
_PHASE_OF: dict[FaultMode, Phase] = {"refused": "before", "applied": "after"}


class ProcessKilled(BaseException):
    """The process running a request died at this point (simulated).

    A ``BaseException`` so that no ``except Exception`` in product code can swallow it: the
    whole call stack unwinds and nothing after this point runs, as after a real crash.
    """


@dataclass
class CrashPlan:
    """Counts the calls a process makes (AWS operations and step-host dispatches) and kills
    it at call number ``kill_at``: ``refused``, before the call reaches the service, or
    ``applied``, after the service applied it (the answer is lost with the process).

    The plan is shared by every process of a scenario: once it fired it stays spent, so
    recovery runs without faults.
    """

    kill_at: int | None = None
    mode: FaultMode = "refused"
    #: Called at the moment of the crash, before the process dies (to record what it left).
    on_fire: Callable[[], None] | None = None
    calls: list[str] = field(default_factory=list)
    #: The sort key of the item each call wrote ("" for other calls), by call.
    written: list[str] = field(default_factory=list)
    fired_at: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def point(self, name: str, phase: Phase, index: int | None = None, written: str = "") -> int:
        """Pass the fault point ``name``; raise :class:`ProcessKilled` if it is the chosen one.

        Returns the call's number. The ``after`` point of a call that made calls of its own
        (a dispatch whose host wrote checkpoints) passes the number its ``before`` returned.
        """
        with self._lock:
            if phase == "before":
                self.calls.append(name)
                self.written.append(written)
            number = len(self.calls) if index is None else index
            due = (
                self.fired_at is None
                and self.kill_at is not None
                and number == self.kill_at
                and phase == _PHASE_OF[self.mode]
            )
            if due:
                self.fired_at = f"{self.mode} #{self.kill_at} {name}"
        if due:
            if self.on_fire is not None:
                self.on_fire()
            raise ProcessKilled(f"process killed ({self.mode}) at call #{self.kill_at} ({name})")
        return number

    @property
    def fired(self) -> bool:
        """True once the plan killed a process."""
        return self.fired_at is not None


#: Attempts botocore makes per call (``total_max_attempts`` of relayflow's clients): a burst
#: this long fails the whole call, whatever the retry handler does.
CALL_ATTEMPTS = 5
#: The error each service answers a swept call with (transient: botocore retries it).
OUTAGE_ERRORS: dict[str, tuple[str, int]] = {
    "dynamodb": ("InternalServerError", 500),
    "s3": ("SlowDown", 503),
    "scheduler": ("ThrottlingException", 429),
    "sqs": ("InternalError", 500),
}


@dataclass
class OutagePlan:
    """Counts the calls a deployment makes, as :class:`CrashPlan` does, and fails one call as
    a whole (call number ``fail_at``, or the first writing an item under ``fail_writes``):
    every attempt botocore makes of it gets a transient error (``error``, by default the
    service's :data:`OUTAGE_ERRORS` entry), ``refused`` (never applied) or ``applied``
    (applied, the answer lost). The process lives on; the call raises what botocore raises
    once it stops retrying (after :data:`CALL_ATTEMPTS` attempts, or fewer once its retry
    quota is spent, as in a real outage).

    Calls of services without an entry in :data:`OUTAGE_ERRORS` (step-host dispatches,
    hand-offs) are counted but never failed: the plan then fires at no call.
    """

    injector: ErrorInjector
    fail_at: int | None = None
    mode: FaultMode = "refused"
    fail_writes: str | None = None
    error: tuple[str, int] | None = None
    calls: list[str] = field(default_factory=list)
    written: list[str] = field(default_factory=list)
    fired_at: str | None = None
    burst: ErrorBurst | None = None
    _closed: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def point(self, name: str, phase: Phase, index: int | None = None, written: str = "") -> int:
        """Pass the fault point ``name``: fail every attempt of the chosen call."""
        with self._lock:
            if phase == "after":
                # botocore calls do not nest in a thread: the first answer this thread gets
                # after the chosen call started is that call's, whatever attempts it made.
                burst = self.burst
                if burst is not None and not self._closed and burst.thread == threading.get_ident():
                    burst.count = burst.injected
                    self._closed = True
                return len(self.calls) if index is None else index
            self.calls.append(name)
            self.written.append(written)
            number = len(self.calls)
            service = name.split(":")[0]
            chosen = number == self.fail_at or (
                self.fail_writes is not None and written.startswith(self.fail_writes)
            )
            if chosen and self.fired_at is None and service in OUTAGE_ERRORS:
                self.fired_at = f"{self.mode} #{number} {name}"
                code, status = self.error or OUTAGE_ERRORS[service]
                self.burst = self.injector.burst(
                    name, code, status, CALL_ATTEMPTS, self.mode, thread=threading.get_ident()
                )
        return number

    @property
    def fired(self) -> bool:
        """True once the chosen call failed: each attempt botocore made of it got the error."""
        return self.burst is not None and self._closed and self.burst.injected >= 1


def _operation(event_name: str) -> str:
    # "before-call.dynamodb.TransactWriteItems" -> "dynamodb:TransactWriteItems"
    parts = event_name.split(".")
    return f"{parts[1]}:{parts[2]}" if len(parts) >= 3 else event_name


def _written_sk(request: Any) -> str:
    """The sort key of the item a DynamoDB ``PutItem`` request writes ("" for others); of the
    request's parameters (``before-call``) or of the prepared request (``before-send``)."""
    body = request.get("body") if isinstance(request, dict) else getattr(request, "body", None)
    if not isinstance(body, bytes | str) or not body:
        return ""
    try:
        item = json.loads(body).get("Item", {})
    except (ValueError, AttributeError):
        return ""
    sk = item.get("sk", {}) if isinstance(item, dict) else {}
    return sk.get("S", "") if isinstance(sk, dict) else ""


class ClientTap:
    """Routes every call of the boto3 clients it is installed on to the current plan.

    One tap per shared set of clients; ``plan`` is swapped per scenario (None: no faults).
    """

    def __init__(self) -> None:
        self.plan: CrashPlan | OutagePlan | None = None

    def install(self, client: Any) -> None:
        """Hook ``client``'s before-call and after-call events."""
        client.meta.events.register("before-call.*.*", self._before)
        client.meta.events.register("after-call.*.*", self._after)

    def _before(self, event_name: str, params: Any = None, **_: Any) -> None:
        if self.plan is not None:
            self.plan.point(_operation(event_name), "before", written=_written_sk(params))

    def _after(self, event_name: str, **_: Any) -> None:
        if self.plan is not None:
            self.plan.point(_operation(event_name), "after")


@dataclass
class ErrorBurst:
    """Answers the next ``count`` matching calls with ``code``/``status`` (then lets calls
    through), as a throttled or failing AWS endpoint would: ``refused`` requests never reach
    the service, ``applied`` ones are applied before the error replaces the answer. botocore's
    retry handler sees these answers exactly as it would see real ones."""

    operation: str
    code: str
    status: int
    count: int
    mode: FaultMode = "refused"
    injected: int = 0
    #: Only requests writing an item whose sort key starts with this (``log#``: checkpoints).
    writes: str | None = None
    #: Only requests sent by this thread (the one whose call the burst fails as a whole).
    thread: int | None = None
    #: The error's message (``injected <code>`` by default).
    message: str | None = None
    #: Matching requests let through before the first error.
    after: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def take(self, operation: str, request: Any = None) -> bool:
        """True (and one fewer left) when ``operation`` should get the error now."""
        with self._lock:
            if operation != self.operation or self.injected >= self.count:
                return False
            if self.thread is not None and self.thread != threading.get_ident():
                return False
            if self.writes is not None and not _written_sk(request).startswith(self.writes):
                return False
            if self.after > 0:
                self.after -= 1
                return False
            self.injected += 1
            return True


class ErrorInjector:
    """Stands in front of moto on a client's ``before-send``: injected errors go through
    botocore's own retry logic, and moto sees a request only if the service would (every
    request without a fault reaches moto untouched).

    botocore calls every ``before-send`` handler and keeps the first answer, so a handler
    placed ahead of moto's could not stop moto from applying the request; the injector takes
    moto's place on the client instead and calls it itself.
    """

    def __init__(self) -> None:
        self.bursts: list[ErrorBurst] = []

    def install(self, client: Any) -> None:
        """Hook ``client`` so that bursts apply to it (call it inside an active mock)."""
        from moto.core.models import botocore_stubber

        client.meta.events.unregister("before-send", botocore_stubber)
        client.meta.events.register("before-send", self._send)

    def burst(
        self,
        operation: str,
        code: str,
        status: int,
        count: int,
        mode: FaultMode = "refused",
        *,
        writes: str | None = None,
        thread: int | None = None,
        message: str | None = None,
        after: int = 0,
    ) -> ErrorBurst:
        """Fail the next ``count`` calls of ``operation`` (``service:Operation``), only those
        writing an item under ``writes`` and sent by ``thread`` when given, after letting
        ``after`` of them through."""
        added = ErrorBurst(
            operation,
            code,
            status,
            count,
            mode,
            writes=writes,
            thread=thread,
            message=message,
            after=after,
        )
        self.bursts.append(added)
        return added

    def _send(self, request: Any, event_name: str, **kwargs: Any) -> AWSResponse | None:
        from moto.core.models import botocore_stubber

        operation = _operation(event_name)
        for burst in self.bursts:
            if burst.take(operation, request):
                if burst.mode == "applied":
                    botocore_stubber(event_name, request, **kwargs)
                service = operation.split(":")[0]
                message = burst.message or f"injected {burst.code}"
                return _error_response(request.url, burst.code, burst.status, service, message)
        answer: AWSResponse | None = botocore_stubber(event_name, request, **kwargs)
        return answer


class RawBody:
    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_: Any) -> Any:
        yield self._data

    def read(self, *_: Any) -> bytes:
        data, self._data = self._data, b""
        return data


def _error_response(url: str, code: str, status: int, service: str, message: str) -> AWSResponse:
    if service in ("s3",):
        body = (
            f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code>"
            f"<Message>{message}</Message></Error>"
        ).encode()
        headers = {"Content-Type": "application/xml"}
    else:
        body = json.dumps({"__type": code, "message": message}).encode()
        headers = {"Content-Type": "application/x-amz-json-1.0", "x-amzn-ErrorType": code}
    return aws_response(url, status, headers, body)


class RecordingSleep:
    """Stands in for ``time.sleep`` in botocore's retry loop: records each backoff delay."""

    def __init__(self, advance: Callable[[float], None] | None = None) -> None:
        self.delays: list[float] = []
        self._advance = advance

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        if self._advance is not None:
            self._advance(seconds)


def aws_response(url: str, status: int, headers: dict[str, str], body: bytes) -> AWSResponse:
    """A raw HTTP answer botocore parses as if the service sent it."""
    return AWSResponse(url, status, headers, RawBody(body))  # type: ignore[arg-type]
