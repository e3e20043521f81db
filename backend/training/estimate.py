"""How long a run will train, before it starts: seconds a step x steps, with a range and its source.

Sources, best first:
  runs   this machine's own earlier runs of the same model and settings (workspace speed log,
         backend/runs/speed_log.py): their wall seconds per step, evaluation and saves included;
  probe  a speed probe: a few real steps of this config in a subprocess (backend/training/speed_probe.py);
  flops  the model's training FLOPs per token over the device's rate (a CPU's measured matmul rate,
         a GPU's listed peak) at an assumed share of it: an order of magnitude, said as such.

The seconds are training time after the model has loaded (summary.json's wall_time_s).
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from backend.config import RunConfig, derived_numbers, split_sizes
from backend.data.encode import count_tokens
from backend.data.pair_rows import PLAN_ROWS, worker_tokenizer
from backend.data.resolve import dataset_size, load_rows, resolve_dataset
from backend.messages import Message, msg
from backend.models.demo_facts import build_demo_rows
from backend.models.loading import DEMO_MODEL, has_own_chat_template, load_tokenizer, needs_build, resolve_model_path
from backend.models.memory import architecture_for, step_row_tokens
from backend.runs.speed_log import matching_records, profile_seconds
from backend.runs.workspace import Workspace
from backend.storage.atomic_files import atomic_write_json, read_json
from backend.training.replay import (
    cached_replay_prompts,
    planned_replay,
    replay_applies,
    replay_count,
    replay_row,
    workspace_answers,
)
from backend.training.threads import usable_cpus

RECENT = 5  # the newest measurements of a key that count (the machine's load drifts)
# Range around the measurements: their own spread, widened by this share. On 2 cores at load 11-15 the
# speed moved 0.74x-1.37x between a measurement and the run, and the range held 6 of 10 runs
# (docs/BENCHMARKS.md, "Time estimate"): a range for a machine that is not this loaded.
RUNS_SPREAD, PROBE_SPREAD = 0.15, 0.25
# (c): training reaches this share of the device's rate; low / high bound the guess.
FLOPS_SHARE = {"cpu": (0.1, 0.3, 0.6), "gpu": (0.15, 0.35, 0.55)}
# Dense bf16 peak, TFLOP/s, of GPUs by a part of their name (their makers' data sheets).
LISTED_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40": 181.0, "L4": 121.0, "A10": 125.0,
                 "4090": 165.0, "3090": 71.0, "A6000": 155.0, "V100": 125.0, "T4": 65.0}
UNKNOWN_GPU_TFLOPS = 100.0
SAMPLE_ROWS = 64  # rows tokenised to guess the tokens of a step for (c)
DEVICE_RATE_FILE = "speed/device_rate.json"
# A CPU with no core free (load + 1 above its cores): the speed moves with the load from minute to minute
# (0.74x-1.37x at load 11-15 on 2 cores), and the rate measured at one load is only scaled to another,
# so the range is this much wider each way and the estimate says why.
BUSY_SPREAD = 2.0


@dataclass(frozen=True)
class Estimate:
    seconds_low: float
    seconds_mid: float
    seconds_high: float
    source: str             # "runs" | "probe" | "flops"
    seconds_per_step: float
    steps: int
    detail: dict = field(default_factory=dict)  # what the message says: counts, rates, when
    busy: dict = field(default_factory=dict)  # a busy CPU: {"load", "cpus", "spread"}, the note's numbers

    def to_dict(self) -> dict:
        return asdict(self)

    def message(self) -> Message:
        spans = {"mid": short_duration(self.seconds_mid), "low": short_duration(self.seconds_low),
                 "high": short_duration(self.seconds_high), "steps": self.steps,
                 "per_step": f"{self.seconds_per_step:.3g}"}
        detail = dict(self.detail)
        if "rate_kind" in detail:  # "measured" | "listed": said in the reader's language
            detail["rate_kind"] = msg(f"estimate.rate_{detail['rate_kind']}")
        said = msg(f"estimate.{self.source}", **spans, **detail)
        return msg("estimate.with_note", estimate=said, note=msg("estimate.busy", **self.busy)) if self.busy else said


def short_duration(seconds: float) -> str:
    """45 -> '45 s', 200 -> '3.3 min', 7200 -> '2 h', 3e5 -> '3.5 days'."""
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size * (2 if unit == "days" else 1):
            return f"{seconds / size:.2g} {unit}" if seconds / size < 10 else f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


def total_of(estimates: list[Estimate]) -> dict:
    """A sweep's or a queue's runs added up: {"low", "mid", "high" (seconds), "sources": {source: runs}}."""
    sources: dict[str, int] = {}
    for e in estimates:
        sources[e.source] = sources.get(e.source, 0) + 1
    return {"low": sum(e.seconds_low for e in estimates), "mid": sum(e.seconds_mid for e in estimates),
            "high": sum(e.seconds_high for e in estimates), "sources": sources}


def planned_steps(config: RunConfig, workspace: Workspace, world_size: int = 1) -> int:
    """Optimizer steps as the Plan counts them (rows before the cutoff filter: an upper bound; replay's
    rows exactly once its cache holds their answers)."""

    rows, has_eval = dataset_size(config.dataset, workspace, config.dataset_name)
    train_rows = rows if has_eval else split_sizes(rows, config.val_size)[0]
    if replay_applies(config, train_rows, has_own_chat_template(config.model_name_or_path, workspace.models_dir)):
        answers = workspace_answers(config.model_name_or_path, config.chat_template, workspace)
        train_rows += planned_replay(config, train_rows, answers)[0]
    return derived_numbers(config, train_rows, world_size)["total_steps"]


def estimate_run_seconds(config: RunConfig, workspace: Workspace, total_steps: int | None = None,
                         devices: list | None = None, load: tuple[float, int] | None = None) -> Estimate:
    """The run's training time. Raises ValueError (a catalogued message) when not even (c) applies.
    `load`: (1-minute load average, usable CPUs) now; None reads this machine's."""
    steps = planned_steps(config, workspace) if total_steps is None else total_steps
    load = machine_load() if load is None else load
    runs = matching_records(workspace.root, config, source="run")[-RECENT:]
    probes = [] if runs else matching_records(workspace.root, config, source="probe")[-1:]
    if runs:
        estimate = _measured(runs, config, steps, "runs", RUNS_SPREAD, {"count": len(runs)})
    elif probes:
        when = time.strftime("%H:%M", time.localtime(probes[0]["time"]))
        estimate = _measured(probes, config, steps, "probe", PROBE_SPREAD,
                             {"probe_steps": probes[0]["steps"], "when": when})
    else:
        estimate = _from_flops(config, workspace, steps, devices, load)
    return busy_range(estimate, *load) if _on_cpu(devices) else estimate


