"""The HTTP API over the in-memory driver, reached with API Gateway v2 events (directly, or
through a small WSGI adapter for schemathesis), with every log line captured."""

from __future__ import annotations

import base64
import io
import itertools
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools import Logger
from reliability_workflows import ALL_WORKFLOWS

from relayflow.api.app import RelayflowResolver, create_app
from relayflow.api.auth import Authenticator, BearerTokenAuth, hash_token
from relayflow.api.context import WaitPolicy
from relayflow.api.metrics import RecordingMetrics
from relayflow.local.http_adapter import build_http_api_event
from relayflow.testing import WorkflowTestEnv

_apps = itertools.count(1)

ADMIN = "rel-admin-7f3a9c0e5d"
READER = "rel-reader-21b8e4f6aa"
WRITER = "rel-writer-9c0d7e1f3b"
EXPIRED = "rel-expired-4e5f6a7b8c"
EXPIRES_AT_MS = 1_700_000_000_000 - 1


def token_secret() -> dict[str, Any]:
    """The token secret of the test deployment (digests only, as stored)."""
    return {
        "tokens": [
            {"sha256": hash_token(ADMIN), "name": "admin", "scopes": ["*"]},
            {"sha256": hash_token(READER), "name": "reader", "scopes": ["runs:read"]},
            {"sha256": hash_token(WRITER), "name": "writer", "scopes": ["runs:write"]},
            {
                "sha256": hash_token(EXPIRED),
                "name": "expired",
                "scopes": ["*"],
                "expiresAt": EXPIRES_AT_MS / 1000,
            },
        ]
    }


@dataclass
class LambdaContext:
    """The attributes Powertools reads from a Lambda context."""

    function_name: str = "relayflow-api"
    function_version: str = "$LATEST"
    invoked_function_arn: str = "arn:aws:lambda:eu-west-1:123456789012:function:relayflow-api"
    memory_limit_in_mb: int = 512
    aws_request_id: str = "lambda-req"
    log_group_name: str = "/aws/lambda/relayflow-api"
    log_stream_name: str = "stream"

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


@dataclass
class Answer:
    """A decoded Lambda proxy answer."""

    status: int
    headers: dict[str, str]
    body: Any
    text: str


@dataclass
class ApiUnderTest:
    """The API app, its environment and everything it logged."""

    app: RelayflowResolver
    env: WorkflowTestEnv
    logs: io.StringIO
    context: LambdaContext = field(default_factory=LambdaContext)

    def send(
        self,
        method: str,
        path: str,
        *,
        body: bytes | str | None = None,
        json_body: Any = None,
        token: str | None = ADMIN,
        headers: Mapping[str, str] | None = None,
    ) -> Answer:
        """One request as API Gateway would deliver it."""
        sent = dict(headers or {})
        data = b""
        if json_body is not None:
            data = json.dumps(json_body).encode()
        elif body is not None:
            data = body.encode("utf-8", errors="surrogatepass") if isinstance(body, str) else body
        if data and not any(k.lower() == "content-type" for k in sent):
            sent["content-type"] = "application/json"
        if token is not None:
            sent["authorization"] = f"Bearer {token}"
        event = build_http_api_event(method, path, sent, data)
        return decode(self.app.resolve(event, self.context))  # type: ignore[arg-type]

    def wsgi(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        """The app as a WSGI application (each request becomes an API Gateway v2 event)."""
        length = int(environ.get("CONTENT_LENGTH") or 0)
        data = environ["wsgi.input"].read(length) if length > 0 else b""
        headers = {
            key[5:].replace("_", "-").lower(): str(value)
            for key, value in environ.items()
            if key.startswith("HTTP_")
        }
        if environ.get("CONTENT_TYPE"):
            headers["content-type"] = str(environ["CONTENT_TYPE"])
        # API Gateway keeps the query string in rawQueryString. RAW_URI carries it when the
        # server sets it with the query (werkzeug's test client does), PATH_INFO never does.
        target = str(environ.get("RAW_URI") or environ.get("PATH_INFO") or "/")
        if environ.get("QUERY_STRING") and "?" not in target:
            target = f"{target}?{environ['QUERY_STRING']}"
        event = build_http_api_event(str(environ["REQUEST_METHOD"]), target, headers, data)
        raw = self.app.resolve(event, self.context)  # type: ignore[arg-type]
        text = raw.get("body") or ""
        payload = base64.b64decode(text) if raw.get("isBase64Encoded") else text.encode()
        reply = [(str(k), str(v)) for k, v in (raw.get("headers") or {}).items()]
        start_response(f"{raw['statusCode']} Answer", reply)
        return [payload]


def decode(raw: Mapping[str, Any]) -> Answer:
    """Decode a Lambda proxy answer (JSON body)."""
    text = raw.get("body") or ""
    if raw.get("isBase64Encoded"):
        text = base64.b64decode(text).decode()
    headers = {k.lower(): str(v) for k, v in (raw.get("headers") or {}).items()}
    return Answer(int(raw["statusCode"]), headers, json.loads(text) if text else None, text)


def build_api(
    auth: Authenticator | None = None, env: WorkflowTestEnv | None = None
) -> ApiUnderTest:
    """The API over a fresh in-memory environment hosting the reliability workflows."""
    env = env or WorkflowTestEnv(workflows=ALL_WORKFLOWS)
    logs = io.StringIO()
    handler = logging.StreamHandler(logs)
    # Powertools shares a logger per service name: one name per app keeps captures apart.
    logger = Logger(service=f"relayflow-api-{next(_apps)}", logger_handler=handler)
    secret = token_secret()
    app = create_app(
        env.driver,
        env.admin,
        auth=auth or BearerTokenAuth(lambda: secret, now_ms=env.clock.now_ms),
        metrics=RecordingMetrics(),
        logger=logger,
        wait=WaitPolicy(monotonic_ms=lambda: float(env.now()), sleep_ms=lambda ms: None),
    )
    return ApiUnderTest(app=app, env=env, logs=logs)
