"""Shared fixtures: the demo model (built once, cached between sessions) and
a fresh workspace per test that links to it."""

from __future__ import annotations

import collections
import os
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from backend.storage.user_cache import user_cache_dir  # noqa: E402  (after the path: the repo is importable)

# Built models survive between sessions and clones here; ensure_demo_model rebuilds a stale one.
CACHE = Path(os.environ.get("FINETUNE_STUDIO_TEST_CACHE", user_cache_dir() / "test-models"))
# The demo's and the starter's answers to the learning report's general questions, beside the models (warm_answers).
ANSWERS = CACHE / "answers"


# The fixtures that start processes (a real worker, a command line, a server, the app, a browser), directly or
# through the fixtures they request. A test that uses one, however deep, is `slow`: the marker comes from the
# fixtures, so it cannot drift. `make test-fast` runs the rest, all in this process.
PROCESS_FIXTURES = frozenset({
    "subprocess_env", "gguf_env", "trained_demo_run", "short_demo_run", "starter_short_run",  # this file
    "starts_processes",
    "app", "chromium",                                                    # tests/browser/conftest.py
    "server", "chat_cli", "vllm_server", "gguf_server",                   # tests/serve/
})
# What starting a process looks like to Python's audit hooks (os.fork: multiprocessing, DataLoader workers).
SPAWN_EVENTS = frozenset({"subprocess.Popen", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty", "os.system",
                          "os.exec"})
_spawned: list[str] = []
_SPAWNS_BEFORE = pytest.StashKey[int]()


def _note_spawn(event: str, args: tuple) -> None:
    if event in SPAWN_EVENTS:
        _spawned.append(f"{event} {str(args[:2])[:160]}")


sys.addaudithook(_note_spawn)  # an audit hook cannot be removed; it only appends to a list


# The session fixtures too costly to build twice (a trained run, an export). `make test` runs the suite on two
# pytest-xdist workers with --dist loadgroup: the tests that share one of these, or a module-, class- or
# package-scoped fixture, form one group that one worker runs, so each is built once; every other test is a group
# of its own, which either worker may take.
SHARED_ONCE = frozenset({
    "trained_demo_run", "short_demo_run", "starter_short_run", "gguf_model_dir", "gguf_run", "gguf_export",
    "serve_workspace", "chat_lora_run",
})


def _shared_instances(item) -> list[str]:
    """The fixture instances this test shares with others: each SHARED_ONCE fixture it uses, however deep, and
    each fixture of a wider scope than the test, named by the node it lives on (a module-scoped fixture has one
    instance per module that uses it, a package-scoped one per package that defines it)."""
    shared = []
    name2fixturedefs = item._fixtureinfo.name2fixturedefs  # pytest's own record of the fixtures a test resolves
    for name in item.fixturenames:
        definitions = name2fixturedefs.get(name)
        scope = definitions[-1].scope if definitions else "function"
        if name in SHARED_ONCE:
            shared.append(name)
        elif scope == "module":
            shared.append(f"{item.path.relative_to(REPO)}::{name}")
        elif scope == "class" and item.cls is not None:
            shared.append(f"{item.path.relative_to(REPO)}::{item.cls.__name__}::{name}")
        elif scope == "package":
            shared.append(f"{definitions[-1].baseid}::{name}")
    return shared


def worker_groups(items) -> dict[str, str]:
    """{nodeid: group}: the connected parts of the graph whose nodes are tests and shared fixture instances,
    linked where a test uses one."""
    parent: dict[str, str] = {}

    def root(node: str) -> str:
        while parent.setdefault(node, node) != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for item in items:
        for instance in _shared_instances(item):
            parent[root(instance)] = root(item.nodeid)
    # Named by the first test's module and a count, in collection order, so every worker names them alike; no
    # brackets or @, which xdist reads to find the group in a node id.
    names: dict[str, str] = {}
    for item in items:
        names.setdefault(root(item.nodeid), f"{item.path.relative_to(REPO)}:{len(names)}")
    return {item.nodeid: names[root(item.nodeid)] for item in items}


def pytest_configure(config):
    if hasattr(config, "workerinput"):
        import torch

        # Two workers on two cores: one thread each for the in-process tests (two threads each made them
        # thrash, 323 s against 247 s in one process). The processes a test starts choose their own.
        torch.set_num_threads(1)


