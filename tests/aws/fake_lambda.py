"""Lambda as far as relayflow invokes it, for tests where a function's code must run: moto's
Lambda cannot run code here.

Each published version of a function is its code (a handler) and its build; an alias
``live`` points at the newest version, and an unqualified invoke runs ``$LATEST`` (the newest
code). An invocation runs the handler in this process with the environment Lambda gives
that version (``AWS_LAMBDA_FUNCTION_NAME``/``AWS_LAMBDA_FUNCTION_VERSION``) and the build's
``RELAYFLOW_BUILD_ID``; a deleted version is a ``ResourceNotFoundException``.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from unittest import mock

from botocore.exceptions import ClientError

from relayflow.dispatch.lambda_dispatcher import LATEST, split_function
from relayflow.worker.builds import BUILD_ID_ENV

ALIAS = "live"
#: A Lambda handler: ``(event, context) -> answer``.
Code = Callable[[Any, Any], Any]


@dataclass(frozen=True)
class Invocation:
    """One invoke: what was asked for and what ran."""

    function: str
    qualifier: str | None
    executed: str | None
    event: Any


@dataclass(frozen=True)
class _Version:
    build: str
    code: Code


class FakeLambda:
    """A Lambda client whose ``invoke`` runs the published versions' code in process."""

    def __init__(self) -> None:
        self._versions: dict[str, dict[str, _Version]] = {}
        self._published: dict[str, int] = {}
        self.invocations: list[Invocation] = []

    def publish(self, function: str, *, build: str, code: Code) -> str:
        """Deploy ``code`` as the next version of ``function``; ``live`` now points at it."""
        number = self._published.get(function, 0) + 1
        self._published[function] = number
        self._versions.setdefault(function, {})[str(number)] = _Version(build, code)
        return str(number)

    def delete_version(self, function: str, version: str) -> None:
        """Remove a published version (its invokes now fail with ResourceNotFound)."""
        del self._versions[function][version]

    @contextmanager
    def running(self, function: str, version: str) -> Iterator[None]:
        """This process is ``function``'s ``version`` for the block (what its code sees)."""
        build = self._versions[function][version].build
        environment = {
            "AWS_LAMBDA_FUNCTION_NAME": function,
            "AWS_LAMBDA_FUNCTION_VERSION": version,
            BUILD_ID_ENV: build,
        }
        with mock.patch.dict(os.environ, environment):
            yield

    def invoke(
        self,
        *,
        FunctionName: str,
        InvocationType: str,
        Payload: bytes,
        Qualifier: str | None = None,
    ) -> dict[str, Any]:
        """Run the version the name and qualifier select, as a synchronous invoke does (the
        parameters are named as boto3 names them)."""
        assert InvocationType == "RequestResponse", "the dispatchers invoke synchronously"
        _, name, named_qualifier = split_function(FunctionName)
        assert Qualifier is None or named_qualifier is None, "qualified twice"
        qualifier = Qualifier or named_qualifier
        executed = self._resolve(name, qualifier)
        event = json.loads(Payload)
        self.invocations.append(Invocation(name, qualifier, executed, event))
        if executed is None:
            raise _not_found(FunctionName, qualifier)
        version = max(self._versions[name], key=int) if executed == LATEST else executed
        with (
            self.running(name, version),
            mock.patch.dict(os.environ, {"AWS_LAMBDA_FUNCTION_VERSION": executed}),
        ):
            answer = self._versions[name][version].code(event, None)
        return {
            "StatusCode": 200,
            "Payload": io.BytesIO(json.dumps(answer).encode()),
            "ExecutedVersion": executed,
        }

    def _resolve(self, name: str, qualifier: str | None) -> str | None:
        versions = self._versions.get(name, {})
        if qualifier in (None, LATEST):
            return LATEST if versions else None
        if qualifier == ALIAS:
            return max(versions, key=int) if versions else None
        return qualifier if qualifier in versions else None


def _not_found(function: str, qualifier: str | None) -> ClientError:
    what = f"{function}:{qualifier}" if qualifier else function
    return ClientError(
        {
            "Error": {
                "Code": "ResourceNotFoundException",
                "Message": f"Function not found: {what}",
            },
            "ResponseMetadata": {"HTTPStatusCode": 404},
        },
        "Invoke",
    )
