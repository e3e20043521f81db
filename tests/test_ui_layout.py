"""The UI's shape, read from the source with `ast`: every `build` only places
components and wires events (the handlers are module-level functions with
their own tests), and only the shell makes the app's RunStore. (No tab
importing another is checked in tests/test_layout.py.)"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
UI = REPO / "ui"
MAX_BUILD_LINES = 80


def _trees() -> list[tuple[str, ast.AST]]:
    return [(str(path.relative_to(REPO)), ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
            for path in sorted(UI.rglob("*.py"))]


def test_no_build_function_is_longer_than_a_screen():
    builds = {f"{name}:{node.lineno}": node.end_lineno - node.lineno + 1 for name, tree in _trees()
              for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == "build"}
    assert len(builds) >= 6  # every tab and panel was found
    long = {where: lines for where, lines in builds.items() if lines > MAX_BUILD_LINES}
    assert not long, (f"build() over {MAX_BUILD_LINES} lines: {long}; move its handlers to module-level "
                      "functions (tested without a browser) and keep build() to components and wiring")


def test_only_the_shell_makes_a_run_store():
    """Tabs use ctx.store: a store of their own would not know the workers the app launched."""
    makers = {name for name, tree in _trees() for node in ast.walk(tree)
              if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "RunStore"}
    assert makers == {"ui/shell.py", "ui/context.py"}, makers
