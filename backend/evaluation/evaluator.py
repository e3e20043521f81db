"""Per-checkpoint evaluation: eval loss / perplexity over the assistant tokens,
and greedy answers scored with BLEU, ROUGE-1/2/L and exact match.

    python -m backend.evaluate --run RUN [--checkpoint NAME ...] [--data FILE] [--json] [--max-samples N]
    python -m backend.evaluate --run RUN --benchmark TASK [TASK ...]   # lm-evaluation-harness (benchmarks.py)

Results land in the run folder, one folder per checkpoint ("base" for the
base model): eval/<checkpoint>/metrics.json and predictions.jsonl, so they
survive restarts. The UI starts this module as a detached background process
(`start_evaluation`) and polls eval/progress.json; it never evaluates inside
a UI event.

The base model is loaded once; LoRA checkpoints are attached to it as named
adapters (the base is scored with the adapters disabled). QLoRA runs are
evaluated on the same 4/8-bit base they were trained on. Loss tokens come
from backend.data.encode, the code path training uses, so eval_loss here is
comparable with the worker's eval_loss.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import time
from pathlib import Path

from backend.config import RunConfig
from backend.evaluation.results import BASE, EVAL_DIR, PROGRESS_FILE, checkpoint_choices, checkpoint_folder, step_of
from backend.evaluation.text_scores import corpus_scores, row_scores
from backend.messages import UserError, message_of, msg
from backend.runs.files import CONFIG_FILE
from backend.runs.jobs import COMPLETED, FAILED, RUNNING, launch, read_progress, write_progress
from backend.runs.workspace import Workspace
from backend.storage.atomic_files import atomic_write_json, atomic_write_text

DEFAULT_MAX_NEW_TOKENS = 128
DEFAULT_BATCH_SIZE = 8


class EvalError(UserError, RuntimeError):
    """An evaluation that cannot run; the message says why and what to do."""


# ---------------------------------------------------------------- the evaluation set

def held_out_rows(run_dir: Path, workspace: Workspace | None = None) -> list[dict]:
    """The run's eval split, recomputed exactly as the worker does (same loader, seed and share)."""
    from backend.data.resolve import load_rows, resolve_dataset, split_rows

    config = RunConfig.load(Path(run_dir) / CONFIG_FILE)
    workspace = workspace or Workspace.for_run_dir(run_dir)
    rows, eval_rows = load_rows(resolve_dataset(config.dataset, workspace))
    if eval_rows is None and config.val_size > 0:
        _, eval_rows = split_rows(rows, config.val_size, config.seed)
    if not eval_rows:
        raise EvalError(msg("evaluate.no_split", run=Path(run_dir).name, val_size=config.val_size))
    return eval_rows


def evaluation_rows(run_dir: Path, data: Path | None, max_samples: int | None) -> tuple[list[dict], str]:
    """(rows that have an answer to score, a description of where they came from)."""
    if data is not None:
        from backend.data.errors import DataError
        from backend.data.load import load_rows

        try:
            rows, label = load_rows(data).rows, f"file {Path(data).name}"
        except DataError as error:
            raise EvalError(msg("evaluate.bad_file", name=Path(data).name, error=error)) from None
    else:
        rows, label = held_out_rows(run_dir), "the run's held-out split"
    if rows and "messages" not in rows[0]:  # preference data: pairs are scored, not answers
        from backend.evaluation.pair_scores import pair_rows

        rows = pair_rows(rows)
        if not rows:
            raise EvalError(msg("evaluate.no_pairs", label=label))
        return (rows[:max_samples] if max_samples else rows), label
    rows = [r for r in rows if any(m["role"] == "assistant" for m in r["messages"])]
    if not rows:
        raise EvalError(msg("evaluate.no_answers", label=label))
    if max_samples:
        rows = rows[:max_samples]
    return rows, label


def _rows_hash(rows: list[dict]) -> str:
    return hashlib.sha256(json.dumps(rows, ensure_ascii=False, sort_keys=True).encode()).hexdigest()[:16]


# ---------------------------------------------------------------- models

