"""`duetime token --scope S` (repeatable): a local token whose `scope` claim carries the scopes,
space-separated as an OAuth server writes it (the operator scope of GET /admin/stats)."""

from __future__ import annotations

from pathlib import Path

import pytest

from duetime.cli.main import main
from duetime.local.keys import load_or_create_key, verify_token


def test_scopes_go_in_the_scope_claim_space_separated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["token", "--tenant", "ops", "--scope", "duetime/operator", "--scope", "read"]
    code = main([*argv, "--state-dir", str(tmp_path)])

    out = capsys.readouterr().out
    assert code == 0
    claims = verify_token(out.strip(), load_or_create_key(tmp_path)[0])
    assert (claims["sub"], claims["scope"]) == ("ops", "duetime/operator read")


def test_without_scope_the_token_has_no_scope_claim(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["token", "--tenant", "t", "--state-dir", str(tmp_path)]) == 0
    claims = verify_token(capsys.readouterr().out.strip(), load_or_create_key(tmp_path)[0])
    assert "scope" not in claims


@pytest.mark.parametrize("scope", ["two words", "", "tab\there"])
def test_a_scope_that_is_not_one_word_is_refused_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], scope: str
) -> None:
    code = main(["token", "--tenant", "t", "--scope", scope, "--state-dir", str(tmp_path)])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err.startswith("duetime: a scope is one word")
