"""Train tab handlers against the real backend: the RunConfig built from form
values, the plan (derived numbers, memory verdict), the command, YAML, and a
real short run started through the handler that then shows in the Runs table."""

from __future__ import annotations

import math
import shlex

import yaml

from backend.config import RunConfig
from backend.config_recipes import tiny_config
from backend.models.demo_facts import build_demo_rows
from backend.models.hardware import Device, as_dicts
from ui import forms
from ui.tabs import train

H100 = Device("cuda:0", "NVIDIA H100", 80.0, True, True)


def browser_values(config: RunConfig) -> list:
    """What the browser sends for `config`: gr.Number and gr.Slider send floats."""
    values = forms.form_values(config)
    kinds = {s.name: s.widget for s in forms.ALL_FIELDS}
    return [float(v) if kinds.get(n) in ("number", "slider") and isinstance(v, int) and not isinstance(v, bool) else v
            for n, v in zip(forms.NAMES, values)]


def test_form_values_round_trip_through_runconfig():
    config = tiny_config(method="qlora", quantization_bits=8, lora_target=["q_proj", "v_proj"], eval_steps=10,
                       max_steps=30, per_device_train_batch_size=4, neftune_noise_alpha=5.0, devices="cpu")
    assert forms.config_from_values(browser_values(config), "demo", "demo") == config
    values = dict(zip(forms.NAMES, browser_values(tiny_config())))
    # Cleared boxes mean "empty"; a cleared devices box means auto; 'all-linear' wins over names.
    values.update(save_total_limit="", run_name="", devices="", lora_target=["all-linear", "q_proj"],
                  method_choice="full")
    config = forms.config_from_values(list(values.values()), "demo", "demo")
    assert config.save_total_limit is None and config.run_name is None and config.devices == "auto"
    assert config.lora_target == "all-linear" and config.method == "full" and config.quantization_bits is None


def test_plan_shows_derived_numbers_and_a_fitting_estimate(ctx, device_dicts):
    rows = train.count_rows(ctx, "demo")
    lengths = rows.pop("lengths")  # each row's tokens, as the worker encodes it: the memory estimate sizes a step by them
    assert rows == {"rows": len(build_demo_rows()), "has_eval": False} and len(lengths["rows"]) == rows["rows"]
    rows["lengths"] = lengths
    config = tiny_config(per_device_train_batch_size=4, gradient_accumulation_steps=2, num_train_epochs=3,
                       val_size=0.1, warmup_ratio=0.1, devices="cpu")
    derived, estimate = train.plan(ctx, "en", "demo", "demo", rows, device_dicts, *browser_values(config))
    n_train = rows["rows"] - round(rows["rows"] * 0.1)
    per_epoch = math.ceil(math.ceil(n_train / 4) / 2)  # the Trainer rounds a partial accumulation up
    assert f"**{n_train}** training rows" in derived
    assert f"effective batch **8**, **{per_epoch}** steps per epoch, **{3 * per_epoch}** steps" in derived
    assert f"**{math.ceil(0.3 * per_epoch)}** warmup steps" in derived
    assert estimate.startswith("✅ Fits on CPU") and "| Activations |" in estimate
    assert "computing in fp32" in estimate  # the CPU trains in fp32


