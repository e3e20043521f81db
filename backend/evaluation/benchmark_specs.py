"""What a benchmark request names, checked before lm-evaluation-harness loads
anything: a bundled task (backend/evaluation/benchmark_tasks.py), a user's
task file or folder of task files, or a task of lm-eval's own by name (data
from the Hugging Face hub). A task file's missing fields, a name nobody
knows and a hub that cannot be reached each end in one sentence
(BenchmarkError); the hub is probed once, a few seconds at most, so an
offline machine never waits on a download.
"""

from __future__ import annotations

import difflib
import os
import socket
from dataclasses import dataclass
from pathlib import Path

import yaml

from backend.evaluation.benchmark_tasks import BUNDLED, ensure_bundled_tasks
from backend.messages import UserError, msg
from backend.models.local.walk import Limits, Walk

BUNDLED_SOURCE, FILE_SOURCE, HUB_SOURCE = "bundled", "file", "hub"
OUTPUT_TYPES = ("multiple_choice", "generate_until", "loglikelihood", "loglikelihood_rolling")
LOCAL_DATA_BUILDERS = ("json", "csv", "parquet", "text", "arrow")
HUB_HOST, HUB_PROBE_S = "huggingface.co", 3.0
OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
# A folder of task files is searched within these bounds (it is searched while the tab waits, and
# `/usr` took 56 s unbounded); lm-eval's own tasks folder is 3 deep.
TASK_FOLDER_LIMITS = Limits(seconds=5.0, depth=4, entries_per_folder=2000)
MAX_TASK_FILES = 500
# The walk's bounds, said as a task folder's: local.* name the model scan's remedies.
BOUND_REASONS = {"local.time_budget": "benchmark.bound.seconds", "local.too_deep": "benchmark.bound.depth",
                 "local.too_many": "benchmark.bound.entries", "local.unreadable": "benchmark.bound.unreadable"}
MAX_INCLUDES = 20  # lm-eval's `include:` chains are one or two long


class BenchmarkError(UserError, RuntimeError):
    """A benchmark that cannot run; the message says why and what to do."""


@dataclass(frozen=True)
class TaskSpec:
    name: str            # lm-eval's task name (the `task:` of a file)
    source: str          # bundled | file | hub
    load_as: str         # what TaskManager.load gets: the name, or the YAML file's path
    path: str | None = None


def local_alternatives() -> str:
    return ", ".join(BUNDLED)


def requested_items(requested: list[str]) -> list[str]:
    """The task names and paths of a request (space- or comma-separated), each once, in order."""
    return list(dict.fromkeys(part for text in requested for part in text.replace(",", " ").split()))


def names_a_file(item: str) -> bool:
    """Whether a requested item is a task file or folder (else a bundled task or one of lm-eval's)."""
    return item not in BUNDLED and (item.endswith((".yaml", ".yml")) or os.sep in item or Path(item).exists())


def refuse_task_files(requested: list[str]) -> None:
    """BenchmarkError for a request that names a task file or folder, before any file is read: lm-eval
    imports the Python a task file's `!function` tags (and `class:`) name, and fills its templates with
    Jinja that is not sandboxed, so a task file is code. What an app open to other computers says."""
    files = [item for item in requested_items(requested) if names_a_file(item)]
    if files:
        raise BenchmarkError(msg("benchmark.file_remote", task=files[0], alternatives=local_alternatives()))


def resolve_specs(requested: list[str], workspace_root: Path) -> tuple[list[TaskSpec], list[str]]:
    """(local task specs, names left for lm-eval's own index). Bundled names and files are checked here."""
    bundled_root = ensure_bundled_tasks(workspace_root)
    local, others = [], []
    for item in requested_items(requested):
        if item in BUNDLED:
            task_file = bundled_root / item / f"{item}.yaml"
            local.append(TaskSpec(item, BUNDLED_SOURCE, str(task_file), str(task_file)))
        elif names_a_file(item):
            local += _file_specs(Path(item).expanduser())
        else:
            others.append(item)
    return local, others


def _file_specs(path: Path) -> list[TaskSpec]:
    if path.is_dir():
        files = task_files(path)
        specs = [spec for f in files if _is_task_file(f) for spec in _file_specs(f)]  # included bases skipped
        if not specs:
            raise BenchmarkError(msg("benchmark.empty_folder", folder=path))
        return specs
    if not path.is_file():
        raise BenchmarkError(msg("benchmark.no_file", path=path, alternatives=local_alternatives()))
    config = check_task_file(path)
    return [TaskSpec(str(config["task"]), FILE_SOURCE, str(path.resolve()), str(path.resolve()))]


def task_files(folder: Path) -> list[Path]:
    """The YAML files under `folder`, within TASK_FOLDER_LIMITS; a folder too big to search is refused
    with the bound it hit, rather than searched for minutes."""
    walk, found = Walk(TASK_FOLDER_LIMITS), []
    walk.enter(folder)

    def visit(path: Path, depth: int) -> None:
        for entry in walk.entries(path):
            if walk.out_of_time(path) or len(found) > MAX_TASK_FILES:
                return
            child = Path(entry.path)
            try:
                is_folder = entry.is_dir()
            except OSError:  # a broken entry: neither a folder to search nor a task file
                continue
            if is_folder:
                if depth == walk.limits.depth:
                    walk.skip(child, msg("local.too_deep", path=child, depth=walk.limits.depth), early=True)
                elif walk.enter(child):
                    visit(child, depth + 1)
            elif child.suffix in (".yaml", ".yml"):
                found.append(child)

    visit(folder, 0)
    if len(found) > MAX_TASK_FILES:
        raise BenchmarkError(msg("benchmark.too_many_files", folder=folder, limit=MAX_TASK_FILES))
    for where, message in walk.skipped:  # the first bound it hit; a symlink loop is only seen once
        if message.id in BOUND_REASONS:
            limits = walk.limits
            raise BenchmarkError(msg("benchmark.folder_bounded", folder=folder, reason=msg(
                BOUND_REASONS[message.id], path=where, seconds=round(limits.seconds), depth=limits.depth,
                limit=limits.entries_per_folder)))
    return sorted(found)


