"""The training worker end to end: real `python -m backend.train` subprocesses
on the demo model (LoRA through the shared default demo run, QLoRA 4-bit and
full with a few steps), stop + resume at the worker level, and bad input."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from backend.config import RunConfig
from backend.config_recipes import tiny_config
from backend.runs.files import list_checkpoints, read_status

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow
# A few fast optimizer steps, no eval split. Four rows and a batch of four: every step sees
# the same batch, so "the loss falls" is about learning, not about which rows a step drew.
QUICK = ["cutoff_len=64", "per_device_train_batch_size=4", "logging_steps=1", "val_size=0", "learning_rate=1e-3",
         "warmup_ratio=0"]


@pytest.fixture
def quick(workspace) -> list[str]:
    from backend.models.demo_facts import build_demo_rows

    data = workspace.root / "four.jsonl"
    data.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in build_demo_rows()[:4]))
    return [*QUICK, f"dataset={data}"]


def worker(workspace, env, *sets: str, run_dir: Path | None = None, args=(), wait=True):
    config = workspace.root / "run.yaml"
    if not config.exists():
        tiny_config().save(config)
    command = [sys.executable, "-m", "backend.train", "--workspace", str(workspace.root)]
    command += list(args) or ["--config", str(config), "--run-dir", str(run_dir)]
    for item in sets:
        command += ["--set", item]
    if not wait:
        with open(Path(run_dir).parent / f"{Path(run_dir).name}.out", "w") as log:  # the child keeps its copy
            return subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


def metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def train_losses(run_dir: Path) -> list[float]:
    return [m["loss"] for m in metrics(run_dir) if m["kind"] == "train"]


def assert_completed(result, run_dir: Path) -> dict:
    status = read_status(run_dir)
    assert result.returncode == 0, f"{status.get('error')}\n{result.stderr[-3000:]}"
    assert status["state"] == "completed" and status["exit_code"] == 0
    assert (run_dir / "final" / "COMPLETE").is_file()
    return status


# ---------------------------------------------------------------- LoRA: the default demo run

def test_default_run_writes_every_contract_file(short_demo_run):
    run = short_demo_run
    status = read_status(run)
    assert status["precision"] == "fp32" and status["world_size"] == 1
    assert status["global_step"] == status["max_steps"] > 0 and status["worker_pid"] and status["create_time"]
    assert RunConfig.load(run / "config.yaml").method == "lora"
    checkpoints = list_checkpoints(run)
    assert len(checkpoints) >= 2
    for folder in checkpoints:
        for name in ("adapter_model.safetensors", "trainer_state.json", "optimizer.pt", "tokenizer_config.json"):
            assert (folder / name).is_file(), folder / name
    records = metrics(run)
    kinds = {r["kind"] for r in records}
    assert kinds == {"train", "eval", "system"}
    for record in records:
        assert {"time", "step", "epoch", "kind"} <= record.keys()
    train = [r for r in records if r["kind"] == "train"]
    for record in train:
        assert {"loss", "learning_rate", "grad_norm", "tokens_per_second", "memory_rss_gb", "grad_norms"} <= record.keys()
        layers = len(record["grad_norms"]["attn"])
        assert layers == len(record["grad_norms"]["mlp"]) > 0 and isinstance(record["grad_norms"]["other"], float)
        assert record["tokens_per_second"] > 0
    assert any("eval_loss" in r for r in records if r["kind"] == "eval")
    summary = json.loads((run / "summary.json").read_text())
    for key in ("global_step", "epochs", "wall_time_s", "train_tokens_per_second", "peak_rss_gb", "rows_total",
                "rows_dropped", "rows_truncated", "best_checkpoint", "best_eval_loss", "final_train_loss", "precision"):
        assert summary[key] is not None, key
    assert (run / summary["best_checkpoint"] / "COMPLETE").is_file()
    log = (run / "train.log").read_text()
    assert "completed at step" in log and log.count("completed at step") == 1
    debug = run / "debug.log"  # a LoRA run does not import bitsandbytes (backend/training/unused_libraries.py)
    assert "gemm_4bit" not in (debug.read_text() if debug.is_file() else "")


def test_default_run_learns_and_leaves_the_base_alone(trained_demo_run, demo_model_dir):
    from peft import PeftModel

    from backend.models.loading import load_model

    losses = train_losses(trained_demo_run)
    assert losses[-1] < 0.5 * losses[0], losses
    base_weights = load_file(str(next(Path(demo_model_dir).glob("*.safetensors"))))
    model = PeftModel.from_pretrained(load_model(demo_model_dir), trained_demo_run / "final")
    adapter = load_file(str(trained_demo_run / "final" / "adapter_model.safetensors"))
    lora_b = [v for k, v in adapter.items() if "lora_B" in k]
    assert lora_b and all(v.abs().sum() > 0 for v in lora_b)  # lora_B starts at zero: it was trained
    state = model.base_model.model.state_dict()
    compared = 0
    for name, original in base_weights.items():
        module, _, param = name.rpartition(".")
        wrapped = f"{module}.base_layer.{param}"  # a LoRA-wrapped layer keeps its weight and bias here
        key = wrapped if wrapped in state else name
        assert torch.equal(state[key], original), name
        compared += key.endswith("base_layer.weight")
    assert compared > 0  # the adapted layers' frozen weights were among those checked


def test_default_run_answers_the_demo_prompts(trained_demo_run, demo_model_dir):
    from peft import PeftModel

    from backend.models.demo_facts import DEMO_PROMPTS
    from backend.models.loading import load_model, load_tokenizer

    tokenizer = load_tokenizer(demo_model_dir)
    model = load_model(demo_model_dir)

    def answers(m):
        out = []
        for prompt, _ in DEMO_PROMPTS:
            ids = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                                return_tensors="pt", return_dict=True)
            with torch.no_grad():
                gen = m.generate(**ids, max_new_tokens=48, do_sample=False)
            out.append(tokenizer.decode(gen[0, ids["input_ids"].shape[1]:], skip_special_tokens=True).strip())
        return out

    base = sum(a == expected for a, (_, expected) in zip(answers(model), DEMO_PROMPTS))
    tuned_model = PeftModel.from_pretrained(model, trained_demo_run / "final")
    tuned = answers(tuned_model)
    right = sum(a == expected for a, (_, expected) in zip(tuned, DEMO_PROMPTS))
    assert base == 0
    assert right >= len(DEMO_PROMPTS) / 2, list(zip(tuned, DEMO_PROMPTS))


# ---------------------------------------------------------------- QLoRA and full

RECORD = "callbacks=[tests.callback_runs:RecordModel]"


def trained_model(run: Path) -> dict:
    """What RecordModel saw in the worker's model when training began."""
    return json.loads((run / "model.json").read_text())