def machine_load() -> tuple[float, int]:
    """(1-minute load average, CPUs this process may use) now."""
    return os.getloadavg()[0], len(usable_cpus())


def cpu_share(load: float, cpus: int) -> float:
    """The share of its idle speed a CPU-bound process gets at this load: all of it while a core is
    free for it, else cpus / (load + 1) (the kernel shares the cores among the runnable processes)."""
    return min(1.0, cpus / (max(0.0, load) + 1.0))


def busy_range(estimate: Estimate, load: float, cpus: int) -> Estimate:
    """On a CPU with no core free, the range BUSY_SPREAD wider each way, with the note that says so."""
    if cpu_share(load, cpus) >= 1.0:
        return estimate
    return replace(estimate, seconds_low=estimate.seconds_low / BUSY_SPREAD,
                   seconds_high=estimate.seconds_high * BUSY_SPREAD,
                   busy={"load": f"{load:.1f}", "cpus": cpus, "spread": f"{BUSY_SPREAD:g}"})


def _on_cpu(devices: list | None) -> bool:
    return getattr((devices or [None])[0], "id", "cpu") == "cpu"


def _measured(records: list[dict], config: RunConfig, steps: int, source: str, spread: float,
              detail: dict) -> Estimate:
    """Each record's profile (set-up, steps, evaluations + saves, end) applied to this run's steps; a
    record without one scales its wall seconds a step."""

    has_eval = config.val_size > 0
    seconds = [profile_seconds(r["profile"], config, steps, has_eval) if r.get("profile")
               else r["seconds_per_step"] * steps for r in records]
    mid = statistics.median(seconds)
    return Estimate(seconds_low=min(seconds) * (1 - spread), seconds_mid=mid,
                    seconds_high=max(seconds) * (1 + spread), source=source,
                    seconds_per_step=mid / steps if steps else 0.0, steps=steps, detail=detail)


