"""The Chat tab's blind votes as a preference dataset.

Each vote with two or more answers gives pairs: the prompt (the conversation
before the answers), the preferred answer as `chosen`, each other answer as
`rejected`. A pair needs one prompt for both answers, and each column answers
after its own earlier turns: a losing answer whose conversation differs from
the winner's (after the first turn, nearly always) makes no pair. Ties, votes
on a single column, and votes recorded before answers were kept are skipped
and counted. The dataset is a workspace dataset (datasets/<name>/) whose
meta.json names its provenance: the run, the checkpoints voted on, the date
and the counts.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from pathlib import Path

from backend.chat.preferences import TIE, read_preferences
from backend.config import RunConfig, stage_switch
from backend.data.pair_rows import fitting_cutoff, measure, worker_tokenizer
from backend.data.saved_datasets import MAX_NAME, save_dataset, validate_name
from backend.evaluation.results import checkpoint_folder
from backend.messages import Message, UserError, message_of, msg
from backend.models.loading import model_context_length, needs_build, resolve_model_path
from backend.runs.files import CONFIG_FILE
from backend.runs.workspace import Workspace
from backend.storage.safe_names import MAX_BYTES, clean_name, is_plain_name


class VoteDataError(UserError, ValueError):
    """Nothing to save, or a bad name; the message is catalogued (backend/messages.py)."""


def votes_to_pairs(run_dir: Path) -> tuple[list[dict], dict]:
    """(canonical pairwise rows, counts {votes, pairs, skipped_ties, skipped_single, skipped_no_answers,
    skipped_answers, skipped_context})."""
    votes = read_preferences(run_dir)["votes"]
    rows, counts, voted_on, wins = [], Counter(votes=len(votes)), Counter(), Counter()
    for vote in votes:
        candidates, winner, answers = vote.get("candidates", []), vote.get("winner"), vote.get("answers")
        if len(candidates) < 2:
            counts["skipped_single"] += 1
        elif winner == TIE:
            counts["skipped_ties"] += 1
        elif not isinstance(answers, dict) or winner not in answers:
            counts["skipped_no_answers"] += 1
        else:
            contexts = answer_contexts(vote)
            prompt, losers = contexts[winner], []
            for loser in (k for k in candidates if k != winner):
                if not (answers.get(loser) or "").strip() or answers[loser] == answers[winner]:
                    counts["skipped_answers"] += 1   # an empty answer, or the winner's own text
                elif contexts.get(loser) != prompt:
                    counts["skipped_context"] += 1   # answered after its own earlier turns
                else:
                    losers.append(loser)
            for loser in losers:
                rows.append({"prompt": prompt, "chosen": [{"role": "assistant", "content": answers[winner]}],
                             "rejected": [{"role": "assistant", "content": answers[loser]}]})
            if losers:
                voted_on.update([winner, *losers])
                wins[winner] += 1
    counts["pairs"] = len(rows)
    return rows, {**dict(counts), "checkpoints": sorted(voted_on), "wins": dict(wins)}


def answer_contexts(vote: dict) -> dict[str, list[dict]]:
    """{candidate key: the conversation its answer followed}. A vote of the earlier format kept
    only the winner's conversation: on a first turn every column had it, later the losers' are unknown."""
    if isinstance(vote.get("contexts"), dict):
        return vote["contexts"]
    context = vote.get("context") or [{"role": "user", "content": vote.get("prompt", "")}]
    if any(m.get("role") == "assistant" for m in context):
        return {vote["winner"]: context}
    return {key: context for key in vote["answers"]}


def voted_checkpoint(run_dir: Path) -> str | None:
    """The run's own checkpoint that won most of the votes that made pairs (the one to continue from)."""
    wins = Counter({k: n for k, n in votes_to_pairs(run_dir)[1]["wins"].items() if k != "base" and "/" not in k})
    return wins.most_common(1)[0][0] if wins else None