# tryfirst: xdist's own hook on a worker turns the xdist_group marks into the node ids' @group suffix, which
# --dist loadgroup schedules by; the marks must be there before it runs.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    import torch

    groups = worker_groups(items)
    for item in items:
        if PROCESS_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
        item.add_marker(pytest.mark.xdist_group(groups[item.nodeid]))
    if hasattr(config, "workerinput"):
        # A worker is handed groups in collection order: the costliest go first, so the longest is not the last
        # one started. A slow test counts 1 and a browser test, a whole journey through the app, 10. Every
        # worker sorts alike (xdist checks that they collect alike).
        cost = collections.Counter()
        for item in items:
            browser = item.path.parent.name == "browser"
            cost[groups[item.nodeid]] += 10 if browser else 1 if "slow" in item.keywords else 0
        items.sort(key=lambda item: -cost[groups[item.nodeid]])
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device; none here")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


def pytest_xdist_node_collection_finished(node, ids):
    """With --dist loadgroup, every node id a worker collected must carry its @group suffix: without it xdist hands
    the tests out one by one and each worker builds every shared run again, with nothing failing (pytest 9.2 broke
    the suffix for pytest-xdist 3.8: pytest-dev/pytest-xdist#1386)."""
    ungrouped = [nodeid for nodeid in ids if "@" not in nodeid]
    if node.config.getvalue("dist") == "loadgroup" and ungrouped:
        raise pytest.UsageError(f"pytest-xdist did not group {len(ungrouped)} tests (first: {ungrouped[0]}): this "
                                "pytest and pytest-xdist do not work together; use the versions requirements-dev.txt pins.")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    item.stash[_SPAWNS_BEFORE] = len(_spawned)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test not marked slow that started a process fails at teardown, naming the process: give it the
    fixture that starts it (PROCESS_FIXTURES), so the fast suite stays in-process."""
    outcome = yield
    report = outcome.get_result()
    if call.when != "teardown" or "slow" in item.keywords or report.failed:
        return
    started = _spawned[item.stash.get(_SPAWNS_BEFORE, len(_spawned)):]
    if started:
        report.outcome = "failed"
        report.longrepr = (f"{item.nodeid} is not marked slow but started {len(started)} process(es), first: "
                           f"{started[0]}. Start processes through a fixture of PROCESS_FIXTURES (tests/conftest.py), "
                           "or mark the test slow.")



@pytest.fixture(scope="session")
def shared_data() -> Path:
    assert SHARED_DATA.is_dir(), f"{SHARED_DATA} is missing: CI runs with ../shared beside the repo"
    return SHARED_DATA


@pytest.fixture(scope="session")
def demo_model_dir() -> Path:
    from backend.models.loading import ensure_demo_model

    CACHE.mkdir(parents=True, exist_ok=True)
    return ensure_demo_model(CACHE)


@pytest.fixture(scope="session")
def starter_model_dir() -> Path:
    """SmolLM2-135M-Instruct, converted once from the GGUF file its package ships (cached like the demo model)."""
    return _offline_model("smollm2-135m-instruct")


@pytest.fixture(scope="session")
def gemma_model_dir() -> Path:
    """The gemma-3-270m base (no chat template), converted once from its packaged GGUF file."""
    return _offline_model("gemma-3-270m")


def _offline_model(name: str) -> Path:
    from backend.models.offline import ensure_offline_model

    CACHE.mkdir(parents=True, exist_ok=True)
    return ensure_offline_model(name, CACHE)


@pytest.fixture
def workspace(tmp_path, demo_model_dir, starter_model_dir, request):
    """A fresh workspace whose models/demo is the cached demo model and whose default model (the starter,
    SmolLM2-135M-Instruct) is the cached conversion: a fresh one would convert it again (20-30 s) the
    first time a test reads the default model's tokenizer, as the Data tab does. A slow test's workspace
    also holds the base models' answers to the general questions (warm_answers), as the app's start leaves
    it; an in-process test's starts cold, so the tests of that cache see it made."""
    from backend.runs.workspace import Workspace

    ws = Workspace(tmp_path / "workspace").ensure()
    (ws.models_dir / "demo").symlink_to(demo_model_dir, target_is_directory=True)
    (ws.models_dir / starter_model_dir.name).symlink_to(starter_model_dir, target_is_directory=True)
    if "slow" in request.node.keywords:
        seed_answers(ws.datasets_dir, request.getfixturevalue("warm_answers"))
    return ws


