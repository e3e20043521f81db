"""The layout's rules, read from the source with `ast` (docs/ARCHITECTURE.md):
who may import whom, and where a new backend module goes."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The backend's top level holds the shared contracts (RunConfig, its fields' policy and its recipes, the
# catalogued messages) and the `python -m` entry points; every other module lives in the
# package that names its part.
BACKEND_TOP_LEVEL = {"__init__.py", "config.py", "config_policy.py", "config_grpo.py", "config_recipes.py",
                     "messages.py", "train.py", "evaluate.py"}


@functools.cache
def parsed(path: Path) -> ast.Module:
    """The syntax tree of `path`, parsed once for every rule of this file."""
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def imports_of(path: Path) -> set[str]:
    """Every module `path` imports (absolute names; `from a import b` counts as a and a.b)."""
    names = set()
    for node in ast.walk(parsed(path)):
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



# ---------------------------------------------------------------- floors and circles
# The backend's packages stand on floors: a module imports only from packages on floors below its own
# (and from its own package). Lowest first; docs/ARCHITECTURE.md draws the same order.
FLOORS = (
    "backend.messages",        # the catalogued sentences every part speaks in
    "backend.config_policy",   # what a RunConfig field's metadata means, and ConfigError
    "backend.scoring",         # per-answer checks: GRPO rewards, Evaluate scorers, the learning rule
    "backend.config_grpo",     # what grpo settings must hold: reward presets, functions, the batch rule
    "backend.storage",         # files on disk: locks, atomic writes and folders, safe names
    "backend.models",          # names and folders of models, loading, hardware, chat templates
    "backend.scale",           # the scale-out plan: guards, engines, launch commands (pure functions)
    "backend.config",          # RunConfig: the one contract of form, CLI and YAML
    "backend.config_recipes",  # named starting RunConfigs
    "backend.runs",            # the run store: run folders, processes, the queue
    "backend.data",            # rows: load, check, fix, encode
    "backend.learning",        # the learning report: held-out prompts, right answers, learning.json
    "backend.training",        # the worker: model, data and Trainer of one run
    "backend.evaluation",      # eval loss, answers, scores and benchmarks of checkpoints
    "backend.sweeps",          # grids of runs queued together
    "backend.export",          # adapters, merged models and GGUF files out of checkpoints
    "backend.chat",            # side-by-side answers of base, checkpoints and exports
    "backend.judge",           # a judge model on checkpoints' answers, calibrated on the Chat tab's votes
    "backend.serve",           # the OpenAI-compatible server
    "backend.train",           # `python -m` entry points
    "backend.evaluate",
    # ui/ (docs/ARCHITECTURE.md's ui tree): texts, then what every tab and panel stands on, then the
    # views, the panels, the tabs and the shell that places them
    "ui.texts",                # the UI's strings, English and Chinese
    "ui.i18n",                 # the language rule: localize, the page's language switch
    "ui.warmup",               # heavy imports, once, under a lock
    "ui.settings",             # the app's own settings file
    "ui.data_session",         # the Data tab's open files between events
    "ui.chat_session",         # one browser session of the Chat tab
    "ui.run_choice",           # the run dropdowns' one rule
    "ui.local_model_choices",  # the models on this machine as choices, from the scan's cache
    "ui.tab_timers",           # a tab's polls on one timer, on while the tab shows
    "ui.context",              # what every tab and panel gets
    "ui.grpo_form",            # the Train form: RunConfig's fields as widgets and back
    "ui.forms",
    "ui.run_actions",          # Stop and Resume, shared by two tabs
    "ui.views",                # pure functions from data to a figure, HTML or Markdown
    "ui.panels",               # a tab's parts: components and their handlers
    "ui.tabs",                 # one module per tab
    "ui.shell",                # the window
    "ui",                      # the package itself: a module on no floor above lands here
    "app",
)
# (importer, imported): why this import may run against the floors. Keep it empty where you can.
FLOOR_EXCEPTIONS: dict[tuple[str, str], str] = {}


def _module_files() -> dict[str, Path]:
    files = {}
    for path in [*(REPO / "backend").rglob("*.py"), *(REPO / "ui").rglob("*.py"), REPO / "app.py"]:
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return files


def import_graph() -> dict[str, set[str]]:
    """Project module -> the project modules it imports, at the top or inside a function alike."""
    files = _module_files()

    def project_module(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for module, path in files.items():
        targets = {project_module(name) for name in imports_of(path)} - {None, module}
        graph[module] = {t for t in targets if not module.startswith(t + ".")}  # a package's own __init__
    return graph


def floor_of(module: str) -> int:
    for index, floor in enumerate(FLOORS):
        if module == floor or module.startswith(floor + "."):
            return index
    raise AssertionError(f"{module} stands on no floor: add its package to FLOORS in tests/test_layout.py")


def test_every_floor_names_a_module_that_exists():
    modules = set(_module_files())
    assert [floor for floor in FLOORS if floor not in modules] == []
    for importer, imported in FLOOR_EXCEPTIONS:
        assert imported in import_graph().get(importer, set()), f"{importer} no longer imports {imported}: drop it"


def test_every_package_imports_only_the_floors_below_it():
    upward = []
    for importer, imported in sorted(import_graph().items()):
        for target in sorted(imported):
            if floor_of(target) > floor_of(importer) and (importer, target) not in FLOOR_EXCEPTIONS:
                upward.append(f"{importer} imports {target} ({FLOORS[floor_of(target)]} is above "
                              f"{FLOORS[floor_of(importer)]})")
    assert not upward, "imports that run up a floor:\n  " + "\n  ".join(upward)


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                circles.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


def test_import_circles_are_found():
    assert import_circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles():
    circles = import_circles(import_graph())
    assert not circles, "modules that import each other, round a circle:\n  " + "\n  ".join(
        " <-> ".join(group) for group in circles)


MAX_FUNCTION_LINES = 80  # a screen: a longer function is a concept without a name yet (../shared/STYLE.md)


def test_every_function_fits_a_screen():
    """Every function of the app, its tests, benchmarks and examples, nested ones included."""
    files = [REPO / "app.py", *(path for folder in ("backend", "ui", "tests", "bench", "examples")
                                for path in (REPO / folder).rglob("*.py"))]
    assert len(files) > 300  # every folder was read
    long = {f"{path.relative_to(REPO)}:{node.lineno} {node.name}": node.end_lineno - node.lineno + 1
            for path in files for node in ast.walk(parsed(path))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES}
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}; give the parts that have a name their own"


# Libraries a function may import for itself, so that only the callers that need one pay for it: the
# big ones, those that import torch, and those that took 0.1 s or more to import here
# (`python -X importtime -c "import NAME"`: pandas 0.54 s, openai 0.68, fastapi 0.26, gguf 0.24,
# pyarrow 0.17, sacrebleu 0.12, numpy 0.12, uvicorn 0.12, httpx 0.11; at a load of 5,
# rouge_score.rouge_scorer 5.0 s, since it imports nltk, 2.9, and jsonschema 0.20). Everything else, and every
# project module that pulls none of them in, is imported at the top, where a reader sees what a
# module depends on.
HEAVY_LIBRARIES = {"torch", "transformers", "peft", "trl", "datasets", "gradio", "llama_cpp", "vllm", "ray",
                   "lm_eval", "accelerate", "bitsandbytes", "deepspeed", "safetensors.torch", "pandas", "openai",
                   "fastapi", "gguf", "pyarrow", "sacrebleu", "numpy", "uvicorn", "httpx", "rouge_score", "nltk",
                   "jsonschema"}


def _top_level_imports(tree: ast.Module) -> set[str]:
    """What importing the module runs: its top-level imports, those under `try` and `if` included,
    `if TYPE_CHECKING:` blocks left out."""
    names, blocks = set(), [tree.body]
    while blocks:
        for node in blocks.pop():
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                blocks.append(node.orelse)
            elif isinstance(node, (ast.If, ast.Try)):
                blocks.extend([node.body, node.orelse, *(h.body for h in getattr(node, "handlers", []))])
            elif isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.update([node.module, *(f"{node.module}.{alias.name}" for alias in node.names)])
    return names


def _is_heavy(name: str) -> bool:
    return any(name == lib or name.startswith(lib + ".") for lib in HEAVY_LIBRARIES)


@functools.cache
def heavy_modules() -> frozenset[str]:
    """The project modules whose import pulls a heavy library in, through their own top-level imports,
    those of the project modules they import, or of their packages."""
    files = _module_files()
    tops = {module: _top_level_imports(parsed(path)) for module, path in files.items()}

    def project_modules(name: str) -> list[str]:
        parts = name.split(".")
        return [m for m in (".".join(parts[:i]) for i in range(1, len(parts) + 1)) if m in files]

    heavy = {m for m, names in tops.items() if any(_is_heavy(n) for n in names)}
    changed = True
    while changed:
        changed = False
        for module, names in tops.items():
            pulled = {p for n in names for p in project_modules(n)} | set(project_modules(module)[:-1])
            if module not in heavy and pulled & heavy:
                heavy.add(module)
                changed = True
    return frozenset(heavy)


def _optional(node: ast.AST, parents: dict) -> bool:
    """An import under `try: ... except ImportError`: an optional dependency, tried where it is used."""
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.Try) and any("ImportError" in ast.unparse(h.type or ast.Name("")) or
                                             "ModuleNotFoundError" in ast.unparse(h.type or ast.Name(""))
                                             for h in node.handlers):
            return True
    return False


def light_local_imports(repo: Path = REPO) -> dict[Path, list[ast.stmt]]:
    """Each app file's imports inside a function that are neither heavy nor optional."""
    files, heavy, found = _module_files(), heavy_modules(), {}
    for module, path in files.items():
        tree = parsed(path)
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if not isinstance(node, (ast.Import, ast.ImportFrom)) or getattr(node, "level", 0) \
                        or _optional(node, parents):
                    continue
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module, *(
                    f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in files)]
                owners = [n for n in names if n in files or n.rpartition(".")[0] in files]
                if any(_is_heavy(n) for n in names) or any(n in heavy for n in names):
                    continue
                if any(module.startswith(n + ".") for n in owners):
                    continue  # its own package, which imports it: the top would be a circle
                if node not in found.setdefault(path, []):
                    found[path].append(node)
    return {path: nodes for path, nodes in found.items() if nodes}


def test_imports_sit_at_the_top_unless_they_are_heavy():
    """An import inside a function hides what a module depends on; it is kept only where it saves a
    measured cost (HEAVY_LIBRARIES, or a project module that pulls one in)."""
    assert "backend.training.trainer" in heavy_modules() and "backend.storage.atomic_files" not in heavy_modules()
    found = [f"{path.relative_to(REPO)}:{node.lineno} {ast.unparse(node)}"
             for path, nodes in light_local_imports().items() for node in nodes]
    assert not found, "imports inside functions that cost nothing to import at the top:\n  " + "\n  ".join(found)