def test_plan_counts_pairs_as_the_worker_trains_them(ctx, device_dicts, tmp_path):
    """kto trains a row per answer, and pairs whose prompt fills cutoff_len are left out: the Plan
    counts both with the demo model's tokenizer; a model not on disk gives an upper bound that says so."""
    import json

    pairs = [{"prompt": f"Question {i}?", "chosen": "Yes.", "rejected": "No."} for i in range(6)]
    pairs += [{"prompt": "Long " + "word " * 80 + f"{i}?", "chosen": "Yes.", "rejected": "No."} for i in range(3)]
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in pairs))
    plan = dict(dataset=str(path), cutoff_len=64, per_device_train_batch_size=1, gradient_accumulation_steps=1,
                num_train_epochs=1, val_size=0.0, devices="cpu")
    for stage, trained in (("dpo", 6), ("kto", 12)):
        rows = train.count_rows(ctx, str(path), "", "demo", "auto", stage)
        config = tiny_config(stage=stage, **plan)
        derived, _ = train.plan(ctx, "en", "demo", str(path), rows, device_dicts, *browser_values(config))
        assert f"**{trained}** training rows" in derived and f"**{trained}** steps in all" in derived
        assert f"**{trained // 2}** rows are left out" in derived and "most steps" not in derived
    assert "9 pairs are 18 rows" in derived
    (ctx.workspace.models_dir / "smollm2-135m-instruct").unlink()  # the workspace fixture's cached conversion
    rows = train.count_rows(ctx, str(path), "", "smollm2-135m-instruct", "auto", "kto")  # not converted here
    config = tiny_config(stage="kto", model_name_or_path="smollm2-135m-instruct", **plan)
    derived, _ = train.plan(ctx, "en", "smollm2-135m-instruct", str(path), rows, device_dicts, *browser_values(config))
    assert "**18** steps in all" in derived and "These are the most steps the run can make" in derived


def test_plan_warns_about_an_absurd_number_of_steps(ctx, device_dicts, tmp_path):
    from backend.runs.files import read_status, update_status
    from backend.runs.info import InfoReader
    from ui.views import run_view

    rows = {"rows": 268}
    sane, _ = train.plan(ctx, "en", "demo", "demo", rows, device_dicts, *browser_values(tiny_config(devices="cpu")))
    assert "⚠" not in sane
    absurd = tiny_config(max_steps=10**12, devices="cpu")
    for lang, words in (("en", "Lower max_steps"), ("zh", "请调低 max_steps")):
        derived, _ = train.plan(ctx, lang, "demo", "demo", rows, device_dicts, *browser_values(absurd))
        assert "1,000,000,000,000" in derived and words in derived
    epochs, _ = train.plan(ctx, "en", "demo", "demo", rows, device_dicts,
                           *browser_values(tiny_config(num_train_epochs=1e30, devices="cpu")))
    assert "Lower num_train_epochs" in epochs
    # The worker's own warning (written after its first step) is shown above a running run's charts.
    run_dir = tmp_path / "20260101-000000-long"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text(absurd.to_yaml(), encoding="utf-8")
    update_status(run_dir, state="running", plan_warning="the remaining steps would take about 3.1e+06 years")
    info = InfoReader().read(run_dir, read_status(run_dir))
    assert run_view.alert_text(lambda k, **v: k, info) == "⚠ the remaining steps would take about 3.1e+06 years"


def test_verdict_says_what_does_not_fit(ctx, device_dicts):
    big = tiny_config(method="full", per_device_train_batch_size=8, cutoff_len=2048, devices="cpu")
    _, estimate = train.plan(ctx, "en", "Qwen/Qwen2.5-7B-Instruct", "demo", {"rows": 10}, device_dicts,
                             *browser_values(big))
    assert estimate.startswith("❌ Does not fit on CPU") and "gradient checkpointing" in estimate
    small = tiny_config(method="qlora", gradient_checkpointing=True, per_device_train_batch_size=2, cutoff_len=1024)
    _, estimate = train.plan(ctx, "zh", "Qwen/Qwen2.5-7B-Instruct", "demo", {"rows": 10}, as_dicts([H100]),
                             *browser_values(small))
    assert estimate.startswith("✅ NVIDIA H100 放得下") and "bf16" in estimate


def test_the_hint_names_only_settings_not_on_that_make_it_fit(ctx):
    """Checkpointing on and QLoRA 4-bit chosen: the Plan suggests neither, only a batch and a cutoff
    that fit, each with the estimate it gives."""
    config = tiny_config(method="qlora", quantization_bits=4, gradient_checkpointing=True, devices="cpu",
                         per_device_train_batch_size=32, cutoff_len=2048)
    small_cpu = as_dicts([Device("cpu", "CPU", 8.0, False, False)])
    for lang, words in (("en", "Each of these alone makes it fit: per_device_train_batch_size "),
                        ("zh", "以下任一项单独即可放下：per_device_train_batch_size 设为 ")):
        _, estimate = train.plan(ctx, lang, "Qwen/Qwen2.5-0.5B-Instruct", "demo", {"rows": 10}, small_cpu,
                                 *browser_values(config))
        verdict = estimate.split("\n")[0]
        assert verdict.startswith(("❌ Does not fit on CPU", "❌ CPU 放不下")) and words in verdict, verdict
        assert "gradient_checkpointing" not in verdict and "qlora" not in verdict
        assert verdict.count("GiB") == 4, verdict  # the verdict's two, and one per suggestion


