"""schemathesis against the API's own OpenAPI document, in process (WSGI), with every check:
requests generated from the document (its examples, the coverage phase's boundary values and
hypothesis' fuzzing, valid and invalid) never get a 5xx, an answer that breaks the document, a
refusal of a request the document allows, an acceptance of one it forbids, or an answer
without credentials. The few refusals JSON Schema cannot express are listed in
:data:`LISTED`, each with its reason; anything else fails. A generated value a URL cannot
carry (an object or a number for a string parameter arrives as its text) is not held against
the API as an accepted violation.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from reliability_api import ADMIN, ApiUnderTest, build_api
from reliability_tally import FULL_SWEEP, add
from schemathesis.checks import load_all_checks
from schemathesis.config import SchemathesisConfig
from schemathesis.core.failures import Failure, FailureGroup
from schemathesis.generation.feedback import NO_FEEDBACK
from schemathesis.pytest._test_builder import build_operation_test

EXAMPLES = 200 if FULL_SWEEP else 25
AUTHORIZATION = {"Authorization": f"Bearer {ADMIN}"}


@dataclass(frozen=True)
class Listed:
    """A refusal of a schema-valid request that the document cannot express, and why."""

    operation: str
    status: int
    error: str
    reason: str
    message_prefix: str = ""

    def explains(self, operation: str, status: int, body: Any) -> bool:
        if not isinstance(body, dict):
            return False
        any_post = self.operation == "POST *" and operation.startswith("POST ")
        return (
            (self.operation == operation or any_post)
            and self.status == status
            and body.get("error") == self.error
            and str(body.get("message", "")).startswith(self.message_prefix)
        )


#: Refusals of schema-valid requests that JSON Schema cannot express (the check
#: ``positive_data_acceptance`` reports them; nothing else is excused).
LISTED = (
    Listed(
        "POST /api/bulk-actions",
        400,
        "invalid_body",
        "an empty filter would match every run: at least one criterion (a rule across fields)",
        message_prefix="a bulk action needs a filter",
    ),
    Listed(
        "POST /api/bulk-actions",
        400,
        "invalid_body",
        "an empty filter would match every run: at least one criterion (a rule across fields)",
        message_prefix="filter: a bulk action needs a filter",
    ),
    Listed(
        "POST /api/bulk-actions",
        400,
        "invalid_body",
        "the options an action takes depend on the action (a rule across fields)",
        message_prefix="rerun needs options.fromStep",
    ),
    Listed(
        "POST /api/bulk-actions",
        400,
        "invalid_body",
        "the options an action takes depend on the action (a rule across fields)",
        message_prefix="filter: rerun needs options.fromStep",
    ),
    Listed(
        "POST /api/bulk-actions",
        400,
        "invalid_body",
        "the options an action takes depend on the action (a rule across fields)",
        message_prefix="fromStep and input apply to rerun only",
    ),
    Listed(
        "POST /api/bulk-actions",
        400,
        "invalid_body",
        "the options an action takes depend on the action (a rule across fields)",
        message_prefix="filter: fromStep and input apply to rerun only",
    ),
    Listed(
        "POST /api/bulk-actions",
        400,
        "invalid_body",
        "the options an action takes depend on the action (a rule across fields)",
        message_prefix="retry applies to redrive only",
    ),
    Listed(
        "POST /api/bulk-actions",
        400,
        "invalid_body",
        "the options an action takes depend on the action (a rule across fields)",
        message_prefix="filter: retry applies to redrive only",
    ),
    Listed(
        "POST /api/bulk-actions",
        400,
        "invalid_body",
        "the options an action takes depend on the action (a rule across fields)",
        message_prefix="compensate applies to cancel only",
    ),
    Listed(
        "POST /api/bulk-actions",
        400,
        "invalid_body",
        "the options an action takes depend on the action (a rule across fields)",
        message_prefix="filter: compensate applies to cancel only",
    ),
    Listed(
        "POST /api/bulk-actions",
        400,
        "invalid_body",
        "a time range must not be empty (a rule across fields)",
        message_prefix="since must be before until",
    ),
    Listed(
        "POST /api/bulk-actions",
        400,
        "invalid_body",
        "a time range must not be empty (a rule across fields)",
        message_prefix="filter: since must be before until",
    ),
    Listed(
        "GET /api/workflows/{workflow_id}/stats",
        400,
        "invalid_range",
        "a time range must not be empty (a rule across fields)",
        message_prefix="'from' must be before 'to'",
    ),
    Listed(
        "GET /api/workflows/{workflow_id}/stats",
        400,
        "invalid_range",
        "a range's length is a rule across fields (at most 31 days between from and to)",
        message_prefix="the range spans more than",
    ),
    Listed(
        "GET /api/audit",
        400,
        "invalid_query",
        "an audit cursor is opaque (the last key read, encoded): whether a string is one the "
        "log gave cannot be said by a pattern",
        message_prefix="cursor is not one the audit log gave",
    ),
    Listed(
        "POST /api/manifests",
        400,
        "invalid_body",
        "manifest validation: the manifest's rules (schemaVersion 1, workflows and event "
        "filters that refer to each other, predicates, input mappers) are checked by the "
        "events module with the reference's messages; the document gives it as an object",
        message_prefix="manifest refused:",
    ),
    Listed(
        "POST /api/runs",
        400,
        "concurrency_key_missing",
        "a relation between two fields: a debounce key (or a workflow's concurrency key) is a "
        "path that must find a string or number in the run's input",
    ),
    Listed(
        "POST /api/runs",
        400,
        "invalid_body",
        "debounce rules JSON Schema cannot state: its key follows the path grammar of input "
        "mappers and maxWait is not shorter than delay (the fields' descriptions say so)",
        message_prefix="body field 'debounce': value error",
    ),
    Listed(
        "POST *",
        422,
        "idempotency_key_reused",
        "state, not shape: the generated Idempotency-Key was sent earlier in the run with "
        "another body, which the key's contract refuses (the document declares this 422)",
    ),
)

API = build_api()
#: A run parked on an event wait after a step: operations on ``{run_id}`` are fuzzed a second
#: time on it, so that their query and body rules are reached (an unknown run answers 404
#: before they are read).
PARKED_RUN = API.env.trigger("reliability.collector", {"count": 2}).id
load_all_checks()


def _schema(**parameters: str) -> Any:
    """The document as schemathesis reads it, over WSGI, with every check enabled."""
    config = {
        "headers": AUTHORIZATION,
        "checks": {"enabled": True},
        "generation": {"mode": "all", "max-examples": EXAMPLES},
        "phases": {
            "examples": {"enabled": True},
            "coverage": {"enabled": True},
            "fuzzing": {"enabled": True},
        },
        "parameters": parameters,
    }
    return schemathesis.openapi.from_wsgi(
        "/api/openapi.json", API.wsgi, config=SchemathesisConfig.from_dict(config)
    )


SCHEMA = _schema()
SCHEMA_ON_A_RUN = _schema(**{"path.run_id": PARKED_RUN})


@pytest.fixture(scope="module")
def api() -> ApiUnderTest:
    return API


def _operations(*, on_a_run: bool = False) -> list[tuple[str, str]]:
    methods = {"get", "post", "put", "patch", "delete"}
    paths = API.app.openapi_document()["paths"]
    return sorted(
        (m.upper(), p)
        for p, ops in paths.items()
        for m in ops
        if m in methods and (not on_a_run or "{run_id}" in p)
    )


@pytest.mark.parametrize(("method", "path"), _operations())
def test_generated_requests_get_answers_that_match_the_document(method: str, path: str) -> None:
    _fuzz(SCHEMA, method, path)


@pytest.mark.parametrize(("method", "path"), _operations(on_a_run=True))
def test_generated_requests_on_a_parked_run_get_answers_that_match_the_document(
    method: str, path: str
) -> None:
    _fuzz(SCHEMA_ON_A_RUN, method, path)


def _fuzz(schema: Any, method: str, path: str) -> None:
    """Every generated request of one operation; fails listing what broke the document."""
    problems: list[str] = []

    def check(case: Any) -> None:
        response = case.call()
        add("generated_requests")
        if response.status_code >= 500:
            add("server_errors")
        validate = partial(case.validate_response, response, headers=AUTHORIZATION)
        problems.extend(
            _describe(case, response, failure)
            for failure in _failures(validate)
            if not _listed(case, response, failure)
        )

    # The test ``schema.parametrize()`` builds for one operation (examples, coverage and
    # fuzzing phases), parametrized here so that each operation keeps its own test id.
    build_operation_test(
        config=schema.config,
        operation=schema[path][method],
        test_func=check,
        given_kwargs={},
        feedback=NO_FEEDBACK,
        explicit_settings=settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            derandomize=not FULL_SWEEP,
            suppress_health_check=list(HealthCheck),
        ),
    )()

    assert not problems, "\n".join(sorted(set(problems))[:20])


def _failures(validate: Callable[[], None]) -> list[Failure]:
    try:
        validate()
    except FailureGroup as group:
        return [f for f in group.exceptions if isinstance(f, Failure)]
    except Failure as failure:
        return [failure]
    return []


def _listed(case: Any, response: Any, failure: Failure) -> bool:
    if failure.checks == ("negative_data_rejection",):
        return _sent_as_text(case)
    if failure.checks != ("positive_data_acceptance",):
        return False
    try:
        body = json.loads(response.content)
    except ValueError:
        return False
    operation = f"{case.method} {case.operation.path}"
    return any(item.explains(operation, response.status_code, body) for item in LISTED)


def _sent_as_text(case: Any) -> bool:
    """Whether a "schema-violating" query value reached the API only as its text: a URL carries
    strings, so an object, number or boolean generated for a string parameter (``{'': None}``,
    ``0``) arrives as the string ``"{'': None}"`` or ``"0"``, which the document allows."""
    values = (case.query or {}).values()
    return any(not _is_text(value) for value in values)


def _is_text(value: Any) -> bool:
    if isinstance(value, list):
        return all(isinstance(item, str) for item in value)
    return isinstance(value, str)


def _describe(case: Any, response: Any, failure: Failure) -> str:
    add("schema_violations")
    answer = response.content[:300].decode("utf-8", errors="replace")
    return f"{'/'.join(failure.checks)}: {failure.title} -> {answer} for {case.as_curl_command()}"


def test_every_listed_refusal_names_its_reason() -> None:
    operations = {
        f"{m.upper()} {p}" for p, ops in API.app.openapi_document()["paths"].items() for m in ops
    }

    for item in LISTED:
        assert item.reason and (item.operation == "POST *" or item.operation in operations)


def test_the_fuzzed_api_never_logged_a_credential(api: ApiUnderTest) -> None:
    api.send("GET", "/api/healthz", token=None)

    # Generated requests may echo the token into a path (which the access log records);
    # the credential itself, as sent in the Authorization header, is never logged.
    assert f"Bearer {ADMIN}" not in api.logs.getvalue()


# ----- contract gaps schemathesis found (the document is laxer than the API) ------------------


def test_the_manifest_environment_parameter_documents_its_values(api: ApiUnderTest) -> None:
    operation = api.app.openapi_document()["paths"]["/api/manifests/{environment}"]["get"]
    (parameter,) = [p for p in operation["parameters"] if p["name"] == "environment"]

    assert set(parameter["schema"].get("enum", [])) == {"production", "preview", "development"}


@pytest.mark.parametrize("path", ["/api/events", "/api/manifests"])
def test_routes_that_need_a_body_declare_it_required(api: ApiUnderTest, path: str) -> None:
    operation = api.app.openapi_document()["paths"][path]["post"]

    assert api.send("POST", path, token=ADMIN).status == 400
    assert operation["requestBody"].get("required") is True


def test_only_values_a_url_cannot_carry_are_excused_from_negative_rejection() -> None:
    operation = SCHEMA["/api/runs"]["GET"]
    carried_as_text = operation.Case(query={"workflowId": {"": None}}, headers=AUTHORIZATION)
    sent_as_is = operation.Case(query={"workflowId": ""}, headers=AUTHORIZATION)

    assert carried_as_text.call().status_code == 200  # the API saw the text "{'': None}"
    assert _sent_as_text(carried_as_text)
    assert sent_as_is.call().status_code == 400
    assert not _sent_as_text(sent_as_is)
