"""What the Train tab shows next to its form: detected hardware, the derived
step numbers and the device-memory estimate with its verdict.

Markdown strings from plain values (no gradio), so handler tests read them
directly. `msg(key, **values)` is the tab's translator for the current language.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from backend.config import (
    ABSURD_LEARNING_RATE,
    MANY_STEPS,
    WARMUP_MIN_STEPS,
    RunConfig,
    derived_numbers,
    split_sizes,
)
from backend.config_policy import ConfigError
from backend.data.pair_rows import CUT, measure_dataset, trained_rows
from backend.data.resolve import dataset_size, load_rows, resolve_dataset, split_rows
from backend.learning.entries import MAX_NEW_TOKENS
from backend.learning.questions import KEPT_QUESTIONS, MAX_IDENTITY, MAX_KEPT, MIN_HELD_OUT_ROWS, plan_counts
from backend.models.hardware import Device, resolve_precision, training_devices
from backend.models.loading import (
    DEMO_MODEL,
    folder_template_check,
    has_own_chat_template,
    inspect_model_folder,
    needs_build,
    resolve_model_path,
)
from backend.models.memory import architecture_for
from backend.models.memory_advice import fit_hint, run_memory
from backend.models.offline import OFFLINE_MODELS, offline_model_ready
from backend.models.presets import PRESETS
from backend.runs.workspace import Workspace
from backend.training.estimate import memory_row_tokens, row_lengths
from backend.training.replay import planned_replay, replay_applies, workspace_answers
from backend.training.threads import choose_threads
from ui.i18n import localize
from ui.views.grpo_plan import grpo_rows
from ui.views.scale_view import world_size

Msg = Callable[..., str]


def devices_from_state(state: list[dict] | None) -> list[Device] | None:
    return [Device(**d) for d in state] if state else None


def hardware_text(msg: Msg, devices: list[Device] | None) -> str:
    if not devices:
        return msg("train.hardware.detecting")
    lines = [msg("train.hardware.header")]
    for d in devices:
        flags = ", ".join(p for p, ok in (("fp32", True), ("bf16", d.supports_bf16), ("fp16", d.supports_fp16)) if ok)
        lines.append(f"- **{d.name}** (`{d.id}`): {d.memory_gb:.1f} GiB, {flags}")
    picked = training_devices("auto", devices)
    lines.append(msg("train.hardware.auto", precision=resolve_precision("auto", picked),
                     devices=", ".join(d.name for d in picked)))
    if all(d.id == "cpu" for d in picked):
        choice = choose_threads()  # what a worker starting now takes; it measures again when it starts
        if choice.idle < 0:
            lines.append(msg("train.hardware.threads_set", threads=choice.threads))
        else:
            lines.append(msg("train.hardware.threads", threads=choice.threads, idle=f"{choice.idle:.1f}",
                             cpus=choice.cpus))
    return "\n".join(lines)


def dataset_rows(dataset: str, workspace: Workspace, dataset_name: str | None = None, model: str = "",
                 chat_template: str = "auto", stage: str = "sft") -> dict:
    """{"rows": total rows, "has_eval": bool} of 'demo', a workspace dataset or a file; {"error":
    sentence} when it cannot be read. For a preference stage also "pairs" (the rows are chosen-rejected
    pairs) and, with the model on disk, "measured": each row's tokens as the worker counts them, so the
    Plan counts the rows the cutoff leaves out; without it the step numbers are an upper bound."""

    try:
        if stage == "grpo":  # prompts (any instruction data, or prompts alone), measured for the Plan's checks
            return grpo_rows(dataset, workspace, dataset_name, local_model_folder(model, workspace), chat_template)
        rows, has_eval = dataset_size(dataset, workspace, dataset_name)
        out = {"rows": rows, "has_eval": has_eval}
        if stage == "sft" and (answers := workspace_answers(model, chat_template, workspace)) is not None:
            out["replay_answers"] = answers  # the replay cache: the Plan counts replay's rows exactly
        if stage == "sft" and (folder := local_model_folder(model, workspace)) is not None:
            # The rows' tokens as the worker encodes them: the memory estimate sizes a step by them.
            out["lengths"] = row_lengths(dataset, workspace, folder, chat_template, dataset_name, out.get("replay_answers"))
        if stage != "sft" and dataset not in ("", "demo", "identity"):
            first = next(iter(load_rows(resolve_dataset(dataset, workspace), dataset_name=dataset_name)[0]), {})
            out["pairs"] = "chosen" in first
            folder = local_model_folder(model, workspace)
            if folder is not None:
                out["measured"] = measure_dataset(dataset, workspace, folder, chat_template, dataset_name)
    except (OSError, ValueError, KeyError, json.JSONDecodeError) as error:
        return {"error": str(error)}
    return out


def derived_text(msg: Msg, config: RunConfig, rows: dict | None, world_size: int = 1,
                 has_template: bool = True) -> str:
    """The step numbers of the Plan; `has_template`: the model has its own chat template (replay's auto rule)."""
    from backend.training.learned_stop import MIN_EPOCHS, PROBE_ROWS, goal_count

    if not rows or "rows" not in rows:
        return msg("train.derived.no_rows", error=(rows or {}).get("error", ""))
    train_rows = rows["rows"] if rows.get("has_eval") else split_sizes(rows["rows"], config.val_size)[0]
    if config.stage != "sft":
        return preference_text(msg, config, rows, train_rows, world_size)
    replay, exact = (planned_replay(config, train_rows, rows.get("replay_answers"))
                     if replay_applies(config, train_rows, has_template) else (0, False))
    numbers = derived_numbers(config, train_rows + replay, world_size)
    text = msg("train.derived", rows=train_rows + replay, **numbers) + "\n\n" + msg("train.derived.at_most")
    if replay:
        key = "train.derived.replay_cached" if exact else "train.derived.replay"
        text += "\n\n" + msg(key, replay=replay, rows=train_rows, setting=config.replay)
    if config.stop_when_learned and numbers["total_steps"] > numbers["steps_per_epoch"] * MIN_EPOCHS:
        probe = min(PROBE_ROWS, train_rows)
        text += "\n\n" + msg("train.derived.learned_stop", first=MIN_EPOCHS, probe=probe, goal=goal_count(probe),
                              epochs=numbers["epochs"])
    return text + learning_text(msg, config, rows) + _plan_warnings(msg, config, numbers)


def learning_text(msg: Msg, config: RunConfig, rows: dict) -> str:
    """What the learning report will ask and cost (backend/learning/questions.py plan_counts)."""
    from backend.training.learning_callback import BUDGET_SHARE

    if not config.learning_report:
        return ""
    learned, held_out = plan_counts(rows["rows"], bool(rows.get("has_eval")), config.val_size)
    identity = msg("train.derived.learning_identity", count=MAX_IDENTITY) if config.dataset == "identity" else ""
    text = "\n\n" + msg("train.derived.learning", learned=learned, identity=identity,
                        kept=min(MAX_KEPT, len(KEPT_QUESTIONS)), questions=len(KEPT_QUESTIONS),
                        limit=MAX_NEW_TOKENS, share=BUDGET_SHARE)
    if not held_out:
        text += " " + msg("train.derived.learning_rows", rows=rows["rows"], minimum=MIN_HELD_OUT_ROWS)
    return text


def preference_text(msg: Msg, config: RunConfig, rows: dict, train_rows: int, world_size: int) -> str:
    """The Plan of a preference stage: counted as the worker counts (kto: a row per answer; rows the
    cutoff leaves out) when the rows were measured, else an upper bound that says so."""

    measured = rows.get("measured")
    if measured is None:
        trained = train_rows * (2 if config.stage == "kto" and rows.get("pairs") else 1)
        numbers = derived_numbers(config, trained, world_size)
        text = msg("train.derived", rows=trained, **numbers) + "\n\n" + msg("train.derived.at_most")
    else:
        if not rows.get("has_eval"):
            measured = split_rows(measured, config.val_size, config.seed)[0]  # the worker's own split
        counted = trained_rows(measured, config.stage, config.cutoff_len)
        numbers = derived_numbers(config, counted.rows, world_size)
        text = msg("train.derived", rows=counted.rows, **numbers)
        left = counted.left_out.get(CUT, 0)
        unusable = sum(counted.left_out.values()) - left
        if left:
            text += "\n\n" + msg("train.derived.pairs_left_out", count=left, cutoff=config.cutoff_len,
                                  needed=counted.needed)
        if counted.cut:
            text += "\n\n" + msg("train.derived.pairs_cut", count=counted.cut, cutoff=config.cutoff_len,
                                  needed=counted.needed)
        if unusable:
            text += "\n\n" + msg("train.derived.pairs_unusable", count=unusable)
    if config.stage == "kto" and rows.get("pairs"):
        text += "\n\n" + msg("train.derived.kto_pairs", pairs=train_rows, rows=2 * train_rows)
    return text + _plan_warnings(msg, config, numbers)


def _plan_warnings(msg: Msg, config: RunConfig, numbers: dict) -> str:
    text = ""
    if config.learning_rate > ABSURD_LEARNING_RATE:
        text += "\n\n" + msg("train.derived.absurd_lr", lr=config.learning_rate)
    if numbers["total_steps"] > MANY_STEPS:  # the same threshold the worker warns at
        knob = "max_steps" if config.max_steps > 0 else "num_train_epochs"
        text += "\n\n" + msg("train.derived.many_steps", total_steps=numbers["total_steps"], knob=knob)
    if config.warmup_ratio > 0 and numbers["total_steps"] and not numbers["warmup_steps"]:
        text += "\n\n" + msg("train.derived.no_warmup", min_steps=WARMUP_MIN_STEPS)
    return text


def estimate_text(msg: Msg, config: RunConfig, workspace: Workspace, devices: list[Device] | None,
                  lang: str = "en", rows: dict | None = None) -> str:
    """The memory table and a fits / does-not-fit verdict on the run's device; a step sized by the
    tokens of the run's rows when `rows` (dataset_rows) measured them, else batch x cutoff_len."""

    try:
        arch = architecture_for(config.model_name_or_path, workspace.models_dir)
    except ValueError as error:
        return msg("train.estimate.unknown", reason=localize(error, lang))
    if not devices:
        return msg("train.hardware.detecting")
    try:
        targets = training_devices(config.devices, devices)
        precision = config.check_devices(targets)
    except (ValueError, ConfigError) as error:
        return f"⚠️ {localize(error, lang)}"
    device = min(targets, key=lambda d: d.memory_gb)  # DDP replicates: the smallest device decides
    # gradient_checkpointing "auto": the worker makes the same choice from the same estimate.
    # Sharded over every GPU of the run (all nodes / Ray workers): the verdict is per GPU.
    run = run_memory(config, arch, device, precision, world_size(config, devices), plan_row_tokens(config, rows, workspace))
    checkpointing = run.settings["gradient_checkpointing"]
    estimate = run.estimate()
    parts = ("weights", "adapters", "gradients", "optimizer", "activations", "runtime")
    parts += ("reference",) if estimate.reference_gb else ()
    parts += ("overlap",) if estimate.overlap_gb else ()  # negative: the rows still add up to the total
    rows = [(msg(f"train.estimate.{part}"), getattr(estimate, f"{part}_gb")) for part in parts]
    table = "\n".join(f"| {name} | {value:.2f} |" for name, value in rows)
    verdict_key = "train.estimate.fits" if estimate.fits(device.memory_gb) else "train.estimate.too_big"
    verdict = msg(verdict_key, total=estimate.total_gb, device=device.name, memory=device.memory_gb)
    if verdict_key == "train.estimate.too_big":
        verdict += " " + localize(fit_hint(run), lang)  # only changes that make it fit, with their estimates
    header = msg("train.estimate.header", params=estimate.total_params / 1e6,
                 trainable=estimate.trainable_params / 1e6, precision=precision)
    if estimate.sharding != "none":
        header += " " + msg("train.estimate.per_gpu", sharding=config.distributed, world=estimate.world_size)
    if estimate.cpu_offload_gb:
        header += " " + msg("train.estimate.cpu_offload", cpu=estimate.cpu_offload_gb)
    auto = "auto_" if config.gradient_checkpointing == "auto" else ""
    header += " " + msg(f"train.estimate.checkpointing.{auto}{'on' if checkpointing else 'off'}")
    return f"{verdict}\n\n{header}\n\n| | GiB |\n|---|---:|\n{table}\n| **{msg('train.estimate.total')}** | **{estimate.total_gb:.2f}** |"


def plan_row_tokens(config: RunConfig, rows: dict | None, workspace: Workspace) -> float | None:
    """The tokens a row of a step takes, from dataset_rows' measured lengths (None: not measured)."""
    if not rows or "rows" not in rows:
        return None
    train_rows = rows["rows"] if rows.get("has_eval") else split_sizes(rows["rows"], config.val_size)[0]
    return memory_row_tokens(config, rows, train_rows,
                             has_own_chat_template(config.model_name_or_path, workspace.models_dir))


def model_text(msg: Msg, model: str, workspace: Workspace, lang: str = "en") -> str:
    """A line about the chosen model; for a local folder, what is missing in it."""

    if model in ("demo", "demo-tiny"):
        return msg("train.model.demo")

    if model in OFFLINE_MODELS:
        offline, preset = OFFLINE_MODELS[model], PRESETS[model]
        state = "ready" if offline_model_ready(model, workspace.models_dir) else "pending"
        return msg("train.model.offline", label=offline.label, params=preset.num_parameters / 1e6,
                   context=preset.context_length, folder=f"models/{model}", state=msg(f"train.model.offline.{state}"),
                   hub_id=offline.hub_id, licence=offline.licence)
    if model in PRESETS:
        preset = PRESETS[model]
        return msg("train.model.preset", label=preset.label, params=preset.num_parameters / 1e9,
                   context=preset.context_length)

    report = inspect_model_folder(model)
    # The template the run gets (the Plan names the form's choice) and what would keep answers from stopping.
    notes = [localize(report["template"], lang)] if report["template"] else []
    notes += [f"⚠️ {localize(w, lang)}" for w in report["warning_messages"]]
    if report["ok"]:
        params = (report["num_parameters"] or 0) / 1e6
        return "\n\n".join([msg("train.model.ok", architecture=report["architecture"], params=params,
                                  context=report["context_length"]), *notes])
    return msg("train.model.problems") + "\n" + "\n".join(f"- {localize(p, lang)}" for p in report["problem_messages"])


def template_text(config: RunConfig, workspace: Workspace, lang: str = "en") -> str:
    """The Plan's chat template line for the form's model and chat_template: the sentence the worker
    logs, or why the choice does not fit. Empty for a model not on disk yet (a hub id, or an offline
    model before its conversion): the worker says it in train.log."""

    folder = local_model_folder(config.model_name_or_path, workspace)
    if folder is None:
        return ""
    check = folder_template_check(folder, config.chat_template)
    if check["problem"] is not None:
        return f"❌ {localize(check['problem'], lang)}"
    return localize(check["plan"], lang) if check["plan"] else ""


def check_template(config: RunConfig, workspace: Workspace) -> None:
    """Start refuses a chat_template that does not fit, with the worker's own sentence."""

    folder = local_model_folder(config.model_name_or_path, workspace)
    problem = folder_template_check(folder, config.chat_template)["problem"] if folder else None
    if problem is not None:
        raise ConfigError(problem)


def local_model_folder(model: str, workspace: Workspace):
    """The folder `model` names when it is already on disk (a folder, or the demo / an offline model
    built or converted in the workspace); None otherwise (nothing is built here)."""

    try:
        if needs_build(model, workspace.models_dir):
            return None
        path = Path(resolve_model_path(model or DEMO_MODEL, workspace.models_dir))
    except Exception:  # noqa: BLE001 - a wrong name: the model check above says why
        return None
    return path if path.is_dir() else None
