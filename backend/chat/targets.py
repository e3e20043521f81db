"""What can be chatted with: the base model and each complete checkpoint of
each run, with its step and eval loss. Read from the run folders on disk
(docs/CONTRACTS.md, the run directory), so lists refresh as training writes new checkpoints."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from backend.messages import UserError, msg
from backend.runs.files import (
    CONFIG_FILE,
    FINAL_DIR,
    STATUS_FILE,
    SUMMARY_FILE,
    is_complete,
    list_checkpoints,
    read_status,
)
from backend.storage.atomic_files import read_json

BASE = "base"
GGUF = "gguf"   # an exported GGUF file, answered by llama.cpp (backend/chat/gguf_targets.py)
ADAPTER_CONFIG = "adapter_config.json"
TRAINER_STATE = "trainer_state.json"


class TargetError(UserError, ValueError):
    """A checkpoint cannot be chatted with; the message says why and what to do."""


@dataclass(frozen=True)
class ChatTarget:
    """One column: the base model, a checkpoint on top of it, or a GGUF file exported from one."""
    model: str                      # base model folder (resolved path) or hub id; a bare GGUF file: the file
    checkpoint: str | None = None   # checkpoint folder or GGUF file; None = the base model itself
    kind: str = BASE                # "base" | "lora" | "full" | "gguf"
    run_id: str | None = None
    name: str = BASE                # "base", "checkpoint-40", "final", or a folder name
    step: int | None = None
    eval_loss: float | None = None
    quantization_bits: int | None = None
    trust_remote_code: bool = False
    chat_template: str = "auto"     # the run's RunConfig.chat_template: base and checkpoints render alike
    # GGUF only: the export folder whose tokenizer renders the prompt (the run's template; None: the
    # file's own tokenizer.chat_template), the checkpoint it was exported from, and its level (q4_k_m).
    tokenizer: str | None = None
    source: str | None = None
    level: str | None = None
    # A model on this machine (backend/chat/local_targets.py): the tool that keeps it ("ollama", "hf").
    origin: str | None = None

    @property
    def key(self) -> str:
        """Stable id of this column's model (also the blind-vote label inside its run)."""
        return f"{self.run_id}/{self.name}" if self.run_id and self.checkpoint else self.name

    @property
    def label(self) -> str:
        return f"{self.run_id} · {self.name}" if self.run_id and self.checkpoint else self.name

    def adapter_name(self) -> str:
        """A peft adapter name from run + step: module-safe, unique per folder."""
        digest = hashlib.sha1(str(Path(self.checkpoint).resolve()).encode()).hexdigest()[:8]
        readable = re.sub(r"[^0-9A-Za-z_]", "_", f"{self.run_id or 'ckpt'}_{self.name}")
        return f"{readable}_{digest}"


def chat_target_kind(folder: Path) -> str:
    """ChatTarget.kind of a checkpoint folder: 'lora' (a peft adapter) or 'full' (a whole model)."""
    folder = Path(folder)
    if (folder / ADAPTER_CONFIG).is_file():
        return "lora"
    if (folder / "config.json").is_file():
        return "full"
    raise TargetError(msg("chat.target.not_checkpoint", folder=str(folder)))


def in_run_folder(folder: Path) -> bool:
    parent = Path(folder).resolve().parent
    return (parent / STATUS_FILE).is_file() or (parent / CONFIG_FILE).is_file()


def eval_loss_at(folder: Path, step: int | None) -> float | None:
    """The last eval_loss logged at or before `step`, from the folder's trainer_state.json."""
    state = read_json(Path(folder) / TRAINER_STATE, default={}) or {}
    best = None
    for entry in state.get("log_history", []):
        if "eval_loss" in entry and (step is None or entry.get("step", 0) <= step):
            best = entry["eval_loss"]
    return best


def _final_step(run_dir: Path, final: Path) -> int | None:
    state = read_json(final / TRAINER_STATE, default={}) or {}
    summary = read_json(run_dir / SUMMARY_FILE, default={}) or {}
    for value in (state.get("global_step"), summary.get("global_step"), summary.get("steps")):
        if isinstance(value, int):
            return value
    return None