def default_dataset_name(run_id: str) -> str:
    """"votes-<run id>", the name the Chat tab offers. A run id is a timestamp, a label of up to 40
    characters and a '-N' suffix, so this can pass a dataset name's limit: then the id is shortened
    and ends in 8 hex digits of its hash, so runs that differ only at the end still get different names."""

    name = f"votes-{run_id}"
    if is_plain_name(name) and len(name) <= MAX_NAME:
        return name
    digest = "-" + hashlib.sha256(run_id.encode("utf-8")).hexdigest()[:8]
    head = clean_name(name, "votes", MAX_NAME - len(digest))
    while len(head.encode("utf-8")) > MAX_BYTES - len(digest):  # only with 4-byte letters
        head = head[:-1].rstrip("-.")
    return head + digest


def save_votes_dataset(run_dir: Path, datasets_dir: Path, name: str, overwrite: bool = False) -> tuple[Path, dict]:
    """Write the votes of `run_dir` as workspace dataset `name`; returns (folder, provenance)."""

    try:
        validate_name(name)
    except ValueError as error:
        raise VoteDataError(message_of(error) or str(error)) from None
    run_dir = Path(run_dir)
    rows, counts = votes_to_pairs(run_dir)
    if not rows:
        raise VoteDataError(msg("votes.no_pairs", run=run_dir.name, skips=_skips(counts)))
    provenance = {"path": f"votes of run {run_dir.name}", "sha256": None, "format": "pairwise",
                  "generator": "chat votes", "run": run_dir.name, "checkpoints": counts["checkpoints"],
                  "date": time.strftime("%Y-%m-%d %H:%M:%S"),
                  **{k: v for k, v in counts.items() if k not in ("checkpoints", "wins")}}
    try:
        folder = save_dataset(datasets_dir, name, rows, source=provenance, fixes=[], rows_before=counts["votes"],
                              overwrite=overwrite)
    except FileExistsError as error:
        raise VoteDataError(message_of(error) or str(error)) from None
    return folder, provenance


def _skips(counts: dict) -> Message:
    return msg("votes.skips", votes=counts.get("votes", 0), ties=counts.get("skipped_ties", 0),
               single=counts.get("skipped_single", 0), no_answers=counts.get("skipped_no_answers", 0),
               same=counts.get("skipped_answers", 0), context=counts.get("skipped_context", 0))


def preference_run_values(run_dir: Path, dataset: str) -> dict:
    """RunConfig values for "Train on these votes": a dpo run over the same base, continuing the voted checkpoint."""

    config = RunConfig.load(Path(run_dir) / CONFIG_FILE)
    values = stage_switch(config.to_dict(), "dpo")
    checkpoint = voted_checkpoint(run_dir) or "final"
    folder = checkpoint_folder(Path(run_dir), checkpoint)
    values.update(dataset=dataset, run_name=f"dpo-votes-{Path(run_dir).name}", val_size=0.0,
                  early_stopping_patience=None, eval_steps=None,
                  init_adapter=str(folder) if config.method != "full" and (folder / "adapter_config.json").is_file()
                  else None)
    if config.method == "full" and folder.is_dir():
        values["model_name_or_path"] = str(folder)
    workspace = Workspace(Path(run_dir).parent.parent)  # a run folder sits in workspace/runs/
    values["cutoff_len"] = _cutoff_for_votes(values, votes_to_pairs(run_dir)[0], workspace.models_dir)
    return json.loads(json.dumps(values))


def _cutoff_for_votes(values: dict, pairs: list[dict], models_dir: Path) -> int:
    """A cutoff_len that fits the vote pairs whole (prompt + the longer answer): multi-turn votes
    carry their conversation, and a prompt that fills the stage's cutoff would leave its pair out.
    The stage's value stays when the model is not on disk yet (the Plan then says "at most")."""

    model = values["model_name_or_path"]
    if needs_build(model, models_dir):
        return values["cutoff_len"]
    folder = resolve_model_path(model, models_dir)
    tokenizer = worker_tokenizer(folder, values.get("chat_template", "auto"))
    if tokenizer is None or not Path(folder).is_dir():
        return values["cutoff_len"]
    return fitting_cutoff(measure(tokenizer, pairs), values["cutoff_len"], model_context_length(folder))
