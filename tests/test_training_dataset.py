"""The worker's data path and bookkeeping, in process: what the Trainer is fed
(assistant-only labels, overflow, padding), checkpoint rotation, the grouped
gradient norms, and the error sentences."""

from __future__ import annotations

import json
import os

import pytest
import torch

from backend.config_recipes import tiny_config
from backend.data.encode import IGNORE_INDEX
from backend.data.resolve import DatasetNotFound, load_rows, resolve_dataset
from backend.runs.files import list_checkpoints, mark_complete
from backend.training.callbacks import CheckpointCallback
from backend.training.collator import PadToLongest
from backend.training.dataset import build_datasets
from backend.training.errors import explain
from backend.training.metrics_log import grouped_grad_norms


@pytest.fixture(scope="module")
def tokenizer(demo_model_dir):
    from backend.models.loading import load_tokenizer

    return load_tokenizer(demo_model_dir)


def test_loss_only_on_assistant_tokens(tokenizer, workspace):
    config = tiny_config(val_size=0.1)
    train, evaluation, counts = build_datasets(tokenizer, config, workspace)
    assert counts.train == len(train) and counts.eval == len(evaluation) and counts.dropped == 0
    rows, _ = load_rows(resolve_dataset("demo", workspace))
    answers = {m["content"] for r in rows for m in r["messages"] if m["role"] == "assistant"}
    for example in train.select(range(20)):
        trained = [t for t, label in zip(example["input_ids"], example["labels"]) if label != IGNORE_INDEX]
        # Exactly the answer and its end-of-turn marker (+ the template's newline): no header, no user text.
        text = tokenizer.decode(trained).rstrip("\n")
        assert text.endswith("<|im_end|>") and text[: -len("<|im_end|>")] in answers, text
        prompt = [t for t, label in zip(example["input_ids"], example["labels"]) if label == IGNORE_INDEX]
        assert "<|im_start|>user" in tokenizer.decode(prompt)


def test_train_on_prompt_labels_everything(tokenizer, workspace):
    train, _, _ = build_datasets(tokenizer, tiny_config(val_size=0, train_on_prompt=True), workspace)
    assert all(e["labels"] == e["input_ids"] for e in train.select(range(10)))


def test_overflow_truncates_or_drops(tokenizer, workspace, tmp_path):
    def row(user, answer):
        return {"messages": [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]}

    data = tmp_path / "rows.jsonl"
    rows = [row("Hi", "Hello."),  # fits
            row("Hi", "word " * 200),  # the answer runs past the cutoff: cut, the start is kept
            row("word " * 200, "Hello.")]  # the prompt alone is past the cutoff: nothing to learn
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    _, _, cut = build_datasets(tokenizer, tiny_config(dataset=str(data), val_size=0, cutoff_len=64), workspace)
    _, _, drop = build_datasets(tokenizer, tiny_config(dataset=str(data), val_size=0, cutoff_len=64, overflow="drop"),
                                workspace)
    assert (cut.train, cut.truncated, cut.dropped) == (2, 1, 1)
    assert cut.reasons == {"answer cut away by cutoff_len": 1}
    assert (drop.train, drop.truncated, drop.dropped) == (1, 0, 2)


def test_collator_pads_to_the_longest_row_only():
    rows = [{"input_ids": [5] * 3, "labels": [IGNORE_INDEX, 5, 5], "length": 3},
            {"input_ids": [6] * 10, "labels": [6] * 10, "length": 10}]
    batch = PadToLongest(pad_token_id=0)(rows)
    assert batch["input_ids"].shape == (2, 16)  # 10 rounded up to a multiple of 8, not cutoff_len
    assert batch["attention_mask"][0].tolist() == [1] * 3 + [0] * 13
    assert batch["labels"][0].tolist() == [IGNORE_INDEX, 5, 5] + [IGNORE_INDEX] * 13