def training_flops_per_token(config: RunConfig, workspace: Workspace) -> float:
    """Matmul FLOPs of one trained token: forward 2N; backward 2N for the activations' gradients and,
    when the weights train (full), 2N more; gradient checkpointing recomputes the forward (2N).
    N: the decoder's linear weights plus the lm_head (the input embedding is a lookup)."""

    arch = architecture_for(config.model_name_or_path, workspace.models_dir)
    n = arch.num_hidden_layers * arch.layer_linear_params() + arch.vocab_size * arch.hidden_size
    per_n = 6 if config.method == "full" else 4
    if config.gradient_checkpointing is True:
        per_n += 2
    return float(per_n * n)


def tokens_per_row(config: RunConfig, workspace: Workspace) -> float:
    """Mean tokens of a row, from the first SAMPLE_ROWS rows through the model's tokenizer when the model is
    on disk, else about 4 characters a token; at most cutoff_len."""

    try:
        if config.dataset in ("", "demo"):
            rows = build_demo_rows()[:SAMPLE_ROWS]
        else:
            rows = load_rows(resolve_dataset(config.dataset, workspace), dataset_name=config.dataset_name)[0][:SAMPLE_ROWS]
        texts = [" ".join(str(m.get("content", "")) for m in row.get("messages", [])) or json.dumps(row)
                 for row in rows]
    except (OSError, ValueError, KeyError):
        return float(config.cutoff_len)
    if not texts:
        return float(config.cutoff_len)
    lengths = _token_lengths(config, workspace, texts) or [len(t) / 4 for t in texts]
    return float(min(config.cutoff_len, statistics.mean(lengths) + 8))  # + the template's few tokens


def row_lengths(dataset: str, workspace: Workspace, model_folder, chat_template: str,
                dataset_name: str | None = None, replay_answers: dict | None = None) -> dict | None:
    """The Plan's token lengths of instruction rows, through the tokenizer and chat template the worker
    trains with: {"rows": the first PLAN_ROWS rows of the data, "replay": {prompt: tokens} of the replay
    cache's usable answers}. None when the tokenizer or the rows cannot be read here."""
    tokenizer = worker_tokenizer(model_folder, chat_template)
    if tokenizer is None:
        return None
    try:
        rows = load_rows(resolve_dataset(dataset, workspace), dataset_name=dataset_name)[0][:PLAN_ROWS]
        rows = [r for r in rows if r.get("messages")]
        usable = [(p, a) for p, a in (replay_answers or {}).items() if a]
        replay = count_tokens(tokenizer, [replay_row(p, a) for p, a in usable]) if usable else []
        return {"rows": count_tokens(tokenizer, rows), "replay": {p: n for (p, _), n in zip(usable, replay)}}
    except (OSError, ValueError, KeyError):
        return None


def memory_row_tokens(config: RunConfig, rows: dict | None, train_rows: int, has_template: bool) -> float | None:
    """step_row_tokens of the run's training rows as the Plan measured them (row_lengths): the data's
    rows and the replay rows the run picks from its cache; None without measured lengths (the memory
    estimate then takes cutoff_len)."""
    lengths = (rows or {}).get("lengths")
    if not lengths:
        return None
    mixed = list(lengths["rows"])
    if config.stage == "sft" and replay_applies(config, train_rows, has_template):
        picked = cached_replay_prompts(rows.get("replay_answers") or {}, replay_count(config, train_rows), config.seed)
        mixed += [lengths["replay"][p] for p in picked or [] if p in lengths["replay"]]
    return step_row_tokens(mixed, config.cutoff_len, config.packing)