class ModelSet:
    """The base model loaded once; checkpoints attached by name as they are asked for."""

    def __init__(self, run_dir: Path, config: RunConfig):
        import torch

        from backend.models.chat_templates import apply_for_model, fit_model
        from backend.models.loading import load_model, load_tokenizer, resolve_model_path

        self.run_dir, self.config = run_dir, config
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.dtype = torch.bfloat16 if self.device == "cuda" and torch.cuda.is_bf16_supported() else torch.float32
        self.base_path = resolve_model_path(config.model_name_or_path, Workspace.for_run_dir(run_dir).models_dir)
        self.tokenizer = load_tokenizer(self.base_path, trust_remote_code=config.trust_remote_code)
        self.template = apply_for_model(self.tokenizer, config.chat_template, self.base_path)  # as the run trained
        self._load = load_model
        self.base = self._load_plain(self.base_path, config.quantization_bits)
        fit_model(self.base, self.template, self.tokenizer)
        self.peft = None

    def _load_plain(self, path, bits=None):
        device_map = {"": self.device} if self.device == "cuda" or bits else None
        return self._load(path, quantization_bits=bits, dtype=self.dtype, device_map=device_map,
                          trust_remote_code=self.config.trust_remote_code).eval()

    def model_for(self, name: str):
        """A model answering as checkpoint `name` ("base": the base model)."""
        if name == BASE:
            if self.peft is not None:
                self.peft.base_model.disable_adapter_layers()
                return self.peft
            return self.base
        folder = checkpoint_folder(self.run_dir, name)
        if not (folder / "adapter_config.json").is_file():  # a full fine-tuning checkpoint
            return self._load_plain(folder)
        return self.adapter_model(folder, name.replace("-", "_"))

    def adapter_model(self, folder: Path, adapter: str):
        """The base with the LoRA adapter in `folder` attached as `adapter` (loaded once) and active."""
        from peft import PeftModel

        if self.peft is None:
            self.peft = PeftModel.from_pretrained(self.base, str(folder), adapter_name=adapter).eval()
        elif adapter not in self.peft.peft_config:
            self.peft.load_adapter(str(folder), adapter_name=adapter)
        self.peft.base_model.enable_adapter_layers()
        self.peft.set_adapter(adapter)
        return self.peft


# ---------------------------------------------------------------- scoring

def eval_loss(model, tokenizer, rows: list[dict], cutoff_len: int, batch_size: int, on_batch=None) -> tuple[float, int]:
    """Mean cross-entropy per assistant token (nats) over all rows, and the token count.
    `on_batch(rows_done)` is called after each batch."""
    import torch

    from backend.data.encode import IGNORE_INDEX, encode_messages

    encoded = [encode_messages(tokenizer, r["messages"], cutoff_len) for r in rows]
    device = next(model.parameters()).device
    total, count = 0.0, 0
    for start in range(0, len(encoded), batch_size):
        chunk = encoded[start:start + batch_size]
        width = max(len(e.input_ids) for e in chunk)
        pad = tokenizer.pad_token_id
        ids = torch.tensor([e.input_ids + [pad] * (width - len(e.input_ids)) for e in chunk], device=device)
        labels = torch.tensor([e.labels + [IGNORE_INDEX] * (width - len(e.labels)) for e in chunk], device=device)
        mask = torch.tensor([[1] * len(e.input_ids) + [0] * (width - len(e.input_ids)) for e in chunk], device=device)
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=mask).logits.float()
        # Token t predicts token t+1: the same shift the causal-LM loss applies.
        losses = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                                   labels[:, 1:].reshape(-1), ignore_index=IGNORE_INDEX,
                                                   reduction="sum")
        total += losses.item()
        count += int((labels[:, 1:] != IGNORE_INDEX).sum())
        if on_batch:
            on_batch(start + len(chunk))
    return (total / count if count else float("nan")), count


