"""The Chat tab's blind votes as a preference dataset: pairs from votes (ties
and single-column votes skipped), provenance in meta.json, the dataset read
back by the data backend, and the "Train on these votes" form values; through
the tab's module-level handlers (ui/panels/vote_panel.py)."""

from __future__ import annotations

import json

import pytest

from backend.chat.preferences import TIE, PreferenceStore, read_preferences
from backend.chat.vote_data import VoteDataError, preference_run_values, save_votes_dataset, votes_to_pairs
from backend.config import RunConfig
from backend.config_recipes import tiny_config
from backend.runs.workspace import Workspace


@pytest.fixture
def voted_run(tmp_path):
    ws = Workspace(tmp_path / "ws").ensure()
    run = ws.runs_dir / "run-a"
    for folder in ("checkpoint-4", "final"):
        (run / folder).mkdir(parents=True)
        (run / folder / "adapter_config.json").write_text("{}")
    tiny_config().save(run / "config.yaml")
    store = PreferenceStore()
    context = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Capital of France?"}]
    answers = {"base": "Paris is a city in", "checkpoint-4": "Paris.", "final": "Rome."}
    store.record([run], ["base", "checkpoint-4", "final"], "checkpoint-4", "Capital of France?",
                 answers, {key: context for key in answers})
    store.record([run], ["base", "final"], TIE, "2+2?", {"base": "4.", "final": "4"})
    store.record([run], ["final"], "final", "Hi", {"final": "Hello."})              # one column: no pair
    store.record([run], ["base", "final"], "final", "Old vote")                    # recorded before answers were kept
    store.record([run], ["base", "run-b/final"], "run-b/final", "Colour of snow?",
                 {"base": "", "run-b/final": "White."})                             # the other answer is empty
    return ws, run


def test_votes_become_pairs_with_skips_counted(voted_run):
    _, run = voted_run
    rows, counts = votes_to_pairs(run)
    assert rows == [
        {"prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Capital of France?"}],
         "chosen": [{"role": "assistant", "content": "Paris."}],
         "rejected": [{"role": "assistant", "content": "Paris is a city in"}]},
        {"prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Capital of France?"}],
         "chosen": [{"role": "assistant", "content": "Paris."}],
         "rejected": [{"role": "assistant", "content": "Rome."}]},
    ]
    assert counts["votes"] == 5 and counts["pairs"] == 2
    assert (counts["skipped_ties"], counts["skipped_single"], counts["skipped_no_answers"]) == (1, 1, 1)
    assert counts["skipped_answers"] == 1  # snow: the losing answer is empty
    assert counts["checkpoints"] == ["base", "checkpoint-4", "final"]
    tally = read_preferences(run)["tally"]
    assert tally["final"] == {"wins": 2, "shown": 4}  # a tie is shown, not won


def test_a_vote_between_identical_answers_makes_no_pair_and_says_so(tmp_path):
    """Two checkpoints can answer alike; the vote is kept, but chosen == rejected teaches nothing."""
    run = Workspace(tmp_path / "ws").ensure().runs_dir / "run-same"
    run.mkdir()
    PreferenceStore().record([run], ["checkpoint-10", "checkpoint-20"], "checkpoint-20", "Capital of France?",
                             {"checkpoint-10": "Paris.", "checkpoint-20": "Paris."})
    rows, counts = votes_to_pairs(run)
    assert rows == [] and counts["votes"] == 1 and counts["skipped_answers"] == 1
    with pytest.raises(VoteDataError, match="1 losing answers empty or the same as the winner's"):
        save_votes_dataset(run, tmp_path / "datasets", "same")


def test_saved_dataset_has_provenance_and_loads_as_pairs(voted_run):
    from backend.data.checks import check_file
    from backend.data.saved_datasets import load_dataset_rows

    ws, run = voted_run
    folder, provenance = save_votes_dataset(run, ws.datasets_dir, "votes-a")
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["source"]["run"] == "run-a" and meta["source"]["pairs"] == 2
    assert meta["source"]["checkpoints"] == ["base", "checkpoint-4", "final"] and meta["source"]["date"]
    assert meta["rows_before"] == 5 and meta["rows_after"] == 2
    assert load_dataset_rows(folder)[0]["chosen"][0]["content"] == "Paris."
    report = check_file(folder)
    assert report.format == "pairwise" and report.usable_rows == 2 and report.exit_code == 0
    with pytest.raises(VoteDataError, match="already exists"):
        save_votes_dataset(run, ws.datasets_dir, "votes-a")
    with pytest.raises(VoteDataError):
        save_votes_dataset(run, ws.datasets_dir, "../outside")


def test_train_on_votes_prefills_a_dpo_run_on_the_voted_checkpoint(voted_run):
    ws, run = voted_run
    values = preference_run_values(run, "votes-a")
    config = RunConfig.from_dict(values)
    assert config.stage == "dpo" and config.dataset == "votes-a"
    assert config.init_adapter == str(run / "checkpoint-4")  # the checkpoint that won the votes
    assert config.learning_rate == 1e-4 and config.val_size == 0  # the dpo stage's default


