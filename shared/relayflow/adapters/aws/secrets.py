"""Reads a secret's current value from AWS Secrets Manager (API token digests, for one).

The client is created lazily on first read, so moto and tests need no import-order tricks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import boto3

from relayflow.errors import ValidationError

if TYPE_CHECKING:
    from mypy_boto3_secretsmanager import SecretsManagerClient


class SecretsManagerSecret:
    """A callable returning the current ``SecretString`` of one secret.

    Pass it as the ``load`` of :class:`relayflow.api.auth.BearerTokenAuth`: the
    authenticator caches what it returns and calls it again when its TTL runs out.
    """

    def __init__(
        self,
        secret_id: str,
        *,
        client: SecretsManagerClient | None = None,
        client_factory: Callable[[], SecretsManagerClient] | None = None,
        region: str | None = None,
    ) -> None:
        """Read ``secret_id`` (a name or ARN) through ``client`` or one built on first use."""
        if not secret_id:
            raise ValidationError("a secret id is required")
        self.secret_id = secret_id
        self._client = client
        self._factory = client_factory or (lambda: _default_client(region))

    def _get_client(self) -> SecretsManagerClient:
        if self._client is None:
            self._client = self._factory()
        return self._client

    def __call__(self) -> str:
        """The secret's current string value.

        Raises:
            ValidationError: The secret holds binary data instead of a string.
        """
        answer: dict[str, Any] = dict(self._get_client().get_secret_value(SecretId=self.secret_id))
        value = answer.get("SecretString")
        if not isinstance(value, str):
            raise ValidationError(f"secret {self.secret_id} has no string value")
        return value


def _default_client(region: str | None) -> SecretsManagerClient:
    return boto3.client("secretsmanager", region_name=region)
