"""The layout's rules, read from the source with `ast` (docs/ARCHITECTURE.md):
who may import whom, and where a new backend module goes."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The backend's top level holds the shared contracts (RunConfig, its fields' policy and its recipes, the
# catalogued messages) and the `python -m` entry points; every other module lives in the
# package that names its part.
BACKEND_TOP_LEVEL = {"__init__.py", "config.py", "config_policy.py", "config_recipes.py", "messages.py", "train.py",
                     "evaluate.py"}


def imports_of(path: Path) -> set[str]:
    """Every module `path` imports (absolute names; `from a import b` counts as a and a.b)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def importers(prefix: str, folders: tuple[str, ...] = ("app.py", "backend", "ui", "bench")) -> set[str]:
    """The files (repo-relative) that import module `prefix` or anything below it."""
    files = []
    for folder in folders:
        path = REPO / folder
        files.extend([path] if path.is_file() else path.rglob("*.py"))
    return {str(f.relative_to(REPO)) for f in files
            if any(name == prefix or name.startswith(prefix + ".") for name in imports_of(f))}


def test_the_backend_never_imports_gradio():
    assert importers("gradio", ("backend",)) == set()


def test_no_tab_imports_another_tab():
    for tab in (REPO / "ui" / "tabs").glob("*.py"):
        others = {name for name in imports_of(tab) if name.startswith("ui.tabs.")} - {f"ui.tabs.{tab.stem}"}
        assert not others, f"{tab.name} imports {sorted(others)}: move what they share into a ui module that is not a tab"


def test_backend_top_level_holds_only_contracts_and_entry_points():
    modules = {p.name for p in (REPO / "backend").glob("*.py")}
    assert modules <= BACKEND_TOP_LEVEL, (
        f"{sorted(modules - BACKEND_TOP_LEVEL)} belong in the package that names their part "
        "(runs, models, data, training, evaluation, export, chat, serve, scale)")


def test_module_names_are_unique_across_the_backend():
    seen: dict[str, str] = {}
    for path in sorted((REPO / "backend").rglob("*.py")):
        if path.name in {"__init__.py", "__main__.py", "cli.py", "errors.py"}:
            continue  # per-package roles, the same job in each package
        assert path.name not in seen, f"two modules called {path.name}: {seen[path.name]} and {path.relative_to(REPO)}"
        seen[path.name] = str(path.relative_to(REPO))


def test_only_the_worker_imports_its_encoding_and_only_the_entry_point_the_data_cli():
    assert {f for f in importers("backend.training.dataset") if not f.startswith("backend/training/")} == set()
    assert importers("backend.data.cli") == {"backend/data/__main__.py"}

