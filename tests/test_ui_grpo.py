"""The Runs tab's GRPO panel and the Train tab's GRPO section.

The view tests write a run folder's metrics.jsonl and completions.jsonl in
the shape the GRPO stage writes them (TRL's logged keys plus format_share;
one sample a line) and read them back through the panel's tails: they test
the view, not the worker. The run test starts a real GRPO run from the Train
tab on the demo model and watches it in the Runs tab's panel."""

from __future__ import annotations

import json
import time

import pytest

from ui.panels import grpo_panel
from ui.tabs import train
from ui.views import grpo_charts


def _train_record(step: int, custom: float | None = 0.5) -> dict:
    record = {"time": 100.0 + step, "step": step, "epoch": step / 10, "kind": "train", "loss": 0.01 * step,
              "reward": 0.2 * step, "reward_std": 0.1, "rewards/exact_match/mean": 0.1 * step,
              "rewards/format/mean": 0.25 * step, "completions/mean_length": 20.0 + step,
              "completions/min_length": 5.0, "completions/max_length": 32.0, "format_share": 0.25 * step}
    if custom is not None:
        record["rewards/ends_politely/mean"] = custom
    return record


def _sample(step: int, n: int) -> dict:
    return {"step": step, "prompt": [{"role": "user", "content": f"What is {n} + {n}?"}],
            "completion": f"<think>add</think><answer>{2 * n + step}</answer>",
            "rewards": {"exact_match": 1.0 if step == 2 else 0.0, "format": 1.0, "ends_politely": None},
            "reward": 2.0 if step == 2 else 1.0}


def _append(path, items, tail: str = "") -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write("".join(json.dumps(i) + "\n" for i in items) + tail)


