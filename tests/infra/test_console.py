"""The web console on AWS: served by the API function (same origin as the API), its files in
the code asset, its two routes public, its sign-in settings from the props, its URL an output."""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from duetime.settings import Env
from infra import packaging
from infra.app import Context, props_from_context
from infra.scheduler import SchedulerProps
from tests.infra.conftest import CONSOLE_CLIENT_ID, ISSUER, REPO_ROOT, Synth

# docs: contracts of issue 15; a deeper path is the console's 404, not the authorizer's 401
CONSOLE_ROUTES = {"GET /console", "GET /console/{file}", "GET /console/{file}/{deeper+}"}
OIDC_VARIABLES = {Env.CONSOLE_CLIENT_ID, Env.CONSOLE_ISSUER, Env.CONSOLE_SCOPES}
AUDIENCE = ("duetime",)


def _routes(synth: Synth) -> dict[str, dict[str, Any]]:
    return {
        r["Properties"]["RouteKey"]: r["Properties"]
        for r in synth.of_type("AWS::ApiGatewayV2::Route").values()
    }


def _variables(synth: Synth, name: str) -> dict[str, Any]:
    _, function = synth.function(name)
    variables: dict[str, Any] = function["Environment"]["Variables"]
    return variables


def _code_dir(synth: Synth) -> Path:
    """The API function's code asset in the cloud assembly."""
    logical_id, _ = synth.function("api")
    return synth.outdir / synth.resources[logical_id]["Metadata"]["aws:asset:path"]


def _repository_console_files() -> dict[str, bytes]:
    console = REPO_ROOT / "console"
    if not console.is_dir():
        return {}
    return {
        f.name: f.read_bytes()
        for f in console.iterdir()
        if f.is_file() and not f.name.startswith(".")
    }


def _text(value: Any) -> str:
    """A CloudFormation string as text, references as `{Ref}` / `{Logical.Attribute}`."""
    if isinstance(value, str):
        return value
    if "Ref" in value:
        return "{" + value["Ref"] + "}"
    if "Fn::GetAtt" in value:
        return "{" + ".".join(value["Fn::GetAtt"]) + "}"
    separator, parts = value["Fn::Join"]
    return str(separator).join(_text(part) for part in parts)


def test_the_console_routes_are_public_and_reach_the_api_function(synth: Synth) -> None:
    routes = _routes(synth)
    (integration_id,) = synth.of_type("AWS::ApiGatewayV2::Integration")

    for key in CONSOLE_ROUTES:
        route = routes[key]
        assert route.get("AuthorizationType", "NONE") == "NONE", key
        assert "AuthorizerId" not in route, key
        assert route["Target"]["Fn::Join"][1][1] == {"Ref": integration_id}, key


def test_the_code_asset_holds_the_console_files(synth: Synth) -> None:
    console = _code_dir(synth) / packaging.CONSOLE_ASSET_DIR
    expected = _repository_console_files()

    shipped = {f.name: f.read_bytes() for f in console.iterdir()} if console.is_dir() else {}

    assert shipped == expected  # every file of console/, unchanged, and nothing else


def test_the_api_function_finds_the_console_where_lambda_extracts_the_asset(
    synth: Synth,
) -> None:
    variables = _variables(synth, "api")
    console_dir = PurePosixPath(variables[Env.CONSOLE_DIR])

    assert console_dir == PurePosixPath("/var/task/console")
    # /var/task is the asset's root in the function: that directory is the asset's console/
    in_asset = _code_dir(synth) / console_dir.relative_to("/var/task")
    if "index.html" in _repository_console_files():
        assert (in_asset / "index.html").is_file()


def test_without_a_client_id_the_console_asks_for_a_token(synth: Synth) -> None:
    """No OpenID Connect settings: GET /console/config.json answers {"auth": "token"}."""
    assert not OIDC_VARIABLES & set(_variables(synth, "api"))


