"""Helpers the infrastructure tests share: reading resources and policies out of templates."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from aws_cdk import App, Stack
from aws_cdk.assertions import Template

from infra.stack import HANDLERS
from relayflow.cdk.functions import FUNCTION_SPECS

# The construct's default handlers, and the sample app's own `functions/` modules.
_NAME_BY_HANDLER = {spec.handler: spec.name for spec in FUNCTION_SPECS} | {
    HANDLERS.handler(spec): spec.name for spec in FUNCTION_SPECS
}

ROOT = Path(__file__).resolve().parents[2]
"""The repository root."""


def resources(template: Template, type_name: str) -> dict[str, dict[str, Any]]:
    """The resources of `type_name` in `template`, by logical id."""
    return {k: dict(v) for k, v in template.find_resources(type_name).items()}


def dead_letter_queue_id(template: Template) -> str:
    """The logical id of the deployment's dead-letter queue (the queue without a redrive)."""
    (dlq,) = [
        logical_id
        for logical_id, queue in resources(template, "AWS::SQS::Queue").items()
        if "RedrivePolicy" not in queue["Properties"]
    ]
    return dlq


def only(template: Template, type_name: str, **match: Any) -> dict[str, Any]:
    """The properties of the single resource of `type_name` whose properties include `match`."""
    hits = [
        r["Properties"]
        for r in resources(template, type_name).values()
        if all(r["Properties"].get(k) == v for k, v in match.items())
    ]
    assert len(hits) == 1, f"expected one {type_name} matching {match}, found {len(hits)}"
    found: dict[str, Any] = hits[0]
    return found


def functions_by_handler(template: Template) -> dict[str, dict[str, Any]]:
    """relayflow's Lambda functions keyed by their name (`api`, `drive`, `sweeper`, `worker`)."""
    out: dict[str, dict[str, Any]] = {}
    for resource in resources(template, "AWS::Lambda::Function").values():
        name = _NAME_BY_HANDLER.get(resource["Properties"]["Handler"])
        if name is not None:
            out[name] = resource["Properties"]
    return out


def logical_id_of_function(template: Template, name: str) -> str:
    """The logical id of relayflow's `name` function."""
    for logical_id, resource in resources(template, "AWS::Lambda::Function").items():
        if _NAME_BY_HANDLER.get(resource["Properties"]["Handler"]) == name:
            return logical_id
    raise AssertionError(f"no {name} function")


def alias_of_function(template: Template, name: str) -> str:
    """The logical id of the `live` alias of relayflow's `name` function (its `Ref` is the
    alias ARN)."""
    function = logical_id_of_function(template, name)
    (alias,) = [
        logical_id
        for logical_id, resource in resources(template, "AWS::Lambda::Alias").items()
        if resource["Properties"]["FunctionName"] == {"Ref": function}
    ]
    return alias


def as_list(value: Any) -> list[Any]:
    """`value` if it is a list, else a one-item list (IAM allows both)."""
    return value if isinstance(value, list) else [value]


def policy_statements(template: Template) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every statement of every identity policy (inline role policies and AWS::IAM::Policy)."""
    for logical_id, resource in resources(template, "AWS::IAM::Policy").items():
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
            yield logical_id, statement
    for logical_id, resource in resources(template, "AWS::IAM::Role").items():
        for policy in resource["Properties"].get("Policies", []):
            for statement in policy["PolicyDocument"]["Statement"]:
                yield logical_id, statement


def role_statements(template: Template, role_logical_id: str) -> list[dict[str, Any]]:
    """Statements granted to one role: its inline policies and policies attached to it."""
    statements: list[dict[str, Any]] = []
    role = resources(template, "AWS::IAM::Role")[role_logical_id]
    for policy in role["Properties"].get("Policies", []):
        statements += policy["PolicyDocument"]["Statement"]
    for resource in resources(template, "AWS::IAM::Policy").values():
        if {"Ref": role_logical_id} in resource["Properties"].get("Roles", []):
            statements += resource["Properties"]["PolicyDocument"]["Statement"]
    return statements


def nag_report(stack: Stack) -> dict[str, Any]:
    """The AwsSolutions part of the validation report written when `stack` was synthesised."""
    app = App.of(stack)
    assert isinstance(app, App)
    report = json.loads((Path(app.outdir) / "validation-report.json").read_text())
    (nag,) = [p for p in report["pluginReports"] if p["pluginName"] == "AwsSolutions"]
    return dict(nag)
