"""What scoring a model on rows needs, shared by the evaluator (evaluator.py)
and the comparison with a parent run (quality_kept.py): the evaluation set,
the models, and the scores of one model.

The base model is loaded once; LoRA checkpoints are attached to it as named
adapters (the base is scored with the adapters disabled). QLoRA runs are
evaluated on the same 4/8-bit base they were trained on. Loss tokens come
from backend.data.encode, the code path training uses, so eval_loss here is
comparable with the worker's eval_loss.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

from backend.config import RunConfig
from backend.data.encode import IGNORE_INDEX, encode_messages
from backend.data.errors import DataError
from backend.data.identity_rows import fill_rows, identity_values
from backend.data.load import load_file_rows
from backend.data.resolve import load_rows, resolve_dataset, split_rows
from backend.evaluation.pair_scores import pair_rows
from backend.evaluation.results import BASE, checkpoint_folder
from backend.evaluation.text_scores import corpus_scores, row_scores
from backend.messages import UserError, msg
from backend.models.chat_templates import apply_for_model, fit_model
from backend.models.greedy import greedy_answers_ended, prompt_and_reference
from backend.models.loading import load_model, load_tokenizer, resolve_model_path
from backend.runs.files import CONFIG_FILE
from backend.runs.workspace import Workspace
from backend.scoring.errors import ScorerError
from backend.scoring.items import Scorer
from backend.scoring.scorer_specs import parse_scorers, specs_from_argument
from backend.scoring.tally import score_rows, summarise


class EvalError(UserError, RuntimeError):
    """An evaluation that cannot run; the message says why and what to do."""


# ---------------------------------------------------------------- the evaluation set

def held_out_rows(run_dir: Path, workspace: Workspace | None = None) -> list[dict]:
    """The run's eval split, recomputed exactly as the worker does (same loader, seed and share)."""

    config = RunConfig.load(Path(run_dir) / CONFIG_FILE)
    workspace = workspace or Workspace.for_run_dir(run_dir)
    rows, eval_rows = load_rows(resolve_dataset(config.dataset, workspace), dataset_name=config.dataset_name)
    if eval_rows is None and config.val_size > 0:
        _, eval_rows = split_rows(rows, config.val_size, config.seed)
    if not eval_rows:
        raise EvalError(msg("evaluate.no_split", run=Path(run_dir).name, val_size=config.val_size))
    return fill_rows(eval_rows, identity_values(config))  # `{{name}}` / `{{author}}` as the run trained them


def evaluation_rows(run_dir: Path, data: Path | None, max_samples: int | None,
                    workspace: Workspace | None = None) -> tuple[list[dict], str]:
    """(rows that have an answer to score, a description of where they came from)."""
    if data is not None:
        try:
            rows, label = load_file_rows(data).rows, f"file {Path(data).name}"
        except DataError as error:
            raise EvalError(msg("evaluate.bad_file", name=Path(data).name, error=error)) from None
    else:
        rows, label = held_out_rows(run_dir, workspace), "the run's held-out split"
    if rows and "messages" not in rows[0]:  # preference data: pairs are scored, not answers
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


def rows_hash(rows: list[dict]) -> str:
    return hashlib.sha256(json.dumps(rows, ensure_ascii=False, sort_keys=True).encode()).hexdigest()[:16]


def chosen_scorers(specs: list[dict] | str | None) -> tuple[list[dict], list[Scorer]]:
    """(the specs as plain data, for metrics.json; the parsed scorers) of the user's choice: a list of
    specs, or the --scorers text / file. A bad spec is an EvalError with the scorer's sentence."""
    try:
        specs = specs_from_argument(specs) if isinstance(specs, str) else list(specs or [])
        return specs, parse_scorers(specs)
    except ScorerError as error:
        raise EvalError(error.catalogued or str(error)) from None


# ---------------------------------------------------------------- models

class ModelSet:
    """The base model loaded once; checkpoints attached by name as they are asked for."""

    def __init__(self, run_dir: Path, config: RunConfig, workspace: Workspace | None = None):
        import torch

        self.run_dir, self.config = run_dir, config
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.dtype = torch.bfloat16 if self.device == "cuda" and torch.cuda.is_bf16_supported() else torch.float32
        workspace = workspace or Workspace.for_run_dir(run_dir)  # where config.yaml's model is found
        self.base_path = resolve_model_path(config.model_name_or_path, workspace.models_dir)
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


def answer_metrics(model, tokenizer, rows: list[dict], cutoff_len: int, settings: dict, report=None,
                   scorers: list[Scorer] = (), identity: tuple[str, ...] = ()) -> tuple[dict, list[dict]]:
    """(metrics, one prediction record per row) of `model` on rows with a reference answer:
    eval loss over the assistant tokens, then greedy answers scored against the references,
    and `ended`, the percentage of answers that stopped on a stop token before max_new_tokens.
    `scorers`: the user's chosen checks (backend/scoring/), each row's result in its record and the
    share of rows passing each in `metrics["scorers"]`; `identity`: the run's filled-in values.

    `report(units)` gets the work done so far: rows scored for loss, then rows answered."""
    report = report or (lambda units: None)

    loss, tokens = eval_loss(model, tokenizer, rows, cutoff_len, settings["batch_size"], report)
    pairs = [prompt_and_reference(r["messages"]) for r in rows]
    finished = greedy_answers_ended(model, tokenizer, [p for p, _ in pairs], settings["max_new_tokens"],
                                    settings["batch_size"], max_prompt_tokens=cutoff_len,
                                    on_batch=lambda done: report(len(rows) + done))
    answers, references = [text for text, _ in finished], [ref for _, ref in pairs]
    metrics = {"eval_loss": loss, "perplexity": math.exp(loss) if loss < 700 else float("inf"),
               "assistant_tokens": tokens, **corpus_scores(answers, references),
               "ended": 100.0 * sum(ended for _, ended in finished) / len(finished) if finished else None}
    chosen = score_rows(list(scorers), answers, references, identity=identity,
                        count_tokens=lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"]))
    if scorers:
        metrics["scorers"] = summarise(list(scorers), chosen)
    lines = [{"index": i, "prompt": prompt[-1]["content"] if prompt else "", "reference": ref, "prediction": answer,
              "ended": ended, **scores, **({"scorers": results} if scorers else {})}
             for i, ((prompt, ref), (answer, ended), scores, results)
             in enumerate(zip(pairs, finished, row_scores(answers, references), chosen))]
    return metrics, lines
