"""Synthetic API Gateway HTTP API (v2) events and Lambda contexts for the API tests."""

from __future__ import annotations

import base64
import itertools
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

_ids = itertools.count(1)


@dataclass
class FakeLambdaContext:
    """The attributes Powertools and the handlers read from a Lambda context."""

    function_name: str = "relayflow-api"
    function_version: str = "$LATEST"
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:relayflow-api"
    memory_limit_in_mb: int = 512
    aws_request_id: str = "lambda-req-1"
    log_group_name: str = "/aws/lambda/relayflow-api"
    log_stream_name: str = "stream"
    remaining_ms: int = 30_000

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def http_event(
    method: str,
    path: str,
    *,
    body: Any = None,
    raw_body: str | bytes | None = None,
    token: str | None = None,
    headers: dict[str, str] | None = None,
    query: dict[str, str] | None = None,
    base64_body: bool = False,
    iam: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One API Gateway v2 event; ``body`` is JSON-encoded, ``raw_body`` is sent as is."""
    hdrs = {"host": "api.example.com", "user-agent": "pytest"}
    text: str | None = None
    if raw_body is not None:
        if isinstance(raw_body, bytes):
            text = base64.b64encode(raw_body).decode()
            base64_body = True
        else:
            text = raw_body
    elif body is not None:
        text = json.dumps(body)
    if text is not None:
        hdrs["content-type"] = "application/json"
        if base64_body and raw_body is None:
            text = base64.b64encode(text.encode()).decode()
    if token is not None:
        hdrs["authorization"] = f"Bearer {token}"
    hdrs.update({k.lower(): v for k, v in (headers or {}).items()})
    request_id = f"req-{next(_ids)}"
    request_context: dict[str, Any] = {
        "accountId": "123456789012",
        "apiId": "api123",
        "domainName": "api.example.com",
        "http": {
            "method": method,
            "path": path,
            "protocol": "HTTP/1.1",
            "sourceIp": "203.0.113.7",
            "userAgent": "pytest",
        },
        "requestId": request_id,
        "routeKey": "$default",
        "stage": "$default",
        "time": "01/Jan/2025:00:00:00 +0000",
        "timeEpoch": 1735689600000,
    }
    if iam is not None:
        request_context["authorizer"] = {"iam": iam}
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": urlencode(query or {}),
        "headers": hdrs,
        "queryStringParameters": dict(query) if query else None,
        "requestContext": request_context,
        "body": text,
        "isBase64Encoded": base64_body,
    }


@dataclass
class Answer:
    """A decoded API answer."""

    status: int
    headers: dict[str, str]
    body: Any
    raw: dict[str, Any]

    @property
    def error(self) -> str | None:
        return self.body.get("error") if isinstance(self.body, dict) else None


def decode(raw: dict[str, Any]) -> Answer:
    """Decode a Lambda proxy answer (JSON body)."""
    text = raw.get("body") or ""
    if raw.get("isBase64Encoded"):
        text = base64.b64decode(text).decode()
    body = json.loads(text) if text else None
    headers = {k.lower(): v for k, v in (raw.get("headers") or {}).items()}
    return Answer(status=int(raw["statusCode"]), headers=headers, body=body, raw=raw)