@pytest.fixture(scope="session")
def warm_answers(tmp_path_factory, demo_model_dir, starter_model_dir) -> Path:
    """The demo's and the starter's answers to the learning report's general questions, and the starter's to
    its default run's held-out identity prompts, generated once per machine (their file's key holds the model,
    its template and the questions, so a change answers anew). Every worker run scores its base on them:
    copied into a slow test's workspace, they spare each run what the app's start-up preparation spares a
    user's (backend/training/replay.py:warm_cache; 4-8 s a demo run, 110 s the starter's, and 16-27 s more
    the starter's held-out prompts)."""
    from backend.config import RunConfig
    from backend.learning.entries import warm_base_answers
    from backend.learning.questions import learning_set
    from backend.models.loading import load_tokenizer
    from backend.runs.workspace import Workspace
    from backend.storage.file_lock import file_lock

    # Read as a run reads them, in a workspace of their own (the identity rows are written into it).
    scratch = Workspace(tmp_path_factory.mktemp("warm-answers") / "workspace")
    starter_held_out = [item.prompt for item in learning_set(RunConfig(), scratch).learned]
    with file_lock(ANSWERS / ".lock"):  # two xdist workers: one answers, the other reads its file
        for model_dir, prompts in ((demo_model_dir, ()), (starter_model_dir, starter_held_out)):
            warm_base_answers(model_dir, load_tokenizer(model_dir), ANSWERS, prompts=prompts)
    return ANSWERS / ".replay"


def seed_answers(datasets_dir: Path, answers: Path) -> None:
    """Copies (never links: a test may write its own) the cached answers into `datasets_dir`/.replay."""
    shutil.copytree(answers, Path(datasets_dir) / ".replay", dirs_exist_ok=True)


@pytest.fixture(scope="session")
def starts_processes() -> None:
    """For a test or fixture whose processes the app's own code starts (the run store's workers, the
    background jobs, the app itself through tests/browser/harness.py): requesting it makes the test slow."""


@pytest.fixture(scope="module")
def devices():
    """This machine's training devices, detected once a module (the run store's tests pass them on)."""
    from backend.models.hardware import detect_devices

    return detect_devices()


@pytest.fixture(scope="module")
def device_dicts():
    """The devices as the Train tab's page holds them (plain dicts), detected once a module."""
    from backend.models.hardware import as_dicts, detect_devices

    return as_dicts(detect_devices())


@pytest.fixture
def lora_demo(workspace):
    """(a LoRA r4 over the demo model, its tokenizer, its folder), in this process."""
    import torch
    from peft import LoraConfig, get_peft_model

    from backend.models.loading import load_model, load_tokenizer

    path = workspace.models_dir / "demo"
    model = get_peft_model(load_model(path, dtype=torch.float32), LoraConfig(r=4, target_modules="all-linear"))
    return model, load_tokenizer(path), path


@pytest.fixture
def ctx(workspace):
    """A UI context of the Train and Runs tabs' texts, for handlers called without a browser; a module
    that needs other tabs' texts or an i18n defines its own `ctx`."""
    from ui.context import UIContext
    from ui.i18n import merge_texts
    from ui.tabs import runs, train

    return UIContext(workspace=workspace, texts=merge_texts(train.TEXT, runs.TEXT), i18n=None)