def test_train_on_votes_prefills_a_cutoff_that_fits_the_votes(workspace):
    """Votes carry whole conversations: the stage's cutoff_len (64) would leave these pairs out."""
    from backend.data.pair_rows import measure, trained_rows, worker_tokenizer

    run = workspace.runs_dir / "run-long"
    (run / "final").mkdir(parents=True)
    (run / "final" / "adapter_config.json").write_text("{}")
    tiny_config().save(run / "config.yaml")
    store, question = PreferenceStore(), "Tell me about " + "the old stone bridge and " * 12 + "its river."
    for i in range(5):
        answers = {"base": f"I do not know {i}.", "final": f"It crosses the river {i}."}
        store.record([run], ["base", "final"], "final", question, answers,
                     {k: [{"role": "user", "content": question}] for k in answers})
    values = preference_run_values(run, "votes-long")
    rows, _ = votes_to_pairs(run)
    measured = measure(worker_tokenizer(workspace.models_dir / "demo", "auto"), rows)
    assert trained_rows(measured, "dpo", 64).rows == 0   # what the stage's default would have trained on
    config = RunConfig.from_dict(values)
    assert config.cutoff_len > 64 and config.cutoff_len % 32 == 0
    plan = trained_rows(measured, "dpo", config.cutoff_len)
    assert (plan.rows, plan.cut, plan.left_out) == (5, 0, {})


def test_handlers_save_and_prefill(voted_run):
    from ui.context import UIContext
    from ui.panels.vote_panel import save_votes, train_on_votes, train_outputs
    from ui.tabs import chat

    ws, run = voted_run
    ctx = UIContext(workspace=ws, texts=chat.TEXT, i18n=None)
    assert "Pick the run" in save_votes(ctx, "en", [], "x")
    assert "Pick the run" in save_votes(ctx, "en", ["run-a", "run-b"], "x")
    message = save_votes(ctx, "en", ["run-a"], "")
    assert "Saved 2 pairs from 5 votes of run-a as dataset 'votes-run-a'" in message
    assert "1 ties, 1 single-column, 1 without answers, 1 losing answers empty or the same" in message
    text, values = train_on_votes(ctx, "zh", ["run-a"], "my-votes")
    assert values["dataset"] == "my-votes" and values["stage"] == "dpo" and "checkpoint-4" in text
    assert (ws.datasets_dir / "my-votes" / "meta.json").is_file()
    empty = ws.runs_dir / "run-empty"
    empty.mkdir()
    tiny_config().save(empty / "config.yaml")
    text, values = train_on_votes(ctx, "en", ["run-empty"], "")
    assert values is None and text.startswith("⚠️") and "no votes that make a pair" in text
    said, prefill, switch = train_outputs(ctx, "en", ["run-empty"], "")
    assert said == text and prefill == switch == {"__type__": "update"}  # stay on Chat, Train form untouched
    said, prefill, switch = train_outputs(ctx, "en", ["run-a"], "my-votes")
    assert prefill["stage"] == "dpo" and switch.selected == "train"


def test_vote_answers_keep_each_columns_context_and_skip_failed_columns():
    from types import SimpleNamespace

    from ui.chat_session import ChatSession, vote_answers

    targets = {"a": SimpleNamespace(key="base"), "b": SimpleNamespace(key="run/final")}
    session = ChatSession(keys=["a", "b"], prompt="Q", histories={
        "a": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A1"}],
        "b": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "⚠️ out of memory"}]})
    answers, contexts = vote_answers(session, targets)
    assert answers == {"base": "A1"} and contexts == {"base": [{"role": "user", "content": "Q"}]}


def _turn(question, answer):
    return [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]


def test_a_multi_turn_vote_pairs_only_answers_that_followed_the_same_conversation(tmp_path):
    """Each column answers after its own earlier turns: the loser's answer never gets the winner's history."""
    from types import SimpleNamespace

    from ui.chat_session import ChatSession, vote_answers

    run = Workspace(tmp_path / "ws").ensure().runs_dir / "run-m"
    run.mkdir()
    targets = {k: SimpleNamespace(key=k) for k in ("checkpoint-4", "checkpoint-8", "final")}
    session = ChatSession(keys=list(targets), prompt="And Italy?", histories={
        "checkpoint-4": _turn("Capital of France?", "Paris.") + _turn("And Italy?", "Rome."),
        "checkpoint-8": _turn("Capital of France?", "Lyon.") + _turn("And Italy?", "Milan."),
        "final": _turn("Capital of France?", "Paris.") + _turn("And Italy?", "Turin.")})
    answers, contexts = vote_answers(session, targets)
    PreferenceStore().record([run], list(targets), "checkpoint-4", "And Italy?", answers, contexts)
    vote = read_preferences(run)["votes"][0]
    assert vote["contexts"]["checkpoint-8"][1]["content"] == "Lyon."  # its own history, kept
    rows, counts = votes_to_pairs(run)
    assert rows == [{"prompt": _turn("Capital of France?", "Paris.") + [{"role": "user", "content": "And Italy?"}],
                     "chosen": [{"role": "assistant", "content": "Rome."}],
                     "rejected": [{"role": "assistant", "content": "Turin."}]}]
    assert counts["skipped_context"] == 1   # checkpoint-8 answered after "Lyon.", not "Paris."


