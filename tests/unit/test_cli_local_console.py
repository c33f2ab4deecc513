"""`duetime local --console-client-id ID --console-issuer URL [--console-scopes S]`: the
console's OpenID Connect sign-in on the local stack (its happy path runs in a browser:
tests/browser/test_console_oidc.py). Bad combinations stop before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from duetime.cli.main import main


def test_a_client_id_without_an_issuer_is_refused_before_the_stack_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DUETIME_CONSOLE_ISSUER", raising=False)
    code = main(["local", "--console-client-id", "console", "--state-dir", str(tmp_path)])

    out, err = capsys.readouterr()
    assert code == 2
    assert "--console-client-id needs --console-issuer" in err
    assert "starting" not in out


@pytest.mark.parametrize("issuer", ["idp.example.com", "ftp://idp.example.com", "https://"])
def test_an_issuer_that_is_not_an_http_url_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], issuer: str
) -> None:
    argv = ["local", "--console-client-id", "c", "--console-issuer", issuer]
    with pytest.raises(SystemExit) as stopped:
        main([*argv, "--state-dir", str(tmp_path)])

    assert stopped.value.code == 2
    assert "is not an http(s) URL" in capsys.readouterr().err


@pytest.mark.parametrize("issuer", ["not a url", "ftp://idp.example.com", "https://"])
def test_an_issuer_variable_that_is_not_an_http_url_is_refused_as_the_option_is(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    issuer: str,
) -> None:
    # The variable was taken as it was, shown in the banner and served to the console.
    monkeypatch.setenv("DUETIME_CONSOLE_ISSUER", issuer)
    monkeypatch.setenv("DUETIME_CONSOLE_CLIENT_ID", "c")
    code = main(["local", "--state-dir", str(tmp_path)])

    out, err = capsys.readouterr()
    assert code == 2
    assert "DUETIME_CONSOLE_ISSUER is not an http(s) URL" in err
    assert "starting" not in out
