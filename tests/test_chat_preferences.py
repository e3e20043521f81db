"""Blind-mode order and the per-run vote tallies on disk; the Chat tab's catalog."""

from __future__ import annotations

import json

import pytest

from backend.chat.catalog import catalog, dropdown_choices, header, run_ids_of
from backend.chat.preferences import PREFERENCES_FILE, PreferenceStore, blind_order, tally_rows
from backend.runs.files import mark_complete
from tests.test_chat_support import single_thread  # noqa: F401 (fixture)

pytestmark = pytest.mark.usefixtures("single_thread")


def test_blind_order_is_a_seeded_permutation():
    assert sorted(blind_order(5, 1)) == [0, 1, 2, 3, 4]
    assert blind_order(5, 1) == blind_order(5, 1)
    assert len({tuple(blind_order(5, seed)) for seed in range(20)}) > 1


def test_votes_are_tallied_per_run_on_disk(tmp_path):
    run_a, run_b = tmp_path / "run-a", tmp_path / "run-b"
    run_a.mkdir()
    run_b.mkdir()
    store = PreferenceStore()
    shown = ["base", "run-a/checkpoint-10", "run-b/final"]
    store.record([run_a, run_b], shown, "run-a/checkpoint-10", "What is the capital of France?")
    store.record([run_a, run_b], shown, "base", "2 + 2?")
    saved = json.loads((run_a / PREFERENCES_FILE).read_text())
    assert [v["winner"] for v in saved["votes"]] == ["checkpoint-10", "base"]
    assert saved["votes"][0]["candidates"] == ["base", "checkpoint-10", "run-b/final"]
    assert tally_rows(run_a) == [["base", 1, 2, 50.0], ["checkpoint-10", 1, 2, 50.0], ["run-b/final", 0, 2, 0.0]]
    assert tally_rows(run_b)[-1] == ["final", 0, 2, 0.0]
    with pytest.raises(ValueError, match="not one of the answers"):
        store.record([run_a], shown, "run-a/checkpoint-99", "x")


def test_catalog_offers_complete_checkpoints_as_they_appear(tmp_path, demo_model_dir):
    from tests.test_chat_support import make_lora_run

    runs_dir = tmp_path / "runs"
    make_lora_run(runs_dir / "run-a", demo_model_dir, steps=(10,), incomplete_step=20)
    targets = catalog(runs_dir, ["run-a"], resolve_model=str)
    assert list(targets) == ["base@run-a", "run-a/checkpoint-10"]
    mark_complete(runs_dir / "run-a" / "checkpoint-20")   # training finished writing it
    targets = catalog(runs_dir, ["run-a", "missing-run"], resolve_model=str)
    assert list(targets) == ["base@run-a", "run-a/checkpoint-10", "run-a/checkpoint-20"]
    labels = dict((v, label) for label, v in dropdown_choices(targets))
    assert labels["base@run-a"] == "base" and "eval loss 1.0000" in labels["run-a/checkpoint-20"]
    assert "step 20" in header(targets["run-a/checkpoint-20"])
    assert run_ids_of(["base@run-a", "run-a/checkpoint-10", "run-b/final"]) == ["run-a", "run-b"]