@pytest.fixture
def subprocess_env() -> dict:
    """Environment for real worker / CLI subprocesses started by tests."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


@pytest.fixture(scope="session")
def trained_demo_run(tmp_path_factory, demo_model_dir, warm_answers) -> Path:
    """The default demo config trained once per session through the real worker
    CLI (`python -m backend.train`); returns the run folder. The one full-length
    run of the suite: for the tests that prove the demo learns (its answers).
    save_steps leaves at least 2 complete checkpoints plus final/."""
    from backend.config import derived_numbers, split_sizes
    from backend.config_recipes import tiny_config
    from backend.models.demo_facts import build_demo_rows

    config = tiny_config()
    train_rows, _ = split_sizes(len(build_demo_rows()), config.val_size)
    total = derived_numbers(config, train_rows)["total_steps"]
    return _train_demo(tmp_path_factory, demo_model_dir, warm_answers, "demo-default",
                       [f"save_steps={max(1, total // 3)}"])


@pytest.fixture(scope="session")
def short_demo_run(tmp_path_factory, demo_model_dir, warm_answers) -> Path:
    """The default demo config cut to 24 steps (checkpoints 8, 16, 24 and final/):
    for tests that need a real run's files and a model that moved from the base
    (the contract, evaluation, export), not a finished demo."""
    return _train_demo(tmp_path_factory, demo_model_dir, warm_answers, "demo-short", ["max_steps=24", "save_steps=8"])


@pytest.fixture(scope="session")
def starter_short_run(tmp_path_factory, starter_model_dir, warm_answers) -> Path:
    """The real starter (SmolLM2-135M-Instruct, the identity dataset) trained seeded steps through
    the worker CLI, fast enough to learn the name: checkpoint-5, checkpoint-10, final/ and the
    learning report the worker writes as it trains. Five steps an epoch: the learned stop checks at
    step 10 and ends the run there when the name is learned (else at the ceiling, step 15).
    Shared by the tests of what a real run learned."""
    import subprocess

    from backend.runs.workspace import Workspace

    ws = Workspace(tmp_path_factory.mktemp("starter-short") / "workspace").ensure()
    (ws.models_dir / starter_model_dir.name).symlink_to(starter_model_dir, target_is_directory=True)
    seed_answers(ws.datasets_dir, warm_answers)
    run_dir = ws.runs_dir / "starter-short"
    sets = ["max_steps=15", "learning_rate=3e-3", "replay=off", "save_steps=5", "cutoff_len=96"]
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    result = subprocess.run([sys.executable, "-m", "backend.train", "--workspace", str(ws.root), "--run-dir",
                             str(run_dir), *[a for item in sets for a in ("--set", item)]],
                            cwd=REPO, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    return run_dir


def _train_demo(tmp_path_factory, demo_model_dir, answers: Path, name: str, sets: list[str]) -> Path:
    import subprocess

    from backend.config_recipes import tiny_config
    from backend.runs.files import list_checkpoints, read_status
    from backend.runs.workspace import Workspace

    ws = Workspace(tmp_path_factory.mktemp(name) / "workspace").ensure()
    (ws.models_dir / "demo").symlink_to(demo_model_dir, target_is_directory=True)
    seed_answers(ws.datasets_dir, answers)
    config_file = ws.root / "default.yaml"
    tiny_config().save(config_file)
    run_dir = ws.runs_dir / name
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    command = [sys.executable, "-m", "backend.train", "--config", str(config_file), "--run-dir", str(run_dir),
               "--workspace", str(ws.root), *[a for item in sets for a in ("--set", item)]]
    # No timeout: on a busy machine a slow run is still a passing run (the worker ends on its own).
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    status = read_status(run_dir)
    assert result.returncode == 0 and status.get("state") == "completed", (
        f"demo run failed (exit {result.returncode}): {status.get('error')}\n{result.stderr[-3000:]}")
    assert len(list_checkpoints(run_dir)) >= 2 and (run_dir / "final" / "COMPLETE").is_file()
    return run_dir


# --- GGUF: one small real model, one LoRA run on it and one export, shared by every GGUF test -------------

@pytest.fixture(scope="session")
def gguf_env() -> dict:
    return dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
                OMP_NUM_THREADS="1")


@pytest.fixture(scope="session")
def gguf_model_dir(tmp_path_factory, starter_model_dir) -> Path:
    """SmolLM2 cut to two layers (tests/gguf_runs.py): a model llama.cpp's converter accepts, 35M parameters."""
    from tests.gguf_runs import build_two_layer_smollm2

    return build_two_layer_smollm2(starter_model_dir, tmp_path_factory.mktemp("models") / "smollm2-2-layers")


@pytest.fixture(scope="session")
def gguf_run(tmp_path_factory, gguf_model_dir, gguf_env) -> Path:
    """A short LoRA run on it (workspace/runs/gguf-run) through the real worker."""
    from tests.gguf_runs import train_lora

    return train_lora(gguf_model_dir, tmp_path_factory.mktemp("gguf-run"), gguf_env)


@pytest.fixture(scope="session")
def gguf_export(gguf_run, gguf_env) -> tuple[Path, dict]:
    """The run's final adapter exported as f16 + q8_0 + q4_k_m (+ a GGUF LoRA) into the run's own
    workspace, workspace/exports/assistant, through the export CLI: (export folder, its report)."""
    from tests.gguf_runs import export_gguf_cli

    out = gguf_run.parent.parent / "exports" / "assistant"
    return out, export_gguf_cli(gguf_run / "final", out, gguf_env)
