"""The choices the Chat tab offers: the base of each distinct model, every
complete checkpoint of the chosen runs and the GGUF files exported from them,
keyed by a short string a dropdown can hold. Re-read from disk on each call,
so new checkpoints and exports show up."""

from __future__ import annotations

from pathlib import Path

from backend.chat.gguf_targets import run_gguf_targets
from backend.chat.local_targets import LOCAL, local_targets
from backend.chat.targets import BASE, GGUF, ChatTarget, RunChoices, TargetError, run_choices
from backend.models.local.places import SOURCE_LABELS

# At most this many columns side by side: the base and four checkpoints.
MAX_COLUMNS = 5


def catalog(runs_dir: Path, run_ids: list[str], resolve_model, exports_dir: Path | None = None) -> dict[str, ChatTarget]:
    """value -> target for the chosen runs, base(s) first, in a stable order.

    Values: "base@<run>" (one per distinct base model), "<run>/<checkpoint>" and, for the GGUF
    files exported from the run into `exports_dir`, "<run>/gguf/<file stem>"."""
    bases: dict[str, ChatTarget] = {}
    checkpoints: dict[str, ChatTarget] = {}
    files: dict[str, ChatTarget] = {}
    for run_id in run_ids:
        run_dir = Path(runs_dir) / run_id
        try:
            choices: RunChoices = run_choices(run_dir, resolve_model)
        except (OSError, ValueError, TargetError):
            continue   # a run folder mid-creation or with an unreadable config: offer nothing yet
        base = choices.targets[0]
        if all(b.model != base.model for b in bases.values()):
            bases[f"{BASE}@{run_id}"] = base
        for target in choices.targets[1:]:
            checkpoints[f"{run_id}/{target.name}"] = target
        for target in run_gguf_targets(exports_dir, choices) if exports_dir else []:
            files[f"{run_id}/{GGUF}/{target.name}"] = target
    return {**bases, **checkpoints, **files}


def choice_label(value: str, target: ChatTarget, several_bases: bool) -> str:
    if target.origin:
        return f"{target.name} · {_origin(target)}"
    if target.kind == BASE:
        return f"base · {Path(target.model).name}" if several_bases else "base"
    if target.kind == GGUF:
        return f"{target.run_id} / {_export_name(target)} · {target.level} GGUF (from {target.source})"
    extra = f" · step {target.step}" if target.step is not None and target.name == "final" else ""
    loss = f" · eval loss {target.eval_loss:.4f}" if target.eval_loss is not None else ""
    full = " · full" if target.kind == "full" else ""
    return f"{target.run_id} / {target.name}{extra}{loss}{full}"


def dropdown_choices(targets: dict[str, ChatTarget]) -> list[tuple[str, str]]:
    several = sum(t.kind == BASE for t in targets.values()) > 1
    return [(choice_label(value, t, several), value) for value, t in targets.items()]


def header(target: ChatTarget) -> str:
    """Markdown above a column: which model, its step and eval loss."""
    if target.origin:
        return f"**{target.name}** · {_origin(target)}"
    if target.kind == BASE:
        return f"**base** · {Path(target.model).name}"
    if target.kind == GGUF:
        step = f" · step {target.step}" if target.step is not None else ""
        return (f"**{_export_name(target)} · {target.level}** · GGUF of {target.run_id} / {target.source}{step} · "
                "llama.cpp, CPU")
    step = f"step {target.step}" if target.step is not None else "step ?"
    loss = f"eval loss {target.eval_loss:.4f}" if target.eval_loss is not None else "no eval loss logged"
    kind = " · full weights" if target.kind == "full" else ""
    return f"**{target.run_id} / {target.name}** · {step} · {loss}{kind}"


def _origin(target: ChatTarget) -> str:
    """Where a model on this machine comes from and what answers it: "Ollama · GGUF, llama.cpp (CPU)"."""
    engine = "GGUF, llama.cpp (CPU)" if target.kind == GGUF else "transformers"
    return f"{SOURCE_LABELS.get(target.origin, target.origin)} · {engine}"


def _export_name(target: ChatTarget) -> str:
    """The export folder a GGUF file sits in (exports/<name>/gguf/<file>)."""
    return Path(target.checkpoint).parent.parent.name


def run_ids_of(values: list[str]) -> list[str]:
    """The runs a selection draws checkpoints from (for recording votes); a model on this machine
    belongs to no run."""
    runs = []
    for value in values:
        if value.startswith(LOCAL):
            continue
        run_id = value.split("@", 1)[1] if value.startswith(f"{BASE}@") else value.split("/", 1)[0]
        if run_id not in runs:
            runs.append(run_id)
    return runs


def local_choices(workspace_root: Path) -> list[tuple[str, str]]:
    """(label, path) of each chattable model (the Serve panel's list)."""
    return [(choice_label(value, target, False), target.model)
            for value, target in local_targets(workspace_root).items()]