def test_qlora_4bit_run_with_dora(workspace, subprocess_env, quick):
    run = workspace.runs_dir / "qlora"
    result = worker(workspace, subprocess_env, "method=qlora", "quantization_bits=4", "use_dora=true", "max_steps=4",
                    "save_steps=4", *quick, RECORD, run_dir=run)
    assert_completed(result, run)
    assert {"Linear4bit", "DoraLinearLayer"} <= set(trained_model(run)["classes"])
    assert json.loads((run / "final" / "adapter_config.json").read_text())["use_dora"] is True
    losses = train_losses(run)
    assert losses[-1] < losses[0], losses
    config = json.loads((run / "final" / "adapter_config.json").read_text())
    assert config["peft_type"] == "LORA" and config["r"] == 16
    assert list_checkpoints(run)[-1].name == "checkpoint-4"


def test_qlora_8bit_with_rslora_and_neftune(workspace, subprocess_env, quick):
    run = workspace.runs_dir / "qlora8"
    result = worker(workspace, subprocess_env, "method=qlora", "quantization_bits=8", "use_rslora=true",
                    "lora_r=16", "lora_alpha=32", "neftune_noise_alpha=5", "max_steps=3", "save_steps=3", *quick,
                    RECORD, run_dir=run)
    assert_completed(result, run)
    model = trained_model(run)
    assert "Linear8bitLt" in model["classes"] and "Linear4bit" not in model["classes"], model["classes"]
    assert model["scalings"] == [32 / 16**0.5]  # rsLoRA: alpha / sqrt(r) = 8, not alpha / r = 2
    assert model["neftune_noise_alpha"] == 5 and model["neftune_hooks"]
    assert json.loads((run / "final" / "adapter_config.json").read_text())["use_rslora"] is True
    assert all(loss == loss for loss in train_losses(run))  # finite: no NaN


