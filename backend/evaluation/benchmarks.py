"""Benchmarks with lm-evaluation-harness on the base and the checkpoints of a run.

    python -m backend.evaluate --run RUN --benchmark TASK [TASK ...] [--checkpoint NAME ...]
                               [--local-model PATH ...] [--max-samples N] [--no-chat-template]

TASK is a bundled task (backend/evaluation/benchmark_tasks.py), a task YAML
file or a folder of them, or one of lm-eval's own tasks by name (its data
from the hub). Each checkpoint is lm-eval's `hf` model: the run's base with
the checkpoint's adapter (`peft=`), a full fine-tune's checkpoint folder
itself, or the base alone for "base". Prompts go through the chat template
the run trained with unless --no-chat-template. A --local-model (a model on
this machine: a folder with config.json, or a GGUF file converted once into
the workspace) is benchmarked beside them as eval/local-<name>/ with its own
tokenizer and chat template (plain text when it has none) and step null; with
--local-model, only the checkpoints --checkpoint names are run.

Results, one file per checkpoint, merged task by task (a later benchmark of a
task replaces that task's entry only):

    RUN/eval/<checkpoint>/benchmarks.json
    {"checkpoint": "checkpoint-16", "step": 16, "lm_eval_version": "0.4.13",
     "tasks": {"studio_facts_choice": {"metrics": {"acc": 0.85, "acc_norm": 0.8},
                                       "primary": "acc", "samples": 40, "source": "bundled",
                                       "task_file": "/…/studio_facts_choice.yaml", "chat_template": true,
                                       "limit": null, "time": 1733040000.0, "seconds": 3.2}}}

Metric names are lm-eval's, with the filter appended after a comma when it
is not "none" ("exact_match,strict-match"). Like the other evaluation it runs
as a detached process the UI polls (eval/benchmark-progress.json).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from huggingface_hub import try_to_load_from_cache

from backend.config import RunConfig
from backend.evaluation.benchmark_specs import (
    HUB_SOURCE,
    BenchmarkError,
    TaskSpec,
    go_offline,
    hub_specs,
    hub_unreachable,
    local_alternatives,
    refuse_task_files,
    resolve_specs,
)
from backend.evaluation.benchmark_tasks import PRIMARY_METRIC
from backend.evaluation.results import (
    BASE,
    EVAL_DIR,
    checkpoint_folder,
    chosen_checkpoints,
    step_of,
)
from backend.messages import msg
from backend.models.chat_templates import apply_for_model
from backend.models.gguf_header import GGUFLayoutError, read_gguf_header
from backend.models.gguf_source import GGUFSourceError, find_gguf
from backend.models.hub_cache import hub_id_of
from backend.models.loading import load_tokenizer, quantization_config, resolve_model_path
from backend.runs.files import CONFIG_FILE
from backend.runs.jobs import RUNNING, launch_job, read_progress, write_progress
from backend.runs.workspace import Workspace
from backend.storage.atomic_files import atomic_write_json, read_json
from backend.storage.safe_names import clean_name

BENCHMARKS_FILE = "benchmarks.json"
PROGRESS_FILE = "benchmark-progress.json"
DEFAULT_BATCH_SIZE = 8
LOCAL_PREFIX = "local-"  # eval/local-<name>/: a model on this machine benchmarked beside the run


# ---------------------------------------------------------------- what to run on

def base_model_path(run_dir: Path, config: RunConfig, workspace: Workspace | None = None) -> str:
    """The run's base model as a folder (or a hub id that is cached or reachable); a sentence when it is gone."""

    name = config.model_name_or_path
    path = resolve_model_path(name, (workspace or Workspace.for_run_dir(run_dir)).models_dir)
    if Path(path).expanduser().is_dir():
        return path
    looks_local = path.startswith((".", "/", "~")) or path.count("/") > 1
    if looks_local:
        raise BenchmarkError(msg("benchmark.base_gone", run=Path(run_dir).name, path=path))

    if not isinstance(try_to_load_from_cache(path, "config.json"), str):
        why = hub_unreachable()
        if why:
            raise BenchmarkError(msg("benchmark.base_not_cached", run=Path(run_dir).name, name=path, why=why))
    return path


