"""A small HTTP client of the relayflow API, used by the ``relayflow`` command.

It knows the routes and bodies of the API and turns refusals into :class:`ApiRequestError`; it knows
nothing about how results are printed.
"""

from __future__ import annotations

import secrets
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

import requests

from relayflow.cli.values import UsageError

DEFAULT_URL = "http://127.0.0.1:8787"
DEFAULT_TIMEOUT_S = 30.0
#: Answers after which a write is sent again, with the same ``Idempotency-Key``.
RETRIED_STATUSES = frozenset({0, 409, 502, 503, 504})
_LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "[::1]", "0.0.0.0"})
#: What a 401 answer adds: where a token comes from.
TOKEN_HINT = (
    "pass --token or RELAYFLOW_TOKEN; `relayflow dev` prints its token at start "
    "and keeps it in .relayflow/dev.json"
)


def api_base_url(url: str) -> str:
    """``url`` with a scheme: ``localhost:8787`` becomes ``http://localhost:8787``.

    A loopback address gets ``http://`` (what ``relayflow dev`` serves), any other host
    ``https://`` (API Gateway); a trailing slash is dropped.

    Raises:
        UsageError: The URL has another scheme (``ftp://``) or no host.
    """
    text = url.strip()
    if "://" not in text and text:
        host = urlsplit(f"//{text}").hostname or ""
        loopback = host in _LOOPBACK_HOSTS or host.startswith("127.")
        text = f"{'http' if loopback else 'https'}://{text}"
    parts = urlsplit(text)
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise UsageError(
            f"{url!r} is not an API URL: give --url or RELAYFLOW_URL as http://HOST:PORT "
            "or https://HOST (relayflow dev serves http://127.0.0.1:8787)"
        )
    return text.rstrip("/")


class ApiRequestError(Exception):
    """The API refused a request, or could not be reached (``status`` 0).

    The client's view of an error answer; ``relayflow.api.errors.ApiError`` is the server's
    refusal that produces one. ``ApiError`` here is a deprecated alias of this class.

    Attributes:
        status: The HTTP status, or 0 when no answer came back.
        code: The API's ``error`` code (``not_found``, ``unauthorized``...).
        message: The API's human-readable ``message``.
        body: The decoded answer, when it was JSON.
    """

    def __init__(self, status: int, code: str, message: str, body: Any = None) -> None:
        super().__init__(f"{code}: {message}" if message else code)
        self.status = status
        self.code = code
        self.message = message
        self.body = body