def answer_metrics(model, tokenizer, rows: list[dict], cutoff_len: int, settings: dict, report=None
                   ) -> tuple[dict, list[dict]]:
    """(metrics, one prediction record per row) of `model` on rows with a reference answer:
    eval loss over the assistant tokens, then greedy answers scored against the references,
    and `ended`, the percentage of answers that stopped on a stop token before max_new_tokens.

    `report(units)` gets the work done so far: rows scored for loss, then rows answered."""
    report = report or (lambda units: None)
    from backend.evaluation.greedy import greedy_answers_ended, prompt_and_reference

    loss, tokens = eval_loss(model, tokenizer, rows, cutoff_len, settings["batch_size"], report)
    pairs = [prompt_and_reference(r["messages"]) for r in rows]
    finished = greedy_answers_ended(model, tokenizer, [p for p, _ in pairs], settings["max_new_tokens"],
                                    settings["batch_size"], max_prompt_tokens=cutoff_len,
                                    on_batch=lambda done: report(len(rows) + done))
    answers, references = [text for text, _ in finished], [ref for _, ref in pairs]
    metrics = {"eval_loss": loss, "perplexity": math.exp(loss) if loss < 700 else float("inf"),
               "assistant_tokens": tokens, **corpus_scores(answers, references),
               "ended": 100.0 * sum(ended for _, ended in finished) / len(finished) if finished else None}
    lines = [{"index": i, "prompt": prompt[-1]["content"] if prompt else "", "reference": ref, "prediction": answer,
              "ended": ended, **scores}
             for i, ((prompt, ref), (answer, ended), scores) in enumerate(zip(pairs, finished,
                                                                              row_scores(answers, references)))]
    return metrics, lines


def evaluate_checkpoint(models: ModelSet, name: str, rows: list[dict], settings: dict, report=None) -> dict:
    """Score one checkpoint; writes eval/<name>/metrics.json + predictions.jsonl and returns the metrics."""
    started = time.time()
    scores, lines = answer_metrics(models.model_for(name), models.tokenizer, rows, models.config.cutoff_len,
                                   settings, report)
    metrics = {"checkpoint": name, "step": step_of(models.run_dir, name), **scores, "num_samples": len(rows),
               **settings, "time": time.time(), "seconds": round(time.time() - started, 2)}
    folder = Path(models.run_dir) / EVAL_DIR / name
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(folder / "predictions.jsonl", "".join(json.dumps(line, ensure_ascii=False) + "\n"
                                                             for line in lines))
    atomic_write_json(folder / "metrics.json", metrics)
    return metrics


def evaluate_run(run_dir: Path, checkpoints: list[str] | None = None, data: Path | None = None,
                 max_samples: int | None = None, max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
                 batch_size: int = DEFAULT_BATCH_SIZE, progress: Path | None = None) -> dict:
    """Evaluate `checkpoints` (default: base and every complete checkpoint) of a run."""
    run_dir = Path(run_dir).resolve()
    if not (run_dir / CONFIG_FILE).is_file():
        raise EvalError(msg("evaluate.not_run", path=run_dir, config=CONFIG_FILE))
    available = checkpoint_choices(run_dir)
    checkpoints = checkpoints or available
    unknown = [c for c in checkpoints if c not in available]
    if unknown:
        raise EvalError(msg("evaluate.unknown_checkpoint", names=", ".join(unknown), run=run_dir.name,
                            available=", ".join(available)))
    checkpoints = [c for c in available if c in checkpoints]  # base first, then by step
    rows, label = evaluation_rows(run_dir, data, max_samples)
    settings = {"data": label, "data_hash": _rows_hash(rows), "max_new_tokens": max_new_tokens,
                "batch_size": batch_size}
    if "chosen" in rows[0]:
        return with_parent(evaluate_pairs(run_dir, checkpoints, rows, settings, progress), run_dir, checkpoints,
                           settings, data, max_samples, progress)
    total = 2 * len(rows) * len(checkpoints)  # units: rows scored for loss + rows answered, per checkpoint
    write_progress(progress, stage=msg("evaluate.stage.loading"), total=total, checkpoints=checkpoints, data=label)
    models = ModelSet(run_dir, RunConfig.load(run_dir / CONFIG_FILE))
    results = {}
    for k, name in enumerate(checkpoints):
        write_progress(progress, stage=msg("evaluate.stage.checkpoint", name=name), done=2 * len(rows) * k)

        def report(units: int, offset: int = 2 * len(rows) * k) -> None:
            write_progress(progress, done=offset + units, total=total)

        results[name] = evaluate_checkpoint(models, name, rows, settings, report)
    summary = {"run": run_dir.name, "data": label, "num_samples": len(rows), "results": results}
    return with_parent(summary, run_dir, checkpoints, settings, data, max_samples, progress)


