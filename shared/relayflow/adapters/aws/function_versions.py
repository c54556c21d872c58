"""Deleting the published versions of relayflow's Lambda functions that no run needs any more.

Every deploy publishes a version of each function and keeps the old ones, because a pinned
run keeps invoking the version it started on. Versions add up against the region's Lambda
code storage quota, so the sweeper deletes a version once all of these hold: it is not
``$LATEST``, no alias points to it, no run pinned to it is live, and neither its publication
nor the end of the last run pinned to it is within the retention. The runs are found with
one query per old version (:class:`~relayflow.ports.PinnedRunIndex`), never a scan.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from relayflow.adapters.aws.errors import error_code
from relayflow.ports import Clock, PinnedRunIndex

if TYPE_CHECKING:
    from mypy_boto3_lambda import LambdaClient

    from relayflow.config import Settings

__all__ = ["DELETIONS_PER_SWEEP", "LambdaVersionCleaner", "VersionCleanup"]

_log = logging.getLogger("relayflow.versions")
_DAY_MS = 86_400_000
_LATEST = "$LATEST"
#: Versions one sweep deletes at most: the Lambda control plane is rate limited, and the
#: next sweep carries on where this one stopped.
DELETIONS_PER_SWEEP = 20


@dataclass
class VersionCleanup:
    """What one clean-up did: the versions deleted and the functions it could not finish."""

    #: Qualified names (``name:7``) of the versions deleted.
    deleted: list[str] = field(default_factory=list)
    #: Versions kept because a live run is pinned to them.
    pinned: list[str] = field(default_factory=list)
    #: ``function: reason`` for every failure (logged; the next sweep tries again).
    failures: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The JSON form the sweeper returns."""
        return {"deleted": self.deleted, "pinned": self.pinned, "failures": self.failures}


class LambdaVersionCleaner:
    """Deletes the versions of ``functions`` that no run needs (see the module).

    Args:
        functions: Names (or ARNs) of the functions whose versions are cleaned.
        runs: Answers which runs are pinned to a version.
        client_factory: Returns the Lambda client.
        clock: The current time.
        retention_days: How long a version is kept after its publication and after the end
            of the last run pinned to it.
        max_deletions: Versions deleted at most per call.
    """

    def __init__(
        self,
        functions: Sequence[str],
        *,
        runs: PinnedRunIndex,
        client_factory: Callable[[], LambdaClient],
        clock: Clock,
        retention_days: int,
        max_deletions: int = DELETIONS_PER_SWEEP,
    ) -> None:
        self.functions = tuple(_function_name(f) for f in functions)
        self.retention_ms = retention_days * _DAY_MS
        self.max_deletions = max_deletions
        self._runs = runs
        self._client_factory = client_factory
        self._clock = clock

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        runs: PinnedRunIndex,
        client_factory: Callable[[], LambdaClient],
        clock: Clock,
    ) -> LambdaVersionCleaner:
        """A cleaner of ``RELAYFLOW_VERSIONED_FUNCTIONS`` keeping
        ``RELAYFLOW_VERSION_RETENTION_DAYS``."""
        return cls(
            settings.versioned_functions,
            runs=runs,
            client_factory=client_factory,
            clock=clock,
            retention_days=settings.version_retention_days,
        )

    def clean(self) -> VersionCleanup:
        """Delete what no run needs, up to ``max_deletions``; never raises (a failure is
        logged and reported, and the next call tries again)."""
        report = VersionCleanup()
        cutoff = self._clock.now_ms() - self.retention_ms
        for function in self.functions:
            if len(report.deleted) >= self.max_deletions:
                break
            try:
                self._clean_function(function, cutoff, report)
            except Exception as exc:
                _log.warning("cleaning the versions of %s failed", function, exc_info=True)
                report.failures.append(f"{function}: {error_code(exc) or type(exc).__name__}")
        if report.deleted:
            _log.info("deleted %d Lambda versions: %s", len(report.deleted), report.deleted)
        return report

    def _clean_function(self, function: str, cutoff: int, report: VersionCleanup) -> None:
        client = self._client_factory()
        aliased = self._alias_targets(client, function)
        for version, published_at in self._versions(client, function):
            if len(report.deleted) >= self.max_deletions:
                return
            if version == _LATEST or version in aliased or published_at > cutoff:
                continue
            qualified = f"{function}:{version}"
            usage = self._runs.version_usage(qualified)
            if usage.live:
                report.pinned.append(qualified)
                continue
            if usage.last_ended_at is not None and usage.last_ended_at > cutoff:
                continue
            if self._delete(client, function, version, report):
                report.deleted.append(qualified)

    def _alias_targets(self, client: LambdaClient, function: str) -> set[str]:
        targets: set[str] = set()
        for page in client.get_paginator("list_aliases").paginate(FunctionName=function):
            for alias in page.get("Aliases", []):
                targets.add(alias.get("FunctionVersion", ""))
                # A weighted alias sends part of its traffic to a second version.
                weights = alias.get("RoutingConfig", {}).get("AdditionalVersionWeights", {})
                targets.update(weights)
        return targets

    def _versions(self, client: LambdaClient, function: str) -> Iterator[tuple[str, int]]:
        paginator = client.get_paginator("list_versions_by_function")
        for page in paginator.paginate(FunctionName=function):
            for entry in page.get("Versions", []):
                version = entry.get("Version", _LATEST)
                modified = entry.get("LastModified")
                # A version whose publication time cannot be read is treated as new: kept.
                published_at = _epoch_ms(modified) if modified else None
                yield version, published_at if published_at is not None else self._clock.now_ms()

    def _delete(
        self, client: LambdaClient, function: str, version: str, report: VersionCleanup
    ) -> bool:
        try:
            client.delete_function(FunctionName=function, Qualifier=version)
        except Exception as exc:
            code = error_code(exc)
            if code == "ResourceNotFoundException":
                return False  # deleted already (an earlier sweep, or by hand)
            if code == "ResourceConflictException":
                # An alias was pointed at it since it was listed: Lambda refuses, as it should.
                _log.info("kept %s:%s, an alias points to it now", function, version)
                return False
            _log.warning("deleting %s:%s failed", function, version, exc_info=True)
            report.failures.append(f"{function}:{version}: {code or type(exc).__name__}")
            return False
        return True


def _function_name(function: str) -> str:
    # The runs name a version by function name (``AWS_LAMBDA_FUNCTION_NAME``), not by ARN.
    return function.rsplit(":", 1)[-1] if function.startswith("arn:") else function


def _epoch_ms(timestamp: str) -> int | None:
    try:
        return int(datetime.fromisoformat(timestamp).timestamp() * 1000)
    except ValueError:
        return None