def test_alpaca_file_and_bad_rows(tmp_path, workspace):
    good = tmp_path / "a.json"
    good.write_text(json.dumps([{"instruction": "Say hi", "input": "to Bob", "output": "Hi Bob", "system": "Be brief"}]))
    rows, eval_rows = load_rows(resolve_dataset(str(good), workspace))
    assert eval_rows is None
    assert rows[0]["messages"] == [{"role": "system", "content": "Be brief"},
                                   {"role": "user", "content": "Say hi\nto Bob"},
                                   {"role": "assistant", "content": "Hi Bob"}]
    bad = tmp_path / "b.jsonl"
    bad.write_text('{"question": "x"}\n')
    with pytest.raises(DatasetNotFound, match=r"b.jsonl \(row 0\): no known shape"):
        load_rows(bad)  # the data backend's own sentence
    with pytest.raises(DatasetNotFound, match="nothing-here.jsonl"):
        resolve_dataset(str(tmp_path / "nothing-here.jsonl"), workspace)


def test_workspace_dataset_uses_its_own_eval_split(tokenizer, workspace):
    from backend.data.saved_datasets import save_dataset

    rows = [{"messages": [{"role": "user", "content": f"Hi {n}"}, {"role": "assistant", "content": "Hello."}]}
            for n in range(3)]
    save_dataset(workspace.datasets_dir, "mine", rows, source={"path": "x", "sha256": "0"}, fixes=[],
                 rows_before=3, eval_ratio=0.34)
    train, evaluation, counts = build_datasets(tokenizer, tiny_config(dataset="mine", val_size=0.5), workspace)
    assert (counts.train, counts.eval) == (2, 1)


def test_unusable_rows_are_skipped_and_counted(tokenizer, workspace, tmp_path):
    from backend.data.resolve import SCHEMA_REASON

    data = tmp_path / "chat.jsonl"
    turns = [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello."}]
    data.write_text("\n".join(json.dumps(r) for r in [{"conversations": turns}, {"conversations": "oops"},
                                                       {"conversations": turns}]) + "\n")
    train, _, counts = build_datasets(tokenizer, tiny_config(dataset=str(data), val_size=0), workspace)
    assert (counts.total, counts.train, counts.dropped) == (3, 2, 1)
    assert counts.reasons == {SCHEMA_REASON: 1}


def test_rotation_keeps_newest_and_best(tmp_path):
    for step in (10, 20, 30, 40):
        (tmp_path / f"checkpoint-{step}").mkdir()
        mark_complete(tmp_path / f"checkpoint-{step}")
    (tmp_path / "checkpoint-50").mkdir()  # being written: no marker, never touched
    callback = CheckpointCallback(tmp_path, save_total_limit=2)
    callback.best = (10, 0.5)
    callback._rotate()
    assert [p.name for p in list_checkpoints(tmp_path)] == ["checkpoint-10", "checkpoint-40"]
    assert (tmp_path / "checkpoint-50").is_dir()


def test_grad_norms_grouped_per_layer(demo_model_dir):
    from backend.models.loading import load_model

    model = load_model(demo_model_dir)
    ids = torch.tensor([[1, 2, 3, 4]])
    model(input_ids=ids, labels=ids).loss.backward()
    norms, total = grouped_grad_norms(model, model.config.num_hidden_layers)
    layers = model.config.num_hidden_layers
    assert len(norms["attn"]) == layers and len(norms["mlp"]) == layers
    assert all(x > 0 for x in norms["attn"] + norms["mlp"]) and norms["other"] > 0
    squares = sum(x * x for x in norms["attn"] + norms["mlp"]) + norms["other"] ** 2
    assert squares == pytest.approx(total**2, rel=1e-4)


def test_errors_are_one_sentence_with_advice():
    config = tiny_config(per_device_train_batch_size=16, cutoff_len=1024)
    oom = explain(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), config)
    for knob in ("per_device_train_batch_size (now 16)", "cutoff_len (now 1024)", "gradient_checkpointing",
                 "qlora"):
        assert knob in oom.advice
    assert oom.exit_code == 1
    bnb = explain(ImportError("No module named 'bitsandbytes'"), config)
    assert "pip install bitsandbytes" in bnb.advice
    assert explain(DatasetNotFound("Dataset 'x' not found"), config).exit_code == 2


