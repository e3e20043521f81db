"""Real LoRA / QLoRA / full runs on the demo model for the evaluate and export tests.

Built with peft and a short plain training loop (the optimizer steps, the
loss and the saved files are real; only the Trainer is left out to keep the
tests within their time budget). Each run folder has what the worker writes:
config.yaml, checkpoint-<step>/ with the adapter, the tokenizer,
trainer_state.json and the COMPLETE marker, final/, and eval records in
metrics.jsonl.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from backend.config_recipes import tiny_config
from backend.runs.files import append_metrics, list_checkpoints, mark_complete
from backend.runs.workspace import Workspace
from backend.storage.file_lock import file_lock

LORA = {"r": 8, "lora_alpha": 16, "lora_dropout": 0.0, "target_modules": "all-linear"}
# Bump when make_run changes: cached runs of another version are rebuilt.
RUNS_VERSION = "1"
RECIPES = {
    "lora": {"method": "lora", "saves": (8, 16)},
    "qlora": {"method": "qlora", "saves": (4,)},
    "full": {"method": "full", "saves": (2,), "lr": 1e-4},
}


@pytest.fixture(scope="module", autouse=False)
def one_torch_thread():
    """One intra-op thread while these tests run in the pytest process. The tiny demo model gains
    nothing from more, and on a shared 2-core box two spinning OpenMP threads made each forward
    pass ~10x slower (export test: 41 s with the default threads, 4.5 s with one)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def copy_run(run_dir: Path, workspace, run_id: str) -> Path:
    """A private copy of a finished run (e.g. the session's `trained_demo_run`) in `workspace`,
    so a test can write eval/ results without touching what other tests read."""
    target = workspace.runs_dir / run_id
    shutil.copytree(run_dir, target, symlinks=True)
    return target


def checkpoint_names(run_dir: Path) -> list[str]:
    from backend.runs.files import list_checkpoints

    return [p.name for p in list_checkpoints(run_dir)]


def cached_run(workspace, demo_model_dir: Path, recipe: str, run_id: str | None = None) -> Path:
    """A copy of a `RECIPES` run in workspace/runs/<run_id>, trained once and cached beside the
    demo model (runs are deterministic: fixed seeds, the same data order)."""
    demo_version = (Path(demo_model_dir) / "DEMO_VERSION").read_text(encoding="utf-8").strip()
    cache = Path(demo_model_dir).parent / "eval-export-runs" / f"{recipe}-v{RUNS_VERSION}-demo{demo_version}"
    if not (cache / "COMPLETE").is_file():
        cache.parent.mkdir(parents=True, exist_ok=True)
        with file_lock(cache.parent / f".{recipe}.lock"):
            if not (cache / "COMPLETE").is_file():
                _build_cached(cache, demo_model_dir, recipe)
    target = workspace.runs_dir / (run_id or f"{recipe}-run")
    shutil.copytree(cache / "run", target, symlinks=True)
    return target


def _build_cached(cache: Path, demo_model_dir: Path, recipe: str) -> None:
    staging = Path(tempfile.mkdtemp(prefix=f".{recipe}-", dir=cache.parent))
    try:
        scratch = Workspace(staging / "workspace").ensure()
        link_demo_model(scratch, demo_model_dir)
        built = make_run(scratch, "run", **RECIPES[recipe])
        shutil.move(str(built), str(staging / "run"))
        shutil.rmtree(staging / "workspace")
        (staging / "COMPLETE").write_text("ok\n", encoding="utf-8")
        shutil.rmtree(cache, ignore_errors=True)
        staging.rename(cache)
    finally:
        shutil.rmtree(staging, ignore_errors=True)




def _batches(tokenizer, rows, cutoff, batch_size):
    import torch

    from backend.data.encode import IGNORE_INDEX, encode_messages

    encoded = [encode_messages(tokenizer, r["messages"], cutoff) for r in rows]
    for start in range(0, len(encoded), batch_size):
        chunk = encoded[start:start + batch_size]
        width = max(len(e.input_ids) for e in chunk)
        pad = tokenizer.pad_token_id
        yield {
            "input_ids": torch.tensor([e.input_ids + [pad] * (width - len(e.input_ids)) for e in chunk]),
            "attention_mask": torch.tensor([[1] * len(e.input_ids) + [0] * (width - len(e.input_ids)) for e in chunk]),
            "labels": torch.tensor([e.labels + [IGNORE_INDEX] * (width - len(e.labels)) for e in chunk]),
        }