def local_benchmark_targets(paths: list[str] | None) -> list[tuple[str, str]]:
    """(name under eval/, path) of each model on this machine to benchmark beside the run: a folder with
    a config.json or a GGUF file (the job converts it once into the workspace). Refused with a sentence
    when a path is neither; nothing is loaded or converted here. Names start with LOCAL_PREFIX, so they
    never meet a checkpoint's, and are told apart by a number when two models share one."""

    targets: list[tuple[str, str]] = []
    for text in [p for p in (paths or []) if str(p).strip()]:
        path = Path(str(text).strip()).expanduser()
        try:
            gguf = None if (path / "config.json").is_file() else find_gguf(path)
        except GGUFSourceError as error:
            raise BenchmarkError(error.catalogued or str(error)) from None
        if gguf is None and not (path / "config.json").is_file():
            raise BenchmarkError(msg("benchmark.local_not_model", path=path))
        name = unique = LOCAL_PREFIX + clean_name(_local_title(path, gguf), "model", max_len=60)
        for k in range(2, len(targets) + 2):
            if unique not in {n for n, _ in targets}:
                break
            unique = f"{name}-{k}"
        targets.append((unique, str(path)))
    return targets


def _local_title(path: Path, gguf: Path | None) -> str:
    """A GGUF file's own name (general.name: an Ollama blob's file name is its digest), a hub snapshot's
    Org--Name, else the folder's name."""

    if gguf is not None:
        try:
            return read_gguf_header(gguf).fields.get("general.name") or gguf.stem
        except (GGUFLayoutError, OSError, ValueError):
            return gguf.stem
    return (hub_id_of(path) or path.name).replace("/", "--")


def load_tasks(local: list[TaskSpec], hub_names: list[str], include: list[str]):
    """(TaskManager, every spec) with lm-eval's index read only when a name needs it, and each task's
    data loaded once here so a hub dataset that cannot be had fails before any model loads."""
    offline = hub_unreachable() if hub_names else None
    if offline:
        go_offline()  # before lm_eval (and with it datasets) is imported
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_path=include or None, include_defaults=bool(hub_names))
    specs = [*local, *hub_specs(hub_names, manager.all_tasks)]
    for spec in specs:
        try:
            manager.load([spec.load_as])
        except Exception as error:  # noqa: BLE001 - datasets / lm-eval raise many kinds; the sentence names it
            first = str(error).splitlines()[0] if str(error) else type(error).__name__
            if spec.source == HUB_SOURCE and offline:
                raise BenchmarkError(msg("benchmark.hub_offline", name=spec.name, why=offline,
                                         alternatives=local_alternatives())) from None
            raise BenchmarkError(msg("benchmark.task_failed", name=spec.name, error=first)) from None
    return manager, specs


# ---------------------------------------------------------------- running

def _device_dtype() -> tuple[str, str]:
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    return device, "bfloat16" if device == "cuda" and torch.cuda.is_bf16_supported() else "float32"


def local_language_model(folder: str, batch_size: int):
    """(lm-eval's `hf` model of a model on this machine, whether its tokenizer has its own chat template):
    its own tokenizer and template, never the run's (a model without one is asked in plain text)."""
    from lm_eval.models.huggingface import HFLM

    tokenizer = load_tokenizer(folder)
    device, dtype = _device_dtype()
    lm = HFLM(pretrained=folder, tokenizer=tokenizer, device=device, dtype=dtype, batch_size=batch_size)
    lm.model.generation_config.max_new_tokens = None  # as in language_model
    return lm, bool(getattr(tokenizer, "chat_template", None))


def language_model(run_dir: Path, config: RunConfig, base: str, name: str, batch_size: int):
    """lm-eval's `hf` model answering as checkpoint `name`, with the tokenizer and chat template the run trained with."""
    import torch
    from lm_eval.models.huggingface import HFLM

    tokenizer = load_tokenizer(base, trust_remote_code=config.trust_remote_code)
    apply_for_model(tokenizer, config.chat_template, base)
    device, dtype = _device_dtype()
    pretrained, peft = base, None
    if name != BASE:
        folder = checkpoint_folder(run_dir, name)
        if (folder / "adapter_config.json").is_file():
            peft = str(folder)
        else:  # a full fine-tune: the checkpoint is the model
            pretrained = str(folder)
    extra = {}
    if config.quantization_bits and pretrained == base:  # QLoRA: the 4/8-bit base it trained on
        extra["quantization_config"] = quantization_config(config.quantization_bits, getattr(torch, dtype))
    lm = HFLM(pretrained=pretrained, peft=peft, tokenizer=tokenizer, device=device, dtype=dtype,
              batch_size=batch_size, trust_remote_code=config.trust_remote_code, **extra)
    # A max_new_tokens in generation_config.json (SmolLM2's, the demo model's: 64) takes precedence over the
    # max_length lm-eval derives from a task's max_gen_toks, so answers ran past the task's limit.
    lm.model.generation_config.max_new_tokens = None
    return lm


def flat_metrics(task_result: dict) -> dict[str, float]:
    """lm-eval's {"acc,none": 0.5, "acc_stderr,none": "N/A", "alias": ...} as {"acc": 0.5}."""
    metrics = {}
    for key, value in task_result.items():
        if "," not in key or "_stderr" in key or not isinstance(value, (int, float)):
            continue
        metric, filter_name = key.split(",", 1)
        metrics[metric if filter_name == "none" else key] = float(value)
    return metrics