def test_disk_check_refuses_a_save_that_cannot_fit(tmp_path):
    from backend.training.callbacks import DiskFullError, DiskSpaceCallback

    DiskSpaceCallback(tmp_path, first_estimate_bytes=1024).check()  # a small first checkpoint fits
    (tmp_path / "checkpoint-5").mkdir()
    (tmp_path / "checkpoint-5" / "adapter_model.safetensors").write_bytes(b"x" * 4096)
    mark_complete(tmp_path / "checkpoint-5")
    callback = DiskSpaceCallback(tmp_path, first_estimate_bytes=10**18)
    assert 6144 <= callback.needed_bytes() < 10**6  # 1.5 x the last real checkpoint, not the estimate
    (tmp_path / "fresh-run").mkdir()
    with pytest.raises(DiskFullError, match="a checkpoint needs about"):
        DiskSpaceCallback(tmp_path / "fresh-run", first_estimate_bytes=10**18).check()
    explained = explain(OSError(28, "No space left on device"), tiny_config(), tmp_path)
    assert "disk space on the disk mounted at" in explained.error
    assert "continues from checkpoint-5, which was kept" in explained.advice


@pytest.mark.parametrize("cpus, processes, idle, threads", [
    (2, 1, 2.0, 2), (2, 1, 1.5, 2), (2, 1, 1.4, 1), (2, 1, 0.0, 1), (2, 2, 2.0, 1), (16, 4, 15.5, 4),
    (16, 1, 4.0, 4), (1, 3, 1.0, 1)])
def test_thread_share(cpus, processes, idle, threads):
    from backend.training.threads import thread_share

    assert thread_share(cpus, processes, idle) == threads


def test_idle_cpus_are_measured_now_on_the_cpus_this_process_may_use():
    from backend.training.threads import choose_threads, idle_cpus, usable_cpus

    cpus = usable_cpus()
    assert 0.0 <= idle_cpus(cpus, sample_s=0.2) <= len(cpus)
    choice = choose_threads()
    assert 1 <= choice.threads <= len(cpus) and choice.cpus == len(cpus)
    assert "idle now" in str(choice) or "OMP_NUM_THREADS" in str(choice)