def _eval_loss(model, tokenizer, rows, cutoff):
    import torch

    with torch.no_grad():
        losses = [model(**batch).loss.item() for batch in _batches(tokenizer, rows, cutoff, 8)]
    return sum(losses) / len(losses)


def make_run(workspace, run_id: str, method: str = "lora", saves=(8, 16), lr: float = 3e-3) -> Path:
    """A run folder under workspace/runs with a checkpoint at each step in `saves` and final/."""
    import torch
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

    from backend.data.resolve import load_rows, resolve_dataset, split_rows
    from backend.models.loading import load_model, load_tokenizer, resolve_model_path

    config = tiny_config(method=method, learning_rate=lr, lora_r=LORA["r"], lora_alpha=LORA["lora_alpha"],
                       lora_dropout=0.0, max_steps=max(saves), per_device_train_batch_size=8, cutoff_len=96,
                       run_name=run_id)
    run_dir = workspace.runs_dir / run_id
    run_dir.mkdir(parents=True)
    config.save(run_dir / "config.yaml")
    base_path = resolve_model_path("demo", workspace.models_dir)
    tokenizer = load_tokenizer(base_path)
    torch.manual_seed(0)
    if method == "full":
        model = load_model(base_path, dtype=torch.float32)
    else:
        model = load_model(base_path, quantization_bits=config.quantization_bits, dtype=torch.float32,
                           device_map={"": "cpu"} if config.quantization_bits else None)
        if config.quantization_bits:
            model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
        model = get_peft_model(model, LoraConfig(task_type="CAUSAL_LM", **LORA))
    rows, _ = load_rows(resolve_dataset(config.dataset, workspace))
    train_rows, eval_rows = split_rows(rows, config.val_size, config.seed)
    batches = list(_batches(tokenizer, train_rows, config.cutoff_len, config.per_device_train_batch_size))
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    history = []
    model.train()
    for step in range(1, max(saves) + 1):
        loss = model(**batches[(step - 1) % len(batches)]).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        history.append({"step": step, "loss": loss.item()})
        append_metrics(run_dir, {"time": 0, "step": step, "epoch": 0.0, "kind": "train", "loss": loss.item()})
        if step in saves:
            model.eval()
            eval_loss = _eval_loss(model, tokenizer, eval_rows[:16], config.cutoff_len)
            model.train()
            history.append({"step": step, "eval_loss": eval_loss})
            append_metrics(run_dir, {"time": 0, "step": step, "epoch": 0.0, "kind": "eval", "eval_loss": eval_loss})
            _save(model, tokenizer, run_dir / f"checkpoint-{step}", step, history)
    shutil.copytree(run_dir / f"checkpoint-{max(saves)}", run_dir / "final")
    (run_dir / "final" / "trainer_state.json").unlink()
    (run_dir / "summary.json").write_text(json.dumps({"global_step": max(saves)}), encoding="utf-8")
    return run_dir


def _save(model, tokenizer, folder: Path, step: int, history: list) -> None:
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "optimizer.pt").write_bytes(b"resume-only state")  # must not be exported
    state = {"global_step": step, "log_history": list(history)}
    (folder / "trainer_state.json").write_text(json.dumps(state), encoding="utf-8")
    mark_complete(folder)


def link_demo_model(workspace, demo_model_dir: Path) -> None:
    (workspace.models_dir / "demo").symlink_to(demo_model_dir, target_is_directory=True)


def evaluate_tab_context(folder: Path, demo_model_dir: Path):
    """The Evaluate tab's context over a workspace in `folder` whose run-a is the cached LoRA run."""
    from ui.context import UIContext
    from ui.i18n import merge_texts
    from ui.tabs import evaluate

    workspace = Workspace(folder / "ws").ensure()
    link_demo_model(workspace, demo_model_dir)
    cached_run(workspace, demo_model_dir, "lora", "run-a")
    return UIContext(workspace=workspace, texts=merge_texts(evaluate.TEXT), i18n=None)


def hold_back_the_end(run_dir: Path, aside: Path) -> Callable[[], None]:
    """Move the run's files after its first checkpoint (the later checkpoints, final/, summary.json)
    into `aside`, as the run was when a page opened mid-run; the returned call puts them back (the
    run went on and ended)."""
    first = list_checkpoints(run_dir)[0].name
    later = [p for p in Path(run_dir).iterdir()
             if (p.name.startswith("checkpoint-") and p.name != first) or p.name in ("final", "summary.json")]
    aside.mkdir(parents=True, exist_ok=True)
    for path in later:
        path.rename(aside / path.name)
    return lambda: [(aside / path.name).rename(path) for path in later]