def test_with_a_client_id_the_console_signs_in_at_the_jwt_issuer(console_synth: Synth) -> None:
    variables = _variables(console_synth, "api")

    assert variables[Env.CONSOLE_CLIENT_ID] == CONSOLE_CLIENT_ID
    assert variables[Env.CONSOLE_ISSUER] == ISSUER  # the issuer the JWT authorizer trusts
    assert variables[Env.CONSOLE_SCOPES] == "openid email"
    assert variables[Env.CONSOLE_DIR] == "/var/task/console"
    # Only the API function serves the console
    for name in ("coordinator", "sweeper", "worker"):
        assert not OIDC_VARIABLES & set(_variables(console_synth, name)), name
    # and its routes stay public, the others behind the authorizer
    routes = _routes(console_synth)
    public = CONSOLE_ROUTES | {"GET /health", "GET /openapi.json"}
    with_head = public | {key.replace("GET", "HEAD", 1) for key in public}
    assert {k for k, r in routes.items() if "AuthorizerId" not in r} == with_head


def test_the_console_url_is_an_output_below_the_api_url(synth: Synth) -> None:
    outputs = synth.json["Outputs"]

    api_url = _text(outputs["ApiUrl"]["Value"])
    console_url = _text(outputs["ConsoleUrl"]["Value"])

    assert api_url.startswith("https://")
    assert api_url.endswith("/")
    assert console_url == api_url + "console/"


def test_copy_console_takes_the_flat_directory_only(tmp_path: Path) -> None:
    source = tmp_path / "console"
    (source / "drafts").mkdir(parents=True)
    (source / "index.html").write_text("<!doctype html>")
    (source / "app.js").write_text("export {};")
    (source / ".editorconfig").write_text("root = true")
    (source / "drafts" / "old.js").write_text("// not served")

    copied = packaging.copy_console(source, tmp_path / "asset" / "console")

    assert copied == ["app.js", "index.html"]
    assert sorted(p.name for p in (tmp_path / "asset" / "console").iterdir()) == copied


def test_without_a_console_directory_the_asset_has_none(tmp_path: Path) -> None:
    assert packaging.copy_console(tmp_path / "absent", tmp_path / "asset" / "console") == []
    assert not (tmp_path / "asset").exists()


def test_console_env_is_empty_without_a_client_id() -> None:
    props = SchedulerProps(jwt_issuer=ISSUER, jwt_audience=AUDIENCE)

    assert props.console_client_id is None
    assert props.console_scopes == ("openid",)
    assert props.console_env() == {}


def test_console_env_names_the_client_the_issuer_and_the_scopes() -> None:
    props = SchedulerProps(
        jwt_issuer=ISSUER,
        jwt_audience=AUDIENCE,
        console_client_id="spa",
        console_scopes=("openid", "profile"),
    )

    assert props.console_env() == {
        "DUETIME_CONSOLE_CLIENT_ID": "spa",
        "DUETIME_CONSOLE_ISSUER": ISSUER,
        "DUETIME_CONSOLE_SCOPES": "openid profile",
    }


@pytest.mark.parametrize(
    "changes",
    [
        {"console_client_id": ""},
        {"console_client_id": "two words"},
        {"console_scopes": ()},
        {"console_scopes": ("profile",)},  # OpenID Connect needs "openid"
        {"console_scopes": "openid"},  # a string, not a tuple of scopes
        {"console_scopes": ("openid", "a b")},
        {"console_scopes": ("openid", "")},
    ],
)
def test_invalid_console_props_are_refused(changes: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="console_"):
        SchedulerProps(jwt_issuer=ISSUER, jwt_audience=AUDIENCE, **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize("scopes", ["openid email", "openid,email", '["openid", "email"]'])
def test_console_context_is_read(scopes: str) -> None:
    context = {"duetime:consoleClientId": "spa", "duetime:consoleScopes": scopes}

    props = props_from_context(Context(context.get))

    assert props.console_client_id == "spa"
    assert props.console_scopes == ("openid", "email")


def test_console_context_defaults_to_token_sign_in() -> None:
    props = props_from_context(Context({}.get))

    assert (props.console_client_id, props.console_scopes) == (None, ("openid",))