def _is_task_file(path: Path) -> bool:
    try:
        return "task" in _read_yaml(path)
    except BenchmarkError:
        return True  # a broken file in the folder is reported, not skipped


# ---------------------------------------------------------------- task files

def _read_yaml(path: Path, included_by: tuple[Path, ...] = ()) -> dict:
    """The file's fields, those of the files it includes under them; an include that comes back to a
    file of its own chain is refused with the chain."""
    if path.resolve() in included_by or len(included_by) > MAX_INCLUDES:
        chain = " -> ".join(str(p) for p in (*included_by, path.resolve()))
        raise BenchmarkError(msg("benchmark.include_loop", file=included_by[0], chain=chain))

    class Loader(yaml.SafeLoader):
        """lm-eval's `!function module.name` tags read as text: only their presence is checked here."""

    Loader.add_multi_constructor("!", lambda loader, suffix, node: f"!{suffix}")
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=Loader)  # noqa: S506 - a SafeLoader subclass
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        raise BenchmarkError(msg("benchmark.bad_yaml", file=path, error=str(error).splitlines()[0])) from None
    if not isinstance(data, dict):
        raise BenchmarkError(msg("benchmark.not_mapping", file=path))
    include = data.get("include")
    if isinstance(include, str):  # lm-eval's own inheritance: the included file's fields, this file's on top
        included = (path.parent / include) if not Path(include).is_absolute() else Path(include)
        data = {**_read_yaml(included, (*included_by, path.resolve())),
                **{k: v for k, v in data.items() if k != "include"}}
    return data


def check_task_file(path: Path) -> dict:
    """The task config of `path` when it has what lm-eval needs to run it; else the first missing field."""
    config = _read_yaml(path)
    if "group" in config and "task" not in config:
        raise BenchmarkError(msg("benchmark.group_file", file=path))

    def missing(field: str, why: str):
        return BenchmarkError(msg("benchmark.missing_field", file=path, field=field, why=msg(f"benchmark.why.{why}")))

    if not config.get("task"):
        raise missing("task", "task")
    if "class" in config or "custom_dataset" in config:
        return config  # a Python task: lm-eval checks it itself
    output_type = config.get("output_type", "generate_until")
    if output_type not in OUTPUT_TYPES:
        raise BenchmarkError(msg("benchmark.output_type", file=path, value=output_type, allowed=", ".join(OUTPUT_TYPES)))
    if not config.get("dataset_path"):
        raise missing("dataset_path", "dataset_path")
    if not (config.get("test_split") or config.get("validation_split")):
        raise missing("test_split", "split")
    if config["dataset_path"] in LOCAL_DATA_BUILDERS:
        _check_data_files(path, config)
    needs = ["doc_to_text", "doc_to_target"]
    if output_type == "multiple_choice":
        needs.append("doc_to_choice")
    if output_type == "loglikelihood_rolling":
        needs = ["doc_to_target"]
    for field in needs:
        if config.get(field) in (None, ""):
            raise missing(field, field)
    return config


def _check_data_files(path: Path, config: dict) -> None:
    files = (config.get("dataset_kwargs") or {}).get("data_files")
    if not files:
        raise BenchmarkError(msg("benchmark.missing_field", file=path, field="dataset_kwargs.data_files",
                                 why=msg("benchmark.why.data_files", builder=config["dataset_path"])))
    names = files.values() if isinstance(files, dict) else ([files] if isinstance(files, str) else files)
    for name in (n for value in names for n in ([value] if isinstance(value, str) else value)):
        if not Path(name).expanduser().is_file():
            beside = path.parent / name
            if beside.is_file():
                raise BenchmarkError(msg("benchmark.data_beside", file=path, data=name, path=beside.resolve()))
            raise BenchmarkError(msg("benchmark.data_missing", file=path, data=name))


# ---------------------------------------------------------------- lm-eval's own tasks

def hub_unreachable() -> str | None:
    """Why the hub cannot be reached (None when it answers). HF_HUB_OFFLINE / HF_DATASETS_OFFLINE say
    so at once; else one TCP connection to huggingface.co:443 with a short timeout."""
    for variable in OFFLINE_VARIABLES:
        if os.environ.get(variable, "").strip().lower() in ("1", "true", "yes", "on"):
            return f"{variable} is set"
    try:
        socket.create_connection((HUB_HOST, 443), timeout=HUB_PROBE_S).close()
    except OSError as error:
        return f"{HUB_HOST} did not answer within {HUB_PROBE_S:.0f} s ({type(error).__name__})"
    return None


def go_offline() -> None:
    """Have huggingface_hub and datasets read only their caches (before they are imported: both read
    these variables at import), so a cached hub dataset still loads and a missing one fails at once."""
    for variable in OFFLINE_VARIABLES:
        os.environ[variable] = "1"


def hub_specs(names: list[str], known: list[str]) -> list[TaskSpec]:
    """lm-eval's own tasks by name; an unknown name gets the nearest known names in its sentence."""
    specs = []
    for name in names:
        if name not in known:
            close = difflib.get_close_matches(name, [*BUNDLED, *known], n=3, cutoff=0.6)
            raise BenchmarkError(msg("benchmark.unknown_task", name=name, alternatives=local_alternatives(),
                                     close=f" Did you mean {', '.join(close)}?" if close else ""))
        specs.append(TaskSpec(name, HUB_SOURCE, name))
    return specs