def with_parent(summary: dict, run_dir: Path, checkpoints: list[str], settings: dict, data: Path | None,
                max_samples: int | None, progress) -> dict:
    """`summary` with "kept": a run that continues another is scored beside its parent
    (backend/evaluation/quality_kept.py). Only on the held-out data: an uploaded file is the user's own test."""
    from backend.evaluation.quality_kept import compare_with_parent

    if data is not None:
        return summary
    try:
        kept = compare_with_parent(run_dir, checkpoints, settings, summary, max_samples, progress)
    except EvalError as error:  # the checkpoints' own scores are written; the comparison says why it is missing
        return {**summary, "kept_error": str(error)}
    return {**summary, "kept": kept} if kept else summary


def evaluate_pairs(run_dir: Path, checkpoints: list[str], rows: list[dict], settings: dict, progress) -> dict:
    """Preference accuracy and mean margin per checkpoint (backend/evaluation/pair_scores.py)."""
    from backend.evaluation.pair_scores import pair_logps, preference_scores, reference_model
    from backend.training.preference import init_adapter_dir

    config = RunConfig.load(run_dir / CONFIG_FILE)
    write_progress(progress, stage="loading the model", total=len(checkpoints) + 1, checkpoints=checkpoints,
                   data=settings["data"])
    try:
        adapter = init_adapter_dir(config, Workspace.for_run_dir(run_dir))
    except UserError as error:  # the adapter this run continued was deleted: no reference to score against
        raise EvalError(msg("evaluate.reference_gone", adapter=config.init_adapter, error=error)) from None
    models = ModelSet(run_dir, config)
    batch = settings["batch_size"]
    reference = pair_logps(reference_model(models, adapter), models.tokenizer, rows, config.cutoff_len, batch)
    # A continued run's reference is its parent: scored against itself (accuracy 0.5, margin 0; its own
    # log-prob accuracy), the parent's column of the comparison (quality_kept.py).
    reference_scores = preference_scores(reference, reference, config.beta) if adapter else None
    results = {}
    for k, name in enumerate(checkpoints):
        write_progress(progress, stage=f"evaluating {name}", done=k + 1)
        started = time.time()
        policy = pair_logps(models.model_for(name), models.tokenizer, rows, config.cutoff_len, batch)
        metrics = {"checkpoint": name, "step": step_of(run_dir, name), "stage": config.stage,
                   **preference_scores(policy, reference, config.beta), "num_samples": len(rows), **settings,
                   "reference": str(adapter) if adapter else "base", "time": time.time(),
                   "seconds": round(time.time() - started, 2)}
        folder = run_dir / EVAL_DIR / name
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_json(folder / "metrics.json", metrics)
        results[name] = metrics
    return {"run": run_dir.name, "data": settings["data"], "num_samples": len(rows), "results": results,
            "reference_scores": reference_scores}


# ---------------------------------------------------------------- background job

def progress_path(run_dir: Path) -> Path:
    return Path(run_dir) / EVAL_DIR / PROGRESS_FILE


def start_evaluation(run_dir: Path, checkpoints: list[str], data: Path | None = None,
                     max_samples: int | None = None, max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS) -> int:
    """Launch `python -m backend.evaluate` detached; refuses while one runs for this run."""
    run_dir = Path(run_dir)
    if read_progress(progress_path(run_dir)).get("state") == RUNNING:
        raise EvalError(msg("evaluate.running", run=run_dir.name))
    if not checkpoints:
        raise EvalError(msg("evaluate.choose"))
    args = ["--run", str(run_dir), "--checkpoint", *checkpoints, "--max-new-tokens", str(max_new_tokens)]
    if data is not None:
        args += ["--data", str(data)]
    if max_samples:
        args += ["--max-samples", str(max_samples)]
    progress_path(run_dir).unlink(missing_ok=True)
    return launch("backend.evaluate", args, Path(run_dir) / EVAL_DIR / "eval.log", progress_path(run_dir))


