"""scripts/bootstrap.sh (sourced by scripts/local and scripts/test) on a machine it cannot set
up: a message, not a silent exit."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_without_python_on_the_path_it_says_what_it_needs(tmp_path: Path) -> None:
    # `command -v python3.11 || command -v python3` failed under `set -e`: exit 1, no word.
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "scripts" / "bootstrap.sh", root / "scripts")
    shutil.copy(REPO_ROOT / "pyproject.toml", root)
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("bash", "sha256sum", "cut", "cat", "dirname"):
        found = shutil.which(tool)
        assert found is not None
        (tools / tool).symlink_to(found)

    done = subprocess.run(
        [str(tools / "bash"), "scripts/bootstrap.sh"],
        cwd=root,
        env={"PATH": str(tools)},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )

    assert done.returncode == 1
    assert "duetime needs Python 3.11 or newer on PATH" in done.stderr
