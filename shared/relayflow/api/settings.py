"""How a deployment configures the HTTP API (auth mode, token secret, CORS), from env vars.

Read once, when the Lambda handler builds the app; nothing is read at import.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal, cast

from aws_lambda_powertools.event_handler import CORSConfig

from relayflow.api.auth import (
    DEFAULT_CACHE_TTL_S,
    AllowAllAuth,
    Authenticator,
    BearerTokenAuth,
    IamAuth,
    StaticTokenAuth,
)
from relayflow.errors import ValidationError

ENV_API_AUTH = "RELAYFLOW_API_AUTH"
ENV_API_TOKENS_SECRET = "RELAYFLOW_API_TOKENS_SECRET"
ENV_API_STATIC_TOKENS = "RELAYFLOW_API_TOKENS"
ENV_API_TOKEN_CACHE_TTL = "RELAYFLOW_API_TOKEN_CACHE_TTL"
ENV_API_CORS_ORIGINS = "RELAYFLOW_API_CORS_ORIGINS"

AuthMode = Literal["bearer", "iam", "static", "none"]
AUTH_MODES: tuple[str, ...] = ("bearer", "iam", "static", "none")


@dataclass(frozen=True)
class ApiSettings:
    """The API's part of a deployment's configuration.

    Attributes:
        auth_mode: ``bearer`` (token digests in Secrets Manager), ``iam`` (API Gateway IAM
            authorizer), ``static`` (plain tokens from ``RELAYFLOW_API_TOKENS``, for local
            development) or ``none`` (no check, local development only).
        tokens_secret: Name or ARN of the secret holding the token digests (``bearer``).
        static_tokens: Comma-separated plain tokens (``static``).
        token_cache_ttl_s: Seconds the token list is cached before the secret is re-read.
        cors_origins: Origins answered with CORS headers (empty: no CORS headers).
    """

    auth_mode: AuthMode = "bearer"
    tokens_secret: str | None = None
    static_tokens: tuple[str, ...] = ()
    token_cache_ttl_s: float = DEFAULT_CACHE_TTL_S
    cors_origins: tuple[str, ...] = ()

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> ApiSettings:
        """Read the API settings; raises ``ValidationError`` naming a bad variable."""
        mode = (env.get(ENV_API_AUTH) or "bearer").strip().lower()
        if mode not in AUTH_MODES:
            raise ValidationError(
                f"{ENV_API_AUTH} must be one of {', '.join(AUTH_MODES)}, got {mode!r}"
            )
        ttl_text = (env.get(ENV_API_TOKEN_CACHE_TTL) or "").strip()
        ttl = DEFAULT_CACHE_TTL_S
        if ttl_text:
            try:
                ttl = float(ttl_text)
            except ValueError:
                raise ValidationError(f"{ENV_API_TOKEN_CACHE_TTL} must be seconds") from None
            if not ttl >= 0:
                raise ValidationError(f"{ENV_API_TOKEN_CACHE_TTL} must not be negative")
        return cls(
            auth_mode=cast(AuthMode, mode),
            tokens_secret=(env.get(ENV_API_TOKENS_SECRET) or "").strip() or None,
            static_tokens=_csv(env.get(ENV_API_STATIC_TOKENS)),
            token_cache_ttl_s=ttl,
            cors_origins=_csv(env.get(ENV_API_CORS_ORIGINS)),
        )

    def authenticator(
        self, secret_loader: Callable[[str], Callable[[], str]] | None = None
    ) -> Authenticator:
        """The authenticator of this mode.

        Args:
            secret_loader: Builds the secret reader for a secret id (Secrets Manager by
                default; injectable for tests).

        Raises:
            ValidationError: The mode lacks what it needs (secret id, tokens).
        """
        if self.auth_mode == "iam":
            return IamAuth()
        if self.auth_mode == "none":
            return AllowAllAuth()
        if self.auth_mode == "static":
            if not self.static_tokens:
                raise ValidationError(f"{ENV_API_AUTH}=static needs {ENV_API_STATIC_TOKENS}")
            return StaticTokenAuth(self.static_tokens)
        if not self.tokens_secret:
            raise ValidationError(f"{ENV_API_AUTH}=bearer needs {ENV_API_TOKENS_SECRET}")
        if secret_loader is None:
            from relayflow.adapters.aws.secrets import SecretsManagerSecret

            return BearerTokenAuth(
                SecretsManagerSecret(self.tokens_secret), ttl_s=self.token_cache_ttl_s
            )
        return BearerTokenAuth(secret_loader(self.tokens_secret), ttl_s=self.token_cache_ttl_s)

    def cors(self) -> CORSConfig | None:
        """The CORS settings, or None when no origin is configured."""
        if not self.cors_origins:
            return None
        first, *others = self.cors_origins
        return CORSConfig(
            allow_origin=first,
            extra_origins=others or None,
            allow_headers=["authorization", "content-type"],
            max_age=3600,
        )


def _csv(value: str | None) -> tuple[str, ...]:
    return tuple(part.strip() for part in (value or "").split(",") if part.strip())
