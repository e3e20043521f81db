"""The README.md model card written next to an exported model: base model,
data and its cleaning (the workspace dataset's meta.json), hyperparameters
(config.yaml) and evaluation results (eval/<checkpoint>/metrics.json)."""

from __future__ import annotations

from pathlib import Path

import yaml

from backend.messages import CATALOGUE, Message, render_message
from backend.runs.files import CONFIG_FILE
from backend.runs.workspace import Workspace
from backend.storage.atomic_files import read_json

HYPERPARAMETERS = (
    "method", "quantization_bits", "lora_r", "lora_alpha", "lora_dropout", "lora_target", "use_rslora", "use_dora",
    "precision", "learning_rate", "num_train_epochs", "max_steps", "per_device_train_batch_size",
    "gradient_accumulation_steps", "lr_scheduler_type", "warmup_ratio", "weight_decay", "max_grad_norm",
    "cutoff_len", "val_size", "train_on_prompt", "neftune_noise_alpha", "seed",
)
# backend/export/verify.py's verdicts, as the card words them.
VERDICTS = {"passed": "passed", "ties": "not passed (16-bit rounding ties only)", "failed": "FAILED"}
EVAL_COLUMNS = ("eval_loss", "perplexity", "bleu", "rouge1", "rouge2", "rougeL", "exact_match")