def _token_lengths(config: RunConfig, workspace: Workspace, texts: list[str]) -> list[int] | None:
    try:
        if needs_build(config.model_name_or_path, workspace.models_dir):
            return None  # nothing is built or converted for an estimate
        folder = Path(resolve_model_path(config.model_name_or_path or DEMO_MODEL, workspace.models_dir))
        if not folder.is_dir():
            return None
        tokenizer = load_tokenizer(str(folder), trust_remote_code=False)
        return [len(ids) for ids in tokenizer(texts)["input_ids"]]
    except Exception:  # noqa: BLE001 - any tokenizer trouble: the character guess instead
        return None


def device_rate(devices: list | None, workspace: Workspace,
                load: tuple[float, int] | None = None) -> tuple[str, float, str]:
    """(device name, TFLOP/s, "measured" | "listed") of the run's first device; a CPU's measured rate
    scaled from the load it was measured at to `load` (now, when None)."""
    device = (devices or [None])[0]
    if device is not None and getattr(device, "id", "cpu") != "cpu":
        listed = next((v for k, v in LISTED_TFLOPS.items() if k in device.name), UNKNOWN_GPU_TFLOPS)
        return device.name, listed, "listed"
    load, cpus = machine_load() if load is None else load
    tflops, measured_at = cpu_matmul_tflops(workspace)
    return "CPU", tflops * cpu_share(load, cpus) / cpu_share(measured_at, cpus), "measured"


def cpu_matmul_tflops(workspace: Workspace) -> tuple[float, float]:
    """(fp32 matmul rate of this machine, the 1-minute load it was measured at), measured once (about
    0.3 s) and kept in the workspace per host name. A rate kept without its load is measured again:
    measured on an idle machine and read at load 11 on 2 cores, it made estimates 4-12x too short."""
    path = workspace.root / DEVICE_RATE_FILE
    saved = read_json(path, {}) or {}
    host = socket.gethostname()
    kept = saved.get(host)
    if isinstance(kept, dict) and isinstance(kept.get("tflops"), (int, float)) and isinstance(kept.get("load"), (int, float)):
        return float(kept["tflops"]), float(kept["load"])
    import torch

    a, b = torch.randn(512, 512), torch.randn(512, 512)
    a @ b  # the first call pays the kernel set-up
    started, count = time.perf_counter(), 0
    while time.perf_counter() - started < 0.3:
        a @ b
        count += 1
    tflops = 2 * 512**3 * count / (time.perf_counter() - started) / 1e12
    load = os.getloadavg()[0]
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, {**saved, host: {"tflops": round(tflops, 5), "load": round(load, 2)}})
    return tflops, load


def _from_flops(config: RunConfig, workspace: Workspace, steps: int, devices: list | None,
                load: tuple[float, int] | None = None) -> Estimate:
    flops = training_flops_per_token(config, workspace)
    tokens = tokens_per_row(config, workspace) * config.per_device_train_batch_size * config.gradient_accumulation_steps
    name, tflops, kind = device_rate(devices, workspace, load)
    low_share, mid_share, high_share = FLOPS_SHARE["cpu" if kind == "measured" else "gpu"]
    seconds = flops * tokens / (tflops * 1e12)  # at the full rate
    return Estimate(seconds_low=seconds / high_share * steps, seconds_mid=seconds / mid_share * steps,
                    seconds_high=seconds / low_share * steps, source="flops",
                    seconds_per_step=seconds / mid_share, steps=steps,
                    detail={"tokens": f"{tokens:.0f}", "gflops": f"{flops / 1e9:.3g}", "device": name,
                            "rate": f"{tflops:.3g}", "rate_kind": kind, "share": f"{mid_share:.0%}"})
