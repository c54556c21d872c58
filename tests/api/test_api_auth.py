"""Bearer tokens from a secret (TTL, rotation, expiry, scopes), static tokens, IAM and open mode."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from api_harness import Api, make_api
from apigw import FakeLambdaContext, decode, http_event
from aws_lambda_powertools import Logger

from relayflow.api.auth import (
    AllowAllAuth,
    BearerTokenAuth,
    IamAuth,
    StaticTokenAuth,
    hash_token,
    parse_token_secret,
)
from relayflow.api.errors import UnauthorizedError
from relayflow.api.settings import ApiSettings
from relayflow.errors import ValidationError
from relayflow.testing import WorkflowTestEnv


class Secret:
    """A secret whose value can be rotated; counts reads."""

    def __init__(self, *entries: dict[str, Any]) -> None:
        self.entries = list(entries)
        self.reads = 0

    def __call__(self) -> str:
        self.reads += 1
        return json.dumps({"tokens": self.entries})


class Clock:
    def __init__(self) -> None:
        self.s = 1000.0

    def __call__(self) -> float:
        return self.s


def entry(token: str, **extra: Any) -> dict[str, Any]:
    return {"sha256": hash_token(token), "name": f"{token}-name", **extra}


def auth_header(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def test_a_known_token_authenticates_with_its_name_and_scopes() -> None:
    auth = BearerTokenAuth(Secret(entry("t1", scopes=["runs:read"])))

    principal = auth.authenticate(auth_header("t1"), {})

    assert principal.name == "t1-name"
    assert principal.allows("runs:read") and not principal.allows("runs:write")


def test_a_token_without_scopes_or_with_star_holds_every_scope() -> None:
    auth = BearerTokenAuth(Secret(entry("a"), entry("b", scopes=["*"])))

    for token in ("a", "b"):
        assert auth.authenticate(auth_header(token), {}).scopes is None


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({}, "missing Authorization header"),
        ({"authorization": "Basic dXNlcg=="}, "Authorization header must use the Bearer scheme"),
        ({"authorization": "Bearer "}, "Authorization header must use the Bearer scheme"),
        ({"authorization": "Bearer wrong"}, "bearer token does not match any configured value"),
    ],
)
def test_bad_credentials_are_refused(headers: dict[str, str], message: str) -> None:
    auth = BearerTokenAuth(Secret(entry("t1")))

    with pytest.raises(UnauthorizedError) as refused:
        auth.authenticate(headers, {})

    assert refused.value.message == message
    assert refused.value.status == 401


def test_the_scheme_is_case_insensitive() -> None:
    auth = BearerTokenAuth(Secret(entry("t1")))

    assert auth.authenticate({"Authorization": "bearer t1"}, {}).name == "t1-name"


def test_an_expired_token_is_refused() -> None:
    now = [1_700_000_000_000]
    auth = BearerTokenAuth(
        Secret(entry("old", expiresAt="2023-11-14T22:13:21Z")), now_ms=lambda: now[0]
    )

    assert auth.authenticate(auth_header("old"), {}).name == "old-name"
    now[0] += 2_000
    with pytest.raises(UnauthorizedError, match="expired"):
        auth.authenticate(auth_header("old"), {})


def test_the_token_list_is_cached_for_its_ttl_then_reread() -> None:
    secret, clock = Secret(entry("t1")), Clock()
    auth = BearerTokenAuth(secret, ttl_s=300, miss_refresh_s=30, monotonic=clock)

    for _ in range(5):
        auth.authenticate(auth_header("t1"), {})
    assert secret.reads == 1

    secret.entries = [entry("t2")]  # rotation: t1 revoked, t2 issued
    clock.s += 301
    assert auth.authenticate(auth_header("t2"), {}).name == "t2-name"
    with pytest.raises(UnauthorizedError):
        auth.authenticate(auth_header("t1"), {})


def test_a_new_token_works_before_the_ttl_but_misses_do_not_hammer_the_secret() -> None:
    secret, clock = Secret(entry("t1")), Clock()
    auth = BearerTokenAuth(secret, ttl_s=300, miss_refresh_s=30, monotonic=clock)
    auth.authenticate(auth_header("t1"), {})

    secret.entries.append(entry("new"))
    for _ in range(10):
        with pytest.raises(UnauthorizedError):
            auth.authenticate(auth_header("unknown"), {})
    assert secret.reads == 1
    clock.s += 31
    assert auth.authenticate(auth_header("new"), {}).name == "new-name"
    assert secret.reads == 2


def test_a_failed_reread_keeps_the_last_good_list() -> None:
    secret, clock = Secret(entry("t1")), Clock()
    auth = BearerTokenAuth(secret, ttl_s=10, monotonic=clock)
    auth.authenticate(auth_header("t1"), {})

    def broken() -> str:
        raise ConnectionError("secrets manager unreachable")

    auth._load = broken  # the secret store goes away
    clock.s += 11
    assert auth.authenticate(auth_header("t1"), {}).name == "t1-name"


@pytest.mark.parametrize(
    "raw",
    [
        "not json",
        "{}",
        json.dumps({"tokens": [{"sha256": "short"}]}),
        json.dumps({"tokens": [{"sha256": "a" * 64, "scopes": ["runs:delete"]}]}),
    ],
)
def test_malformed_secrets_are_refused_without_echoing_values(raw: str) -> None:
    with pytest.raises(ValidationError) as refused:
        parse_token_secret(raw)

    assert "short" not in refused.value.message


def test_static_tokens_need_at_least_one_token() -> None:
    with pytest.raises(ValidationError):
        StaticTokenAuth([])


def test_iam_mode_trusts_the_authorizer_context() -> None:
    auth = IamAuth()

    principal = auth.authenticate({}, {"authorizer": {"iam": {"userArn": "arn:aws:iam::1:u"}}})

    assert principal.name == "arn:aws:iam::1:u"
    assert principal.scopes is None
    with pytest.raises(UnauthorizedError):
        auth.authenticate({}, {})


def test_iam_mode_over_the_app(env: WorkflowTestEnv) -> None:
    api = make_api(env, auth=IamAuth())
    ctx = FakeLambdaContext()

    signed = decode(api.app.resolve(http_event("GET", "/api/runs", iam={"userArn": "u"}), ctx))
    unsigned = decode(api.app.resolve(http_event("GET", "/api/runs"), ctx))

    assert signed.status == 200
    assert unsigned.status == 401


def test_open_mode_accepts_anyone(env: WorkflowTestEnv) -> None:
    api = make_api(env, auth=AllowAllAuth())

    assert api.get("/api/runs", token=None).status == 200


def test_health_and_openapi_are_public_and_everything_else_is_not(api: Api) -> None:
    assert api.get("/api/healthz", token=None).status == 200
    assert api.get("/api/openapi.json", token=None).status == 200
    for method, path in [
        ("GET", "/api/runs"),
        ("POST", "/api/runs"),
        ("GET", "/api/runs/x"),
        ("POST", "/api/events"),
        ("GET", "/api/manifests/production"),
    ]:
        answer = api.call(method, path, token=None)
        assert (answer.status, answer.error) == (401, "unauthorized"), path
        assert answer.headers["www-authenticate"] == "Bearer"


def test_tokens_and_payloads_never_reach_the_logs(env: WorkflowTestEnv) -> None:
    stream = io.StringIO()
    api = make_api(env, logger=Logger(service="relayflow-log-test", stream=stream))

    api.get("/api/runs", token="super-secret-token-value")
    run = api.post("/api/runs", {"workflowId": "api.echo", "input": {"card": "4111-secret"}})

    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [line["status"] for line in lines if line["message"] == "request"] == [401, 201]
    assert lines[-1]["run_id"] == run.body["id"]
    assert lines[-1]["workflow_id"] == "api.echo"
    assert "super-secret-token-value" not in stream.getvalue()
    assert "4111-secret" not in stream.getvalue()


@pytest.mark.parametrize(
    ("env", "kind"),
    [
        ({"RELAYFLOW_API_AUTH": "iam"}, IamAuth),
        ({"RELAYFLOW_API_AUTH": "none"}, AllowAllAuth),
        ({"RELAYFLOW_API_AUTH": "static", "RELAYFLOW_API_TOKENS": "a, b"}, StaticTokenAuth),
        ({"RELAYFLOW_API_TOKENS_SECRET": "arn:secret"}, BearerTokenAuth),
    ],
)
def test_settings_choose_the_auth_mode(env: dict[str, str], kind: type) -> None:
    auth = ApiSettings.from_env(env).authenticator(secret_loader=lambda sid: Secret())

    assert isinstance(auth, kind)


@pytest.mark.parametrize(
    "env",
    [
        {"RELAYFLOW_API_AUTH": "magic"},
        {"RELAYFLOW_API_AUTH": "static"},
        {"RELAYFLOW_API_AUTH": "bearer"},
        {"RELAYFLOW_API_TOKEN_CACHE_TTL": "soon"},
    ],
)
def test_incomplete_auth_settings_are_refused(env: dict[str, str]) -> None:
    with pytest.raises(ValidationError):
        ApiSettings.from_env(env).authenticator(secret_loader=lambda sid: Secret())


def test_cors_headers_follow_the_settings(env: WorkflowTestEnv) -> None:
    settings = ApiSettings.from_env({"RELAYFLOW_API_CORS_ORIGINS": "https://app.example.com"})
    api = make_api(env, cors=settings.cors(), auth=AllowAllAuth())

    answer = api.get("/api/runs", headers={"origin": "https://app.example.com"})
    preflight = api.call(
        "OPTIONS", "/api/runs", headers={"origin": "https://app.example.com"}, token=None
    )

    assert answer.headers["access-control-allow-origin"] == "https://app.example.com"
    assert preflight.status == 204
    assert "authorization" in preflight.headers["access-control-allow-headers"].lower()
