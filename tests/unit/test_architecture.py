"""The house rules of docs/architecture.md ("What each room may import"), read from the code's
own imports: a new import that crosses a floor the wrong way fails here, not in review."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

LIBRARY = Path(__file__).resolve().parents[2] / "shared" / "duetime"
MAX_MODULE_LINES = 450

# room -> the other rooms of duetime it may import ("" is the package itself: __version__).
ALLOWED: dict[str, set[str]] = {
    "domain": set(),
    "clock": set(),
    "observability": set(),
    "ports": {"domain"},
    "settings": {"domain"},
    "resources": {"domain", "settings"},
    "adapters": {"domain", "ports", "settings", "observability", "clock"},
    "targets": {"", "domain", "ports", "settings", "clock", "observability", "adapters"},
    "services": {"domain", "ports", "settings", "clock", "observability"},
    "history": {"domain", "settings", "clock", "observability", "adapters"},
    "api": {"", "domain", "ports", "settings", "clock", "observability", "services"},
    "wiring": {
        "domain",
        "ports",
        "settings",
        "clock",
        "observability",
        "adapters",
        "targets",
        "services",
        "history",
        "api",
    },
    "entrypoints": {
        "",
        "domain",
        "ports",
        "settings",
        "clock",
        "observability",
        "services",
        "history",
        "wiring",
    },
}
# local and cli sit on top: they may import any room (cli also local; nothing imports cli).
TOP = {"local", "cli"}


def _room(path: Path) -> str:
    return path.relative_to(LIBRARY).with_suffix("").parts[0]


def _imported_rooms(path: Path) -> set[str]:
    rooms = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + (
                [f"duetime.{a.name}" for a in node.names] if node.module == "duetime" else []
            )
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "duetime":
                rooms.add(parts[1] if len(parts) > 1 else "")
    return rooms


MODULES = sorted(p for p in LIBRARY.rglob("*.py") if p.name != "__init__.py" or p.stat().st_size)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(LIBRARY)))
def test_each_module_imports_only_the_rooms_below_it(path: Path) -> None:
    room = _room(path)
    if room in TOP or room == "__init__":
        return
    assert room in ALLOWED, f"{room} is a new room: add it to ALLOWED and docs/architecture.md"
    wrong = _imported_rooms(path) - ALLOWED[room] - {room, "__version__"}
    assert not wrong, f"{path.relative_to(LIBRARY)} ({room}) imports {sorted(wrong)}"


def test_nothing_but_the_local_stack_imports_the_entrypoints_and_nothing_imports_the_cli() -> None:
    for path in MODULES:
        room = _room(path)
        imported = _imported_rooms(path)
        if room not in ("entrypoints", "local"):
            assert "entrypoints" not in imported, path
        if room != "cli":
            assert "cli" not in imported, path


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(LIBRARY)))
def test_each_module_is_under_the_size_limit(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines < MAX_MODULE_LINES, f"{path.relative_to(LIBRARY)} has {lines} lines"
