"""stage grpo end to end: TRL's GRPOTrainer on the demo model through the worker's command line
(`python -m backend.train`): the run folder contract with each reward's metrics and completions.jsonl,
a reward function of the user's own from a module, stop then resume, and every check before launch
as a sentence (settings, data, the user's function, use_vllm on the CPU)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import time
from pathlib import Path

import pytest

from backend.config import RunConfig
from backend.config_policy import ConfigError
from backend.runs.files import list_checkpoints, read_status
from tests.worker_runs import records, worker

REPO = Path(__file__).resolve().parents[1]
# A generation batch of 8 completions = 2 prompts x 4; completions of 8 tokens keep a step to seconds.
QUICK = ["stage=grpo", "num_generations=4", "per_device_train_batch_size=8", "max_completion_length=8",
         "logging_steps=1", "val_size=0", "cutoff_len=96", "learning_rate=1e-3"]
USER_REWARD = '''
def short_reward(prompts, completions, answer=None, **kwargs):
    """1 for a completion of at most 20 characters."""
    texts = [c[0]["content"] if isinstance(c, list) else c for c in completions]
    return [float(len(t) <= 20) for t in texts]


def wrong_signature(completion):
    return [1.0]


def wrong_result(prompts, completions, **kwargs):
    return 1.0
'''


def sums_rows(count: int, with_answer: bool = True) -> list[dict]:
    rows = []
    for i in range(count):
        a, b = 10 + i, 20 + 2 * i
        row = {"system": "Answer as <answer>N</answer>.", "instruction": f"What is {a} + {b}?"}
        if with_answer:
            row["output"] = str(a + b)
        rows.append(row)
    return rows


def write_rows(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def sums(workspace) -> Path:
    return write_rows(workspace.root / "sums.jsonl", sums_rows(16))


@pytest.fixture
def reward_module(workspace, subprocess_env) -> dict:
    """A module of the user's own reward functions on the worker's PYTHONPATH."""
    folder = workspace.root / "user_code"
    folder.mkdir()
    (folder / "my_rewards.py").write_text(USER_REWARD, encoding="utf-8")
    env = dict(subprocess_env)
    env["PYTHONPATH"] = str(folder) + os.pathsep + env["PYTHONPATH"]
    return env


def test_grpo_run_contract_with_each_reward_and_a_function_of_the_users(workspace, sums, reward_module):
    run = workspace.runs_dir / "grpo"
    result = worker(workspace, reward_module, f"dataset={sums}", *QUICK, "max_steps=4", "save_steps=2",
                    "rewards=[{kind: exact_match, weight: 1.0}, {kind: format, weight: 0.5, pattern: '<answer>\\d+</answer>'},"
                    " {kind: length, max: 6}, {kind: contains, text: '<answer>'}]",
                    "reward_functions=[my_rewards:short_reward]", "reward_weights=[2.0]", run_dir=run)
    status = read_status(run)
    assert result.returncode == 0 and status["state"] == "completed", f"{status.get('error')}\n{result.stderr[-3000:]}"
    for name in ("config.yaml", "status.json", "metrics.jsonl", "train.log", "summary.json", "completions.jsonl"):
        assert (run / name).is_file(), name
    assert (run / "final" / "COMPLETE").is_file() and (run / "final" / "adapter_model.safetensors").is_file()
    assert [c.name for c in list_checkpoints(run)] == ["checkpoint-2", "checkpoint-4"]
    assert "stage: grpo" in (run / "config.yaml").read_text()
    train = records(run, "train")
    assert [r["step"] for r in train] == [1, 2, 3, 4]
    names = ["exact_match", "format", "length", "contains", "short_reward"]
    for line in train:
        for key in ("reward", "reward_std", "completions/mean_length", "kl", "format_share",
                    *(f"rewards/{n}/mean" for n in names)):
            assert isinstance(line[key], (int, float)), (key, line)
        assert line["completions/mean_length"] <= 8
        assert 0.0 <= line["format_share"] <= 1.0
    samples = [json.loads(line) for line in (run / "completions.jsonl").read_text().splitlines()]
    assert {s["step"] for s in samples} == {1, 2, 3, 4}
    weights = {"exact_match": 1.0, "format": 0.5, "length": 1.0, "contains": 1.0, "short_reward": 2.0}
    for sample in samples:
        assert sample["prompt"].startswith("What is ") and isinstance(sample["completion"], str)
        assert set(sample["rewards"]) == set(names)
        # The user's function scored what it says, and the sum is the weighted one TRL trains on.
        assert sample["rewards"]["short_reward"] == float(len(sample["completion"]) <= 20)
        assert sample["reward"] == pytest.approx(sum(weights[n] * v for n, v in sample["rewards"].items()), abs=1e-4)
    assert "reward" in (run / "train.log").read_text()


def test_grpo_stop_then_resume(workspace, subprocess_env, sums):
    run = workspace.runs_dir / "grpo-stop"
    process = worker(workspace, subprocess_env, f"dataset={sums}", *QUICK, "max_steps=8", "save_steps=100",
                     "rewards=[{kind: length, min: 2, max: 6}]", run_dir=run, wait=False)
    deadline = time.time() + 900
    while not any(r["step"] >= 2 for r in _safe_train(run)):
        assert process.poll() is None and time.time() < deadline, (run.parent / "grpo-stop.out").read_text()[-3000:]
        time.sleep(0.3)
    os.killpg(process.pid, signal.SIGTERM)
    assert process.wait(timeout=600) == 0
    status = read_status(run)
    assert status["state"] == "stopped" and 2 <= status["global_step"] < 8
    result = worker(workspace, subprocess_env, args=["--resume", str(run)])
    assert result.returncode == 0 and read_status(run)["state"] == "completed", result.stderr[-3000:]
    steps = [r["step"] for r in records(run, "train")]
    assert steps[-1] == 8 and steps.count(8) == 1
    assert [r["event"] for r in records(run, "system")] == ["start", "end", "resume", "end"]
    assert (run / "final" / "COMPLETE").is_file()
    resumed = [json.loads(line)["step"] for line in (run / "completions.jsonl").read_text().splitlines()]
    assert max(resumed) == 8 and status["global_step"] + 1 in resumed


def test_the_documented_quick_command_learns(workspace, subprocess_env):
    """docs/PREFERENCE.md's quick command, as written: its rewards differ within groups, so steps have a
    gradient, and the run ends with nothing to warn about (the default rewards scored every completion 0).
    A streak of alike steps before the first reward (steps 3-7 on this machine) may warn on the way, and the
    warning is then withdrawn in train.log once the groups score apart."""
    line = next(line.strip() for line in (REPO / "docs" / "PREFERENCE.md").read_text(encoding="utf-8").splitlines()
                if line.strip().startswith("python -m backend.train --recipe demo-tiny --set stage=grpo"))
    words = shlex.split(line)
    sets = [words[i + 1] for i, word in enumerate(words) if word == "--set"]
    run = workspace.runs_dir / "grpo-quick"
    result = worker(workspace, subprocess_env, *sets, run_dir=run)
    status = read_status(run)
    assert result.returncode == 0 and status["state"] == "completed", result.stderr[-3000:]
    train = records(run, "train")
    differed = [r for r in train if r["frac_reward_zero_std"] < 1]
    assert len(differed) >= len(train) // 2, [(r["step"], r["reward"], r["frac_reward_zero_std"]) for r in train]
    assert all(r["grad_norm"] > 0 for r in differed) and sum(r["reward"] for r in train) > 0
    assert status.get("train_warning") is None
    log = (run / "train.log").read_text(encoding="utf-8")
    assert log.count("scored alike") == log.count("is withdrawn"), log[-3000:]  # each warning withdrawn


def _safe_train(run: Path) -> list[dict]:
    try:
        return records(run, "train")
    except (FileNotFoundError, json.JSONDecodeError):
        return []


# --- checks before launch: each a sentence --------------------------------------------------------

@pytest.mark.parametrize("sets, words", [
    # The classic failure: TRL stops after loading when a generation batch cuts a prompt's group.
    (["num_generations=6"], ["num_generations = 6 must divide the effective batch of 8 completions",
                             "choose num_generations 4 / 8", "per_device_train_batch_size 6 / 12"]),
    (["num_generations=3", "gradient_accumulation_steps=2"], ["effective batch of 16", "num_generations 2 / 4",
                                                               "per_device_train_batch_size 6 / 9"]),
    (["rewards=[]"], ["stage grpo needs a reward"]),
    (["rewards=[{kind: exact, weight: 1}]"], ["kind 'exact' is not one of: exact_match, format"]),
    (["rewards=[{kind: format, pattern: '<answer>('}]"], ["not a valid regular expression"]),
    (["rewards=[{kind: contains}]"], ["needs a text to look for"]),
    (["rewards=[{kind: length, min: 9, max: 3}]"], ["min not above max"]),
    (["rewards=[{kind: format, text: x}]"], ["has text, which it does not use; it takes weight, pattern"]),
    (["reward_functions=[a:f, b:g]", "reward_weights=[1]"], ["reward_weights has 1 weight(s) for 2 reward function(s)"]),
    (["loss_type=sigmoid"], ["does not apply to stage grpo; choose one of dapo, grpo, dr_grpo"]),
])
def test_impossible_grpo_settings_are_one_sentence(sets, words):
    with pytest.raises(ConfigError) as caught:
        RunConfig().with_overrides(["stage=grpo", *sets])
    for word in words:
        assert word in str(caught.value)


def test_use_vllm_is_refused_on_the_cpu_and_for_other_stages():
    from backend.models.hardware import training_devices

    config = RunConfig().with_overrides(["stage=grpo", "use_vllm=true"])
    with pytest.raises(ConfigError, match="use_vllm needs a CUDA GPU"):
        config.check_devices(training_devices("cpu"))
    with pytest.raises(ConfigError, match="stage dpo samples none"):
        RunConfig().with_overrides(["stage=dpo", "use_vllm=true"])


def test_launch_checks_in_the_worker_exit_2_with_a_sentence(workspace, reward_module):
    """Through the worker, before any model loads: the user's function (import, signature) and a reference
    the data lacks. The other checks are the same functions, tested in-process below."""
    prompts_only = write_rows(workspace.root / "prompts.jsonl", sums_rows(8, with_answer=False))
    sums = write_rows(workspace.root / "sums.jsonl", sums_rows(8))
    cases = [
        ([f"dataset={sums}", "reward_functions=[no_such_module:f]"], "Cannot import module 'no_such_module'"),
        ([f"dataset={sums}", "reward_functions=[my_rewards:wrong_signature]"],
         "failed when called once on a sample completion"),
        ([f"dataset={prompts_only}", "rewards=[{kind: exact_match}]"], "compare(s) against a reference answer"),
    ]
    for number, (sets, words) in enumerate(cases):
        result = worker(workspace, reward_module, *QUICK, "max_steps=1", *sets,
                        run_dir=workspace.runs_dir / f"refused-{number}")
        assert result.returncode == 2, (sets, result.stderr[-2000:])
        assert words in result.stderr and "Traceback" not in result.stderr, (sets, result.stderr[-2000:])


def test_a_reward_function_that_returns_no_list_is_refused(workspace, reward_module, monkeypatch):
    from backend.training.rewards import check_user_functions

    monkeypatch.syspath_prepend(str(workspace.root / "user_code"))
    config = RunConfig().with_overrides(["stage=grpo", "reward_functions=[my_rewards:wrong_result]"])
    with pytest.raises(ConfigError, match=r"returned 1.0 for 2 completions; it should return a list of 2 floats"):
        check_user_functions(config)
    check_user_functions(RunConfig().with_overrides(["stage=grpo", "reward_functions=[my_rewards:short_reward]"]))


def test_data_checks_before_the_model_loads(workspace):
    from backend.models.loading import load_tokenizer
    from backend.training.grpo_data import build_grpo_datasets

    tokenizer = load_tokenizer(str(workspace.models_dir / "demo"))
    path = write_rows(workspace.root / "sums.jsonl", sums_rows(3))

    def build(*sets):
        config = RunConfig().with_overrides(["stage=grpo", f"dataset={path}", "val_size=0", *sets])
        return build_grpo_datasets(tokenizer, config, workspace, context_length=128)
    with pytest.raises(ConfigError, match=r"plus max_completion_length 200 make \d+ tokens, over the model's "
                                          r"context of 128; lower max_completion_length to \d+"):
        build("max_completion_length=200")
    # 3 prompts x 2 completions = 6, under one step of 8: TRL would train nothing.
    with pytest.raises(ConfigError, match="3 prompt\\(s\\) x num_generations 2 = 6 completions, fewer than one step's "
                                          "effective batch of 8: nothing would train; give at least 4 prompts"):
        build("num_generations=2", "max_completion_length=8")
    train, _, counts = build("num_generations=2", "per_device_train_batch_size=6", "max_completion_length=8")
    assert len(train) == 3 and train.column_names == ["prompt", "answer"] and train[0]["answer"] == "30"


def test_prompts_alone_train_with_rewards_that_need_no_reference(workspace):
    """A file of prompts without answers is grpo data (the data backend refuses it for sft)."""
    from backend.data.resolve import check_dataset
    from backend.models.loading import load_tokenizer
    from backend.training.grpo_data import build_grpo_datasets

    path = write_rows(workspace.root / "prompts.jsonl", sums_rows(6, with_answer=False))
    config = RunConfig().with_overrides(["stage=grpo", f"dataset={path}", "rewards=[{kind: length, max: 8}]",
                                         "val_size=0"])
    assert check_dataset(str(path), workspace, stage="grpo") == path
    tokenizer = load_tokenizer(str(workspace.models_dir / "demo"))
    train, evaluation, counts = build_grpo_datasets(tokenizer, config, workspace, context_length=512)
    assert len(train) == 6 and evaluation is None and train.column_names == ["prompt"]
    assert train[0]["prompt"][-1] == {"role": "user", "content": "What is 10 + 20?"}
    assert train[0]["prompt"][0]["role"] == "system"


def test_presets_score_what_they_say():
    from backend.training.rewards import build_preset, exact_match_reward

    answers = ["<answer>1,000</answer>", "The sum is 57.", "<think>x</think> <answer>12</answer>", "12"]
    assert exact_match_reward(None, answers, answer=["1000", "57", "12", "13"]) == [1.0, 1.0, 1.0, 0.0]
    shares = []
    fmt = build_preset({"kind": "format"}, "format", len)
    assert fmt(None, answers, log_metric=lambda name, value: shares.append((name, value))) == [0, 0, 1, 0]
    assert shares == [("format_share", 0.25)]
    length = build_preset({"kind": "length", "min": 2, "max": 4}, "length", len)
    assert length(None, ["ab", "abcdef", "a", "abcdefgh"]) == [1.0, 0.5, 0.5, 0.0]
    assert build_preset({"kind": "not_contains", "text": "sorry"}, "x", len)(None, ["sorry", "ok"]) == [0.0, 1.0]


def test_memory_estimate_counts_generation_and_the_reference(demo_model_dir):
    from backend.models.memory import Architecture, config_estimate_kwargs, estimate_memory

    arch = Architecture.from_folder(demo_model_dir)

    def estimate(*sets):
        return estimate_memory(arch, **config_estimate_kwargs(RunConfig().with_overrides(["stage=grpo", *sets]),
                                                              "fp32", "cpu"))
    with_kl, without = estimate("beta=0.04"), estimate("beta=0")
    assert with_kl.generation_gb > 0 and with_kl.reference_gb > 0 and without.reference_gb == 0
    assert estimate("num_generations=4", "max_completion_length=512").generation_gb > with_kl.generation_gb


def test_plan_counts_completions_per_prompt():
    from backend.config import derived_numbers

    config = RunConfig().with_overrides(["stage=grpo", "num_generations=4", "per_device_train_batch_size=8",
                                         "num_train_epochs=1"])
    # 10 prompts x 4 completions = 40 in batches of 8: 5 steps (TRL drops a partial last step).
    assert derived_numbers(config, 10)["total_steps"] == 5
    assert derived_numbers(config, 11)["steps_per_epoch"] == 5