def test_tensorboard_files_and_early_stopping_names_the_best_checkpoint(workspace, subprocess_env, quick):
    """A threshold no eval can beat: patience 2 stops at the third evaluation. The log says so, and
    final/ holds the best checkpoint's weights, the one summary.json names, not the last step's."""
    from safetensors.torch import load_file

    run = workspace.runs_dir / "early"
    # learning_rate 3e-2 overshoots after the first step (eval_loss 6.2, 8.1, 8.4 on this machine): the best
    # checkpoint is an early one by a wide margin. At 1e-3 the curve's shape was within float noise and
    # fell monotonically on some CPUs, leaving the last checkpoint the best.
    result = worker(workspace, subprocess_env, *quick, "val_size=0.5", "eval_steps=1", "save_steps=1", "max_steps=10",
                    "early_stopping_patience=2", "early_stopping_threshold=100", "report_to=tensorboard",
                    "save_total_limit=1", "learning_rate=3e-2", run_dir=run)
    status = assert_completed(result, run)
    assert status["global_step"] == 3 and status["max_steps"] == 10
    assert list((run / "tensorboard").rglob("events.out.tfevents.*")), list(run.rglob("*"))
    evals = {r["step"]: r["eval_loss"] for r in metrics(run) if r["kind"] == "eval"}
    best_step = min(evals, key=evals.get)
    assert best_step < 3, evals  # an earlier checkpoint than the last is the best: the case to check
    summary = json.loads((run / "summary.json").read_text())
    assert summary["best_checkpoint"] == f"checkpoint-{best_step}" and summary["best_eval_loss"] == pytest.approx(evals[best_step], rel=1e-5)
    assert (run / summary["best_checkpoint"] / "COMPLETE").is_file()  # kept, though save_total_limit is 1
    assert summary["early_stopped_at"] == 3 and summary["final_step"] == best_step
    final, best, last = (load_file(run / folder / "adapter_model.safetensors")
                         for folder in ("final", f"checkpoint-{best_step}", "checkpoint-3"))
    assert final.keys() == best.keys() and all(final[k].equal(best[k]) for k in final)
    assert not all(final[k].equal(last[k]) for k in final)
    log = (run / "train.log").read_text()
    assert "INFO early stopping at step 3 of 10: eval_loss" in log, log[-3000:]
    assert f"final/ holds checkpoint-{best_step}, the best eval_loss" in log
    assert "completed at step 3 of 10 (early stopping)" in log
    assert "without load_best_model_at_end" not in log + result.stderr  # transformers' warning: not so here


def test_full_run(workspace, subprocess_env, demo_model_dir, quick):
    from transformers import AutoModelForCausalLM

    run = workspace.runs_dir / "full"
    # Also the documented customisation example (docs/CUSTOMIZE.md): a user callback and loss.
    result = worker(workspace, subprocess_env, "method=full", "max_steps=4", "save_steps=4", *quick,
                    "callbacks=[examples.custom_training:LossSpikeAlert]",
                    "loss_function=tests.callback_runs:offset_loss", run_dir=run)
    assert_completed(result, run)
    assert "LossSpikeAlert watching" in (run / "train.log").read_text()
    losses = train_losses(run)
    assert losses[-1] < losses[0], losses
    # offset_loss is the documented label_smoothed_loss + 1000: the logged loss is that function's value.
    assert all(1000 < loss < 1100 for loss in losses), losses
    tuned = AutoModelForCausalLM.from_pretrained(run / "final")
    base = AutoModelForCausalLM.from_pretrained(demo_model_dir)
    changed = [n for n, p in tuned.state_dict().items() if not torch.equal(p, base.state_dict()[n])]
    assert len(changed) > len(base.state_dict()) // 2


# ---------------------------------------------------------------- stop and resume