def test_the_panel_charts_each_reward_and_shows_the_samples_of_each_logging_step(ctx, tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    metrics, completions = run_dir / "metrics.jsonl", run_dir / grpo_panel.COMPLETIONS_FILE
    _append(metrics, [{"time": 99.0, "step": 0, "kind": "system", "event": "start"}, _train_record(1)])
    _append(completions, [_sample(1, 3), _sample(1, 4)], tail='{"step": 2, "prompt": "torn')  # a line being written
    watch = grpo_panel.GrpoWatch()
    watch.follow("run", run_dir, grpo=True)
    assert watch.read_new() and len(watch.records) == 2 and len(watch.samples) == 2

    note, table = grpo_panel.samples_view(ctx, "en", watch, None)
    assert note == "2 completions of step 1 (newest: step 1)."
    assert table["headers"] == ["prompt", "completion", "exact match", "format", "ends_politely", "weighted sum"]
    assert table["data"][0] == ["user: What is 3 + 3?", "<think>add</think><answer>7</answer>", "0", "1", "–", "1"]

    # The torn line completes, a later step arrives: only the new lines are read.
    with open(completions, "a", encoding="utf-8") as handle:
        handle.write(' cut", "completion": "x", "rewards": {}, "reward": 0}\n' + json.dumps(_sample(2, 5)) + "\n")
    _append(metrics, [_train_record(2)])
    assert watch.read_new() and len(watch.records) == 3 and len(watch.samples) == 4
    assert not watch.read_new()
    note, table = grpo_panel.samples_view(ctx, "en", watch, "")
    assert note == "2 completions of step 2 (newest: step 2)." and table["data"][1][-1] == "2"
    assert grpo_charts.sample_steps(watch.samples) == [2, 1]
    note, earlier = grpo_panel.samples_view(ctx, "en", watch, "1")  # the step picker's value
    assert note.startswith("2 completions of step 1") and earlier["data"][1][0] == "user: What is 4 + 4?"

    rewards, length, share, kl = grpo_panel.figures(ctx, "en", watch.records)
    assert [t.name for t in rewards.data] == ["exact match", "format", "ends_politely", "weighted sum"]
    assert list(rewards.data[3].y) == [0.2, 0.4] and list(rewards.data[0].x) == [1, 2]
    assert [t.name for t in length.data] == ["mean", "shortest", "longest"] and list(length.data[0].y) == [21.0, 22.0]
    assert list(share.data[0].y) == [0.25, 0.5] and tuple(share.layout.yaxis.range) == (0, 1.02)
    assert not kl.data and kl.layout.annotations[0].text == "No KL: beta is 0 (no reference model)"

    zh_rewards, *_ = grpo_panel.figures(ctx, "zh", watch.records)
    assert [t.name for t in zh_rewards.data] == ["完全匹配", "格式", "ends_politely", "加权和"]
    note, table = grpo_panel.samples_view(ctx, "zh", watch, None)
    assert note == "第 2 步的 2 条生成（最新：第 2 步）。" and table["headers"][:2] == ["提示", "生成"]


def test_a_run_without_files_or_samples_says_so(ctx, tmp_path):
    watch = grpo_panel.GrpoWatch()
    watch.follow("run", tmp_path, grpo=True)
    assert not watch.read_new()
    note, table = grpo_panel.samples_view(ctx, "en", watch, None)
    assert note.startswith("No sample completions yet") and table["data"] == [["", "", ""]]
    figures = grpo_panel.figures(ctx, "en", [])
    assert all(f.layout.annotations[0].text == "Waiting for the first logged step…" for f in figures)
    without_format = {k: v for k, v in _train_record(1).items() if k != "format_share"}
    _, _, share, kl = grpo_panel.figures(ctx, "en", [{**without_format, "kl": 0.01}])
    assert share.layout.annotations[0].text == "No format reward in this run" and list(kl.data[0].y) == [0.01]


def test_sample_table_copes_with_odd_lines():
    samples = [{"step": 3, "prompt": "p" * 1000, "completion": {"role": "assistant", "content": "ok"},
                "rewards": [1, 2], "reward": float("nan")},
               {"step": "x", "prompt": "no step"}, {"prompt": "no step at all"}]
    table = grpo_charts.sample_table(samples, None, {"prompt": "prompt", "completion": "completion",
                                                     "weighted_sum": "sum"})
    assert table["headers"] == ["prompt", "completion", "sum"]
    (prompt, completion, total), = table["data"]
    assert len(prompt) == grpo_charts.PROMPT_CHARS and prompt.endswith("…") and completion == "ok" and total == "–"
    many = [{"step": s, "prompt": "", "completion": "", "rewards": {}, "reward": 0} for s in range(300)]
    kept = grpo_charts.keep_newest(many)
    assert len(kept) == grpo_charts.KEPT_STEPS and kept[0]["step"] == 300 - grpo_charts.KEPT_STEPS


# --- the Train tab's GRPO section ---------------------------------------------------------------

def _grpo_config(**settings):
    from backend.config_recipes import tiny_config

    settings.setdefault("rewards", [{"kind": "exact_match", "weight": 1.0}, {"kind": "format", "weight": 1.0}])
    settings = {"per_device_train_batch_size": 4, "num_generations": 4, **settings}
    return tiny_config(stage="grpo", **settings)


def _values(**widgets) -> list:
    """The Train form of a grpo run with some GRPO widgets set as a browser would send them."""
    from ui import forms

    values = forms.form_values(_grpo_config())
    for name, value in widgets.items():
        values[forms.NAMES.index(name)] = value
    return values


def test_every_reward_preset_and_own_function_round_trip_through_form_runconfig_and_yaml(tmp_path):
    from backend.config import RunConfig
    from ui import forms

    rewards = [{"kind": "exact_match", "weight": 2.0}, {"kind": "format", "weight": 0.5, "pattern": r"\d+"},
               {"kind": "length", "weight": 1.0, "min": 4, "max": 40}, {"kind": "contains", "weight": 1.0, "text": "sum"},
               {"kind": "not_contains", "weight": -1.0, "text": "sorry"},
               {"kind": "contains", "weight": 0.25, "text": "because"}]  # a kind twice: the form keeps the second
    config = _grpo_config(rewards=rewards, reward_functions=["tests.test_ui_grpo:_polite", "os.path:basename"],
                          reward_weights=[0.5, 1.0])
    values = forms.form_values(config)
    shown = dict(zip(forms.NAMES, values))
    assert shown["reward_contains_text"] == "sum" and shown["rewards_kept"] == [rewards[-1]]
    assert shown["reward_length_min"] == "4" and shown["reward_format_pattern"] == r"\d+"
    assert shown["reward_functions_text"] == "tests.test_ui_grpo:_polite 0.5\nos.path:basename 1"
    back = forms.config_from_values(values, config.model_name_or_path, config.dataset)
    assert back.to_dict() == config.to_dict()
    path = tmp_path / "run.yaml"
    back.save(path)
    assert forms.form_values(RunConfig.load(path)) == values

    # Unticking a kind drops it and the kept preset of that kind; a weight on one line gives 1 to the others.
    values[forms.NAMES.index("reward_contains_on")] = False
    values[forms.NAMES.index("reward_functions_text")] = "a.b:one\n\n# a comment\na.c:two\t3  # heavier\n"
    values[forms.NAMES.index("reward_format_pattern")] = ""  # empty: the think / answer default
    changed = forms.config_from_values(values, "demo", "demo")
    assert [p["kind"] for p in changed.rewards] == ["exact_match", "format", "length", "not_contains"]
    assert "pattern" not in changed.rewards[1]
    assert changed.reward_functions == ["a.b:one", "a.c:two"] and changed.reward_weights == [1.0, 3.0]


def _polite(prompts, completions, **kwargs):
    return [1.0 if "please" in str(c) else 0.0 for c in completions]


def test_grpo_settings_the_run_cannot_take_are_sentences_in_the_plan(ctx):
    cases = [  # widgets as typed -> the sentence the Plan shows (RunConfig's own)
        ({"reward_length_on": True, "reward_length_min": "ten"}, "(length): give min and / or max as whole numbers"),
        ({"reward_length_on": True, "reward_length_min": "50", "reward_length_max": "10"}, "min not above max"),
        ({"reward_contains_on": True, "reward_contains_text": ""}, "(contains) needs a text to look for"),
        ({"reward_format_pattern": "(<answer>"}, "is not a valid regular expression"),
        ({"reward_exact_match_weight": None, "reward_functions_text": "a.b:f heavy"}, "'heavy' should be float"),
        ({"reward_functions_text": "no_colon"}, "no_colon"),
        ({"reward_exact_match_on": False, "reward_format_on": False}, "stage grpo needs a reward"),
        ({"num_generations": 3}, "num_generations"),
    ]
    for widgets, sentence in cases:
        derived, estimate = train.plan(ctx, "en", "demo", "demo", {"rows": 10}, None, *_values(**widgets))
        assert derived.startswith("❌") and sentence in derived and estimate == "", (widgets, derived)
    derived, _ = train.plan(ctx, "zh", "demo", "demo", {"rows": 10}, None,
                            *_values(reward_exact_match_on=False, reward_format_on=False))
    assert derived.startswith("❌") and "stage grpo needs a reward" not in derived  # in Chinese


def test_switching_to_grpo_ticks_its_default_rewards_and_keeps_a_users_own(ctx):
    from backend.config_recipes import tiny_config
    from ui import forms
    from ui.panels import grpo_section

    values = forms.form_values(tiny_config())
    values[forms.NAMES.index("stage")] = "grpo"
    moved = dict(zip(forms.NAMES, forms.stage_form_values(values, "sft")))
    assert moved["reward_exact_match_on"] and moved["reward_format_on"] and not moved["reward_length_on"]
    assert moved["per_device_train_batch_size"] == 8 and grpo_section.visible("grpo") and not grpo_section.visible("dpo")

    own = forms.form_values(tiny_config())  # a user who ticked length before choosing grpo
    own[forms.NAMES.index("reward_length_on")], own[forms.NAMES.index("reward_length_max")] = True, "30"
    own[forms.NAMES.index("stage")] = "grpo"
    kept = dict(zip(forms.NAMES, forms.stage_form_values(own, "sft")))
    assert kept["reward_length_on"] and not kept["reward_exact_match_on"]

    back = list(moved.values())
    back[forms.NAMES.index("stage")] = "sft"  # the defaults go again with the stage
    assert not dict(zip(forms.NAMES, forms.stage_form_values(back, "grpo")))["reward_exact_match_on"]


# --- a real GRPO run, started from the Train tab and watched in the Runs tab ---------------------

def _sums(path) -> str:
    rows = [{"system": "Answer as <answer>N</answer>.", "instruction": f"What is {10 + i} + {20 + 2 * i}?",
             "output": str(30 + 3 * i)} for i in range(16)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


@pytest.mark.slow
def test_a_grpo_run_started_in_train_shows_its_rewards_and_samples_in_runs(ctx, workspace):
    from backend.config_recipes import tiny_config
    from backend.runs.files import read_status
    from ui import forms

    # Sums with a reference answer; 8 completions a step = 2 prompts x 4, of at most 8 tokens.
    config = tiny_config(devices="cpu", stage="grpo", max_steps=2, logging_steps=1, val_size=0.0, cutoff_len=96,
                         per_device_train_batch_size=8, num_generations=4, max_completion_length=8,
                         learning_rate=1e-3, rewards=[{"kind": "exact_match", "weight": 1.0}])
    values = forms.form_values(config)
    for name, value in {"reward_format_on": True, "reward_not_contains_on": True,
                        "reward_not_contains_text": "sorry", "reward_not_contains_weight": 0.5}.items():
        values[forms.NAMES.index(name)] = value  # ticked in the GRPO section
    message, run_id = train.start(ctx, "en", "demo", _sums(workspace.root / "sums.jsonl"), *values)
    assert run_id, message
    run_dir = ctx.store.get(run_id).run_dir
    watch, out = None, None
    while True:  # tick like the panel's timer until the run ends
        state = ctx.store.get(run_id).state
        out = grpo_panel.tick(ctx, "en", watch, run_id, None)
        watch = out[0]
        if state not in ("queued", "running"):
            break
        time.sleep(0.5)  # the timer's pace; the loop ends with the run, not with a time
    assert state == "completed", (read_status(run_dir), (run_dir / "train.log").read_text()[-3000:])
    assert watch.grpo and len(watch.records) == len((run_dir / "metrics.jsonl").read_text().splitlines())

    # Everything the files hold is in the panel: a fresh session sees the run whole.
    out = grpo_panel.tick(ctx, "en", None, run_id, None)
    assert out[1] == {"visible": True, "__type__": "update"}
    rewards, length, share, kl = out[2:6]
    train_lines = [r for r in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines())
                   if r.get("kind") == "train" and "reward" in r]
    assert [t.name for t in rewards.data] == ["exact match", "format", "does not contain", "weighted sum"]
    assert list(rewards.data[-1].y) == [r["reward"] for r in train_lines] and len(train_lines) == 2
    assert list(share.data[0].y) == [r["format_share"] for r in train_lines]
    assert list(length.data[0].y) == [r["completions/mean_length"] for r in train_lines] and kl.data  # beta > 0
    samples = [json.loads(line) for line in (run_dir / grpo_panel.COMPLETIONS_FILE).read_text().splitlines()]
    newest = [s for s in samples if s["step"] == max(s["step"] for s in samples)]
    table = out[-1]
    assert table["headers"] == ["prompt", "completion", "exact match", "format", "does not contain", "weighted sum"]
    assert [row[1] for row in table["data"]] == [s["completion"] for s in newest]
    assert all(row[0].startswith("What is ") for row in table["data"])
    assert out[-3]["choices"] == [str(s) for s in sorted({s["step"] for s in samples}, reverse=True)]


def test_the_panel_stays_hidden_for_a_run_of_another_stage(ctx):
    from backend.config_recipes import tiny_config
    from backend.runs.files import update_status

    run_dir = ctx.store.runs_dir / "20260101-000000-sft"
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(tiny_config().to_yaml(), encoding="utf-8")
    update_status(run_dir, state="completed", started_at=1.0, ended_at=2.0)
    out = grpo_panel.tick(ctx, "en", None, run_dir.name, None)
    assert out[1] == {"visible": False, "__type__": "update"} and not out[0].grpo
    again = grpo_panel.tick(ctx, "en", out[0], run_dir.name, None)
    assert again[0].metrics is None  # nothing of its files is read
    assert grpo_panel.tick(ctx, "en", None, None, None)[1] == {"visible": False, "__type__": "update"}


# --- the Plan of a grpo run -------------------------------------------------------------------------

def _plan(ctx, dataset: str, lang: str = "en", **settings) -> str:
    from ui import forms

    settings = {"val_size": 0.0, "per_device_train_batch_size": 8, **settings}
    config = _grpo_config(**settings)
    rows = train.count_rows(ctx, dataset, None, "demo", "auto", "grpo")
    derived, _ = train.plan(ctx, lang, "demo", dataset, rows, None, *forms.form_values(config))
    return derived


def test_the_plan_counts_prompts_and_completions_and_says_the_workers_checks(ctx, workspace):
    sums = _sums(workspace.root / "sums.jsonl")
    rows = train.count_rows(ctx, sums, None, "demo", "auto", "grpo")
    assert rows["rows"] == 16 and all(tokens > 0 and has for tokens, has in rows["prompts"]) and rows["context"]
    plan = _plan(ctx, sums)
    assert plan.startswith("**16** prompts x **4** completions each → **8** completions an optimizer step "
                           "(**2** prompts), **8** steps per epoch") and "❌" not in plan and "⚠" not in plan
    assert "beta **0.1**: a reference pass" in _plan(ctx, sums) and "beta 0: no KL term" in _plan(ctx, sums, beta=0.0)

    longest = max(tokens for tokens, _ in rows["prompts"])
    assert "❌" in _plan(ctx, sums, max_completion_length=rows["context"]) and "over the model's context" in \
        _plan(ctx, sums, max_completion_length=rows["context"])
    assert "❌ No prompt is left to train on (16 prompt longer than cutoff_len)" in _plan(ctx, sums, cutoff_len=longest - 1)
    one = workspace.root / "one.jsonl"
    one.write_text(json.dumps({"instruction": "What is 1 + 2?", "output": "3"}) + "\n", encoding="utf-8")
    assert "❌ 1 prompt(s) x num_generations 4 = 4 completions, fewer than one step" in _plan(ctx, str(one))

    prompts_only = workspace.root / "prompts.jsonl"  # no reference answers, which exact match needs
    prompts_only.write_text("".join(json.dumps({"prompt": f"Say {i}."}) + "\n" for i in range(8)), encoding="utf-8")
    plan = _plan(ctx, str(prompts_only))
    assert plan.startswith("**8** prompts") and "❌ exact_match compare(s) against a reference answer" in plan
    assert "❌" not in _plan(ctx, str(prompts_only), rewards=[{"kind": "format", "weight": 1.0}])
    zh = _plan(ctx, str(prompts_only), "zh")
    assert zh.startswith("**8** 个提示") and "❌" in zh and "compare(s) against" not in zh

    broken = workspace.root / "broken.json"
    broken.write_text('[{"instruction": "a" "output": "b"}]', encoding="utf-8")
    assert _plan(ctx, str(broken)).startswith("Step numbers appear once the dataset can be read. ") and \
        "invalid JSON in row 0" in _plan(ctx, str(broken))


def test_the_plan_checks_the_users_reward_functions_as_the_worker_does(ctx, workspace, tmp_path, monkeypatch,
                                                                      starts_processes):
    # Checked as the worker checks them, in a child process (which finds the module on PYTHONPATH, as the
    # worker would), and again after the file is fixed.
    sums = _sums(workspace.root / "sums.jsonl")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    module = tmp_path / "plan_rewards.py"
    module.write_text("def polite(completion):\n    return [1.0]\n", encoding="utf-8")
    plan = _plan(ctx, sums, reward_functions=["plan_rewards:polite"])
    assert "❌ reward_functions: 'plan_rewards:polite' failed when called once on a sample completion" in plan
    module.write_text("def polite(prompts, completions, **kwargs):\n    return [0.5] * len(completions)\n",
                      encoding="utf-8")
    assert "✅ Your reward functions import and score a sample completion: `plan_rewards:polite`" in \
        _plan(ctx, sums, reward_functions=["plan_rewards:polite"])
    module.write_text("def polite(prompts, completions:\n", encoding="utf-8")
    assert "❌ Cannot import module 'plan_rewards' for 'plan_rewards:polite': SyntaxError" in \
        _plan(ctx, sums, reward_functions=["plan_rewards:polite"])
    assert "❌ Cannot import module 'nowhere'" in _plan(ctx, sums, reward_functions=["nowhere:f"])