def test_invalid_settings_show_the_config_sentence(ctx, device_dicts):
    values = dict(zip(forms.NAMES, browser_values(tiny_config())))
    values.update(val_size=0.0, early_stopping_patience=2.0)
    derived, estimate = train.plan(ctx, "en", "demo", "demo", {"rows": 10}, device_dicts, *values.values())
    assert "early_stopping_patience needs an eval split" in derived and estimate == ""
    message, run_id = train.start(ctx, "en", "demo", "demo", *values.values())
    assert run_id is None and "needs an eval split" in message
    assert not any(ctx.workspace.runs_dir.iterdir())


def test_local_model_folder_is_checked_as_typed(ctx, tmp_path, demo_model_dir):
    assert "looks complete" in train.check_model(ctx, "en", str(demo_model_dir))
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "config.json").write_text("{}")
    report = train.check_model(ctx, "en", str(tmp_path / "half"))
    assert "cannot be trained yet" in report and "No tokenizer files" in report and "No weights" in report


def test_show_command_and_yaml_reproduce_the_config(ctx, tmp_path):
    config = tiny_config(max_steps=7, lora_r=4, devices="cpu")
    message, command, text = train.show_command(ctx, "en", "demo", "demo", *browser_values(config))
    argv = shlex.split(command)
    assert argv[argv.index("-m"):argv.index("-m") + 4] == ["-m", "backend.train", "--config", "run.yaml"]
    assert argv[argv.index("--workspace") + 1] == str(ctx.workspace.root)
    assert RunConfig.from_dict(yaml.safe_load(text)) == config and "run.yaml" in message
    message, path = train.save_yaml(ctx, "en", "demo", "demo", *browser_values(config))
    assert ctx.workspace.contains(path)
    loaded = train.load_yaml(ctx, "en", path)
    assert loaded[1:3] == ["demo", "demo"] and forms.config_from_values(loaded[3:], "demo", "demo") == config
    (tmp_path / "bad.yaml").write_text("lora_rank: 3\n")
    bad = train.load_yaml(ctx, "en", str(tmp_path / "bad.yaml"))
    assert "Unknown setting 'lora_rank'" in bad[0] and "did you mean 'lora_r'" in bad[0]


def test_picking_a_model_proposes_settings_for_its_size_to_take_or_leave(ctx):
    """The tiny demo's lr 0.003 x 12 epochs is no setting for a 135M model: picking one proposes the
    measured setting; taking it changes only those fields, and a form that has them proposes nothing."""
    tiny = browser_values(tiny_config())
    text, proposed = train.suggest(ctx, "en", "smollm2-135m-instruct", *tiny)
    assert "`learning_rate` 0.0005 (now 0.003)" in text and "`num_train_epochs` 5 (now 12)" in text
    assert "measured on SmolLM2-135M" in text
    taken = forms.config_from_values(proposed, "smollm2-135m-instruct", "identity")
    left = forms.config_from_values(tiny, "smollm2-135m-instruct", "identity")
    assert (taken.learning_rate, taken.num_train_epochs) == (5e-4, 5.0)
    assert dict(taken.to_dict(), learning_rate=0, num_train_epochs=0) == dict(left.to_dict(), learning_rate=0,
                                                                              num_train_epochs=0)
    assert train.suggest(ctx, "en", "smollm2-135m-instruct", *proposed) == ("", None)
    text, _ = train.suggest(ctx, "en", "demo", *browser_values(RunConfig()))
    assert "`learning_rate` 0.003 (now 0.0005)" in text
    text, _ = train.suggest(ctx, "zh", "Qwen/Qwen2.5-7B-Instruct", *tiny)
    assert "0.0002" in text and "未在此实测" in text


