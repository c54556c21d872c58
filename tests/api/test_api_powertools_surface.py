"""The private Powertools members the API still relies on, checked against the installed release.

Powertools has no public list of a resolver's routes and no thread-safe way to build a route's
middleware stack, so ``relayflow.api.app`` and ``relayflow.api.request_checks`` use the members
below (pyproject.toml pins the release they were checked against). An upgrade that removes or
renames one fails here with what to look at, not somewhere deep in a request.
"""

from __future__ import annotations

import inspect
from importlib.metadata import version

import pytest
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from aws_lambda_powertools.event_handler.api_gateway import Route

from relayflow.api.app import RelayflowResolver, create_app
from relayflow.api.auth import AllowAllAuth
from relayflow.api.metrics import RecordingMetrics
from relayflow.testing import WorkflowTestEnv

#: (owner, member, what relayflow uses it for).
PRIVATE_MEMBERS = [
    ("resolver", "_static_routes", "RelayflowResolver.routes(): 404/405 and route checks"),
    ("resolver", "_dynamic_routes", "RelayflowResolver.routes(): 404/405 and route checks"),
    ("resolver", "_router_middlewares", "building every route's middleware stack once"),
    ("route", "_middleware_stack_built", "building every route's middleware stack once"),
    ("route", "_build_middleware_stack", "building every route's middleware stack once"),
]


def _resolver() -> RelayflowResolver:
    env = WorkflowTestEnv()
    return create_app(env.driver, env.admin, auth=AllowAllAuth(), metrics=RecordingMetrics())


@pytest.mark.parametrize(("owner", "member", "use"), PRIVATE_MEMBERS)
def test_each_private_member_the_api_uses_still_exists(owner: str, member: str, use: str) -> None:
    app = _resolver()
    subject = app if owner == "resolver" else app.routes()[0]
    assert hasattr(subject, member), (
        f"aws-lambda-powertools {version('aws-lambda-powertools')} has no {type(subject).__name__}"
        f".{member}, which relayflow uses for {use}: adapt relayflow/api before widening the pin"
    )


def test_the_route_list_is_what_powertools_matches_against() -> None:
    app = _resolver()
    routes = app.routes()
    assert routes and all(isinstance(route, Route) for route in routes)
    source = inspect.getsource(APIGatewayHttpResolver._resolve)
    assert "self._static_routes + self._dynamic_routes" in source, (
        "Powertools no longer matches requests against _static_routes + _dynamic_routes in "
        "that order: RelayflowResolver.routes() would answer 404/405 differently than routing"
    )


def test_a_route_stack_is_built_with_the_signature_relayflow_calls() -> None:
    parameters = inspect.signature(Route._build_middleware_stack).parameters
    assert list(parameters)[1:] == ["router_middlewares", "app"], (
        "Route._build_middleware_stack changed its parameters: see "
        "RelayflowResolver._build_middleware_stacks"
    )


def test_every_route_stack_is_built_before_the_first_request_is_routed() -> None:
    from apigw import FakeLambdaContext, http_event

    app = _resolver()
    assert not any(route._middleware_stack_built for route in app.routes())
    app.resolve(http_event("GET", "/api/healthz"), FakeLambdaContext())
    assert all(route._middleware_stack_built for route in app.routes())


def test_the_swagger_ui_files_the_docs_page_serves_ship_with_powertools() -> None:
    from relayflow.api import swagger

    for name in swagger.asset_names():
        asset = swagger.load_asset(name)
        assert asset is not None and len(asset.body) > 10_000, (
            f"the installed aws-lambda-powertools no longer ships the swagger-ui file behind "
            f"/api/docs/{name} in {swagger.ASSET_PACKAGE}"
        )
