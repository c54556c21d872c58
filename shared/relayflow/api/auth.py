"""Who may call the HTTP API: bearer tokens (hashes from a secret), static dev tokens, or IAM.

Tokens are never stored or logged: only their SHA-256 hex digests are kept, and a presented
token is hashed and compared in constant time against every known digest.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic import ValidationError as PydanticValidationError

from relayflow.api.errors import UnauthorizedError
from relayflow.clock import SystemClock
from relayflow.errors import ValidationError

RUNS_READ = "runs:read"
RUNS_WRITE = "runs:write"
EVENTS_WRITE = "events:write"
MANIFESTS_WRITE = "manifests:write"
#: Bulk actions by filter and pausing a whole workflow.
RUNS_ADMIN = "runs:admin"
#: Every scope a token can be granted; ``*`` in a token's list grants them all.
ALL_SCOPES: frozenset[str] = frozenset(
    {RUNS_READ, RUNS_WRITE, RUNS_ADMIN, EVENTS_WRITE, MANIFESTS_WRITE}
)

DEFAULT_CACHE_TTL_S = 300.0
DEFAULT_MISS_REFRESH_S = 30.0

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Principal:
    """The authenticated caller.

    Attributes:
        name: A label for logs (the token's ``name``, the IAM caller); never the token.
        scopes: The scopes granted; ``None`` grants every scope.
    """

    name: str
    scopes: frozenset[str] | None = None

    def allows(self, scope: str) -> bool:
        """True when the caller holds ``scope``."""
        return self.scopes is None or scope in self.scopes


#: The caller of the request being answered on this thread (None: not authenticated).
_caller: ContextVar[Principal | None] = ContextVar("relayflow_request_caller", default=None)


def hold_caller(principal: Principal | None) -> None:
    """Record who sent the request being answered (the resolver's gate does, per request)."""
    _caller.set(principal)


def caller_name(default: str = "api") -> str:
    """The name of who sent the request being answered (``default`` when nobody was
    authenticated): what an operator action records as who asked."""
    principal = _caller.get()
    return principal.name if principal is not None else default


class Authenticator(Protocol):
    """Decides who sent a request; raises :class:`UnauthorizedError` when nobody valid did."""

    #: The OpenAPI security scheme this mode is documented with.
    openapi_scheme: dict[str, Any]

    def authenticate(
        self, headers: Mapping[str, str], request_context: Mapping[str, Any]
    ) -> Principal: ...


def hash_token(token: str) -> str:
    """The SHA-256 hex digest under which a token is stored."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class TokenRecord:
    """One accepted token, by digest.

    Attributes:
        sha256: Lower-case hex SHA-256 of the token.
        name: A label for logs.
        scopes: Granted scopes (``None``: all).
        expires_at_ms: Epoch ms after which the token is refused (``None``: never).
    """

    sha256: str
    name: str = ""
    scopes: frozenset[str] | None = None
    expires_at_ms: int | None = None


class _TokenEntry(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    sha256: str = Field(pattern=r"^[0-9a-fA-F]{64}$")
    name: str = ""
    scopes: list[str] | None = None
    expires_at: datetime | int | float | None = Field(default=None, alias="expiresAt")

    @field_validator("scopes")
    @classmethod
    def _known_scopes(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        unknown = sorted(set(value) - ALL_SCOPES - {"*"})
        if unknown:
            raise ValueError(f"unknown scopes {unknown}; known: {sorted(ALL_SCOPES)} or '*'")
        return value


class _TokenSecret(BaseModel):
    model_config = ConfigDict(extra="ignore")

    tokens: list[_TokenEntry]


def parse_token_secret(raw: str | bytes | Mapping[str, Any]) -> tuple[TokenRecord, ...]:
    """Read the secret ``{"tokens": [{"sha256", "scopes"?, "name"?, "expiresAt"?}]}``.

    ``expiresAt`` is an ISO-8601 timestamp or epoch seconds.

    Raises:
        ValidationError: The secret is not in that shape (the message says where, never
            echoing a value).
    """
    try:
        data = json.loads(raw) if isinstance(raw, (str, bytes)) else dict(raw)
        parsed = _TokenSecret.model_validate(data)
    except json.JSONDecodeError:
        raise ValidationError("token secret is not valid JSON") from None
    except PydanticValidationError as exc:
        where = ", ".join(".".join(str(p) for p in e["loc"]) for e in exc.errors())
        raise ValidationError(f"token secret is malformed at: {where}") from None
    records = []
    for entry in parsed.tokens:
        scopes = None if entry.scopes is None or "*" in entry.scopes else frozenset(entry.scopes)
        records.append(
            TokenRecord(
                sha256=entry.sha256.lower(),
                name=entry.name,
                scopes=scopes,
                expires_at_ms=_expiry_ms(entry.expires_at),
            )
        )
    return tuple(records)


def _expiry_ms(value: datetime | int | float | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    return int(value * 1000)


_BEARER_SCHEME = {"type": "http", "scheme": "bearer", "description": "relayflow API token"}


def _bearer_token(headers: Mapping[str, str]) -> str:
    value = _header(headers, "authorization")
    if value is None:
        raise UnauthorizedError("missing Authorization header")
    scheme, _, token = value.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise UnauthorizedError("Authorization header must use the Bearer scheme")
    return token


def _header(headers: Mapping[str, str], name: str) -> str | None:
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return None


def _match(token: str, records: Iterable[TokenRecord]) -> TokenRecord | None:
    """The record of ``token``; every digest is compared so timing says nothing."""
    digest = hash_token(token)
    found: TokenRecord | None = None
    for record in records:
        if hmac.compare_digest(digest, record.sha256) and found is None:
            found = record
    return found


class BearerTokenAuth:
    """Bearer tokens checked against digests loaded from a secret, cached with a TTL.

    The secret is re-read after ``ttl_s`` so rotation needs no redeploy; an unknown token
    also triggers a re-read at most every ``miss_refresh_s`` so a freshly added token works
    at once. When a re-read fails the last good list keeps serving (and the failure is
    logged); when no list was ever loaded the request fails as an internal error.
    """

    openapi_scheme: dict[str, Any] = _BEARER_SCHEME

    def __init__(
        self,
        load: Callable[[], str | bytes | Mapping[str, Any]],
        *,
        ttl_s: float = DEFAULT_CACHE_TTL_S,
        miss_refresh_s: float = DEFAULT_MISS_REFRESH_S,
        now_ms: Callable[[], int] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        """Create the authenticator.

        Args:
            load: Returns the secret text (or parsed mapping); called lazily.
            ttl_s: Seconds a loaded token list is trusted.
            miss_refresh_s: Minimum seconds between re-reads caused by unknown tokens.
            now_ms: Wall clock (epoch ms) for token expiry.
            monotonic: Clock for the cache.
        """
        self._load = load
        self._ttl_s = ttl_s
        self._miss_refresh_s = miss_refresh_s
        self._now_ms = now_ms or SystemClock().now_ms
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._records: tuple[TokenRecord, ...] | None = None
        self._loaded_at = 0.0

    def _refresh(self, *, force: bool) -> tuple[TokenRecord, ...]:
        with self._lock:
            now = self._monotonic()
            age = now - self._loaded_at
            stale = self._records is None or age >= self._ttl_s
            if not stale and not (force and age >= self._miss_refresh_s):
                assert self._records is not None
                return self._records
            try:
                self._records = parse_token_secret(self._load())
            except Exception:
                if self._records is None:
                    raise
                _log.exception("reloading API tokens failed; keeping the previous list")
            # A failed reload also waits a full period before the next try.
            self._loaded_at = now
            return self._records

    def authenticate(
        self, headers: Mapping[str, str], request_context: Mapping[str, Any]
    ) -> Principal:
        """Check the request's bearer token."""
        token = _bearer_token(headers)
        record = _match(token, self._refresh(force=False))
        if record is None:
            record = _match(token, self._refresh(force=True))
        if record is None:
            raise UnauthorizedError("bearer token does not match any configured value")
        if record.expires_at_ms is not None and self._now_ms() >= record.expires_at_ms:
            raise UnauthorizedError("bearer token has expired")
        return Principal(name=record.name or "token", scopes=record.scopes)


class StaticTokenAuth(BearerTokenAuth):
    """A fixed list of plain tokens, for local development (hashed at construction)."""

    def __init__(self, tokens: Iterable[str | tuple[str, Iterable[str]]]) -> None:
        """Accept ``tokens``: plain strings (all scopes) or ``(token, scopes)`` pairs.

        Raises:
            ValidationError: The list is empty or holds an empty token.
        """
        entries: list[dict[str, Any]] = []
        for item in tokens:
            token, scopes = (item, None) if isinstance(item, str) else (item[0], list(item[1]))
            if not token:
                raise ValidationError("static API tokens must not be empty")
            entries.append({"sha256": hash_token(token), "name": "static", "scopes": scopes})
        if not entries:
            raise ValidationError("static token auth needs at least one token")
        secret = {"tokens": entries}
        super().__init__(lambda: secret, ttl_s=float("inf"))


class IamAuth:
    """API Gateway's IAM authorizer already checked the signature; the app trusts it.

    A request whose context carries no IAM identity did not pass through the authorizer
    (misconfigured route) and is refused.
    """

    openapi_scheme: dict[str, Any] = {
        "type": "apiKey",
        "in": "header",
        "name": "Authorization",
        "description": "AWS Signature Version 4 (API Gateway IAM authorization)",
    }

    def authenticate(
        self, headers: Mapping[str, str], request_context: Mapping[str, Any]
    ) -> Principal:
        """Read the caller from the authorizer's context."""
        authorizer = request_context.get("authorizer")
        iam = authorizer.get("iam") if isinstance(authorizer, Mapping) else None
        if not isinstance(iam, Mapping):
            raise UnauthorizedError("request was not authorised by IAM")
        name = iam.get("userArn") or iam.get("callerId") or iam.get("accountId") or "iam"
        return Principal(name=str(name), scopes=None)


class AllowAllAuth:
    """No authentication: every caller holds every scope (local development only)."""

    openapi_scheme: dict[str, Any] = {
        "type": "http",
        "scheme": "bearer",
        "description": "not checked by this deployment",
    }

    def authenticate(
        self, headers: Mapping[str, str], request_context: Mapping[str, Any]
    ) -> Principal:
        """Accept the request."""
        return Principal(name="anonymous", scopes=None)