def test_taking_a_suggestion_keeps_fields_changed_after_it_was_proposed(ctx):
    """The proposal is made when the model is picked; a batch size typed before the click stays."""
    tiny = browser_values(tiny_config())
    _, proposed = train.suggest(ctx, "en", "smollm2-135m-instruct", *tiny)
    edited = browser_values(tiny_config(per_device_train_batch_size=3))
    taken = forms.config_from_values(train.take_suggestion(proposed, *edited), "smollm2-135m-instruct", "identity")
    assert (taken.learning_rate, taken.num_train_epochs, taken.per_device_train_batch_size) == (5e-4, 5.0, 3)
    assert train.take_suggestion(None, *edited) == edited


def test_the_hardware_note_says_how_many_cpu_threads_a_run_takes_now(ctx, monkeypatch):
    """On the CPU the note gives the thread choice a worker would make now, from the idle CPUs measured
    (or OMP_NUM_THREADS when the user set it), in both languages."""
    cpu = [Device("cpu", "CPU", 24.0, False, False)]
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    english = train.summary.hardware_text(train._msg(ctx, "en"), cpu)
    assert "CPU thread(s):" in english and "CPUs are idle" in english
    assert "个 CPU 线程" in train.summary.hardware_text(train._msg(ctx, "zh"), cpu)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert "**3** CPU thread(s), as OMP_NUM_THREADS says" in train.summary.hardware_text(train._msg(ctx, "en"), cpu)
    assert "thread" not in train.summary.hardware_text(train._msg(ctx, "en"), [H100, *cpu]).split("`auto`")[1]


def _hold_the_cpu(ctx) -> str:
    """A run recorded as running on the CPU under this test's own process: a Start then queues
    behind it, so nothing launches (and nothing queued here ever starts)."""
    import os
    import time

    from backend.runs import processes
    from backend.runs.files import update_status

    run_id = ctx.store.create(tiny_config(devices="cpu", run_name="holder"))
    update_status(ctx.store.runs_dir / run_id, state="running", pid=os.getpid(), pgid=os.getpgid(0),
                  create_time=processes.create_time(os.getpid()), started_at=time.time())
    return run_id


def test_every_page_load_restores_the_form_from_the_saved_settings(ctx):
    """The components' values are the app start's: a reload showed `identity` and the default names
    although the settings held others, and Start then trained on those."""
    from backend.runs import queue

    assert train.restore_form(ctx)[1]["value"] == "identity"  # nothing saved: the recipe's
    ctx.remember(dataset="mine")  # saved in the Data tab
    model, dataset, *values = train.restore_form(ctx)
    assert dataset["value"] == "mine"
    _hold_the_cpu(ctx)
    config = tiny_config(devices="cpu", dataset="identity", identity_name="Aster", identity_author="Lab Nine")
    message, run_id = train.start(ctx, "en", "demo", "identity", *forms.form_values(config))
    assert run_id and "queued" in message
    queue.cancel(ctx.store, run_id)
    model, dataset, *values = train.restore_form(ctx)  # the next page load, in any browser
    assert model == "demo" and dataset["value"] == "identity"  # Start's dataset wins over Data's older one
    restored = forms.config_from_values(values, model, dataset["value"])
    assert (restored.identity_name, restored.identity_author) == ("Aster", "Lab Nine")


SKIP = {"__type__": "update"}  # gr.skip(), as a handler returns it


def test_a_page_load_restores_only_what_differs_and_what_the_user_has_not_edited():
    """Setting every field at load fired every field's change handlers at once (the Plan, the rows, the
    estimate), and a late load on a busy machine overwrote what the user had just typed."""
    start = ["demo", "identity", 5e-4, 8, "Nova"]
    restored = ["demo", {"__type__": "update", "value": "mine"}, 3e-4, 8, "Aster"]
    current = ["demo", "identity", 0.0005, 8.0, "Typed"]  # the user already typed a name
    changes = train.restore_changes(restored, start, current)
    assert changes[0] == SKIP and changes[3] == SKIP  # equal (8 and 8.0 alike): nothing sent
    assert changes[1]["value"] == "mine" and changes[2] == 3e-4  # differs from the page: restored
    assert changes[4] == SKIP  # the user's edit stays
