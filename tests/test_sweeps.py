"""Sweeps: a 2x2 grid on the demo model completes four real queued runs that share a sweep id and
the table picks the best by the target; every bad sweep is one sentence and queues nothing."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from backend.config_policy import ConfigError
from backend.config_recipes import tiny_config
from backend.evaluation.results import METRICS
from backend.runs.files import read_status
from backend.sweeps.grid import TARGETS, SweepError, parse_sweep
from backend.train import main as train_main
from tests.conftest import REPO
from ui import forms
from ui.context import UIContext
from ui.i18n import merge_texts
from ui.panels import sweep_panel, sweep_results_panel
from ui.tabs import runs, train

pytestmark = pytest.mark.timeout(1800)


def out_of_bounds_sentence() -> str:
    with pytest.raises(ConfigError) as refused:
        tiny_config(lora_r=0)
    return str(refused.value)


BAD_SWEEPS = {
    "close name": ("grid: {learning_rat: [1.0e-4]}",
                   "The sweep varies 'learning_rat', which is not a run setting; did you mean 'learning_rate'?"),
    "no such field": ("grid: {zzqq: [1]}", "The sweep varies 'zzqq', which is not a run setting."),
    "out of bounds": ("grid: {lora_r: [8, 0]}", "The sweep's run 2 (lora_r=0) is refused: "),
    "empty values": ("grid: {learning_rate: []}", "The sweep's grid is empty: learning_rate has no values."),
    "empty grid": ("grid: {}", "The sweep varies nothing"),
    "over budget": ("grid: {learning_rate: [1.0e-4, 3.0e-4, 1.0e-3], lora_r: [4, 8, 16]}\nmax_runs: 4",
                    "The grid has 9 runs, over the budget of 4 (max_runs): raise max_runs to 9, or set sample: 4"),
    "four fields": ("grid: {lora_r: [4], lora_alpha: [8], seed: [1], cutoff_len: [64]}",
                    "A sweep varies one to three settings; this one varies 4"),
    "bad target": ("grid: {lora_r: [4]}\ntarget: accuracy", "The sweep's target 'accuracy' is not a metric"),
}


@pytest.mark.parametrize("case", list(BAD_SWEEPS))
def test_a_bad_sweep_is_one_sentence_and_queues_nothing(case, workspace, tmp_path, capsys):
    text, sentence = BAD_SWEEPS[case]
    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text(text + "\n", encoding="utf-8")
    code = train_main(["--recipe", "demo-tiny", "--workspace", str(workspace.root), "--sweep", str(sweep_file)])
    err = capsys.readouterr().err
    assert code == 2 and sentence in err, err
    if case == "out of bounds":
        assert out_of_bounds_sentence() in err  # RunConfig's own sentence
    assert not [p for p in workspace.runs_dir.iterdir() if p.is_dir()] and not (workspace.root / "sweeps").exists()


def test_the_train_tab_says_the_same_sentence_and_queues_nothing(workspace):
    ctx = UIContext(workspace=workspace, texts=merge_texts(train.TEXT, runs.TEXT), i18n=None)
    form = forms.form_values(tiny_config(max_steps=4, devices="cpu"))
    sweep = ["learning_rat", "", "", "1e-4, 3e-4", "", "", "eval_loss", "auto", 16, 0, 0]
    said = sweep_panel.queue_runs(ctx, "en", "demo", "demo", *sweep, *form)
    assert "did you mean 'learning_rate'?" in said and not [p for p in workspace.runs_dir.iterdir() if p.is_dir()]
    zh = sweep_panel.check(ctx, "zh", "demo", "demo", *sweep, *form)
    assert "您是否想写 'learning_rate'" in zh
    sweep[0] = "learning_rate"
    plan = sweep_panel.check(ctx, "en", "demo", "demo", *sweep, *form)
    assert "**2 runs** over learning_rate" in plan and "`learning_rate=0.0001`" in plan and "2 runs: about" in plan
    assert not [p for p in workspace.runs_dir.iterdir() if p.is_dir()]  # a check queues nothing


def test_a_sample_of_the_grid_is_the_same_for_the_same_seed():
    data = {"grid": {"learning_rate": [1e-4, 3e-4, 1e-3], "lora_r": [4, 8, 16]}, "max_runs": 4, "sample": 4, "seed": 3}
    first, again = parse_sweep(data), parse_sweep(data)
    assert first.grid_size == 9 and len(first.combinations) == 4 and first.combinations == again.combinations
    assert len({json.dumps(c, sort_keys=True) for c in first.combinations}) == 4


def test_a_sample_of_a_huge_grid_builds_only_the_runs_it_keeps():
    """300 values in each of 3 fields is 27 million combinations (gigabytes when built): a sample of 4
    builds 4, and without a sample the grid is refused by its count before any is built."""
    import tracemalloc

    data = {"grid": {"learning_rate": [1e-4 + i * 1e-7 for i in range(300)], "lora_r": list(range(1, 301)),
                     "lora_alpha": list(range(1, 301))}, "sample": 4, "seed": 1}
    tracemalloc.start()
    try:
        sweep = parse_sweep(data)
        with pytest.raises(SweepError) as refused:
            parse_sweep({**data, "sample": None})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sweep.grid_size == 300**3 and len(sweep.combinations) == 4 and sweep.sample == 4
    assert peak < 50 * 2**20, f"{peak / 2**20:.0f} MiB"
    grid = data["grid"]
    assert all(c["learning_rate"] in grid["learning_rate"] and c["lora_r"] in grid["lora_r"] for c in sweep.combinations)
    assert str(refused.value).startswith(f"The grid has {300**3} runs, over the budget of 16 (max_runs)")


def test_every_metric_evaluate_computes_is_a_target_with_its_direction():
    for name, lower in METRICS.items():
        assert TARGETS[name] is lower, name


def test_a_2x2_sweep_completes_four_runs_and_the_table_picks_the_best(workspace, tmp_path, subprocess_env):
    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text("grid:\n  learning_rate: [1.0e-3, 3.0e-3]\n  lora_r: [4, 16]\ntarget: eval_loss\n")
    command = [sys.executable, "-m", "backend.train", "--recipe", "demo-tiny", "--set", "max_steps=3",
               "--workspace", str(workspace.root), "--sweep", str(sweep_file)]
    result = subprocess.run(command, cwd=REPO, env=subprocess_env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    statuses = {p.name: read_status(p) for p in workspace.runs_dir.iterdir() if p.is_dir()}
    assert len(statuses) == 4 and {s["state"] for s in statuses.values()} == {"completed"}
    (sweep_id,) = {s["sweep_id"] for s in statuses.values()}
    # The best by eval_loss, computed here from each run's own eval lines in metrics.jsonl.
    losses = {}
    for run_id in statuses:
        lines = [json.loads(line) for line in (workspace.runs_dir / run_id / "metrics.jsonl").read_text().splitlines()]
        losses[run_id] = min(line["eval_loss"] for line in lines if line.get("kind") == "eval")
    best = min(losses, key=losses.get)
    assert f"best by eval_loss (min): {best}" in result.stdout
    ctx = UIContext(workspace=workspace, texts=merge_texts(train.TEXT, runs.TEXT), i18n=None)
    assert sweep_results_panel.sweep_choices(ctx)[0][1] == sweep_id
    note, table, figure, best_run = sweep_results_panel.show(ctx, "en", sweep_id)
    assert best_run == best and f"**{best}**" in note
    assert table["headers"][2:5] == ["learning_rate", "lora_r", "eval_loss"] and len(table["data"]) == 4
    starred = [row for row in table["data"] if row[0] == "★"]
    assert len(starred) == 1 and starred[0][1] == best and starred[0][4] == pytest.approx(losses[best], abs=1e-4)
    assert {(row[2], row[3]) for row in table["data"]} == {(1e-3, 4), (1e-3, 16), (3e-3, 4), (3e-3, 16)}
    assert all(row[6] and row[7] and row[8] for row in table["data"])  # time, tokens/s, peak memory
    assert len(figure.data) == 2  # the target against each swept setting
    shared, tabs = sweep_results_panel.open_in("evaluate", best_run)
    assert shared == best and tabs.selected == "evaluate"