def test_votes_of_the_earlier_format_pair_on_first_turns_only(tmp_path):
    """Votes that kept only the winner's conversation: a first turn was every column's, a later one was not."""
    from backend.storage.atomic_files import atomic_write_json

    run = tmp_path / "run-old"
    run.mkdir()
    first = [{"role": "user", "content": "Hi"}]
    later = _turn("Hi", "Hello.") + [{"role": "user", "content": "Bye"}]
    atomic_write_json(run / "preferences.json", {"votes": [
        {"prompt": "Hi", "candidates": ["base", "final"], "winner": "final", "context": first,
         "answers": {"base": "Yo", "final": "Hello."}},
        {"prompt": "Bye", "candidates": ["base", "final"], "winner": "final", "context": later,
         "answers": {"base": "Later", "final": "Goodbye."}}], "tally": {}})
    rows, counts = votes_to_pairs(run)
    assert [r["prompt"] for r in rows] == [first] and counts["skipped_context"] == 1


def test_train_form_stage_switch_and_prefill():
    from ui import forms

    values = forms.form_values(tiny_config(learning_rate=1e-5))
    values[forms.NAMES.index("stage")] = "dpo"
    moved = dict(zip(forms.NAMES, forms.stage_form_values(values, "sft")))
    assert moved["stage"] == "dpo" and moved["cutoff_len"] == 64 and moved["per_device_train_batch_size"] == 4
    assert moved["learning_rate"] == 1e-5  # changed by the user: kept
    model, dataset, *form = forms.prefill_values(tiny_config().with_overrides(["stage=kto", "dataset=votes"]).to_dict())
    assert (model, dataset) == ("demo", "votes") and dict(zip(forms.NAMES, form))["stage"] == "kto"


def test_vote_panel_says_its_refusals_in_chinese(voted_run):
    """No pairs yet, or a name that is not a plain folder name: the user's language, not the backend's English."""
    from ui.context import UIContext
    from ui.panels.vote_panel import save_votes, train_on_votes
    from ui.tabs import chat

    ws, _ = voted_run
    ctx = UIContext(workspace=ws, texts=chat.TEXT, i18n=None)
    empty = ws.runs_dir / "run-empty"
    empty.mkdir()
    tiny_config().save(empty / "config.yaml")
    text, values = train_on_votes(ctx, "zh", ["run-empty"], "")
    assert values is None and text.startswith("⚠️")
    assert "还没有能组成一对回答的投票" in text and "0 次投票" in text and "no votes" not in text
    assert "no votes that make a pair yet (0 votes, 0 ties" in save_votes(ctx, "en", ["run-empty"], "")
    refused = save_votes(ctx, "zh", ["run-a"], "../outside")
    assert refused.startswith("⚠️") and "../outside" in refused and "not allowed" not in refused.lower()


def test_default_votes_name_fits_the_dataset_name_limit_for_long_run_ids(tmp_path):
    """A run id is a timestamp, a label of up to 40 characters and a '-N' suffix: 'votes-' + it can pass 64."""
    from backend.chat.vote_data import default_dataset_name
    from backend.data.saved_datasets import validate_name
    from ui.context import UIContext
    from ui.panels.vote_panel import save_votes
    from ui.tabs import chat

    ws = Workspace(tmp_path / "ws").ensure()
    long_id = "20260101-120000-" + "a-very-long-run-label-that-fills-forty-c" + "-999"
    assert len(f"votes-{long_id}") > 64
    names = {default_dataset_name(run_id) for run_id in (long_id, long_id[:-1] + "8", "20260101-120000-" + "中" * 40)}
    assert len(names) == 3 and all(validate_name(name) == name for name in names)
    assert default_dataset_name("run-a") == "votes-run-a"   # a short id stays whole
    run = ws.runs_dir / long_id
    run.mkdir()
    PreferenceStore().record([run], ["base", "final"], "final", "Hi", {"base": "Yo", "final": "Hello."})
    ctx = UIContext(workspace=ws, texts=chat.TEXT, i18n=None)
    assert "Saved 1 pairs" in save_votes(ctx, "en", [long_id], "")
    assert (ws.datasets_dir / default_dataset_name(long_id) / "meta.json").is_file()