def test_sigterm_saves_and_resume_finishes(workspace, subprocess_env, quick):
    run = workspace.runs_dir / "stopped"
    process = worker(workspace, subprocess_env, "max_steps=30", "save_steps=100", *quick, run_dir=run, wait=False)
    deadline = time.time() + 300
    while not any(r["kind"] == "train" and r["step"] >= 2 for r in _safe_metrics(run)):
        assert process.poll() is None and time.time() < deadline, (run.parent / "stopped.out").read_text()[-3000:]
        time.sleep(0.3)
    os.killpg(process.pid, signal.SIGTERM)  # a whole process group, as a user or a service manager may send it
    assert process.wait(timeout=300) == 0
    status = read_status(run)
    assert status["state"] == "stopped" and status["exit_code"] == 0
    stopped_at = list_checkpoints(run)
    assert len(stopped_at) == 1 and 2 <= status["global_step"] < 30
    assert stopped_at[0].name == f"checkpoint-{status['global_step']}"
    assert not (run / "final").exists()

    result = worker(workspace, subprocess_env, args=["--resume", str(run)])
    status = assert_completed(result, run)
    assert status["global_step"] == 30 and status["resumed_from"] == stopped_at[0].name
    steps = [r["step"] for r in metrics(run) if r["kind"] == "train"]
    assert steps[-1] == 30 and steps.count(steps[-1]) == 1  # appended, continuing where it stopped
    assert [r["event"] for r in metrics(run) if r["kind"] == "system"] == ["start", "end", "resume", "end"]
    assert "resuming from checkpoint" in (run / "train.log").read_text()
    # The trained adapter was resumed, not a fresh one: a fresh adapter (lora_B = 0) would give
    # exactly the base model's loss on this same batch, i.e. the loss of step 1.
    loss = {r["step"]: r["loss"] for r in metrics(run) if r["kind"] == "train"}
    assert loss[status_step(stopped_at[0]) + 1] < loss[1] - 1e-3, loss


def test_a_resumed_runs_summary_counts_time_and_tokens_over_the_same_steps(workspace, subprocess_env, quick):
    """A run lost after checkpoint-3 and resumed: summary.json's time, tokens and tokens/s all cover
    steps 1-6 (the first session up to checkpoint-3 plus the second), not time of one session
    against tokens of both."""
    run = workspace.runs_dir / "resumed"
    first = worker(workspace, subprocess_env, "max_steps=6", "save_steps=3", *quick, run_dir=run)
    uninterrupted = json.loads((run / "summary.json").read_text())
    assert_completed(first, run)
    before = json.loads((run / "checkpoint-3" / "run_clock.json").read_text())
    assert before["sessions"] == 1 and before["train_seconds"] > 0
    for lost in ("checkpoint-6", "final", "summary.json"):  # as if killed after checkpoint-3
        shutil.rmtree(run / lost) if (run / lost).is_dir() else (run / lost).unlink()

    assert_completed(worker(workspace, subprocess_env, args=["--resume", str(run)]), run)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["global_step"] == 6 and summary["sessions"] == 2
    assert summary["train_tokens"] == uninterrupted["train_tokens"]  # the same six batches
    # The second session's own training time (the Trainer's) comes on top of the first's up to step 3.
    assert summary["wall_time_s"] >= before["train_seconds"] + summary["train_runtime_s"]
    assert summary["train_tokens_per_second"] == pytest.approx(summary["train_tokens"] / summary["wall_time_s"], rel=0.01)


def status_step(checkpoint: Path) -> int:
    return int(checkpoint.name.rsplit("-", 1)[1])


def _safe_metrics(run: Path) -> list[dict]:
    try:
        return metrics(run)
    except (FileNotFoundError, json.JSONDecodeError):
        return []


@pytest.mark.parametrize("setting, words", [("lora_r=4", "lora_r 16 -> 4"), ("lora_alpha=8", "lora_alpha 32 -> 8"),
                                            ("use_rslora=true", "use_rslora False -> True")])
def test_resume_refuses_a_different_adapter_shape_or_scale(workspace, subprocess_env, setting, words):
    run = workspace.runs_dir / "shape"
    run.mkdir()
    tiny_config().save(run / "config.yaml")
    result = worker(workspace, subprocess_env, setting, args=["--resume", str(run)])
    assert result.returncode == 2
    assert words in result.stderr and read_status(run)["state"] == "failed"
    assert RunConfig.load(run / "config.yaml") == tiny_config()  # a refused resume leaves the config as it was