def test_worker_takes_its_share_of_the_cores(subprocess_env):
    """Two ranks on this machine (LOCAL_WORLD_SIZE=2): each uses at most half the CPUs."""
    import subprocess
    import sys

    env = {k: v for k, v in subprocess_env.items() if k != "OMP_NUM_THREADS"}
    code = ("import os, torch; from backend.training.threads import limit_threads; n = limit_threads(); "
            "print(n, torch.get_num_threads(), len(os.sched_getaffinity(0)))")
    out = subprocess.run([sys.executable, "-c", code], env={**env, "LOCAL_WORLD_SIZE": "2"}, capture_output=True,
                         text=True, timeout=300, check=True).stdout.split()
    threads, torch_threads, cpus = map(int, out)
    assert threads == torch_threads and 1 <= threads <= max(1, cpus // 2)


def test_a_live_workers_claim_counts_and_an_ended_ones_is_removed(tmp_path, starts_processes):
    import subprocess
    import sys

    import psutil

    from backend.training.threads import choose_threads, claimed_by_others, usable_cpus

    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        cpus = len(usable_cpus())
        (tmp_path / str(sleeper.pid)).write_text(f"{psutil.Process(sleeper.pid).create_time()} {cpus}")
        (tmp_path / "999999999").write_text("1.0 2")  # no such process
        (tmp_path / str(os.getpid())).write_text(f"{psutil.Process().create_time()} 7")  # this process's own
        assert claimed_by_others(tmp_path) == cpus
        assert not (tmp_path / "999999999").exists()
        choice = choose_threads(tmp_path)
        assert choice.threads == 1 and choice.claimed == cpus
        assert f"{cpus} taken by other runs" in str(choice)
        # The same pid with another start time: a later process, not the worker that claimed.
        (tmp_path / str(sleeper.pid)).write_text(f"{psutil.Process(sleeper.pid).create_time() - 100} {cpus}")
        assert claimed_by_others(tmp_path) == 0
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_worker_gives_threads_back_while_others_claim_them_and_takes_them_again(tmp_path, monkeypatch,
                                                                                   starts_processes):
    import subprocess
    import sys

    import psutil
    import torch

    from backend.training.threads import ThreadRebalance, usable_cpus

    cpus = len(usable_cpus())
    if cpus < 2:
        pytest.skip("one CPU: there is nothing to give back")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        torch.set_num_threads(cpus)
        rebalance = ThreadRebalance(tmp_path, every_s=0.0)
        assert rebalance.maybe() is None  # nobody else: the share stays
        (tmp_path / str(sleeper.pid)).write_text(f"{psutil.Process(sleeper.pid).create_time()} {cpus - 1}")
        assert rebalance.maybe() == 1 and torch.get_num_threads() == 1
        assert (tmp_path / str(os.getpid())).read_text().split()[1] == "1"  # its own claim follows
        sleeper.kill()
        sleeper.wait()
        assert rebalance.maybe() == cpus and torch.get_num_threads() == cpus  # the other ended
    finally:
        sleeper.kill()
        sleeper.wait()
        torch.set_num_threads(before)


def test_two_workers_started_together_do_not_both_take_every_cpu(subprocess_env, tmp_path):
    """Each records its threads under a lock, so the second counts the first's (they shared 2 cores
    with 4 threads before: about 18 s a step against 3)."""
    import subprocess
    import sys

    env = {k: v for k, v in subprocess_env.items() if k != "OMP_NUM_THREADS"}
    env["TMPDIR"] = str(tmp_path)  # their own claims folder
    code = ("import time; from backend.training.threads import limit_threads, usable_cpus; "
            "print(limit_threads(), len(usable_cpus()), flush=True); time.sleep(4)")
    workers = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
               for _ in range(2)]
    outputs = [worker.communicate(timeout=300)[0].split() for worker in workers]
    threads = sorted(int(out[0]) for out in outputs)
    cpus = int(outputs[0][1])
    assert threads[0] <= max(1, cpus - threads[1]), f"{threads} threads on {cpus} CPUs"
    assert not list(tmp_path.glob("finetune-studio-threads-*/[0-9]*"))  # claims removed at exit


def test_an_absurd_plan_is_warned_with_its_estimated_time(tmp_path):
    """max_steps=1e12 is a valid number: the worker says what it means, first in steps,
    then (after one real Trainer step) in time."""
    from transformers import Trainer, TrainerCallback, TrainingArguments

    from backend.config import derived_numbers
    from backend.training.plan_check import PlanCheck, human_duration, steps_warning
    from tests.test_config import _TinyLM

    config = tiny_config(max_steps=10**12, val_size=0)
    assert "1,000,000,000,000 optimizer steps (max_steps=1000000000000)" in steps_warning(10**12, config)
    epochs = tiny_config(num_train_epochs=1e30)
    assert "num_train_epochs=1e+30" in steps_warning(derived_numbers(epochs, 241)["total_steps"], epochs)
    assert steps_warning(derived_numbers(tiny_config(), 241)["total_steps"], tiny_config()) is None  # the demo plan

    class StopAfterTwo(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            control.should_training_stop = state.global_step >= 2
            return control

    check = PlanCheck(None, config)
    args = TrainingArguments(str(tmp_path), max_steps=10**12, per_device_train_batch_size=2, use_cpu=True,
                             report_to=[], save_strategy="no", logging_strategy="no", disable_tqdm=True)
    trainer = Trainer(model=_TinyLM(), args=args, train_dataset=[{"x": torch.tensor([1.0])}] * 8,
                      callbacks=[check, StopAfterTwo()])
    trainer.train()
    assert len(check.warnings) == 1, check.warnings
    assert "years; stop the run and lower max_steps" in check.warnings[0]
    assert human_duration(90) == "1.5 minutes" and human_duration(3e7 * 365.25 * 86400) == "3.0e+07 years"
