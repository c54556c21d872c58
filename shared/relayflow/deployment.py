"""What every deployed function is built from: values made once per container, on first use,
and the deployment's AWS driver configured from the environment."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

from relayflow.config import Settings, import_workflow_modules
from relayflow.drivers import WorkflowDriver

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
    driver: WorkflowDriver = build_aws_driver(Settings.from_env(env))
    return driver


#: The driver the api, drive and sweeper functions of one container share.
deployment_driver: Lazy[WorkflowDriver] = Lazy(build_driver_from_env)
