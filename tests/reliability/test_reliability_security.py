"""Security: API requests without, with wrong, expired or out-of-scope tokens are refused;
tokens are compared in constant time; no token or payload is ever logged; step hosts refuse
unsigned, tampered and replayed (outside the window) requests."""

from __future__ import annotations

import base64
import hmac
import io
import json
import logging
import time
from typing import Any

import pytest
from reliability_api import ADMIN, EXPIRED, READER, WRITER, ApiUnderTest, build_api
from reliability_tally import add

from relayflow.api import auth as auth_module
from relayflow.dispatch.signing import (
    RELAYFLOW_SIGNATURE_HEADER,
    VOYANT_SIGNATURE_HEADER,
    sign_relayflow,
    sign_voyant,
)
from relayflow.worker.hosts import make_lambda_handler, make_step_host, make_wsgi_app

SECRET = "step-host-secret-5b1e"
STEP_REQUEST = {"protocolVersion": 1, "runId": "r1"}
BODY = json.dumps(STEP_REQUEST).encode()


@pytest.fixture
def api() -> ApiUnderTest:
    return build_api()


def _routes(api: ApiUnderTest, scheme: str | None = None) -> list[tuple[str, str]]:
    """The secured routes (only those of ``scheme`` when given)."""
    doc = api.app.openapi_document()
    out = []
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            security = operation.get("security") or []
            if security and (scheme is None or any(scheme in r for r in security)):
                concrete = path.replace("{run_id}", "r1").replace("{token_id}", "t1")
                out.append((method.upper(), concrete.replace("{environment}", "development")))
    return sorted(out)


ROUTES = _routes(build_api())
#: Routes taking the API's bearer tokens (the checkpoint route takes a capability instead).
BEARER_ROUTES = _routes(build_api(), "bearerAuth")


def _scope_of(api: ApiUnderTest, method: str, path: str) -> str:
    doc = api.app.openapi_document()
    for template, operations in doc["paths"].items():
        concrete = template.replace("{run_id}", "r1").replace("{token_id}", "t1")
        if concrete.replace("{environment}", "development") == path:
            return str(operations[method.lower()]["security"][0]["bearerAuth"][0])
    raise AssertionError(f"no route {method} {path}")


BAD_CREDENTIALS: list[tuple[str, dict[str, str]]] = [
    ("none", {}),
    ("wrong-token", {"authorization": "Bearer not-a-real-token"}),
    ("expired-token", {"authorization": f"Bearer {EXPIRED}"}),
    ("basic-scheme", {"authorization": "Basic " + base64.b64encode(b"admin:x").decode()}),
    ("bearer-without-token", {"authorization": "Bearer "}),
    ("token-without-scheme", {"authorization": ADMIN}),
    ("token-with-suffix", {"authorization": f"Bearer {ADMIN}x"}),
    ("token-prefix", {"authorization": f"Bearer {ADMIN[:-1]}"}),
    ("api-key-header", {"x-api-key": ADMIN}),
]


@pytest.mark.parametrize(("method", "path"), ROUTES, ids=[f"{m} {p}" for m, p in ROUTES])
@pytest.mark.parametrize(
    "headers", [h for _, h in BAD_CREDENTIALS], ids=[n for n, _ in BAD_CREDENTIALS]
)
def test_requests_without_valid_credentials_are_refused_with_401(
    api: ApiUnderTest, method: str, path: str, headers: dict[str, str]
) -> None:
    body = b"{}" if method == "POST" else None

    answer = api.send(method, path, body=body, token=None, headers=headers)

    add("auth_refusals")
    assert answer.status == 401, answer.text[:200]
    assert answer.body["error"] == "unauthorized"


@pytest.mark.parametrize(
    ("method", "path"), BEARER_ROUTES, ids=[f"{m} {p}" for m, p in BEARER_ROUTES]
)
def test_tokens_without_the_routes_scope_are_refused_with_403(
    api: ApiUnderTest, method: str, path: str
) -> None:
    scope = _scope_of(api, method, path)
    outsider = WRITER if scope == "runs:read" else READER
    body = b"{}" if method == "POST" else None

    answer = api.send(method, path, body=body, token=outsider)

    add("auth_refusals")
    assert answer.status == 403, answer.text[:200]
    assert answer.body["error"] == "forbidden"


