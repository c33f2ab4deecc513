"""The local stack's state directory (`.duetime/`, `--state-dir`): created private, a path that
cannot be one is a one-line message (not an errno), and `local.json` is never seen half
written. Found by an outside audit of the local stack (2026-11-30)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from duetime.cli.main import main
from duetime.local.endpoint import LocalEndpoint, read_local_endpoint, write_endpoint_file
from duetime.local.keys import KeyFileError, ensure_state_dir, load_or_create_key


def test_the_state_directory_is_created_private(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        ensure_state_dir(tmp_path / "a" / ".duetime")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a" / ".duetime").stat().st_mode) == 0o700


def test_a_state_directory_that_is_a_file_is_named_as_such(tmp_path: Path) -> None:
    path = tmp_path / "notadir"
    path.write_text("x")
    with pytest.raises(KeyFileError, match=f"the state directory {path} is not a directory"):
        load_or_create_key(path)
    assert path.read_text() == "x"


def test_the_token_command_on_a_file_says_what_the_state_directory_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # It said "cannot read the signing key notadir/jwt-hs256.key: Not a directory": mkdir's
    # "File exists" was taken for "the key exists".
    path = tmp_path / "notadir"
    path.write_text("x")
    assert main(["token", "--tenant", "tenant-a", "--state-dir", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"the state directory {path} is not a directory" in err
    assert "Errno" not in err
    assert "signing key" not in err


def test_local_on_a_file_says_what_the_state_directory_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "notadir"
    path.write_text("x")
    assert main(["local", "--state-dir", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"the state directory {path} is not a directory" in err
    assert "Errno" not in err


def test_local_that_cannot_write_its_log_says_so_in_a_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A read-only state directory answered "duetime: [Errno 30] Read-only file system: …".
    (tmp_path / "functions.log").mkdir()  # what cannot be opened for writing, even by root
    assert main(["local", "--state-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"duetime local: cannot write {tmp_path / 'functions.log'}: Is a directory" in err
    assert "Errno" not in err
    assert "Traceback" not in err


def test_the_endpoint_file_is_replaced_whole_never_rewritten_in_place(tmp_path: Path) -> None:
    # It was written in place: a command reading it at that instant could read it half written
    # (and take "no stack running").
    first = LocalEndpoint("http://127.0.0.1:1", "us-east-1", "bucket-1")
    path = write_endpoint_file(tmp_path, first)
    with path.open(encoding="utf-8") as reader:  # a reader that opened the file before
        write_endpoint_file(tmp_path, LocalEndpoint("http://127.0.0.1:2", "us-east-1", "b-2"))
        assert json.loads(reader.read())["endpoint_url"] == "http://127.0.0.1:1"
    assert read_local_endpoint(tmp_path) == LocalEndpoint("http://127.0.0.1:2", "us-east-1", "b-2")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["local.json"]  # no draft left


def test_a_key_file_others_may_read_is_refused_as_ssh_refuses_such_a_key(tmp_path: Path) -> None:
    # Found by an outside audit: a key file of any mode was used, so a key copied in with 0644
    # let every user of the machine sign tokens for any tenant of the stack.
    key, _ = load_or_create_key(tmp_path)
    path = tmp_path / "jwt-hs256.key"
    path.chmod(0o644)
    with pytest.raises(KeyFileError, match=r"open to other users \(mode 0644\): chmod 600"):
        load_or_create_key(tmp_path)
    path.chmod(0o600)
    assert load_or_create_key(tmp_path) == (key, False)