def test_command_line_run_holds_its_devices_and_a_resume_records_its_settings(workspace, subprocess_env, quick,
                                                                            devices):
    """`python -m backend.train` by hand: the app sees its devices as busy. Stopped, then
    resumed by hand with other settings: the warnings are logged and config.yaml says what
    the run now trains with."""
    from backend.runs.store import RunError, RunStore
    from ui.views import run_view

    run = workspace.runs_dir / "by-hand"
    run.mkdir(parents=True)
    (run / ".hold").touch()
    process = worker(workspace, subprocess_env, "max_steps=6", "save_steps=2", "devices=cpu", *quick,
                     "callbacks=[tests.callback_runs:HoldWhileFileExists]", run_dir=run, wait=False)
    deadline = time.time() + 600
    while not (run / ".held").exists():
        assert process.poll() is None and time.time() < deadline, (run.parent / "by-hand.out").read_text()[-3000:]
        time.sleep(0.3)
    assert read_status(run)["devices"] == ["cpu"]
    # The Runs tab shows when it started (no store wrote started_at: the worker's own time), not 1970.
    info = RunStore(workspace, devices=devices).get("by-hand")
    assert info.started_at == info.created_at == read_status(run)["worker_started_at"]
    started = time.strftime("%Y-%m-%d %H:%M", time.localtime(info.started_at))
    assert run_view.table_rows([info])[0][run_view.TABLE_COLUMNS.index("started")] == started != "1970-01-01 00:00"
    with pytest.raises(RunError, match="cpu is busy with run by-hand"):
        RunStore(workspace, devices=devices).launch(tiny_config(devices="cpu"))
    os.killpg(process.pid, signal.SIGTERM)
    (run / ".hold").unlink()
    assert process.wait(timeout=300) == 0 and read_status(run)["state"] == "stopped"

    result = worker(workspace, subprocess_env, "seed=8", "gradient_accumulation_steps=2", "max_steps=5",
                    args=["--resume", str(run)])
    status = assert_completed(result, run)
    assert status["global_step"] == 5
    saved = RunConfig.load(run / "config.yaml")
    assert (saved.seed, saved.gradient_accumulation_steps, saved.max_steps) == (8, 2, 5)
    log = (run / "train.log").read_text() + result.stderr
    for words in ("resuming with seed changed from 42 to 8", "gradient_accumulation_steps changed from 1 to 2"):
        assert words in log, log[-3000:]
    # In RunConfig's field order (each field's resume policy: backend/config_policy.py).
    assert [w["args"]["name"] for w in status["resume_warnings"]] == ["gradient_accumulation_steps", "seed"]


# ---------------------------------------------------------------- data through the data backend

def test_trains_from_a_sharegpt_file(workspace, subprocess_env):
    from backend.data.resolve import SCHEMA_REASON
    from backend.models.demo_facts import build_demo_rows

    names = {"user": "human", "assistant": "gpt"}
    rows = [{"conversations": [{"from": names[m["role"]], "value": m["content"]} for m in row["messages"]]}
            for row in build_demo_rows()[:4]]
    data = workspace.root / "chat.json"  # a JSON array, one row the data backend flags as unusable
    data.write_text(json.dumps([*rows, {"conversations": "oops"}], ensure_ascii=False))
    run = workspace.runs_dir / "sharegpt"
    result = worker(workspace, subprocess_env, *QUICK, "max_steps=1", f"dataset={data}", run_dir=run)
    assert_completed(result, run)
    summary = json.loads((run / "summary.json").read_text())
    assert (summary["rows_total"], summary["rows_train"], summary["rows_eval"]) == (5, 4, 0)
    assert summary["dropped_reasons"] == {SCHEMA_REASON: 1}


def test_trains_from_a_workspace_dataset_with_its_eval_split(workspace, subprocess_env):
    from backend.data.saved_datasets import save_dataset
    from backend.models.demo_facts import build_demo_rows

    folder = save_dataset(workspace.datasets_dir, "saved", build_demo_rows()[:8], source={"path": "x", "sha256": "0"},
                          fixes=[], rows_before=8, eval_ratio=0.25)
    eval_lines = len((folder / "eval.jsonl").read_text().splitlines())
    run = workspace.runs_dir / "saved"
    result = worker(workspace, subprocess_env, *QUICK, "max_steps=1", "val_size=0.5", "dataset=saved", run_dir=run)
    assert_completed(result, run)
    summary = json.loads((run / "summary.json").read_text())
    # The saved split, not a fresh 50% one: 6 train rows, the 2 of eval.jsonl.
    assert eval_lines == 2 and (summary["rows_train"], summary["rows_eval"]) == (6, eval_lines)


# ---------------------------------------------------------------- bad input

def test_a_refused_run_exits_2_with_one_line_and_no_traceback(workspace, subprocess_env):
    """The exit code and stderr of a real worker process; every refusal's sentence is in
    test_training_refusals.py, in-process."""
    run = workspace.runs_dir / "bad"
    result = worker(workspace, subprocess_env, "model_name_or_path=/no/such/model", run_dir=run)
    assert result.returncode == 2, result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(lines) == 1 and "/no/such/model does not exist" in lines[0], result.stderr[-2000:]
    assert "Traceback" not in result.stderr and not run.exists()