@dataclass(frozen=True)
class ApiClient:
    """Calls one relayflow deployment at ``url`` with an optional bearer ``token``.

    Every ``POST`` carries a fresh ``Idempotency-Key``; when no answer comes back (or a
    503/502/504, or 409 ``request_in_progress``) it is sent again up to ``retries`` times
    with the same key, so a retry never starts or delivers anything twice.
    """

    url: str = DEFAULT_URL
    token: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    session: requests.Session | None = None
    retries: int = 2
    retry_delay_s: float = 1.0
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        """Send one request and return the decoded JSON answer; raises :class:`ApiRequestError`."""
        headers = {"accept": "application/json"}
        if self.token:
            headers["authorization"] = f"Bearer {self.token}"
        if method.upper() != "POST":
            return self._send(method, path, body, params, timeout_s, headers)
        headers["idempotency-key"] = f"cli-{secrets.token_urlsafe(18)}"
        for attempt in range(self.retries + 1):
            try:
                return self._send(method, path, body, params, timeout_s, headers)
            except ApiRequestError as exc:
                retried = exc.status in RETRIED_STATUSES and (
                    exc.status != 409 or exc.code == "request_in_progress"
                )
                if not retried or attempt == self.retries:
                    raise
            self.sleep(self.retry_delay_s * (2**attempt))
        raise AssertionError("unreachable")

    def _send(
        self,
        method: str,
        path: str,
        body: Any,
        params: Mapping[str, Any] | None,
        timeout_s: float | None,
        headers: dict[str, str],
    ) -> Any:
        query = {k: v for k, v in (params or {}).items() if v is not None}
        http = self.session or requests
        try:
            response = http.request(
                method,
                self.url.rstrip("/") + path,
                json=body,
                params=query or None,
                headers=headers,
                timeout=timeout_s or self.timeout_s,
            )
        except requests.ConnectionError as exc:
            raise ApiRequestError(
                0,
                "unreachable",
                f"no relayflow API at {self.url}: is `relayflow dev` running? (set RELAYFLOW_URL)",
            ) from exc
        except requests.Timeout as exc:
            limit = timeout_s or self.timeout_s
            raise ApiRequestError(
                0, "unreachable", f"the relayflow API at {self.url} did not answer in {limit:g} s"
            ) from exc
        except requests.RequestException as exc:
            raise ApiRequestError(
                0, "unreachable", f"cannot call {self.url}: {type(exc).__name__}"
            ) from exc
        try:
            decoded: Any = response.json() if response.content else None
        except ValueError:
            decoded = None
        if response.status_code >= 400:
            if isinstance(decoded, dict):
                code = str(decoded.get("error") or f"http_{response.status_code}")
                message = str(decoded.get("message") or "")
            else:
                code = f"http_{response.status_code}"
                message = response.text.strip()[:300]
            raise ApiRequestError(response.status_code, code, message, decoded)
        return decoded

    # Runs ---------------------------------------------------------------------------------

    def trigger(
        self,
        workflow_id: str,
        input_value: Any,
        *,
        idempotency_key: str | None = None,
        tags: list[str] | None = None,
        environment: str | None = None,
        wait_ms: int | None = None,
        flow: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """``POST /api/runs``: start a run (or return the run an idempotency key names, or
        the run a debounced trigger joined). ``flow`` holds the flow-control options by their
        wire names (``delay``, ``ttl``, ``priority``, ``concurrencyKey``, ``debounce``) and
        ``lockToVersion``."""
        body: dict[str, Any] = {"workflowId": workflow_id, "input": input_value, **(flow or {})}
        if idempotency_key is not None:
            body["idempotencyKey"] = idempotency_key
        if tags:
            body["tags"] = tags
        if environment is not None:
            body["environment"] = environment
        timeout = None
        if wait_ms is not None:
            body["waitMs"] = wait_ms
            timeout = self.timeout_s + wait_ms / 1000
        return _as_dict(self.request("POST", "/api/runs", body=body, timeout_s=timeout))

    def list_runs(
        self,
        *,
        environment: str | None = None,
        workflow_id: str | None = None,
        status: str | None = None,
        tag: str | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        code_version: str | None = None,
    ) -> dict[str, Any]:
        """``GET /api/runs``: one page of runs, ``{runs, nextCursor}``."""
        params = {
            "environment": environment,
            "workflowId": workflow_id,
            "status": status,
            "tag": tag,
            "since": since,
            "until": until,
            "codeVersion": code_version,
            "limit": limit,
            "cursor": cursor,
        }
        return _as_dict(self.request("GET", "/api/runs", params=params))

    def get_run(self, run_id: str) -> dict[str, Any]:
        """``GET /api/runs/{id}``."""
        return _as_dict(self.request("GET", f"/api/runs/{_seg(run_id)}"))

    def timeline(self, run_id: str) -> Any:
        """``GET /api/runs/{id}/timeline``: the run's steps and waits."""
        return self.request("GET", f"/api/runs/{_seg(run_id)}/timeline")

    def stream(self, run_id: str, *, after: int = 0, wait_ms: int = 0) -> dict[str, Any]:
        """``GET /api/runs/{id}/stream``: the journal events after ``after`` (a long poll)."""
        return _as_dict(
            self.request(
                "GET",
                f"/api/runs/{_seg(run_id)}/stream",
                params={"after": after, "waitMs": wait_ms},
                timeout_s=self.timeout_s + wait_ms / 1000,
            )
        )

    def cancel(
        self, run_id: str, *, reason: str | None = None, compensate: bool = False
    ) -> dict[str, Any]:
        """``POST /api/runs/{id}/cancel``."""
        body: dict[str, Any] = {"compensate": compensate}
        if reason is not None:
            body["reason"] = reason
        return _as_dict(self.request("POST", f"/api/runs/{_seg(run_id)}/cancel", body=body))

    def run_action(
        self, run_id: str, action: str, body: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """``POST /api/runs/{id}/{action}`` for ``pause``, ``resume``, ``redrive``, ``rerun``
        or ``upgrade``: the run after the action (the new run for a rerun)."""
        path = f"/api/runs/{_seg(run_id)}/{action}"
        return _as_dict(self.request("POST", path, body=body or {}))

    def send_run_event(self, run_id: str, event_type: str, payload: Any = None) -> dict[str, Any]:
        """``POST /api/runs/{id}/events``: deliver an event to one run."""
        body = {"eventType": event_type, "payload": payload}
        return _as_dict(self.request("POST", f"/api/runs/{_seg(run_id)}/events", body=body))

    def signal(self, run_id: str, name: str, payload: Any = None) -> dict[str, Any]:
        """``POST /api/runs/{id}/signals``."""
        body = {"name": name, "payload": payload}
        return _as_dict(self.request("POST", f"/api/runs/{_seg(run_id)}/signals", body=body))

    def complete_token(
        self, run_id: str | None, token_id: str, payload: Any = None
    ) -> dict[str, Any]:
        """``POST /api/runs/{id}/tokens/{tokenId}`` (``/api/tokens/{tokenId}`` without a run)."""
        path = _token_path(run_id, token_id)
        return _as_dict(self.request("POST", path, body={"payload": payload}))

    def fail_token(
        self, run_id: str | None, token_id: str, message: str, code: str | None = None
    ) -> dict[str, Any]:
        """``POST /api/runs/{id}/tokens/{tokenId}/fail``."""
        error: dict[str, Any] = {"message": message}
        if code is not None:
            error["code"] = code
        path = f"{_token_path(run_id, token_id)}/fail"
        return _as_dict(self.request("POST", path, body={"error": error}))

    def heartbeat_token(self, run_id: str | None, token_id: str) -> dict[str, Any]:
        """``POST /api/runs/{id}/tokens/{tokenId}/heartbeat``."""
        path = f"{_token_path(run_id, token_id)}/heartbeat"
        return _as_dict(self.request("POST", path, body={}))

    # Events and manifests -----------------------------------------------------------------

    def ingest_event(
        self,
        environment: str,
        envelope: dict[str, Any],
        *,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """``POST /api/events``: route an event through the environment's manifest."""
        body: dict[str, Any] = {"environment": environment, "envelope": envelope}
        if idempotency_key is not None:
            body["idempotencyKey"] = idempotency_key
        return _as_dict(self.request("POST", "/api/events", body=body))

    def push_manifest(self, environment: str, manifest: dict[str, Any]) -> dict[str, Any]:
        """``POST /api/manifests``."""
        body = {"environment": environment, "manifest": manifest}
        return _as_dict(self.request("POST", "/api/manifests", body=body))

    def get_manifest(self, environment: str) -> dict[str, Any]:
        """``GET /api/manifests/{env}``."""
        return _as_dict(self.request("GET", f"/api/manifests/{_seg(environment)}"))


def _token_path(run_id: str | None, token_id: str) -> str:
    """The run-scoped token route, or the run-free one for ids that name their run."""
    if run_id is None:
        return f"/api/tokens/{_seg(token_id)}"
    return f"/api/runs/{_seg(run_id)}/tokens/{_seg(token_id)}"


def _seg(value: str) -> str:
    # Child run ids contain "/" (``<parent>/<waitId>``): escape it so the id stays one segment.
    return quote(value, safe=":@")


def _as_dict(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    return {"value": value}


def __getattr__(name: str) -> Any:
    """``ApiError``: the former name of :class:`ApiRequestError`, with a warning."""
    if name == "ApiError":
        warnings.warn(
            "relayflow.cli.client.ApiError is deprecated: use ApiRequestError "
            "(relayflow.api.errors.ApiError is the server-side refusal)",
            DeprecationWarning,
            stacklevel=2,
        )
        return ApiRequestError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