# ---------------------------------------------------------------- command line

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m backend.evaluate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", required=True, type=Path, help="run folder (workspace/runs/<run-id>)")
    parser.add_argument("--checkpoint", nargs="+", help="names such as base checkpoint-20 final (default: all)")
    parser.add_argument("--data", type=Path, help="evaluation file in any supported format (default: held-out split)")
    parser.add_argument("--max-samples", type=int, help="evaluate the first N rows only")
    parser.add_argument("--max-new-tokens", type=int, default=DEFAULT_MAX_NEW_TOKENS)
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE)
    parser.add_argument("--json", action="store_true", help="print the results as one JSON object")
    parser.add_argument("--benchmark", nargs="+", metavar="TASK",
                        help="run lm-evaluation-harness tasks instead: studio_facts_choice studio_facts_answer "
                             "studio_general_choice, a task YAML file or folder, or an lm-eval task name "
                             "(--max-samples limits the questions per task)")
    parser.add_argument("--no-chat-template", action="store_true",
                        help="benchmark prompts as plain text, not in the run's chat template")
    parser.add_argument("--progress", type=Path, help=argparse.SUPPRESS)  # set by the UI's background launcher
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.benchmark:
        return benchmark_main(args)
    try:
        summary = evaluate_run(args.run, args.checkpoint, args.data, args.max_samples, args.max_new_tokens,
                               args.batch_size, progress=args.progress)
    except EvalError as error:
        write_progress(args.progress, state=FAILED, error=message_of(error) or str(error))
        print(f"evaluation failed: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # noqa: BLE001 - model loading etc.: the UI shows the message, the log the trace
        write_progress(args.progress, state=FAILED, error=f"{type(error).__name__}: {error}")
        raise
    write_progress(args.progress, state=COMPLETED, stage=msg("job.stage.done"))
    if summary.get("kept"):
        from backend.evaluation.quality_drops import run_drops

        summary["kept"]["drops"] = [str(m) for m in run_drops(args.run)]
    print(json.dumps(summary, indent=2, ensure_ascii=False) if args.json else _table(summary, args.run))
    return 0


def benchmark_main(args: argparse.Namespace) -> int:
    from backend.evaluation.benchmarks import as_json, run_benchmarks, summary_table

    try:
        summary = run_benchmarks(args.run, args.benchmark, args.checkpoint, args.max_samples,
                                 not args.no_chat_template, args.batch_size, progress=args.progress)
    except UserError as error:  # BenchmarkError, and a model or checkpoint name refused on the way
        write_progress(args.progress, state=FAILED, error=message_of(error) or str(error))
        print(f"benchmark failed: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # noqa: BLE001 - model loading etc.: the UI shows the message, the log the trace
        write_progress(args.progress, state=FAILED, error=f"{type(error).__name__}: {error}")
        raise
    write_progress(args.progress, state=COMPLETED, stage=msg("job.stage.done"))
    print(as_json(summary) if args.json else summary_table(summary))
    return 0


def _table(summary: dict, run_dir: Path) -> str:
    columns = ("eval_loss", "perplexity", "bleu", "rouge1", "rouge2", "rougeL", "exact_match")
    if any("preference_accuracy" in m for m in summary["results"].values()):
        columns = ("preference_accuracy", "mean_margin", "logp_accuracy")
    lines = [f"Run {summary['run']}: {summary['num_samples']} rows of {summary['data']}",
             f"{'checkpoint':<18}" + "".join(f"{c:>{max(12, len(c) + 2)}}" for c in columns)]
    for name, metrics in summary["results"].items():
        lines.append(f"{name:<18}" + "".join(f"{metrics[c]:>{max(12, len(c) + 2)}.4g}" for c in columns))
    if summary.get("kept"):
        from backend.evaluation.quality_drops import kept_lines

        lines += kept_lines(summary["kept"], run_dir)
    if summary.get("kept_error"):
        lines.append(f"Not compared with the run it continues: {summary['kept_error']}")
    return "\n".join(lines)

