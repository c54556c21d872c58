"""The HTTP API of relayflow: API Gateway v2 (payload 2.0) in front of the api function."""

from __future__ import annotations

import json

import jsii
from aws_cdk import RemovalPolicy
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from relayflow.cdk.props import ApiAuthMode, CorsSettings
from relayflow.cdk.suppressions import acknowledge

__all__ = [
    "API_ROUTES",
    "CAPABILITY_ROUTES",
    "DASHBOARD_ROUTES",
    "OPEN_ROUTES",
    "RelayflowHttpApi",
]

API_ROUTES: tuple[tuple[apigwv2.HttpMethod, str], ...] = (
    (apigwv2.HttpMethod.GET, "/api/{proxy+}"),
    (apigwv2.HttpMethod.POST, "/api/{proxy+}"),
    (apigwv2.HttpMethod.POST, "/__voyant/tokens/{tokenId}"),
)
"""Routes that need authentication; the api function's router answers 404 for unknown paths.

``/__voyant/tokens/{tokenId}`` is the token ``url`` the reference runtime hands workflows."""

OPEN_ROUTES: tuple[tuple[apigwv2.HttpMethod, str], ...] = (
    (apigwv2.HttpMethod.GET, "/api/healthz"),
    (apigwv2.HttpMethod.GET, "/api/openapi.json"),
    (apigwv2.HttpMethod.GET, "/api/docs"),
    (apigwv2.HttpMethod.GET, "/api/docs/{proxy+}"),
)
"""Routes open to anyone: the health check, the API description and its interactive docs."""

CAPABILITY_ROUTES: tuple[tuple[apigwv2.HttpMethod, str], ...] = (
    (apigwv2.HttpMethod.POST, "/api/runs/{runId}/checkpoints"),
)
"""Routes called by step hosts with a signed capability instead of the API's credentials."""

DASHBOARD_ROUTES: tuple[tuple[apigwv2.HttpMethod, str], ...] = (
    (apigwv2.HttpMethod.GET, "/"),
    (apigwv2.HttpMethod.GET, "/dashboard/{proxy+}"),
)
"""The web dashboard's page shell and files, answered by the api function."""

_ACCESS_LOG_FORMAT = json.dumps(
    {
        "requestId": "$context.requestId",
        "ip": "$context.identity.sourceIp",
        "requestTime": "$context.requestTime",
        "httpMethod": "$context.httpMethod",
        "routeKey": "$context.routeKey",
        "status": "$context.status",
        "protocol": "$context.protocol",
        "responseLength": "$context.responseLength",
        "integrationLatency": "$context.integrationLatency",
        "integrationError": "$context.integrationErrorMessage",
    }
)


@jsii.implements(apigwv2.IAccessLogSettings)
class _AccessLogSettings:
    def __init__(self, log_group: logs.ILogGroup) -> None:
        self._destination = apigwv2.LogGroupLogDestination(log_group)

    @property
    def destination(self) -> apigwv2.IAccessLogDestination:
        return self._destination

    @property
    def format(self) -> apigw.AccessLogFormat:
        return apigw.AccessLogFormat.custom(_ACCESS_LOG_FORMAT)


class RelayflowHttpApi(Construct):
    """The HTTP API: throttled `$default` stage, access logs, bearer or IAM auth, CORS."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        handler: lambda_.IFunction,
        api_name: str,
        auth: ApiAuthMode,
        cors: CorsSettings | None,
        throttle_rate: int,
        throttle_burst: int,
        log_retention: logs.RetentionDays,
        removal_policy: RemovalPolicy,
    ) -> None:
        """Route `/api/*` to `handler` (payload format 2.0)."""
        super().__init__(scope, construct_id)
        self.http_api = apigwv2.HttpApi(
            self,
            "HttpApi",
            api_name=api_name,
            description="relayflow: runs, events, manifests",
            create_default_stage=False,
            cors_preflight=_cors(cors) if cors is not None else None,
        )
        access_logs = logs.LogGroup(
            self, "AccessLogs", retention=log_retention, removal_policy=removal_policy
        )
        self.stage = apigwv2.HttpStage(
            self,
            "DefaultStage",
            http_api=self.http_api,
            stage_name="$default",
            auto_deploy=True,
            throttle=apigwv2.ThrottleSettings(rate_limit=throttle_rate, burst_limit=throttle_burst),
            access_log_settings=_AccessLogSettings(access_logs),
        )
        integration = integrations.HttpLambdaIntegration(
            "Api",
            handler,
            payload_format_version=apigwv2.PayloadFormatVersion.VERSION_2_0,
        )
        authorizer = authorizers.HttpIamAuthorizer() if auth is ApiAuthMode.IAM else None
        self.routes: list[apigwv2.HttpRoute] = []
        for method, path in API_ROUTES:
            routes = self.http_api.add_routes(
                path=path, methods=[method], integration=integration, authorizer=authorizer
            )
            if auth is ApiAuthMode.BEARER:
                for route in routes:
                    acknowledge(
                        route,
                        "AwsSolutions-APIG4",
                        "Bearer tokens are checked by the api function against token hashes "
                        "kept in Secrets Manager (constant-time compare), not by a gateway "
                        "authorizer.",
                    )
            self.routes += routes
        public = (
            (
                OPEN_ROUTES,
                "Public on purpose: the health check, the OpenAPI description and its Swagger UI "
                "page read no run data.",
            ),
            (
                CAPABILITY_ROUTES,
                "Authorised by the api function: a step host's checkpoint call carries the "
                "capability its signed step request gave it, checked before anything is written.",
            ),
            (
                DASHBOARD_ROUTES,
                "Public on purpose: the dashboard's page and script files hold no run data; "
                "the pages call the protected API routes with the person's bearer token.",
            ),
        )
        for table, reason in public:
            for method, path in table:
                routes = self.http_api.add_routes(
                    path=path,
                    methods=[method],
                    integration=integration,
                    authorizer=apigwv2.HttpNoneAuthorizer(),
                )
                for route in routes:
                    acknowledge(route, "AwsSolutions-APIG4", reason)
                self.routes += routes

    @property
    def url(self) -> str:
        """The API's base URL (ends with `/`)."""
        return self.stage.url


def _cors(settings: CorsSettings) -> apigwv2.CorsPreflightOptions:
    return apigwv2.CorsPreflightOptions(
        allow_origins=list(settings.allow_origins),
        allow_headers=list(settings.allow_headers),
        allow_methods=[apigwv2.CorsHttpMethod(m) for m in settings.allow_methods],
        max_age=settings.max_age,
    )