def primary_metric(name: str, metrics: dict) -> str | None:
    if name in PRIMARY_METRIC and PRIMARY_METRIC[name] in metrics:
        return PRIMARY_METRIC[name]
    for preferred in ("acc", "exact_match", "acc_norm"):
        if preferred in metrics:
            return preferred
    return next(iter(metrics), None)


def benchmark_checkpoint(run_dir: Path, name: str, lm, manager, specs: list[TaskSpec], settings: dict,
                         local_model: str | None = None) -> dict:
    """Run every task on one checkpoint's model; merge the results into eval/<name>/benchmarks.json.
    `local_model`: the path of a model on this machine benchmarked as `name` (its step is None)."""
    import lm_eval
    from lm_eval import simple_evaluate

    started = time.time()
    output = simple_evaluate(model=lm, tasks=[s.load_as for s in specs], task_manager=manager,
                             limit=settings["limit"], bootstrap_iters=0, log_samples=False,
                             apply_chat_template=settings["chat_template"], random_seed=0, numpy_random_seed=0,
                             torch_random_seed=0, fewshot_random_seed=0)
    seconds = round(time.time() - started, 2)
    path = Path(run_dir) / EVAL_DIR / name / BENCHMARKS_FILE
    record = read_json(path, default=None) or {}
    tasks = dict(record.get("tasks") or {})
    for spec in specs:
        metrics = flat_metrics(output["results"].get(spec.name, {}))
        samples = (output.get("n-samples") or {}).get(spec.name, {})
        tasks[spec.name] = {"metrics": metrics, "primary": primary_metric(spec.name, metrics),
                            "samples": samples.get("effective"), "source": spec.source, "task_file": spec.path,
                            "chat_template": settings["chat_template"], "limit": settings["limit"],
                            "time": time.time(), "seconds": seconds}
    record = {"checkpoint": name, "step": None if local_model else step_of(run_dir, name),
              "lm_eval_version": getattr(lm_eval, "__version__", ""), "tasks": tasks}
    if local_model:
        record["local_model"] = local_model
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, record)
    return record


def run_benchmarks(run_dir: Path, tasks: list[str], checkpoints: list[str] | None = None, limit: int | None = None,
                   chat_template: bool = True, batch_size: int = DEFAULT_BATCH_SIZE,
                   progress: Path | None = None, workspace: Workspace | None = None,
                   local_models: list[str] | None = None) -> dict:
    """Benchmark `checkpoints` (default: base and every complete checkpoint; with `local_models`, none
    unless named) of a run on `tasks`, and beside them `local_models` (paths of models on this machine,
    written to eval/local-<name>/). Everything a user gave is checked before a model loads. `workspace`:
    where the base model and the bundled tasks are (default: the one that holds the run folder)."""
    run_dir = Path(run_dir).resolve()
    if not (run_dir / CONFIG_FILE).is_file():
        raise BenchmarkError(msg("evaluate.not_run", path=run_dir, config=CONFIG_FILE))
    if not any(t.strip() for t in tasks):
        raise BenchmarkError(msg("benchmark.choose_task", alternatives=local_alternatives()))
    local = local_benchmark_targets(local_models)
    checkpoints = chosen_checkpoints(run_dir, checkpoints, BenchmarkError) if checkpoints or not local else []
    config = RunConfig.load(run_dir / CONFIG_FILE)
    workspace = workspace or Workspace.for_run_dir(run_dir)
    task_files, hub_names = resolve_specs(tasks, workspace.root)
    base = base_model_path(run_dir, config, workspace) if checkpoints else None
    write_progress(progress, stage=msg("benchmark.stage.tasks"), total=len(checkpoints) + len(local), done=0,
                   checkpoints=checkpoints + [n for n, _ in local])
    manager, specs = load_tasks(task_files, hub_names, sorted({str(Path(s.load_as).parent) for s in task_files}))
    settings = {"limit": limit, "chat_template": chat_template}
    results = {}
    for k, name in enumerate(checkpoints):
        write_progress(progress, stage=msg("benchmark.stage.checkpoint", name=name), done=k)
        lm = language_model(run_dir, config, base, name, batch_size)
        results[name] = benchmark_checkpoint(run_dir, name, lm, manager, specs, settings)
        del lm
    for k, (name, path) in enumerate(local, start=len(checkpoints)):
        write_progress(progress, stage=msg("benchmark.stage.checkpoint", name=name), done=k)
        results[name] = _benchmark_local(run_dir, name, path, workspace, manager, specs, settings, batch_size)
    return {"run": run_dir.name, "tasks": [s.name for s in specs], "results": results}


