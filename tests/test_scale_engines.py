"""Sharding settings: the arguments that reach the Trainer are generated from
the run's numbers (FSDP2, DeepSpeed ZeRO-2 / ZeRO-3 + offload), and every
refusal of a scale setting ends the worker CLI with its sentence and exit
code 2, never a traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from backend.config_policy import ConfigError
from backend.config_recipes import tiny_config
from backend.models.hardware import Device
from backend.scale.engines import decoder_layer_classes, uses_torchrun
from backend.scale.guards import check_environment
from backend.training.arguments import RunFacts, argument_values
from tests.conftest import REPO

NUMBERS = dict(per_device_train_batch_size=3, gradient_accumulation_steps=5, max_grad_norm=0.7,
               learning_rate=2e-4, max_steps=40, seed=11)
H200 = Device(id="cuda:0", name="NVIDIA H200", memory_gb=139.8, supports_bf16=True, supports_fp16=True)


def values(**kw) -> dict:
    config = tiny_config(**{**NUMBERS, **kw})
    facts = RunFacts("bf16", has_eval=False, on_cpu=False, world_size=2, checkpointing=False)
    return argument_values(config, REPO / "unused-run", facts, layer_classes=["Qwen2DecoderLayer"])


def test_run_numbers_reach_the_trainer_with_every_engine():
    for distributed in ("auto", "fsdp", "deepspeed_zero2", "deepspeed_zero3"):
        v = values(distributed=distributed)
        assert (v["per_device_train_batch_size"], v["gradient_accumulation_steps"], v["max_grad_norm"],
                v["learning_rate"], v["max_steps"], v["bf16"], v["fp16"]) == (3, 5, 0.7, 2e-4, 40, True, False)
    assert "fsdp" not in values() and "deepspeed" not in values(distributed="ddp")


def test_fsdp2_wraps_the_decoder_layer_and_gathers_on_save():
    v = values(distributed="fsdp", gradient_checkpointing=True)
    assert v["fsdp"] is True
    assert v["fsdp_config"] == {
        "version": 2, "auto_wrap_policy": "TRANSFORMER_BASED_WRAP", "transformer_layer_cls_to_wrap": ["Qwen2DecoderLayer"],
        "reshard_after_forward": True, "state_dict_type": "FULL_STATE_DICT", "activation_checkpointing": True,
        "cpu_ram_efficient_loading": False}
    # FSDP checkpoints activations itself; the Trainer's own flag would gather twice.
    assert v["activation_checkpointing"] is False and v["activation_checkpointing_kwargs"] is None


BASE_DS = {"train_micro_batch_size_per_gpu": "auto", "train_batch_size": "auto", "gradient_accumulation_steps": "auto",
           "gradient_clipping": "auto", "bf16": {"enabled": "auto"},
           "fp16": {"enabled": "auto", "loss_scale": 0, "initial_scale_power": 16},
           "steps_per_print": 1_000_000, "wall_clock_breakdown": False}


def test_deepspeed_zero2_dict():
    assert values(distributed="deepspeed_zero2")["deepspeed"] == {**BASE_DS, "zero_optimization": {
        "stage": 2, "overlap_comm": True, "contiguous_gradients": True, "reduce_bucket_size": "auto",
        "allgather_partitions": True, "allgather_bucket_size": 5e8, "reduce_scatter": True}}
    offload = values(distributed="deepspeed_zero2", cpu_offload=True)["deepspeed"]
    assert offload["zero_optimization"]["offload_optimizer"] == {"device": "cpu", "pin_memory": True}
    assert "offload_param" not in offload["zero_optimization"] and offload["zero_force_ds_cpu_optimizer"] is False


def test_deepspeed_zero3_dict_with_and_without_offload():
    zero3 = {"stage": 3, "overlap_comm": True, "contiguous_gradients": True, "reduce_bucket_size": "auto",
             "stage3_prefetch_bucket_size": "auto", "stage3_param_persistence_threshold": "auto",
             "stage3_gather_16bit_weights_on_model_save": True}
    assert values(distributed="deepspeed_zero3")["deepspeed"] == {**BASE_DS, "zero_optimization": zero3}
    cpu = {"device": "cpu", "pin_memory": True}
    assert values(distributed="deepspeed_zero3", cpu_offload=True)["deepspeed"] == {
        **BASE_DS, "zero_force_ds_cpu_optimizer": False,
        "zero_optimization": {**zero3, "offload_optimizer": cpu, "offload_param": cpu}}


def test_own_deepspeed_file_is_passed_through(tmp_path):
    own = tmp_path / "ds.json"
    own.write_text('{"zero_optimization": {"stage": 2}}')
    assert values(deepspeed=str(own))["deepspeed"] == str(own)
    assert uses_torchrun(tiny_config(deepspeed=str(own)), 1) and uses_torchrun(tiny_config(distributed="fsdp"), 1)
    assert not uses_torchrun(tiny_config(), 1) and uses_torchrun(tiny_config(), 2)


def test_decoder_layer_class_found_through_peft(demo_model_dir):
    from peft import get_peft_model

    from backend.models.loading import load_model
    from backend.training.model import lora_config

    model = load_model(str(demo_model_dir))
    classes = decoder_layer_classes(model)
    assert classes and classes == sorted(model._no_split_modules)
    assert decoder_layer_classes(get_peft_model(model, lora_config(tiny_config()))) == classes


def test_more_processes_than_selected_gpus_is_refused():
    config = tiny_config(distributed="fsdp")
    with pytest.raises(ConfigError, match=r"num_processes = 3 is more than the 2 selected GPU\(s\) "
                                          r"\(cuda:0, cuda:1\): one process per GPU; set num_processes to 2"):
        check_environment(config, [H200, Device("cuda:1", "NVIDIA H200", 139.8, True, True)], processes=3)
    check_environment(config, [H200], processes=1)  # FSDP on one GPU is allowed (world size 1)


# (settings, the sentence's start) for each refusal; all through `python -m backend.train`.
REFUSALS = [
    (["cpu_offload=true"], "cpu_offload needs distributed deepspeed_zero2 or deepspeed_zero3 (now auto)"),
    (["method=qlora", "distributed=deepspeed_zero3"], "QLoRA with deepspeed_zero3 is not supported here"),
    (["method=qlora", "distributed=fsdp"], "QLoRA with fsdp is not supported here"),
    (["nnodes=2", "node_rank=2", "master_addr=127.0.0.1"], "node_rank = 2 is out of range for nnodes = 2: use 0 to 1"),
    (["nnodes=2"], "nnodes = 2 needs master_addr"),
    (["distributed=fsdp", "devices=cpu"], "distributed = fsdp needs CUDA GPUs, but this run trains on the CPU"),
    (["distributed=deepspeed_zero3"], "distributed = deepspeed_zero3 needs DeepSpeed, which is not installed: "
                                      "pip install -r requirements-gpu.txt"),
    (["ray_address=local"], "ray_address needs Ray Train, which is not installed"),
    (["ray_address=nowhere"], "ray_address = 'nowhere' is not a Ray address"),
    # Nothing listens on port 1: ray.init would retry for minutes, the guard says it in seconds.
    (["ray_address=127.0.0.1:1"], "No Ray cluster answers at ray_address = '127.0.0.1:1' (Connection refused): "
                                  "start its head with `ray start --head`"),
    (["deepspeed=missing.json"], "deepspeed = 'missing.json': no such file"),
]


def test_every_guard_exits_2_with_its_sentence(tmp_path, subprocess_env):
    config_file = tmp_path / "run.yaml"
    tiny_config(max_steps=2).save(config_file)
    # A `ray` package that fails to import, first on the path: Ray "not installed".
    (tmp_path / "no_ray" / "ray").mkdir(parents=True)
    (tmp_path / "no_ray" / "ray" / "__init__.py").write_text("raise ImportError(\"No module named 'ray'\")\n")
    runs = []
    for settings, _ in REFUSALS:
        env = dict(subprocess_env)
        if settings == ["ray_address=local"]:
            env["PYTHONPATH"] = f"{tmp_path / 'no_ray'}:{env['PYTHONPATH']}"
        if any(s.startswith("deepspeed=") for s in settings):
            env.pop("PYTHONPATH")  # also from another folder: the path is the user's
        argv = [sys.executable, "-m", "backend.train", "--config", str(config_file),
                "--workspace", str(tmp_path / "ws"), *[a for s in settings for a in ("--set", s)]]
        # Started together: each is mostly imports, and they overlap well.
        runs.append(subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for (settings, sentence), run in zip(REFUSALS, runs):
        out, err = run.communicate(timeout=600)
        assert run.returncode == 2, (settings, err[-2000:])
        assert err.startswith(f"error: {sentence}"), (settings, err[-2000:])
        assert "Traceback" not in err + out, settings
    assert not (tmp_path / "ws" / "runs").exists() or not any((tmp_path / "ws" / "runs").iterdir())


def test_ray_address_auto_without_a_cluster_exits_2_naming_ray_start(tmp_path, subprocess_env):
    from ray._private.services import find_bootstrap_address, find_gcs_addresses

    if find_gcs_addresses() or find_bootstrap_address(None):
        pytest.skip("a Ray cluster runs on this machine: ray_address = auto would join it")
    env = {k: v for k, v in subprocess_env.items() if k != "RAY_ADDRESS"}
    argv = [sys.executable, "-m", "backend.train", "--recipe", "demo-tiny", "--workspace", str(tmp_path / "ws"),
            "--set", "ray_address=auto", "--set", "max_steps=2"]
    run = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 2, run.stderr[-2000:]
    assert run.stderr.startswith("error: ray_address = auto found no running Ray cluster on this machine: start one "
                                 "with `ray start --head`"), run.stderr[-2000:]
    assert "ray_address: local" in run.stderr and "Traceback" not in run.stderr + run.stdout
    assert not (tmp_path / "ws" / "runs").exists()


def test_launch_commands_for_each_way_of_running():
    from backend.scale.launch import held_devices, other_node_commands, worker_command

    args = ["--config", "run.yaml"]
    assert worker_command(args, tiny_config(), 1)[1:] == ["-m", "backend.train", *args]
    assert worker_command(args, tiny_config(distributed="fsdp"), 1)[1:5] == [
        "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=1"]
    assert worker_command(args, tiny_config(ray_address="local"), 4)[1:] == ["-m", "backend.train", *args]
    nodes = tiny_config(nnodes=2, master_addr="10.0.0.1", master_port=29400, node_join_timeout=60)
    assert worker_command(args, nodes, 8)[1:10] == [
        "-m", "backend.runs.torchrun", "--nnodes=2", "--node-rank=0", "--nproc-per-node=8",
        "--master-addr=10.0.0.1", "--master-port=29400", "--rdzv-conf=timeout=60", "-m"]
    assert [c[4] for c in other_node_commands(args, nodes, 8)] == ["--node-rank=1"]
    assert other_node_commands(args, tiny_config(), 1) == []
    assert held_devices(tiny_config(ray_address="ray://head:10001"), [H200]) == []
    assert held_devices(tiny_config(ray_address="local"), [H200]) == held_devices(tiny_config(), [H200]) == ["cuda:0"]
