"""Step host entry points: an AWS Lambda handler and a WSGI app, both checking signatures.

Both check in the reference runtime's order: method (405), signature (401), JSON (400), then
hand the request to :func:`relayflow.worker.handle_step_request`. Values over the inline cap
travel as payload pointers; when a payload store is given, the host resolves them in the
request and offloads large values of its answer.

A signed host runs a signed request once: a copy of one it accepted is answered 409
``request_replayed`` (see :mod:`relayflow.dispatch.replay`).
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from relayflow.dispatch.replay import AcceptedSignatures, RequestReplayedError
from relayflow.dispatch.signing import RequestSigner, SigningMode
from relayflow.errors import ReplayRecordFullError, SignatureError
from relayflow.flow.ports import RateLimiter
from relayflow.payloads import PayloadCodec
from relayflow.ports import CheckpointWriter, PayloadStore
from relayflow.protocol import strict_json_loads

if TYPE_CHECKING:
    from relayflow.config import Settings

StepHandler = Callable[[dict[str, Any]], tuple[int, dict[str, Any]]]
Answer = tuple[int, dict[str, Any]]

DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024


def _default_handler(raw: dict[str, Any]) -> Answer:
    # Imported on first request so this module loads even where the SDK is not importable yet.
    from relayflow.worker import handle_step_request  # type: ignore[attr-defined,unused-ignore]

    answer: Answer = handle_step_request(raw)
    return answer


def checkpointing_handler(
    checkpoints: CheckpointWriter, rate_limiter: RateLimiter | None = None
) -> StepHandler:
    """The default step handler writing per-step checkpoints into ``checkpoints``; each
    invocation first claims its slot there, so a copy of a request runs nothing. Steps
    declaring ``rate_limit`` reserve their slots in ``rate_limiter`` (without one they raise
    ``RATE_LIMITER_MISSING``)."""
    from relayflow.sdk.invocation import ExecutorOptions
    from relayflow.worker import handle_step_request  # type: ignore[attr-defined,unused-ignore]

    options = ExecutorOptions(rate_limiter=rate_limiter)

    def handler(raw: dict[str, Any]) -> Answer:
        answer: Answer = handle_step_request(
            raw, checkpoints=checkpoints, claim=True, options=options
        )
        return answer

    return handler


def _error(status: int, code: str, message: str) -> Answer:
    return status, {"error": code, "message": message}


class StepHost:
    """The transport-independent part of a step host: checks, then delegation.

    Args:
        handler: Runs one step request (``relayflow.worker.handle_step_request`` by default).
        signer: Verifies signatures; None accepts unsigned requests.
        payload_store: Resolves payload pointers in requests and stores large answer values.
        payload_cap: Answer values whose JSON is larger than this many bytes are offloaded.
        accepted: The signatures this process accepted (a new record by default): a copy of
            a signed request is refused until its signature expires.
    """

    def __init__(
        self,
        *,
        handler: StepHandler | None = None,
        signer: RequestSigner | None = None,
        payload_store: PayloadStore | None = None,
        payload_cap: int | None = None,
        accepted: AcceptedSignatures | None = None,
    ) -> None:
        self._handler = handler or _default_handler
        self.signer = signer
        self._payload_store = payload_store
        self._payload_cap = payload_cap
        self.accepted = accepted if accepted is not None else AcceptedSignatures()

    def handle(self, method: str, headers: Mapping[str, str], body: bytes) -> Answer:
        """Answer one HTTP-shaped request: (status, JSON body)."""
        if method.upper() != "POST":
            return _error(405, "method_not_allowed", f"method {method.upper()} is not allowed")
        if self.signer is not None:
            try:
                verified = self.signer.verify(headers, body)
                now_ms = int(self.signer.clock() * 1000)
                self.accepted.accept(
                    verified.mac, valid_until_ms=verified.valid_until_ms, now_ms=now_ms
                )
            except SignatureError as exc:
                return _error(401, "unauthorized", exc.message)
            except RequestReplayedError as exc:
                return _error(409, exc.code, exc.message)
            except ReplayRecordFullError as exc:
                return _error(503, exc.code, exc.message)
        try:
            raw = strict_json_loads(body)
        except (ValueError, UnicodeDecodeError, RecursionError):
            what = "empty" if not body.strip() else "not valid JSON"
            return _error(400, "invalid_json", f"the request body is {what}")
        return self.run(raw)

    def run(self, raw: Any) -> Answer:
        """Run an already-authenticated, parsed step request."""
        if not isinstance(raw, dict):
            return _error(400, "invalid_request", "the step request must be a JSON object")
        if self.signer is None:
            raw = _without_checkpoint_route(raw)
        if self._payload_store is None:
            return self._handler(raw)
        # One codec per request: values resolved here are not uploaded again in the answer.
        codec = PayloadCodec(self._payload_store, self._payload_cap)
        status, answer = self._handler(codec.resolve_step_request(raw))
        if status == 200:
            answer = codec.offload_step_response(answer)
        return status, answer


def _without_checkpoint_route(raw: dict[str, Any]) -> dict[str, Any]:
    """The request without the orchestrator's checkpoint route: a host that verifies no
    signature cannot tell who sent the URL, so it posts its steps nowhere."""
    channel = raw.get("checkpoint")
    if not isinstance(channel, dict) or "url" not in channel:
        return raw
    kept = {k: v for k, v in channel.items() if k not in ("url", "capability")}
    return {**raw, "checkpoint": kept}


def make_step_host(
    *,
    secret: str | None = None,
    mode: SigningMode = "relayflow",
    handler: StepHandler | None = None,
    payload_store: PayloadStore | None = None,
    payload_cap: int | None = None,
    previous_secrets: tuple[str, ...] = (),
) -> StepHost:
    """A :class:`StepHost` verifying ``secret`` in ``mode`` (no verification without one)."""
    signer = RequestSigner(secret, mode=mode, previous_secrets=previous_secrets) if secret else None
    return StepHost(
        handler=handler, signer=signer, payload_store=payload_store, payload_cap=payload_cap
    )


# ---- AWS Lambda ------------------------------------------------------------------------------


def make_lambda_handler(
    host: StepHost | None = None, **options: Any
) -> Callable[[Any, Any], dict[str, Any]]:
    """A Lambda handler for a step host function.

    Accepted events:

    * a step request object, invoked directly (``LambdaDispatcher`` without a secret); the
      answer is ``{"statusCode": s, "body": {...}}``. Refused with 401 when the host has a
      secret: signed deployments must send envelopes.
    * an envelope ``{"headers": {...}, "body": "<JSON>"}`` — a signed ``LambdaDispatcher``
      payload, or a Lambda Function URL / API Gateway v2 event (``requestContext.http.method``
      and ``isBase64Encoded`` are honoured). The signature is checked over the exact body
      string; the answer's body is a JSON string with a ``content-type`` header.

    Args:
        host: The host to run; else one built by :func:`make_step_host` from ``options``.
    """
    built = host or make_step_host(**options)

    def handler(event: Any, context: Any) -> dict[str, Any]:
        return _lambda_answer(built, event)

    return handler


def _lambda_answer(host: StepHost, event: Any) -> dict[str, Any]:
    if isinstance(event, dict) and isinstance(event.get("body"), str) and "headers" in event:
        headers = event.get("headers") or {}
        body_text: str = event["body"]
        http = (event.get("requestContext") or {}).get("http") or {}
        method = http.get("method") or event.get("httpMethod") or "POST"
        try:
            body = (
                base64.b64decode(body_text, validate=True)
                if event.get("isBase64Encoded")
                else body_text.encode("utf-8", errors="surrogatepass")
            )
        except (binascii.Error, ValueError):
            # Not base64 cannot be the signed JSON: the signature check refuses it first.
            body = body_text.encode("utf-8", errors="surrogatepass")
        status, answer = host.handle(str(method), _str_headers(headers), body)
        return {
            "statusCode": status,
            "headers": {"content-type": "application/json; charset=utf-8"},
            "body": json.dumps(answer, separators=(",", ":"), ensure_ascii=False),
        }
    if host.signer is not None:
        status, answer = _error(
            401,
            "unauthorized",
            f"missing {host.signer.header_name} header "
            '(a signed host expects {"headers", "body"} envelopes)',
        )
    else:
        status, answer = host.run(event)
    return {"statusCode": status, "body": answer}


@functools.cache
def _settings_host() -> StepHost:
    from relayflow.config import current_settings

    settings = current_settings()
    return step_host_from_settings(settings, checkpoint_table=settings.checkpoint_table)


@functools.cache
def _orchestrator_host() -> StepHost:
    from relayflow.config import current_settings

    settings = current_settings()
    return step_host_from_settings(
        settings, checkpoint_table=settings.checkpoint_table or settings.table_name
    )


def step_host_from_settings(settings: Settings, *, checkpoint_table: str | None) -> StepHost:
    """The step host a deployed function runs, configured by ``settings`` (signing, payload
    pointers) after importing the modules of ``RELAYFLOW_WORKFLOW_MODULES``; it writes
    per-step checkpoints and step rate limits into ``checkpoint_table`` when named."""
    from relayflow.config import import_workflow_modules

    import_workflow_modules()
    payload_store: PayloadStore | None = None
    handler: StepHandler | None = None
    if settings.payload_bucket or checkpoint_table:
        from relayflow.adapters.aws.clients import AwsClients

        clients = AwsClients.from_settings(settings)
    if settings.payload_bucket:
        from relayflow.adapters.aws.payloads import S3PayloadStore

        payload_store = S3PayloadStore(settings.payload_bucket, client_factory=clients.s3)
    if checkpoint_table:
        # This function writes the per-step checkpoints itself (one conditional PutItem
        # each) and needs dynamodb:PutItem on the runs table; see docs/operations/durability.md.
        # Its steps' rate limits live in the same table (GetItem and PutItem on `#rate#` keys).
        from relayflow.adapters.aws.checkpoints import DynamoDBCheckpointLog
        from relayflow.adapters.aws.rate_limits import DynamoDBRateLimiter
        from relayflow.costs.meter import UsageMeter

        log = DynamoDBCheckpointLog(
            checkpoint_table,
            client_factory=clients.dynamodb,
            payload_store=payload_store,
            # The orchestrator does not see these writes: the answer reports them.
            usage=UsageMeter(),
        )
        limiter = DynamoDBRateLimiter(checkpoint_table, client_factory=clients.dynamodb)
        handler = checkpointing_handler(log, limiter)
    return make_step_host(
        handler=handler,
        secret=settings.signing_secret,
        mode=settings.signing_mode,
        payload_store=payload_store,
        payload_cap=settings.inline_payload_cap,
    )


def lambda_handler(event: Any, context: Any) -> dict[str, Any]:
    """The step host Lambda entry point, configured from the environment on first call.

    The modules of ``RELAYFLOW_WORKFLOW_MODULES`` are imported first, so their workflows are
    registered; ``RELAYFLOW_SIGNING_SECRET``/``RELAYFLOW_SIGNING_MODE`` enable signature
    checks and ``RELAYFLOW_PAYLOAD_BUCKET`` enables payload pointers (see
    :func:`make_lambda_handler`).
    """
    return _lambda_answer(_settings_host(), event)


def serving_step_requests(
    handler: Callable[[Any, Any], Any], host: Callable[[], StepHost] = _orchestrator_host
) -> Callable[[Any, Any], Any]:
    """``handler`` of an api, drive or sweeper function that also answers step requests.

    Those functions run workflow bodies in process; a run pinned to one of their earlier
    versions is handed to that version with a direct invoke (see
    :class:`~relayflow.dispatch.lambda_dispatcher.PinnedFunctionHandOff`), whose payload is
    what the worker function accepts. Such an event is answered by ``host`` (by default the
    deployment's, checkpointing into the runs table) exactly as the worker function answers
    it; any other event goes to ``handler``.
    """

    def serve(event: Any, context: Any) -> Any:
        if is_step_request_event(event):
            return _lambda_answer(host(), event)
        return handler(event, context)

    return serve


def is_step_request_event(event: Any) -> bool:
    """Whether a Lambda ``event`` is a step request invoked directly: the request itself, or
    the signed envelope ``{"headers", "body"}`` (an API Gateway or Function URL event carries
    more keys, an alarm or an SQS batch no ``protocolVersion``)."""
    if not isinstance(event, Mapping):
        return False
    if set(event) == {"headers", "body"}:
        return isinstance(event["body"], str)
    return "protocolVersion" in event and "runId" in event and "workflowId" in event


# ---- WSGI ------------------------------------------------------------------------------------

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    411: "Length Required",
    413: "Payload Too Large",
    426: "Upgrade Required",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


def make_wsgi_app(
    host: StepHost | None = None,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    **options: Any,
) -> WsgiApp:
    """A WSGI app serving step requests by POST on any path it is mounted at.

    Args:
        host: The host to run; else one built by :func:`make_step_host` from ``options``
            (``secret``, ``mode``, ``handler``, ``payload_store``, ``payload_cap``).
        max_body_bytes: Larger bodies are refused with 413 before they are read.
    """
    built = host or make_step_host(**options)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        status, answer = _wsgi_answer(built, environ, max_body_bytes)
        payload = json.dumps(answer, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        headers = [
            ("Content-Type", "application/json; charset=utf-8"),
            ("Content-Length", str(len(payload))),
        ]
        if status == 405:
            headers.append(("Allow", "POST"))
        start_response(f"{status} {_REASONS.get(status, 'Status')}", headers)
        return [payload]

    return app


def _wsgi_answer(host: StepHost, environ: dict[str, Any], max_body_bytes: int) -> Answer:
    method = str(environ.get("REQUEST_METHOD", "GET"))
    if method.upper() != "POST":
        return host.handle(method, {}, b"")
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return _error(400, "invalid_request", "Content-Length is not a number")
    if length > max_body_bytes:
        return _error(413, "payload_too_large", f"the body exceeds {max_body_bytes} bytes")
    body = environ["wsgi.input"].read(length) if length > 0 else b""
    headers = {
        key[5:].replace("_", "-").lower(): str(value)
        for key, value in environ.items()
        if key.startswith("HTTP_")
    }
    if environ.get("CONTENT_TYPE"):
        headers["content-type"] = str(environ["CONTENT_TYPE"])
    return host.handle(method, headers, body)


@functools.cache
def _settings_wsgi_app() -> WsgiApp:
    return make_wsgi_app(_settings_host())


def wsgi_app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    """The step host WSGI app configured from the environment on first request."""
    return _settings_wsgi_app()(environ, start_response)


def _str_headers(headers: Any) -> dict[str, str]:
    if not isinstance(headers, Mapping):
        return {}
    return {str(key): str(value) for key, value in headers.items() if value is not None}