@dataclass(frozen=True)
class RunChoices:
    run_id: str
    run_dir: Path
    state: str
    model: str                       # resolved base model
    targets: tuple[ChatTarget, ...]  # base first, then complete checkpoints by step, then final


def run_model_settings(run_dir: Path) -> dict:
    config = yaml.safe_load((Path(run_dir) / CONFIG_FILE).read_text(encoding="utf-8")) or {}
    return {
        "model_name_or_path": str(config.get("model_name_or_path", "demo")),
        "quantization_bits": config.get("quantization_bits"),
        "trust_remote_code": bool(config.get("trust_remote_code", False)),
        "chat_template": str(config.get("chat_template") or "auto"),
    }


def run_choices(run_dir: Path, resolve_model) -> RunChoices:
    """The base and every complete checkpoint of one run. `resolve_model(name)` maps
    config.yaml's model_name_or_path to a loadable path (e.g. 'demo' -> its folder)."""
    run_dir = Path(run_dir)
    settings = run_model_settings(run_dir)
    model = resolve_model(settings["model_name_or_path"])
    common = {"model": model, "run_id": run_dir.name, "quantization_bits": settings["quantization_bits"],
              "trust_remote_code": settings["trust_remote_code"], "chat_template": settings["chat_template"]}
    targets = [ChatTarget(**{**common, "run_id": None})]
    folders = [(p, p.name, int(p.name.rsplit("-", 1)[1])) for p in list_checkpoints(run_dir, complete_only=True)]
    final = run_dir / FINAL_DIR
    if is_complete(final):
        folders.append((final, FINAL_DIR, _final_step(run_dir, final)))
    for folder, name, step in folders:
        try:
            kind = chat_target_kind(folder)
        except TargetError:
            continue  # a complete folder with neither adapter nor weights: nothing to offer
        loss = eval_loss_at(folder, step) if name != FINAL_DIR else _final_eval_loss(run_dir, folder, step)
        targets.append(ChatTarget(**common, checkpoint=str(folder), kind=kind, name=name, step=step, eval_loss=loss))
    state = read_status(run_dir).get("state", "unknown")
    return RunChoices(run_dir.name, run_dir, state, model, tuple(targets))


def _final_eval_loss(run_dir: Path, final: Path, step: int | None) -> float | None:
    loss = eval_loss_at(final, step)
    if loss is None:
        checkpoints = list_checkpoints(run_dir, complete_only=True)
        loss = eval_loss_at(checkpoints[-1], step) if checkpoints else None
    return loss


def list_runs(runs_dir: Path) -> list[Path]:
    """Run folders (those with a config.yaml), newest first."""
    runs = [p for p in Path(runs_dir).glob("*") if (p / CONFIG_FILE).is_file()]
    return sorted(runs, key=lambda p: p.stat().st_mtime, reverse=True)


def check_checkpoint_folder(folder: str | Path) -> Path:
    """The checkpoint folder given by path, or TargetError when it is missing or not complete yet."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise TargetError(msg("chat.target.missing", folder=str(folder)))
    if in_run_folder(folder) and not is_complete(folder):
        raise TargetError(msg("chat.target.incomplete", folder=str(folder)))
    return folder


def target_for_folder(model: str, folder: str | Path, quantization_bits: int | None = None) -> ChatTarget:
    """A column for a checkpoint folder given by path (the command line)."""
    folder = check_checkpoint_folder(folder)
    kind = chat_target_kind(folder)
    step = int(folder.name.rsplit("-", 1)[1]) if re.fullmatch(r"checkpoint-\d+", folder.name) else None
    run_id = folder.resolve().parent.name if in_run_folder(folder) else None
    config_file = folder.resolve().parent / CONFIG_FILE
    template = run_model_settings(folder.resolve().parent)["chat_template"] if config_file.is_file() else "auto"
    return ChatTarget(model=model, checkpoint=str(folder), kind=kind, run_id=run_id, name=folder.name,
                      step=step, eval_loss=eval_loss_at(folder, step), quantization_bits=quantization_bits,
                      chat_template=template)
