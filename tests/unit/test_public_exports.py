"""The import paths the README teaches keep their names, and renamed names keep working.

``relayflow.__all__`` itself is pinned in ``test_public_api.py``; the packages below are
pinned here. A name that disappears fails its test; a name added must be added here too.
Old module paths stay importable, and a renamed public name resolves to the new object with
a ``DeprecationWarning``.
"""

from __future__ import annotations

import importlib
import warnings

import pytest

from tests.unit.test_public_api import EXPECTED as RELAYFLOW_ALL

PINNED: dict[str, set[str]] = {
    "relayflow": RELAYFLOW_ALL,
    "relayflow.testing": {
        "DriverHarness",
        "MirroredAlarmClock",
        "ReplayDivergence",
        "ReplayReport",
        "WorkflowTestEnv",
        "assert_replays",
        "crash",
        "replay",
    },
    "relayflow.adapters.aws": {"build_aws_driver"},
    "relayflow.worker": {"ExecutorOptions", "handle_step_request"},
    "relayflow.cdk": {
        "ApiAuthMode",
        "BundleError",
        "CorsSettings",
        "FunctionHandlers",
        "HttpStepHost",
        "InlineStepHost",
        "LambdaBundle",
        "LambdaStepHost",
        "RelayflowOrchestrator",
        "RelayflowOrchestratorProps",
        "StepHost",
        "StepHostError",
        "WorkerStepHost",
    },
}

#: (old module, name) -> (new module, name): the same object, without a warning.
MOVED = {
    ("relayflow.adapters.aws.runs", "DynamoDBRunStore"): (
        "relayflow.adapters.aws.runstore",
        "DynamoDBRunStore",
    ),
    ("relayflow.adapters.aws.driver", "build_aws_driver"): (
        "relayflow.adapters.aws.wiring",
        "build_aws_driver",
    ),
    ("relayflow.adapters.aws.driver", "build_dispatchers"): (
        "relayflow.adapters.aws.wiring",
        "build_dispatchers",
    ),
    ("relayflow.adapters.memory.clock", "VirtualClock"): ("relayflow.clock", "VirtualClock"),
    ("relayflow.adapters.memory", "VirtualClock"): ("relayflow.clock", "VirtualClock"),
    ("relayflow.adapters.memory.clock", "wall_ms"): ("relayflow.clock", "wall_ms"),
    ("relayflow.drivers", "WorkflowAdmin"): ("relayflow.admin", "WorkflowAdmin"),
    ("relayflow.engine", "Engine"): ("relayflow.engine._engine", "Engine"),
    ("relayflow.sdk.effects", "Call"): ("relayflow.sdk.instructions", "Call"),
    ("relayflow.deliveries", "IdempotencyKeyReusedError"): (
        "relayflow.errors",
        "IdempotencyKeyReusedError",
    ),
    ("relayflow.deliveries", "RequestInProgressError"): (
        "relayflow.errors",
        "RequestInProgressError",
    ),
    ("relayflow.events.errors", "ManifestValidationError"): (
        "relayflow.errors",
        "ManifestValidationError",
    ),
    ("relayflow.events.errors", "EventTooLargeError"): ("relayflow.errors", "EventTooLargeError"),
    ("relayflow.dispatch.replay", "ReplayRecordFullError"): (
        "relayflow.errors",
        "ReplayRecordFullError",
    ),
    ("relayflow.dispatch.signing", "SignatureError"): ("relayflow.errors", "SignatureError"),
    ("relayflow.dispatch.capabilities", "CapabilityForbiddenError"): (
        "relayflow.errors",
        "CapabilityForbiddenError",
    ),
    ("relayflow.payloads", "PayloadNotFoundError"): ("relayflow.errors", "PayloadNotFoundError"),
    ("relayflow.payloads", "PayloadIntegrityError"): ("relayflow.errors", "PayloadIntegrityError"),
    ("relayflow.core.inbox", "InboxFullError"): ("relayflow.errors", "InboxFullError"),
    ("relayflow.ports", "DriveAbandoned"): ("relayflow.errors", "DriveAbandoned"),
}

#: (old module, old name) -> (new module, new name): resolves, with a DeprecationWarning.
RENAMED = {
    ("relayflow.drivers", "Delivery"): ("relayflow.drivers", "DeliveryResult"),
    ("relayflow.deliveries", "Deliveries"): ("relayflow.deliveries", "DeliveryIdClaims"),
    ("relayflow.api.idempotency", "Deliveries"): ("relayflow.deliveries", "DeliveryIdClaims"),
    ("relayflow.sdk.effects", "Effect"): ("relayflow.sdk.instructions", "Instruction"),
}


def _get(module: str, name: str) -> object:
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("module", sorted(PINNED))
def test_the_exported_names_are_pinned(module: str) -> None:
    exported = importlib.import_module(module).__all__
    missing = PINNED[module] - set(exported)
    assert not missing, f"{module} no longer exports {sorted(missing)}"
    assert set(exported) == PINNED[module], f"pin the new names of {module} here"
    for name in exported:
        assert _get(module, name) is not None, name


@pytest.mark.parametrize(("old", "new"), sorted(MOVED.items()), ids=lambda p: ".".join(p))
def test_an_old_path_gives_the_same_object_without_a_warning(
    old: tuple[str, str], new: tuple[str, str]
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        assert _get(*old) is _get(*new)


@pytest.mark.parametrize(("old", "new"), sorted(RENAMED.items()), ids=lambda p: ".".join(p))
def test_a_renamed_name_warns_and_gives_the_new_object(
    old: tuple[str, str], new: tuple[str, str]
) -> None:
    target = _get(*new)
    with pytest.warns(DeprecationWarning, match=rf"{old[0]}\.{old[1]} is now {new[0]}\.{new[1]}"):
        resolved = _get(*old)
    assert resolved is target


def test_a_name_never_defined_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="Nope"):
        _get("relayflow.drivers", "Nope")