def _benchmark_local(run_dir, name, path, workspace, manager, specs, settings, batch_size) -> dict:
    folder = resolve_model_path(path, workspace.models_dir)  # a GGUF file: its converted folder (made once)
    lm, own_template = local_language_model(folder, batch_size)
    asked = {**settings, "chat_template": settings["chat_template"] and own_template}
    record = benchmark_checkpoint(run_dir, name, lm, manager, specs, asked, local_model=path)
    del lm
    return record


# ---------------------------------------------------------------- reading back and the background job

def load_benchmarks(run_dir: Path) -> dict[str, dict]:
    """{checkpoint: benchmarks.json} for every benchmarked checkpoint, ordered by step."""
    folder = Path(run_dir) / EVAL_DIR
    found = {}
    if folder.is_dir():
        for sub in folder.iterdir():
            record = read_json(sub / BENCHMARKS_FILE, default=None) if sub.is_dir() else None
            if record and isinstance(record.get("tasks"), dict):
                found[sub.name] = record
    # Models on this machine (step None) after the run's own checkpoints.
    return dict(sorted(found.items(), key=lambda item: (item[1].get("step") is None, item[1].get("step") or 0,
                                                         item[0] == "final", item[0])))


def benchmark_table(results: dict[str, dict]) -> list[dict]:
    """One row per checkpoint: checkpoint, step and '<task> <metric>' columns (primary metric first)."""
    rows = []
    for name, record in results.items():
        row = {"checkpoint": name, "step": record.get("step")}
        for task, entry in sorted(record["tasks"].items()):
            metrics = entry.get("metrics") or {}
            primary = entry.get("primary")
            for metric in sorted(metrics, key=lambda m: (m != primary, m)):
                row[f"{task} {metric}"] = metrics[metric]
        rows.append(row)
    return rows


def benchmark_progress_path(run_dir: Path) -> Path:
    return Path(run_dir) / EVAL_DIR / PROGRESS_FILE


def start_benchmarks(run_dir: Path, tasks: list[str], checkpoints: list[str], limit: int | None = None,
                     chat_template: bool = True, local_models: list[str] | None = None, task_files: bool = True) -> int:
    """Launch `python -m backend.evaluate --benchmark ...` detached; refuses while one runs for this run.
    `local_models`: paths of models on this machine benchmarked beside the checkpoints. `task_files`
    False: a task given as a file or folder is refused (its Python and templates run: an app open to
    other computers runs only the project's tasks and lm-eval's own)."""
    run_dir = Path(run_dir)
    if read_progress(benchmark_progress_path(run_dir)).get("state") == RUNNING:
        raise BenchmarkError(msg("benchmark.running", run=run_dir.name))
    local = [path for _, path in local_benchmark_targets(local_models)]  # a path that is no model is said at once
    if not checkpoints and not local:
        raise BenchmarkError(msg("evaluate.choose"))
    if not any(t.strip() for t in tasks):
        raise BenchmarkError(msg("benchmark.choose_task", alternatives=local_alternatives()))
    if not task_files:
        refuse_task_files(tasks)  # before a file is read
    resolve_specs(tasks, Workspace.for_run_dir(run_dir).root)  # a task file's missing field is said at once
    args = ["--run", str(run_dir), "--benchmark", *tasks]
    args += ["--checkpoint", *checkpoints] if checkpoints else []
    args += ["--local-model", *local] if local else []
    if limit:
        args += ["--max-samples", str(limit)]
    if not chat_template:
        args.append("--no-chat-template")
    benchmark_progress_path(run_dir).unlink(missing_ok=True)
    return launch_job("backend.evaluate", args, run_dir / EVAL_DIR / "benchmarks.log", benchmark_progress_path(run_dir))


def summary_table(summary: dict) -> str:
    """The command line's table: one row per checkpoint, one column per task's primary metric."""
    columns = []
    for record in summary["results"].values():
        for task, entry in record["tasks"].items():
            if task in summary["tasks"] and (task, entry.get("primary")) not in columns:
                columns.append((task, entry.get("primary")))
    width = max([18, *(len(f"{t} {m}") + 2 for t, m in columns)])
    lines = [f"Run {summary['run']}: lm-evaluation-harness",
             f"{'checkpoint':<18}{'step':>6}" + "".join(f"{f'{t} {m}':>{width}}" for t, m in columns)]
    for name, record in summary["results"].items():
        cells = [record["tasks"].get(t, {}).get("metrics", {}).get(m) for t, m in columns]
        step = record.get("step")
        lines.append(f"{name:<18}{'-' if step is None else step:>6}"
                     + "".join(f"{v:>{width}.4f}" if isinstance(v, float) else f"{'–':>{width}}" for v in cells))
    return "\n".join(lines)


def as_json(summary: dict) -> str:
    return json.dumps(summary, indent=2, ensure_ascii=False)