def test_tokens_are_compared_in_constant_time_against_every_digest(
    api: ApiUnderTest, monkeypatch: pytest.MonkeyPatch
) -> None:
    compared: list[tuple[Any, Any]] = []
    real = hmac.compare_digest

    def spy(a: Any, b: Any) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr("relayflow.api.auth.hmac.compare_digest", spy)

    assert api.send("GET", "/api/runs", token=READER).status == 200
    # All four known digests are compared, whichever matches: the time says nothing.
    assert len(compared) == 4
    assert {a for a, _ in compared} == {auth_module.hash_token(READER)}
    compared.clear()
    assert api.send("GET", "/api/runs", token="guess").status == 401
    assert len(compared) >= 4


def test_step_signatures_are_compared_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = hmac.compare_digest

    def spy(a: Any, b: Any) -> bool:
        calls.append(1)
        return real(a, b)

    monkeypatch.setattr("relayflow.dispatch.signing.hmac.compare_digest", spy)
    host = make_step_host(secret=SECRET, handler=lambda raw: (200, {"ok": True}))
    signature = sign_relayflow(BODY, SECRET, timestamp=int(time.time()))

    assert host.handle("POST", {RELAYFLOW_SIGNATURE_HEADER: signature}, BODY)[0] == 200
    assert host.handle("POST", {RELAYFLOW_SIGNATURE_HEADER: signature}, BODY + b" ")[0] == 401
    assert len(calls) == 2


SECRET_PAYLOAD = "card-4111-1111-1111-1111"


def exercise_with_secrets(api: ApiUnderTest) -> None:
    """Requests carrying tokens and a sensitive payload: accepted, refused and malformed."""
    run = api.send(
        "POST",
        "/api/runs",
        json_body={"workflowId": "reliability.once", "input": {"value": SECRET_PAYLOAD}},
    )
    assert run.status == 201
    run_id = run.body["id"]
    api.send("GET", f"/api/runs/{run_id}", token=READER)
    api.send(
        "POST", "/api/runs", json_body={"workflowId": "x", "input": SECRET_PAYLOAD}, token=READER
    )
    api.send("POST", "/api/runs", body='{"input": "' + SECRET_PAYLOAD + '"', token=WRITER)
    api.send("GET", "/api/runs", token=EXPIRED)
    api.send("GET", "/api/runs", headers={"authorization": f"Bearer {ADMIN}-forged"}, token=None)
    event = {"eventType": "e", "payload": SECRET_PAYLOAD}
    api.send("POST", f"/api/runs/{run_id}/events", json_body=event)


def assert_no_secret_in(logged: str) -> None:
    assert logged.count("\n") >= 6
    for secret in (ADMIN, READER, WRITER, EXPIRED, SECRET_PAYLOAD):
        assert secret not in logged


