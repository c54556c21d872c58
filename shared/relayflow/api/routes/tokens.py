"""Routes of ``/api/tokens``: complete, fail or heartbeat a token whose id names its run.

Token ids that relayflow generates carry their run id (``relayflow.token_ids``), so these
routes need none; they take the same bodies, scope and answers as the run-scoped
``/api/runs/{id}/tokens/{tokenId}`` routes. An id the workflow chose answers 404
``token_not_found`` here: it is reachable only through its run.

``POST /__voyant/tokens/{tokenId}`` is the ``url`` the reference runtime hands its workflows
for a token (a path no reference server serves); here it completes the token exactly as
``POST /api/tokens/{tokenId}`` does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar
from urllib.parse import unquote

from aws_lambda_powertools.event_handler.openapi.params import Body, Path
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from relayflow.api.auth import RUNS_WRITE
from relayflow.api.backend import Backend
from relayflow.api.context import ApiContext
from relayflow.api.models import CompleteTokenRequest, FailTokenRequest, InjectionView
from relayflow.api.responses import BODY_ERRORS, declare
from relayflow.api.views import injection_view
from relayflow.drivers import DeliveryResult

_WRITE = [{"bearerAuth": [RUNS_WRITE]}]
Handler = TypeVar("Handler", bound=Callable[..., Any])
#: The run-free token routes, and the reference's token ``url`` (``/__voyant/tokens/<id>``).
TOKENS = "/api/tokens"
REFERENCE_TOKENS = "/__voyant/tokens"
LocatingTokenId = Annotated[
    str, Path(description="a token id relayflow generated (it names its run: rft1.…)")
]


def build_router(ctx: ApiContext) -> APIGatewayHttpRouter:
    """The run-free token routes over ``ctx``'s driver."""
    router = APIGatewayHttpRouter()  # type: ignore[no-untyped-call]
    backend = Backend(ctx.driver, ctx.admin)
    responses = declare(200, InjectionView, "the run after the delivery", *BODY_ERRORS, 404, 409)

    def delivered(delivery: DeliveryResult) -> InjectionView:
        ctx.logger.append_keys(run_id=delivery.run.id, workflow_id=delivery.run.workflow_id)
        return injection_view(delivery)

    def route(path: str, summary: str, operation_id: str) -> Callable[[Handler], Handler]:
        decorator: Callable[[Handler], Handler] = router.post(
            path,
            summary=summary,
            tags=["tokens"],
            operation_id=operation_id,
            security=_WRITE,
            responses=responses,
        )
        return decorator

    @route(f"{TOKENS}/<token_id>", "Complete a token by its id alone", "completeTokenById")
    def complete_token(
        token_id: LocatingTokenId, body: Annotated[CompleteTokenRequest | None, Body()] = None
    ) -> InjectionView:
        payload = body.payload if body is not None else None
        return delivered(backend.complete_token(None, unquote(token_id), payload))

    @route(
        f"{REFERENCE_TOKENS}/<token_id>",
        "Complete a token at the url the reference runtime hands its workflows",
        "completeTokenAtReferenceUrl",
    )
    def complete_token_at_reference_url(
        token_id: LocatingTokenId, body: Annotated[CompleteTokenRequest | None, Body()] = None
    ) -> InjectionView:
        return complete_token(token_id, body)

    @route(f"{TOKENS}/<token_id>/fail", "Fail a token by its id alone", "failTokenById")
    def fail_token(
        token_id: LocatingTokenId, body: Annotated[FailTokenRequest, Body()]
    ) -> InjectionView:
        error = body.error
        return delivered(backend.fail_token(None, unquote(token_id), error.code, error.message))

    @route(
        f"{TOKENS}/<token_id>/heartbeat", "Heartbeat a token by its id alone", "heartbeatTokenById"
    )
    def heartbeat_token(token_id: LocatingTokenId) -> InjectionView:
        return delivered(backend.heartbeat_token(None, unquote(token_id)))

    return router
