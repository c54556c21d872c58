"""S3 payload store: content-addressed objects ``payloads/<sha256>``, written once, encrypted."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from relayflow.adapters.aws.errors import error_code, is_aws_error, translate
from relayflow.errors import PayloadIntegrityError, PayloadNotFoundError
from relayflow.payloads import REF_PREFIX, payload_ref, ref_digest

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

# 412: the object exists (same key, so same content). 409: a concurrent write of it is running.
_ALREADY_STORED = frozenset({"PreconditionFailed", "ConditionalRequestConflict"})


class S3PayloadStore:
    """A :class:`~relayflow.ports.PayloadStore` on one S3 bucket.

    References are ``sha256:<hex>``; the object key is ``<prefix><hex>``. ``put`` never
    overwrites (``If-None-Match: *``), so storing equal data twice is one object.

    Args:
        bucket: The payload bucket.
        client_factory: Returns the S3 client (called on first use, then cached).
        prefix: Key prefix of payload objects.
        kms_key_id: Encrypt with this KMS key (SSE-KMS); SSE-S3 (AES256) when None.
    """

    def __init__(
        self,
        bucket: str,
        *,
        client_factory: Callable[[], S3Client],
        prefix: str = "payloads/",
        kms_key_id: str | None = None,
    ) -> None:
        self.bucket = bucket
        self.prefix = prefix
        self._client_factory = client_factory
        self._client: S3Client | None = None
        self._kms_key_id = kms_key_id

    def _s3(self) -> S3Client:
        if self._client is None:
            self._client = self._client_factory()
        return self._client

    def key_of(self, ref: str) -> str:
        """The object key of a reference; raises ``ValidationError`` for a foreign one."""
        return self.prefix + ref_digest(ref)

    def put(self, data: bytes) -> str:
        """Store ``data`` once; returns ``sha256:<hex>``."""
        digest = hashlib.sha256(data).hexdigest()
        params: dict[str, Any] = {
            "Bucket": self.bucket,
            "Key": self.prefix + digest,
            "Body": data,
            "IfNoneMatch": "*",
            "ContentType": "application/json",
        }
        if self._kms_key_id:
            params.update(ServerSideEncryption="aws:kms", SSEKMSKeyId=self._kms_key_id)
        else:
            params["ServerSideEncryption"] = "AES256"
        try:
            self._s3().put_object(**params)
        except Exception as exc:
            if not is_aws_error(exc):
                raise
            if error_code(exc) not in _ALREADY_STORED:
                raise translate(exc, f"storing payload {digest}") from exc
        return REF_PREFIX + digest

    def get(self, ref: str) -> bytes:
        """The bytes stored under ``ref``.

        Raises:
            PayloadNotFoundError: Nothing is stored under ``ref``.
            PayloadIntegrityError: The stored bytes do not hash to ``ref``.
        """
        key = self.key_of(ref)
        try:
            answer = self._s3().get_object(Bucket=self.bucket, Key=key)
        except Exception as exc:
            if not is_aws_error(exc):
                raise
            if error_code(exc) in ("NoSuchKey", "404", "NotFound"):
                raise PayloadNotFoundError(
                    f"payload {ref} is not in s3://{self.bucket}/{key}"
                ) from exc
            raise translate(exc, f"reading payload {ref}") from exc
        data = answer["Body"].read()
        if payload_ref(data) != ref:
            raise PayloadIntegrityError(f"payload s3://{self.bucket}/{key} does not match {ref}")
        return data