def test_no_token_or_payload_is_ever_logged(
    api: ApiUnderTest, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    caplog.set_level(logging.DEBUG, logger="relayflow")

    exercise_with_secrets(api)

    assert_no_secret_in(
        api.logs.getvalue() + "\n".join(f"{r.name}: {r.getMessage()}" for r in caplog.records)
    )


def test_no_payload_is_logged_even_at_debug_level(
    api: ApiUnderTest, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)

    exercise_with_secrets(api)

    assert_no_secret_in(
        api.logs.getvalue() + "\n".join(f"{r.name}: {r.getMessage()}" for r in caplog.records)
    )


# ----- step hosts ----------------------------------------------------------------------------


def _wsgi(app: Any, headers: dict[str, str], body: bytes) -> int:
    environ = {
        "REQUEST_METHOD": "POST",
        "CONTENT_LENGTH": str(len(body)),
        "CONTENT_TYPE": "application/json",
        "wsgi.input": io.BytesIO(body),
        **{"HTTP_" + k.upper().replace("-", "_"): v for k, v in headers.items()},
    }
    status: list[str] = []
    app(environ, lambda s, h: status.append(s))
    return int(status[0].split()[0])


def _relayflow(body: bytes, *, age_s: int = 0, secret: str = SECRET) -> dict[str, str]:
    stamp = int(time.time()) - age_s
    return {RELAYFLOW_SIGNATURE_HEADER: sign_relayflow(body, secret, timestamp=stamp)}


FORGED: list[tuple[str, Any]] = [
    ("unsigned", lambda: ({}, BODY)),
    ("tampered-body", lambda: (_relayflow(BODY), BODY.replace(b"r1", b"r2"))),
    ("appended-body", lambda: (_relayflow(BODY), BODY + b"\n")),
    ("wrong-secret", lambda: (_relayflow(BODY, secret="guessed"), BODY)),
    ("replayed-301s-later", lambda: (_relayflow(BODY, age_s=301), BODY)),
    ("replayed-a-day-later", lambda: (_relayflow(BODY, age_s=86_400), BODY)),
    ("from-the-future", lambda: (_relayflow(BODY, age_s=-301), BODY)),
    (
        "timestamp-swapped",
        lambda: (
            {
                RELAYFLOW_SIGNATURE_HEADER: _relayflow(BODY)[RELAYFLOW_SIGNATURE_HEADER].replace(
                    "t=", "t=1"
                )
            },
            BODY,
        ),
    ),
    (
        "uppercase-hex",
        lambda: (
            {RELAYFLOW_SIGNATURE_HEADER: _relayflow(BODY)[RELAYFLOW_SIGNATURE_HEADER].upper()},
            BODY,
        ),
    ),
    ("garbage-header", lambda: ({RELAYFLOW_SIGNATURE_HEADER: "t=abc,v1=zz"}, BODY)),
    (
        "voyant-header-on-relayflow-host",
        lambda: ({VOYANT_SIGNATURE_HEADER: sign_voyant(BODY, SECRET)}, BODY),
    ),
]


@pytest.fixture
def handled() -> list[dict[str, Any]]:
    return []


def recorder(handled: list[dict[str, Any]]) -> Any:
    """A step handler that records what reached it and answers an empty 200."""

    def handle(raw: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        handled.append(raw)
        return 200, {}

    return handle


@pytest.mark.parametrize("forge", [f for _, f in FORGED], ids=[n for n, _ in FORGED])
def test_the_wsgi_step_host_refuses_forged_requests_with_401(
    forge: Any, handled: list[dict[str, Any]]
) -> None:
    app = make_wsgi_app(secret=SECRET, handler=recorder(handled))
    headers, body = forge()

    status = _wsgi(app, headers, body)

    add("auth_refusals")
    assert status == 401
    assert handled == []


@pytest.mark.parametrize("forge", [f for _, f in FORGED], ids=[n for n, _ in FORGED])
def test_the_lambda_step_host_refuses_forged_envelopes_with_401(
    forge: Any, handled: list[dict[str, Any]]
) -> None:
    handler = make_lambda_handler(secret=SECRET, handler=recorder(handled))
    headers, body = forge()

    answer = handler({"headers": headers, "body": body.decode()}, None)

    add("auth_refusals")
    assert answer["statusCode"] == 401
    assert handled == []


def test_a_signed_lambda_host_refuses_a_bare_step_request(handled: list[dict[str, Any]]) -> None:
    handler = make_lambda_handler(secret=SECRET, handler=recorder(handled))

    answer = handler(dict(STEP_REQUEST), None)

    add("auth_refusals")
    assert answer["statusCode"] == 401
    assert handled == []


@pytest.mark.parametrize(
    ("headers", "body"),
    [
        ({}, BODY),
        ({VOYANT_SIGNATURE_HEADER: sign_voyant(BODY, SECRET)}, BODY + b" "),
        ({VOYANT_SIGNATURE_HEADER: sign_voyant(BODY, "guessed")}, BODY),
        ({VOYANT_SIGNATURE_HEADER: "not base64!"}, BODY),
    ],
    ids=["unsigned", "tampered", "wrong-secret", "malformed"],
)
def test_the_reference_compatible_mode_refuses_forged_requests(
    headers: dict[str, str], body: bytes, handled: list[dict[str, Any]]
) -> None:
    app = make_wsgi_app(secret=SECRET, mode="voyant", handler=recorder(handled))

    add("auth_refusals")
    assert _wsgi(app, headers, body) == 401
    assert handled == []


def test_correctly_signed_requests_inside_the_window_are_served(
    handled: list[dict[str, Any]],
) -> None:
    app = make_wsgi_app(secret=SECRET, handler=recorder(handled))

    assert _wsgi(app, _relayflow(BODY, age_s=299), BODY) == 200
    assert _wsgi(app, _relayflow(BODY, age_s=-299), BODY) == 200
    assert handled == [STEP_REQUEST, STEP_REQUEST]
