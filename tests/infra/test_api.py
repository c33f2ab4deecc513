"""The HTTP API: a JWT authorizer on every route but the public ones (and the console's)."""

from __future__ import annotations

from typing import Any

from duetime.api.app import PUBLIC_ROUTES, ROUTES
from tests.infra.conftest import AUDIENCE, ISSUER, Synth

# The web console's static files, served by the API function without a token (test_console.py).
CONSOLE_ROUTES = {
    ("GET", "/console"),
    ("GET", "/console/{file}"),
    ("GET", "/console/{file}/{deeper+}"),
}


def _and_head(routes: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """A public GET route is declared for HEAD too (RFC 9110: HEAD wherever GET, and without a
    token where GET needs none; the others' HEAD goes through the authorized $default)."""
    return routes | {("HEAD", path) for method, path in routes if method == "GET"}


def _routes(synth: Synth) -> dict[str, dict[str, Any]]:
    return {
        r["Properties"]["RouteKey"]: r["Properties"]
        for r in synth.of_type("AWS::ApiGatewayV2::Route").values()
    }


def test_jwt_authorizer_pins_issuer_and_audience(synth: Synth) -> None:
    authorizers = list(synth.of_type("AWS::ApiGatewayV2::Authorizer").values())

    assert len(authorizers) == 1
    authorizer = authorizers[0]["Properties"]
    assert authorizer["AuthorizerType"] == "JWT"
    assert authorizer["JwtConfiguration"] == {"Issuer": ISSUER, "Audience": AUDIENCE}
    assert authorizer["IdentitySource"] == ["$request.header.Authorization"]


def test_every_route_but_the_public_ones_is_authorized(synth: Synth) -> None:
    routes = _routes(synth)
    (authorizer_id,) = synth.of_type("AWS::ApiGatewayV2::Authorizer")

    public = _and_head(PUBLIC_ROUTES | CONSOLE_ROUTES)
    expected = {f"{method} {path}" for method, path in {*ROUTES, *public}} | {"$default"}
    assert set(routes) == expected
    for key, route in routes.items():
        method, _, path = key.partition(" ")
        if (method, path) in public:
            assert route.get("AuthorizationType", "NONE") == "NONE", key
            assert "AuthorizerId" not in route, key
        else:
            assert route["AuthorizationType"] == "JWT", key
            assert route["AuthorizerId"] == {"Ref": authorizer_id}, key


def test_public_routes_are_health_the_openapi_document_and_the_console(synth: Synth) -> None:
    public = {k for k, r in _routes(synth).items() if r.get("AuthorizationType", "NONE") == "NONE"}
    assert public == {
        f"{method} {path}"
        for method in ("GET", "HEAD")
        for path in ("/health", "/openapi.json", *(path for _, path in CONSOLE_ROUTES))
    }


def test_default_stage_throttles_and_logs_access(synth: Synth) -> None:
    (stage,) = synth.of_type("AWS::ApiGatewayV2::Stage").values()
    properties = stage["Properties"]
    log_group = synth.logical_id("Scheduler/Api/AccessLogs")

    assert properties["StageName"] == "$default"
    assert properties["AutoDeploy"] is True
    throttle = properties["DefaultRouteSettings"]
    assert throttle["ThrottlingRateLimit"] > 0
    assert throttle["ThrottlingBurstLimit"] > 0
    assert properties["AccessLogSettings"]["DestinationArn"] == {"Fn::GetAtt": [log_group, "Arn"]}
    assert "$context.requestId" in properties["AccessLogSettings"]["Format"]


def test_every_route_reaches_the_api_function(synth: Synth) -> None:
    api_function, _ = synth.function("api")
    ((integration_id, integration),) = synth.of_type("AWS::ApiGatewayV2::Integration").items()

    assert integration["Properties"]["IntegrationType"] == "AWS_PROXY"
    assert integration["Properties"]["PayloadFormatVersion"] == "2.0"
    assert integration["Properties"]["IntegrationUri"] == {"Fn::GetAtt": [api_function, "Arn"]}
    for key, route in _routes(synth).items():
        assert route["Target"]["Fn::Join"][1][1] == {"Ref": integration_id}, key
