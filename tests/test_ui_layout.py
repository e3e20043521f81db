"""The UI's shape, checked from the source: tabs do not import each other,
and every `build` only places components and wires events (short enough to
read in one screen; the handlers are module-level functions with tests)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
UI = REPO / "ui"
MAX_BUILD_LINES = 80


def _imported_modules(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def test_no_tab_imports_another_tab():
    crossings = {f"{path.relative_to(REPO)} imports {name}"
                 for path in sorted((UI / "tabs").glob("*.py"))
                 for name in _imported_modules(path) if name.startswith("ui.tabs")}
    assert not crossings, "move what tabs share into a ui module that is not a tab:\n" + "\n".join(sorted(crossings))


def test_only_the_shell_makes_a_run_store():
    """Tabs use ctx.store: a store of their own would not know the workers the app launched."""
    makers = {str(path.relative_to(REPO)) for path in sorted(UI.rglob("*.py"))
              for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
              if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "RunStore"}
    assert makers == {"ui/shell.py", "ui/context.py"}, makers
