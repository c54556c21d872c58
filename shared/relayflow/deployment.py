"""What every deployed function is built from: values made once per container, on first use,
and the deployment's AWS driver configured from the environment."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from relayflow.config import Settings, current_settings, import_workflow_modules
from relayflow.drivers import WorkflowDriver
from relayflow.ports import PinnedRunIndex
from relayflow.tracing.process import configure_from_environment

if TYPE_CHECKING:
    from mypy_boto3_lambda import LambdaClient

T = TypeVar("T")
#: A Lambda handler: ``(event, context) -> answer``.
Handler = Callable[[Any, Any], Any]


class Lazy(Generic[T]):
    """A value built by ``factory`` on first use (thread-safe); a failed build is retried."""

    def __init__(self, factory: Callable[[], T]) -> None:
        """Keep ``factory`` for the first :meth:`get`."""
        self._factory = factory
        self._value: T | None = None
        self._lock = threading.Lock()

    def get(self) -> T:
        """The value, built now if needed."""
        if self._value is None:
            with self._lock:
                if self._value is None:
                    self._value = self._factory()
        return self._value


def build_driver_from_env(env: Mapping[str, str] = os.environ) -> WorkflowDriver:
    """The AWS driver of this deployment, configured from ``env``."""
    from relayflow.adapters.aws import build_aws_driver

    import_workflow_modules(env)
    configure_from_environment()
    driver: WorkflowDriver = build_aws_driver(Settings.from_env(env))
    return driver


#: The driver the api, drive and sweeper functions of one container share.
deployment_driver: Lazy[WorkflowDriver] = Lazy(build_driver_from_env)


def _lambda_client() -> LambdaClient:
    from relayflow.adapters.aws.clients import AwsClients

    return AwsClients.from_settings(current_settings()).lambda_()


#: The Lambda client the sweeper's clean-up of old versions uses (one per container).
_deployment_lambda: Lazy[LambdaClient] = Lazy(_lambda_client)


def clean_function_versions(driver: WorkflowDriver) -> dict[str, Any]:
    """The sweeper's clean-up of the deployment's old Lambda versions (those of
    ``RELAYFLOW_VERSIONED_FUNCTIONS`` no run needs any more), over ``driver``'s runs."""
    from relayflow.adapters.aws.function_versions import LambdaVersionCleaner

    settings = current_settings()
    runs = driver.engine.runs
    if not settings.versioned_functions or not isinstance(runs, PinnedRunIndex):
        return {"deleted": [], "pinned": [], "failures": []}
    cleaner = LambdaVersionCleaner.from_settings(
        settings, runs=runs, client_factory=_deployment_lambda.get, clock=driver.engine.clock
    )
    return cleaner.clean().to_json()