def run_config(run_dir: Path | None) -> dict:
    if run_dir is None:
        return {}
    try:
        return yaml.safe_load((Path(run_dir) / CONFIG_FILE).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return {}


def dataset_meta(config: dict, workspace: Workspace | None) -> dict | None:
    name = config.get("dataset")
    # A workspace dataset is a bare name; a run trained on a file path ('/data/rows.json') has no meta.json
    # (joined to datasets/ the path would name the file itself, and reading 'rows.json/meta.json' fails).
    if not name or workspace is None or Path(str(name)).name != str(name):
        return None
    return read_json(workspace.datasets_dir / str(name) / "meta.json", default=None)


def build_model_card(*, title: str, base_model, kind: str, checkpoint: Path, run_dir: Path | None,
                     workspace: Workspace | None, export_info: dict) -> str:
    """`base_model`: outputs.BaseModel (or None). The card's `base_model` is its hub id, never a
    local path (a folder on this machine means nothing to a reader); a local-only base is named in the text."""
    config = run_config(run_dir)
    library = "peft" if kind == "adapter" else "transformers"
    tags = ["finetune-studio", config.get("method", "fine-tuned")] + (["merged-lora"] if kind == "merged" else [])
    hub_id = getattr(base_model, "hub_id", None)
    meta = {"base_model": hub_id} if hub_id else {}
    front = yaml.safe_dump({**meta, "library_name": library, "tags": tags}, sort_keys=False, allow_unicode=True)
    if hub_id:
        origin = f"Fine-tuned from `{hub_id}`"
    elif base_model is not None:
        origin = f"Fine-tuned from the local model `{Path(base_model.name).name}`"
    else:
        origin = "Fine-tuned"
    parts = [f"---\n{front}---\n", f"# {title}\n",
             f"{origin} with FineTune Studio ({config.get('method', 'unknown method')}), "
             f"exported from `{Path(checkpoint).name}`" + (f" of run `{run_dir.name}`." if run_dir else "."),
             _export_section(kind, export_info), _data_section(config, dataset_meta(config, workspace)),
             _hyper_section(config), _eval_section(run_dir, Path(checkpoint).name),
             _usage_section(kind, hub_id or "path/to/the/base/model")]
    return "\n".join(p for p in parts if p) + "\n"


def _export_section(kind: str, info: dict) -> str:
    lines = ["\n## Export\n", f"- Kind: {kind}"]
    if info.get("dtype"):
        lines.append(f"- Weights dtype: {info['dtype']}")
    if info.get("note"):
        lines.append(f"- {info['note']}")
    verification = info.get("verification")
    if verification:
        verdict = VERDICTS.get(verification.get("verdict"), "passed" if verification.get("passed") else "FAILED")
        lines.append(f"- Verification {verdict}: {verification.get('summary', '')}")
    return "\n".join(lines)


def _data_section(config: dict, meta: dict | None) -> str:
    if not config.get("dataset"):
        return ""
    lines = ["\n## Data\n", f"- Dataset: `{config['dataset']}`"]
    for key, value in (meta or {}).items():
        lines.extend(_describe(key, value, indent=""))
    if meta is None:
        lines.append("- No workspace dataset record (meta.json): the data was used as given, without recorded cleaning.")
    return "\n".join(lines)


def _describe(key: str, value, indent: str) -> list[str]:
    """meta.json as nested bullets, whatever its exact shape."""
    if isinstance(value, dict):
        lines = [f"{indent}- {key}:"]
        for sub_key, sub_value in value.items():
            lines.extend(_describe(str(sub_key), sub_value, indent + "  "))
        return lines
    if isinstance(value, list):
        lines = [f"{indent}- {key}:" + ("" if value else " none")]
        for item in value[:50]:
            if isinstance(item, dict):
                lines.append(f"{indent}  - " + ", ".join(f"{k}: {v}" for k, v in item.items()))
            else:
                lines.append(f"{indent}  - {item}")
        return lines
    return [f"{indent}- {key}: {value}"]


def _hyper_section(config: dict) -> str:
    if not config:
        return ""
    rows = [f"| {name} | {config[name]} |" for name in HYPERPARAMETERS if config.get(name) is not None]
    return "\n## Training hyperparameters\n\n| setting | value |\n|---|---|\n" + "\n".join(rows)


def _eval_section(run_dir: Path | None, checkpoint_name: str) -> str:
    if run_dir is None or not (Path(run_dir) / "eval").is_dir():
        return ""
    rows = []
    for name in ("base", checkpoint_name):
        metrics = read_json(Path(run_dir) / "eval" / name / "metrics.json", default=None)
        if metrics:
            cells = [_fmt(metrics.get(c)) for c in EVAL_COLUMNS]
            rows.append(f"| {name} | {metrics.get('num_samples', '')} | " + " | ".join(cells) + " |")
    if not rows:
        return ""
    header = "| model | samples | " + " | ".join(EVAL_COLUMNS) + " |\n|" + "---|" * (len(EVAL_COLUMNS) + 2)
    note = ("Greedy answers scored against the references; BLEU from sacrebleu, ROUGE F-measures with CJK "
            "characters as tokens, scores 0-100.")
    return f"\n## Evaluation\n\n{header}\n" + "\n".join(rows) + f"\n\n{note}"


def _fmt(value) -> str:
    return f"{value:.4g}" if isinstance(value, (int, float)) else ""


def _usage_section(kind: str, base_model: str) -> str:
    if kind == "adapter":
        code = ("from peft import PeftModel\nfrom transformers import AutoModelForCausalLM, AutoTokenizer\n\n"
                f"base = AutoModelForCausalLM.from_pretrained({base_model!r})\n"
                "model = PeftModel.from_pretrained(base, \"path/to/this/folder\")\n"
                "tokenizer = AutoTokenizer.from_pretrained(\"path/to/this/folder\")")
    else:
        code = ("from transformers import AutoModelForCausalLM, AutoTokenizer\n\n"
                "model = AutoModelForCausalLM.from_pretrained(\"path/to/this/folder\")\n"
                "tokenizer = AutoTokenizer.from_pretrained(\"path/to/this/folder\")")
    return f"\n## Use\n\n```python\n{code}\n```"


def gguf_lines(gguf: dict) -> list[str]:
    """The GGUF export in plain lines: files, the check against the adapter, each level's KL and top-1."""

    levels = gguf["checks"]["levels"]
    lines = [f"GGUF ({'check passed' if gguf['passed'] else 'CHECK FAILED: the files are kept for inspection'}): "
             + render_message(Message.from_dict(gguf["checks"]["summary"]), CATALOGUE)]
    for name, info in gguf["files"].items():
        level = levels.get(name, {})
        quality = ""
        if level.get("mean_kl") is not None:
            quality = f", mean KL vs f16 {level['mean_kl']:.4g}, top-1 agreement {level['top1_agreement']:.1%}"
        verdict = "" if "failures" not in level else " - passed" if level["passed"] else " - FAILED: " + " ".join(
            render_message(Message.from_dict(f), CATALOGUE) for f in level["failures"])
        lines.append(f"  {info['file']}: {info['bytes'] / 1e6:.1f} MB, {level.get('equal', 0)}/{level.get('total', 0)} "
                     f"greedy answers equal to the adapter's, {level.get('agree_first_8', 0)} agree over the first "
                     f"8 tokens{quality}{verdict}")
    if gguf["checks"].get("levels_summary"):  # reports written before each level was judged have none
        lines.append(render_message(Message.from_dict(gguf["checks"]["levels_summary"]), CATALOGUE))
    if gguf.get("lora"):
        lines.append(f"  {gguf['lora']['file']}: the adapter alone ({gguf['lora']['outtype']})")
    lines.append(f"Ollama: {gguf['ollama']}")
    if gguf.get("template_note"):
        lines.append(render_message(Message.from_dict(gguf["template_note"]), CATALOGUE))
    return lines


def gguf_section(gguf: dict) -> str:
    body = "\n".join(f"- {line.strip()}" for line in gguf_lines(gguf))
    return (f"## GGUF (llama.cpp {gguf['llama_cpp_version']}, Ollama)\n\n{body}\n\n"
            "Checked by running each file in llama.cpp: greedy answers to the run's held-out prompts against "
            "the adapter's (transformers + peft), and each level's next-token distributions against the f16 "
            "file's over the held-out answers.\n")
