"""The Train tab's Plan for stage grpo: prompts, completions and steps, and the
checks the worker makes before its model loads, as sentences.

The rules are the backend's: the steps from backend.config.derived_numbers,
the prompt checks (context, cutoff, reference answers, one step's prompts)
from backend.training.grpo_data.prompt_findings over the prompts measured
once per dataset / model (`grpo_rows`, kept in the tab's rows state), and the
user's reward functions imported and called once on a sample completion
(backend.training.rewards.check_user_functions). No gradio here.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from backend.config import derived_numbers
from backend.config_policy import ConfigError
from backend.data.errors import DataError
from backend.data.pair_rows import worker_tokenizer
from backend.data.resolve import split_rows
from backend.models.loading import model_context_length
from backend.runs.workspace import Workspace
from backend.training.grpo_data import measure_prompts, prompt_findings
from backend.training.reward_probe import check_apart
from ui.i18n import localize
from ui.texts.grpo_plan_texts import TEXT  # noqa: F401  (read here by the shell and the tabs)

Msg = Callable[..., str]


def grpo_rows(dataset: str, workspace: Workspace, dataset_name: str | None, folder: Path | None,
              chat_template: str) -> dict:
    """{"rows", "has_eval", "prompts": [[tokens or None, has reference], ...], "context"} of the data as the
    worker reads it for grpo; the tokens need the model's `folder` on disk (None: not yet, tokens None).
    Raises what the data raises."""

    tokenizer = worker_tokenizer(folder, chat_template) if folder is not None else None
    try:
        measured, has_eval = measure_prompts(dataset, workspace, tokenizer, dataset_name)
    except DataError as error:  # a file neither the data backend nor the prompt reader can read
        return {"error": str(error)}
    except (OSError, ValueError, KeyError):
        raise
    except Exception:  # noqa: BLE001 - the chat template cannot render these prompts: the worker says why
        tokenizer = None
        measured, has_eval = measure_prompts(dataset, workspace, None, dataset_name)
    context = model_context_length(folder) if folder is not None and tokenizer is not None else None
    return {"rows": len(measured), "has_eval": has_eval, "prompts": measured, "context": context}


def plan_text(msg: Msg, config, rows: dict | None, world_size: int, lang: str | None) -> str:
    if not rows or "prompts" not in rows:
        return msg("train.derived.no_rows", error=(rows or {}).get("error", ""))
    measured = rows["prompts"] if rows.get("has_eval") else split_rows(rows["prompts"], config.val_size, config.seed)[0]
    lengths = [tokens for tokens, _ in measured if tokens is not None]
    prompts = sum(1 for n in lengths if n <= config.cutoff_len) if lengths else len(measured)
    numbers = derived_numbers(config, prompts, world_size)
    lines = [msg("train.grpo.derived", prompts=prompts, generations=config.num_generations,
                 prompts_per_step=numbers["effective_batch"] // config.num_generations, **numbers),
             msg("train.grpo.sampling", tokens=config.max_completion_length, temperature=f"{config.temperature:g}")
             + " " + (msg("train.grpo.kl", beta=f"{config.beta:g}") if config.beta else msg("train.grpo.no_kl"))]
    if not lengths:
        lines.append(msg("train.grpo.unmeasured"))
    missing = sum(1 for _, has_reference in measured if not has_reference)
    refusal, warnings = prompt_findings(lengths or [0] * len(measured), missing, config,
                                        rows.get("context") if lengths else None, config.dataset,
                                        world_size if lengths else None)
    lines += [f"❌ {localize(refusal, lang)}"] if refusal is not None else []
    lines += [f"⚠ {localize(w, lang)}" for w in warnings]
    lines += functions_lines(msg, config, lang)
    return "\n\n".join(lines)


def functions_lines(msg: Msg, config, lang: str | None) -> list[str]:
    """The worker's check of the user's reward functions, said in the Plan before Start. It imports
    and calls the user's code, so it runs in a child process (backend.training.reward_probe), never here."""

    if not config.reward_functions:
        return []
    try:
        check_apart(list(config.reward_functions))
    except ConfigError as error:
        return [f"❌ {localize(error, lang)}"]
    return [msg("train.grpo.functions_ok", names=", ".join(f"`{ref}`" for ref in config.reward_functions))]