def test_binary_config_file_is_refused_without_pointing_at_a_missing_log(workspace, subprocess_env):
    binary = workspace.root / "weights.yaml"
    binary.write_bytes(bytes(range(256)) * 8)
    result = worker(workspace, subprocess_env, args=["--config", str(binary)])
    assert result.returncode == 2 and "is not a text (UTF-8 YAML) file" in result.stderr, result.stderr
    assert "train.log" not in result.stderr and "Traceback" not in result.stderr


def test_a_diverging_run_stops_as_failed_naming_the_step_and_learning_rate(workspace, subprocess_env, quick):
    """learning_rate 1e30: the loss turns NaN within steps; the run must not train on and end `completed`.
    The Plan warned before the start."""
    from ui.tabs.train import TEXT
    from ui.views.train_summary import derived_text

    def plain(key, **values):
        return TEXT[key]["en"].format(**values)

    plan = derived_text(plain, tiny_config(learning_rate=1e30), {"rows": 40})
    assert "learning_rate **1e+30** is far above any that trains" in plan
    assert "far above" not in derived_text(plain, tiny_config(), {"rows": 40})

    run = workspace.runs_dir / "diverged"
    result = worker(workspace, subprocess_env, *quick, "learning_rate=1e30", "max_steps=8", run_dir=run)
    assert result.returncode == 1, result.stderr[-2000:]
    status = read_status(run)
    assert status["state"] == "failed", status
    said = re.search(r"The training (loss|grad_norm) became (nan|inf|-inf) at step (\d+) \(learning_rate 1e\+30\)",
                     status["error"])
    assert said and 1 <= int(said.group(3)) < 8, status["error"]
    assert "Lower learning_rate" in status["advice"] and not (run / "final").exists()
    losses = [r["loss"] for r in metrics(run) if r["kind"] == "train"]
    assert losses[-1] != losses[-1] or abs(losses[-1]) == float("inf")   # the last logged loss: NaN or inf


def test_a_diverging_run_shorter_than_its_logging_steps_fails_too_and_no_nan_is_the_best(workspace, subprocess_env,
                                                                                         quick):
    """learning_rate 1e30 for 3 steps with logging_steps 50: no step is logged, yet the evaluation's
    eval_loss (and the closing train_loss) is NaN. The run fails instead of ending `completed` with a NaN
    "best" checkpoint, and the command line warned of the learning rate at the start, as the Plan does."""
    run = workspace.runs_dir / "short-diverged"
    result = worker(workspace, subprocess_env, *quick, "learning_rate=1e30", "max_steps=3", "logging_steps=50",
                    "val_size=0.5", "eval_steps=3", "save_steps=3", run_dir=run)
    assert result.returncode == 1, result.stderr[-2000:]
    status = read_status(run)
    assert status["state"] == "failed", status
    assert re.search(r"The training (eval_loss|train_loss|loss|grad_norm) became (nan|inf|-inf)", status["error"])
    assert not (run / "final").exists()
    assert "learning_rate 1e+30 is far above any that trains" in (run / "train.log").read_text()


def test_resume_skips_a_complete_checkpoint_whose_files_cannot_be_read(workspace, subprocess_env, quick):
    """A filesystem error after the marker left checkpoint-4 "complete" with an empty trainer_state.json and a
    cut adapter: resume says so and continues from checkpoint-2 instead of a JSONDecodeError."""
    from backend.runs.files import update_status

    run = workspace.runs_dir / "broken"
    first = worker(workspace, subprocess_env, *quick, "max_steps=4", "save_steps=2", run_dir=run)
    assert first.returncode == 0, first.stderr[-2000:]
    broken = run / "checkpoint-4"
    (broken / "trainer_state.json").write_bytes(b"")
    adapter = broken / "adapter_model.safetensors"
    adapter.write_bytes(adapter.read_bytes()[:100])
    shutil.rmtree(run / "final")
    update_status(run, state="stopped")
    resumed = worker(workspace, subprocess_env, "max_steps=6", args=["--resume", str(run)])
    log = (run / "train.log").read_text()
    assert resumed.returncode == 0, log[-3000:]
    assert ("checkpoint-4 is marked complete, but its adapter_model.safetensors cannot be read: it is cut off" in log
            or "checkpoint-4 is marked complete, but its trainer_state.json cannot be read: it is empty" in log), log
    assert "resuming from checkpoint-2 instead" in log and "JSONDecodeError" not in log
    assert read_status(run)["state"] == "completed" and read_status(run)["global_step"] == 6
    assert (run / "checkpoint-6" / "COMPLETE").is_file()
