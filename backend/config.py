"""RunConfig: the one typed description of a training run.

The UI form, the YAML file in the run folder and the command line
(`--config`, `--set key=value`) are all views of this dataclass. Each field
carries in its metadata its help text and its policy (backend/config_policy.py):
its bounds or choices, its section of the Train form, how it reaches the
Trainer and what a resume with a changed value does. The form's widgets, the
Trainer's arguments and resume reconciliation are built from that metadata;
`validate()` checks the bounds and turns impossible combinations into one
sentence a user can act on.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import importlib
import importlib.util
import math
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args, get_origin, get_type_hints

import yaml

from backend.config_grpo import check_reward_settings
from backend.config_policy import (
    ANY_NUMBER,
    APP,
    FILE_ONLY,
    FREE,
    MUST_MATCH,
    PICKER,
    PREFERENCE,
    RUNS_CODE,
    SCALE,
    WARN,
    Bounds,
    ConfigError,
    ToTrainer,
    above,
    at_least,
    between,
    converted,
    copied,
    message_args,
    policy_gaps,
    share,
)
from backend.messages import CATALOGUE, msg
from backend.models.chat_templates import CHAT_TEMPLATES
from backend.models.hardware import resolve_precision
from backend.scale.guards import check_config


def _f(default: Any, help: str, choices: tuple | None = None, *, form: str, trainer: ToTrainer, resume: str,
       bounds: Bounds | None = None, runs_code: bool = False, **kw: Any) -> Any:
    """A field with its help, choices and policy (backend/config_policy.py says what each means)."""
    meta = {"help": help, "form": form, "trainer": trainer, "resume": resume}
    if runs_code:
        meta[RUNS_CODE] = True
    if choices is not None:
        meta["choices"] = choices
    if bounds is not None:
        meta["bounds"] = bounds
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=meta, **kw)
    return field(default=default, metadata=meta, **kw)


METHODS = ("lora", "qlora", "full")
PRECISIONS = ("auto", "bf16", "fp16", "fp32")
SCHEDULERS = ("linear", "cosine", "cosine_with_restarts", "polynomial", "constant",
              "constant_with_warmup", "inverse_sqrt", "cosine_with_min_lr")
OPTIMIZERS = ("auto", "adamw_torch", "adamw_torch_fused", "adafactor", "sgd", "adamw_8bit",
              "paged_adamw_8bit", "paged_adamw_32bit")
REPORT_TO = ("none", "tensorboard", "wandb")
OVERFLOW = ("truncate", "drop")
REPLAY = ("auto", "on", "off")
# --- preference tuning: TRL's trainers and their field names -------------------
STAGES = ("sft", "dpo", "orpo", "simpo", "kto", "grpo")
PAIR_LOSSES = ("sigmoid", "hinge", "ipo", "robust", "bco_pair", "sppo_hard", "nca_pair", "apo_zero", "apo_down")
KTO_LOSSES = ("kto", "apo_zero_unpaired")
# TRL 1.16's GRPO losses that need no other setting (luspo / vespo need sequence-level sampling ratios).
GRPO_LOSSES = ("dapo", "grpo", "dr_grpo", "bnpo", "cispo", "sapo")
# Chosen when the stage changes away from sft and the field still holds its sft
# default (profiled on the demo model: docs/DEMO.md, "Preference tuning").
STAGE_DEFAULTS = {
    # dpo lr 1e-4: as high a preference accuracy as 5e-4 (0.92 on the demo's held-out pairs) with the SFT
    # run's answers kept; 5e-4 cut held-out BLEU from 63 to 26 (docs/PREFERENCE.md, "Quality kept").
    "dpo": {"learning_rate": 1e-4, "cutoff_len": 64, "per_device_train_batch_size": 4, "num_train_epochs": 2.0,
            "lora_dropout": 0.0, "save_steps": 20},
    "orpo": {"learning_rate": 1e-3, "cutoff_len": 64, "per_device_train_batch_size": 4, "num_train_epochs": 2.0,
             "lora_dropout": 0.0, "save_steps": 20},
    "simpo": {"learning_rate": 5e-4, "cutoff_len": 64, "per_device_train_batch_size": 4, "num_train_epochs": 2.0,
              "lora_dropout": 0.0, "save_steps": 20, "beta": 2.0},
    "kto": {"learning_rate": 5e-4, "cutoff_len": 64, "per_device_train_batch_size": 8, "num_train_epochs": 2.0,
            "lora_dropout": 0.0, "save_steps": 20},
    # per_device_train_batch_size counts completions in TRL's GRPO: 8 = one prompt's group of 8.
    # beta 0.04 keeps a KL term (and its chart) against the reference; TRL's own default is 0 (none).
    "grpo": {"learning_rate": 2e-4, "cutoff_len": 256, "per_device_train_batch_size": 8, "num_train_epochs": 1.0,
             "lora_dropout": 0.0, "save_steps": 20, "beta": 0.04, "val_size": 0.0, "logging_steps": 1,
             "rewards": [{"kind": "exact_match", "weight": 1.0}, {"kind": "format", "weight": 1.0}]},
}
# The demo-tiny recipe's SFT settings (backend/config_recipes.py): the 2M demo model learns at a rate
# that would wreck a real model. A stage switch treats them as defaults too.
# The learned stop is off: the test suite's runs of this model train the steps they plan.
DEMO_TINY = {"model_name_or_path": "demo", "dataset": "demo", "learning_rate": 3e-3, "num_train_epochs": 12.0,
             "replay": "off", "stop_when_learned": False}
DISTRIBUTED = ("auto", "ddp", "fsdp", "deepspeed_zero2", "deepspeed_zero3")
CHECKPOINTING = ("auto", True, False)


@dataclass
class RunConfig:
    # --- model -------------------------------------------------------------
    model_name_or_path: str = _f("smollm2-135m-instruct", "Base model: an offline model ('smollm2-135m-instruct', "
                                 "'gemma-3-270m'; 'demo' is the tiny test model), a local folder in Hugging Face "
                                 "format, a GGUF file (converted once), or a hub id.",
        form=PICKER, trainer=APP, resume=MUST_MATCH)
    trust_remote_code: bool = _f(False, "Run Python code shipped with this model, for this run only. Only for models you trust; the app never remembers it for another model or launch.",
        form="model", trainer=APP, resume=FREE, runs_code=True)
    chat_template: str = _f("auto", "Chat template the rows are rendered with. auto: the model's own; for a base "
                            "model without one, a known template that fits its tokenizer (Gemma's, Llama 3's, "
                            "ChatML), else ChatML with its tokens added (embeddings resized, the new rows trained). "
                            "The template's end of turn becomes the EOS; both are saved with every checkpoint.",
                            CHAT_TEMPLATES,
        form="model", trainer=APP, resume=MUST_MATCH)
    # --- data --------------------------------------------------------------
    dataset: str = _f("identity", "Training data: 'identity' (teaches the model its name, from identity_name and "
                      "identity_author), 'demo' (the tiny model's facts), a workspace dataset name, or a file (JSON, "
                      "JSONL, CSV, Parquet).",
        form=PICKER, trainer=APP, resume=FREE)
    dataset_name: str | None = _f(None, "Which dataset of a LLaMA-Factory data folder (its dataset_info.json) to train on; empty when the folder holds only one.",
        form="data", trainer=APP, resume=FREE)
    cutoff_len: int = _f(256, "Maximum tokens per example, after the chat template.",
        form="training", trainer=APP, resume=FREE, bounds=at_least(1, "config.above_zero", step=1))
    overflow: str = _f("truncate", "What to do with examples longer than cutoff_len.", OVERFLOW,
        form="advanced", trainer=APP, resume=FREE)
    val_size: float = _f(0.1, "Share of the data held out for evaluation (0 = no eval split), or the dataset's own eval split when it has one.",
        form="training", trainer=APP, resume=FREE, bounds=share("config.val_size", step=0.01))
    train_on_prompt: bool = _f(False, "Also compute the loss on prompt tokens (default: assistant turns only).",
        form="training", trainer=APP, resume=FREE)
    identity_name: str = _f("Nova", "Fills {{name}} in the training rows: the name the model learns from the identity "
                                   "dataset (and from any file with {{name}} placeholders, such as LLaMA-Factory's "
                                   "identity.json). Empty: placeholders stay as they are.",
        form="data", trainer=APP, resume=FREE)
    identity_author: str = _f("FineTune Studio", "Fills {{author}} in the training rows: who the model says made it.",
        form="data", trainer=APP, resume=FREE)
    replay: str = _f("auto", "Mix the base model's own answers to general prompts into the training rows, so a "
                             "small fine-tune keeps what the model knew (generated once per model, cached). auto: "
                             "for SFT sets under 500 rows on a model with its own chat template.", REPLAY,
        form="data", trainer=APP, resume=FREE)
    replay_share: float = _f(0.67, "Share of the mixed training rows that are replay rows (at most one per general "
                                  "prompt).",
        form="data", trainer=APP, resume=FREE, bounds=share(step=0.05))
    group_by_length: bool = _f(True, "Batch examples of similar length together, so little compute is spent on padding "
                                     "(padded batches only: packed batches have no padding and are drawn at random).",
        form="advanced", trainer=converted("train_sampling_strategy"), resume=FREE)
    # --- method ------------------------------------------------------------
    method: str = _f("lora", "lora: train small adapters; qlora: adapters on a 4/8-bit base; full: every weight.", METHODS,
        form="method", trainer=converted("ddp_find_unused_parameters"), resume=MUST_MATCH)
    quantization_bits: int | None = _f(None, "Base model bits for qlora (4 = NF4 with double quantisation, 8 = LLM.int8).", (None, 4, 8),
        form="method", trainer=APP, resume=MUST_MATCH)
    lora_r: int = _f(16, "LoRA rank: adapter capacity.",
        form="lora", trainer=APP, resume=MUST_MATCH, bounds=at_least(1, "config.above_zero", step=1))
    lora_alpha: int = _f(32, "LoRA scaling numerator (scale = alpha / r, or alpha / sqrt(r) with rsLoRA).",
        form="lora", trainer=APP, resume=MUST_MATCH, bounds=at_least(1, "config.above_zero", step=1))
    lora_dropout: float = _f(0.0, "Dropout on the LoRA input. Above 0 peft keeps a dropped copy of every adapted "
                                  "layer's input: LoRA steps were 1.48x slower at 0.05 than at 0 on the demo model "
                                  "(docs/BENCHMARKS.md has the 135M figure).",
        form="lora", trainer=APP, resume=FREE, bounds=share(step=0.01))
    lora_target: str | list[str] = _f("all-linear", "Modules that get adapters: 'all-linear' or a list of module names (q_proj, v_proj, ...).",
        form="lora", trainer=APP, resume=MUST_MATCH)
    use_rslora: bool = _f(False, "Rank-stabilised LoRA scaling (alpha / sqrt(r)).",
        form="lora", trainer=APP, resume=MUST_MATCH)
    use_dora: bool = _f(False, "Weight-decomposed LoRA (DoRA).",
        form="lora", trainer=APP, resume=MUST_MATCH)
    # --- precision and memory ----------------------------------------------
    precision: str = _f("auto", "auto: bf16 on a GPU that supports it, else fp16 on a GPU; fp32 on the CPU. "
                        "bf16 on a CPU with AVX512-BF16 or AMX trained a 135M model 1.4-1.9x faster in 0.73x the "
                        "memory (docs/BENCHMARKS.md).", PRECISIONS,
        form="method", trainer=converted("bf16", "fp16"), resume=FREE)
    gradient_checkpointing: bool | str = _f("auto", "Recompute activations in the backward pass: less memory, about 30% "
                                                   "slower. auto: on only when the memory estimate says the run would "
                                                   "not fit without it.", CHECKPOINTING,
        form="training", trainer=converted("activation_checkpointing", "activation_checkpointing_kwargs"), resume=FREE)
    # --- speed (docs/BENCHMARKS.md measures each) ----------------------------
    packing: bool = _f(True, "Padding-free batches: a batch's rows joined into one sequence with no padding (each row "
                             "still sees only itself). Falls back to length-grouped padded batches, with a log line, "
                             "where the model does not support it.",
        form="advanced", trainer=APP, resume=FREE)
    torch_compile: bool = _f(False, "Compile the model with torch.compile: slower start, often faster steps on a GPU.",
        form="advanced", trainer=copied("torch_compile"), resume=FREE)
    use_liger_kernel: bool = _f(False, "Liger's fused Triton kernels (RMSNorm, RoPE, SwiGLU, linear cross-entropy): "
                                       "less memory and faster steps. CUDA only, needs the liger-kernel package "
                                       "(requirements-gpu.txt).",
        form="advanced", trainer=copied("use_liger_kernel"), resume=FREE)
    # --- optimisation ------------------------------------------------------
    learning_rate: float = _f(5e-4, "Peak learning rate.",
        form="training", trainer=copied("learning_rate"), resume=FREE, bounds=above(0, step=1e-6))
    num_train_epochs: float = _f(5.0, "Passes over the training data (ignored when max_steps > 0).",
        form="training", trainer=copied("num_train_epochs"), resume=FREE, bounds=Bounds(step=0.5))
    max_steps: int = _f(-1, "Stop after this many optimizer steps (-1: use num_train_epochs).",
        form="training", trainer=copied("max_steps"), resume=FREE, bounds=Bounds(step=1))
    per_device_train_batch_size: int = _f(8, "Examples per device per forward pass.",
        form="training", trainer=copied("per_device_train_batch_size"), resume=WARN, bounds=at_least(1, "config.above_zero", step=1))
    per_device_eval_batch_size: int = _f(8, "Examples per device per evaluation pass.",
        form="advanced", trainer=copied("per_device_eval_batch_size"), resume=FREE, bounds=at_least(1, "config.above_zero", step=1))
    gradient_accumulation_steps: int = _f(1, "Forward passes per optimizer step.",
        form="training", trainer=copied("gradient_accumulation_steps"), resume=WARN, bounds=at_least(1, "config.above_zero", step=1))
    optim: str = _f("auto", "Optimizer. auto: AdamW, fused into one kernel on a CUDA GPU (plain on the CPU, where it measured faster).", OPTIMIZERS,
        form="advanced", trainer=converted("optim"), resume=FREE)
    lr_scheduler_type: str = _f("cosine", "Learning-rate schedule.", SCHEDULERS,
        form="training", trainer=copied("lr_scheduler_type"), resume=FREE)
    warmup_ratio: float = _f(0.05, "Share of the total steps spent warming up the learning rate (none on a run "
                             "of fewer than 20 steps, whose first step would otherwise learn nothing).",
        form="training", trainer=copied("warmup_steps"), resume=FREE, bounds=share(step=0.01))
    weight_decay: float = _f(0.0, "AdamW weight decay.",
        form="advanced", trainer=copied("weight_decay"), resume=FREE, bounds=at_least(0, "config.not_negative", step=0.01))
    max_grad_norm: float = _f(1.0, "Gradient clipping norm (0 = no clipping).",
        form="advanced", trainer=copied("max_grad_norm"), resume=FREE, bounds=at_least(0, "config.not_negative", step=0.1))
    neftune_noise_alpha: float | None = _f(None, "NEFTune embedding noise (typical 5); empty = off.",
        form="advanced", trainer=copied("neftune_noise_alpha"), resume=FREE, bounds=at_least(0, "config.not_negative"))
    seed: int = _f(42, "Random seed for data order, splits and initialisation.",
        form="advanced", trainer=copied("seed", "data_seed"), resume=WARN, bounds=between(0, 2**32 - 1, step=1))
    # --- preference tuning (stage) -----------------------------------------
    stage: str = _f("sft", "sft: instruction data; dpo / orpo / simpo: chosen-rejected pairs; kto: labelled "
                    "single answers; grpo: prompts, rewarded completions sampled by the model (TRL's trainers).", STAGES,
        form="preference", trainer=PREFERENCE, resume=MUST_MATCH)
    init_adapter: str | None = _f(None, "Start from an SFT run's adapter (RUN/final or RUN/checkpoint-N) and "
                                  "continue training it; the reference is that adapter, frozen. Empty: a new adapter "
                                  "on the base, whose reference is the base (adapter disabled).",
        form="preference", trainer=APP, resume=MUST_MATCH)
    beta: float = _f(0.1, "TRL beta: dpo / kto: how far the model may move from the reference (higher = closer); "
                     "orpo: weight of the odds-ratio term; simpo: reward scale (typical 2.0); grpo: weight of the KL "
                     "term against the reference (0: none, no reference pass).",
        form="preference", trainer=PREFERENCE, resume=FREE, bounds=above(0, step=0.01, preference_only=True))
    loss_type: str | None = _f(None, "TRL loss_type. dpo: sigmoid (default), hinge, ipo, robust, bco_pair, "
                               "sppo_hard, nca_pair, apo_zero, apo_down; kto: kto (default), apo_zero_unpaired; grpo: dapo "
                               "(default), grpo, dr_grpo, bnpo, cispo, sapo.",
                               (None, *PAIR_LOSSES, *KTO_LOSSES, *GRPO_LOSSES),
        form="preference", trainer=PREFERENCE, resume=FREE)
    label_smoothing: float = _f(0.0, "TRL label_smoothing: the assumed share of flipped preference labels "
                                "(robust / conservative DPO, SimPO), in [0, 0.5).",
        form="preference", trainer=PREFERENCE, resume=FREE, bounds=share("config.label_smoothing", high=0.5, step=0.01, preference_only=True))
    rpo_alpha: float = _f(0.0, "dpo: weight of an SFT term, the chosen answers' mean token loss, added to the "
                          "preference loss (RPO; TRL 1.16 names it loss_type [..., 'sft'] with loss_weights "
                          "[1, rpo_alpha]). Keeps the answers the run started from; 0 = off.",
        form="preference", trainer=PREFERENCE, resume=FREE, bounds=at_least(0, "config.not_negative", step=0.1, preference_only=True))
    simpo_gamma: float = _f(0.5, "TRL simpo_gamma: the target reward margin of SimPO.",
        form="preference", trainer=PREFERENCE, resume=FREE, bounds=Bounds(step=0.1))
    desirable_weight: float = _f(1.0, "TRL desirable_weight (kto): weight of the rows labelled true.",
        form="preference", trainer=PREFERENCE, resume=FREE, bounds=above(0, "config.kto_weights", step=0.1, preference_only=True))
    undesirable_weight: float = _f(1.0, "TRL undesirable_weight (kto): weight of the rows labelled false.",
        form="preference", trainer=PREFERENCE, resume=FREE, bounds=above(0, "config.kto_weights", step=0.1, preference_only=True))
    precompute_ref_log_probs: bool = _f(False, "TRL precompute_ref_log_probs (dpo): one reference pass over the "
                                        "data before training instead of one per step.",
        form="preference", trainer=PREFERENCE, resume=FREE)
    # --- grpo: rewards for sampled completions (TRL's GRPOTrainer, docs/PREFERENCE.md) ----------
    num_generations: int = _f(8, "TRL num_generations (grpo): completions sampled per prompt, compared within "
                              "their group. The effective batch (which counts completions) must be a multiple of it.",
        form="preference", trainer=PREFERENCE, resume=WARN, bounds=at_least(2, "config.num_generations", step=1))
    max_completion_length: int = _f(128, "TRL max_completion_length (grpo): the most tokens a sampled completion "
                                    "may have (TRL's default is 512; every token is generated one by one).",
        form="preference", trainer=PREFERENCE, resume=FREE, bounds=at_least(1, "config.above_zero", step=1))
    temperature: float = _f(1.0, "TRL temperature (grpo): sampling temperature of the completions; a group needs "
                            "varied answers to compare.",
        form="preference", trainer=PREFERENCE, resume=FREE, bounds=above(0, step=0.05))
    rewards: list[dict] = _f([], "grpo reward presets, each {kind, weight, ...}: exact_match (the answer against "
                             "the data's reference answer, numbers normalised), format (regex `pattern` the whole "
                             "completion must match; default <think>...</think><answer>...</answer>), length "
                             "(`min` / `max` completion tokens), contains / not_contains (`text`).",
        form=FILE_ONLY, trainer=PREFERENCE, resume=FREE)
    reward_functions: list[str] = _f([], "Your own grpo rewards as 'module:function' with TRL's signature "
                                     "f(prompts, completions, **kwargs) -> list[float]; the reference answers "
                                     "come as the `answer` keyword.",
        form=FILE_ONLY, trainer=PREFERENCE, resume=FREE, runs_code=True)
    reward_weights: list[float] = _f([], "Weights of reward_functions, in their order (empty: 1 each).",
        form=FILE_ONLY, trainer=PREFERENCE, resume=FREE, bounds=ANY_NUMBER)
    use_vllm: bool = _f(False, "TRL use_vllm (grpo): generate the completions with vLLM, colocated on the "
                        "training GPU (CUDA and the vllm package only).",
        form="preference", trainer=PREFERENCE, resume=FREE)
    # --- evaluation and checkpoints ----------------------------------------
    logging_steps: int = _f(5, "Log train metrics every N optimizer steps.",
        form="advanced", trainer=copied("logging_steps"), resume=FREE, bounds=at_least(1, "config.above_zero", step=1))
    eval_steps: int | None = _f(None, "Evaluate every N steps (empty = at each save).",
        form="training", trainer=converted("eval_steps"), resume=FREE, bounds=at_least(1, "config.at_least_one"))
    save_steps: int = _f(50, "Save a checkpoint every N steps (and at the end).",
        form="training", trainer=copied("save_steps"), resume=FREE, bounds=at_least(1, "config.above_zero", step=1))
    save_total_limit: int | None = _f(3, "Keep at most N checkpoints (the best is always kept); empty = all.",
        form="training", trainer=APP, resume=FREE, bounds=at_least(1, "config.at_least_one"))
    early_stopping_patience: int | None = _f(None, "Stop after N evaluations without eval-loss improvement; empty = off.",
        form="advanced", trainer=APP, resume=FREE, bounds=at_least(1, "config.at_least_one"))
    early_stopping_threshold: float = _f(0.0, "Smallest eval-loss improvement that counts.",
        form="advanced", trainer=APP, resume=FREE, bounds=Bounds(step=0.001))
    stop_when_learned: bool = _f(True, "SFT: from the second epoch on, check at each epoch's end whether the model "
                                       "answers 16 of your training rows right and ends them; stop once 14 are "
                                       "(num_train_epochs is then a ceiling).",
        form="training", trainer=APP, resume=FREE)
    learning_report: bool = _f(True, "Score the base and the checkpoints as the run trains: held-out prompts of "
                                     "your data (learned), general questions the base answers right (kept), "
                                     "answers that end (eval/learning.json), within about 10% of the training time.",
        form="advanced", trainer=APP, resume=FREE)
    # --- execution ---------------------------------------------------------
    devices: str = _f("auto", "auto: every GPU (else the CPU); 'cpu'; or GPU indices such as '0,1'.",
        form="training", trainer=APP, resume=FREE)
    num_processes: int | None = _f(None, "Worker processes (empty: one per device). >1 launches torchrun (DDP).",
        form="training", trainer=APP, resume=FREE, bounds=at_least(1, "config.at_least_one"))
    dataloader_num_workers: int = _f(0, "Processes that prepare batches.",
        form="advanced", trainer=copied("dataloader_num_workers"), resume=FREE, bounds=at_least(0, "config.not_negative", step=1))
    report_to: str = _f("none", "Also log to TensorBoard (inside the run folder) or Weights & Biases.", REPORT_TO,
        form="advanced", trainer=converted("report_to"), resume=FREE)
    callbacks: list[str] = _f([], "Your own transformers TrainerCallback classes as 'module:Class'.",
        form=FILE_ONLY, trainer=APP, resume=FREE, runs_code=True)
    loss_function: str | None = _f(None, "Optional 'module:function' that replaces the loss: fn(outputs, labels, num_items_in_batch) -> tensor.",
        form=FILE_ONLY, trainer=APP, resume=FREE, runs_code=True)
    run_name: str | None = _f(None, "A label for the run (the run id is generated).",
        form="advanced", trainer=copied("run_name"), resume=FREE)
    # --- scale-out: sharding, several machines, Ray (backend/scale, docs/SCALE.md) ---
    distributed: str = _f("auto", "auto: one process, or DDP over several; ddp: the same, named; fsdp: FSDP2 shards "
                          "weights, gradients and optimizer state over the GPUs; deepspeed_zero2: DeepSpeed shards "
                          "gradients and optimizer state; deepspeed_zero3: the weights too. FSDP and ZeRO need CUDA.",
                          DISTRIBUTED,
        form="scale", trainer=SCALE, resume=FREE)
    cpu_offload: bool = _f(False, "Keep the optimizer state (with ZeRO-3 also the weights) in CPU memory: less GPU "
                                  "memory, slower steps. DeepSpeed ZeRO only.",
        form="scale", trainer=SCALE, resume=FREE)
    deepspeed: str | None = _f(None, "Your own DeepSpeed JSON file instead of the generated one ('auto' values are "
                                     "filled from this run's settings); empty: generated.",
        form="scale", trainer=SCALE, resume=FREE)
    nnodes: int = _f(1, "Machines in the run (torchrun). The app starts node 0 and shows the command for each other node.",
        form="scale", trainer=APP, resume=FREE, bounds=at_least(1, "scale.nnodes", step=1))
    node_rank: int = _f(0, "This machine's place among nnodes: 0 hosts the rendezvous, 1..nnodes-1 join it.",
        form="scale", trainer=APP, resume=FREE, bounds=at_least(0, "scale.node_rank", step=1, joint=True))
    master_addr: str | None = _f(None, "Address of node 0 that every other node can reach (needed when nnodes > 1).",
        form="scale", trainer=APP, resume=FREE)
    master_port: int = _f(29500, "A free TCP port on node 0 for the rendezvous (nnodes > 1).",
        form="scale", trainer=APP, resume=FREE, bounds=between(1, 65535, "scale.port", step=1))
    node_join_timeout: int = _f(300, "Seconds the nodes wait for each other before the run fails with a message.",
        form="scale", trainer=APP, resume=FREE, bounds=at_least(1, "scale.join_timeout", step=1))
    ray_address: str | None = _f(None, "Train through Ray Train: empty (no Ray), 'local' (start Ray on this machine), "
                                       "'auto' or 'ray://host:10001' (an existing cluster).",
        form="scale", trainer=APP, resume=FREE)
    ray_num_workers: int = _f(2, "Ray Train workers, one training process each.",
        form="scale", trainer=APP, resume=FREE, bounds=at_least(1, "scale.ray_workers", step=1))
    ray_use_gpu: bool = _f(False, "Give each Ray worker one GPU.",
        form="scale", trainer=APP, resume=FREE)
    ray_cpus_per_worker: float = _f(1.0, "CPUs Ray reserves for each worker.",
        form="scale", trainer=APP, resume=FREE, bounds=above(0, "scale.ray_cpus", step=0.5))

    def __post_init__(self) -> None:
        self.validate()

    # --- validation ----------------------------------------------------------
    def validate(self) -> None:
        """Static checks: what can be told from the config alone."""
        for f in dataclasses.fields(self):
            choices = f.metadata.get("choices")
            value = getattr(self, f.name)
            if isinstance(value, float) and not math.isfinite(value):
                raise ConfigError(msg("config.not_finite", name=f.name, value=value, example=_example(f.default)))
            if choices and value not in choices:
                allowed = ", ".join(str(c).lower() if isinstance(c, bool) else str(c) for c in choices if c is not None)
                raise ConfigError(msg("config.not_choice", name=f.name, value=value, allowed=allowed))
        if self.method == "qlora" and self.quantization_bits is None:
            self.quantization_bits = 4
        if self.quantization_bits is not None and self.method != "qlora":
            raise ConfigError(msg("config.bits_without_qlora", bits=self.quantization_bits))
        self._check_bounds(preference=False)
        if self.max_steps <= 0 and self.num_train_epochs <= 0:
            raise ConfigError(msg("config.no_length"))
        if self.val_size == 0 and self.early_stopping_patience:
            raise ConfigError(msg("config.needs_eval_split", name="early_stopping_patience"))
        if self.val_size == 0 and self.eval_steps:
            raise ConfigError(msg("config.needs_eval_split", name="eval_steps"))
        if self.dataset_name is not None and not self.dataset_name.strip():
            self.dataset_name = None  # a cleared box
        if isinstance(self.lora_target, list) and not self.lora_target:
            raise ConfigError(msg("config.empty_target"))
        self._validate_stage()
        for ref in [*self.callbacks, *([self.loss_function] if self.loss_function else [])]:
            if ":" not in ref or not all(ref.split(":", 1)):
                raise ConfigError(msg("config.reference", ref=ref))

        check_config(self)  # sharding, nodes and Ray: every rule in one module

    def _validate_stage(self) -> None:
        if self.use_vllm and self.stage != "grpo":
            raise ConfigError(msg("config.vllm_stage", stage=self.stage))
        if self.stage == "sft":
            return
        if self.loss_type is not None:
            allowed = {"kto": KTO_LOSSES, "dpo": PAIR_LOSSES, "grpo": GRPO_LOSSES}.get(self.stage, ())
            if self.loss_type not in allowed:
                raise ConfigError(msg("config.loss_type_stage", loss_type=self.loss_type, stage=self.stage,
                                      allowed=", ".join(allowed)) if allowed
                                  else msg("config.loss_type_fixed", loss_type=self.loss_type, stage=self.stage))
        self._check_bounds(preference=True)  # beta, label_smoothing, the KTO weights
        if self.init_adapter and self.method == "full":
            raise ConfigError(msg("config.init_adapter_full"))
        if self.loss_function:
            raise ConfigError(msg("config.loss_function_stage"))
        if self.precompute_ref_log_probs and self.stage != "dpo":
            raise ConfigError(msg("config.precompute_stage"))
        if self.stage == "grpo":
            check_reward_settings(self)  # presets, function names, weights, the batch and num_generations
        if self.rpo_alpha and self.stage != "dpo":
            raise ConfigError(msg("config.rpo_alpha_stage", stage=self.stage))

    def _check_bounds(self, preference: bool) -> None:
        """Each number inside its field's bounds (metadata "bounds"; the form's widgets use the
        same); `preference`: the bounds of the preference-stage settings, which sft ignores."""
        for f in dataclasses.fields(self):
            bounds, value = f.metadata.get("bounds"), getattr(self, f.name)
            if bounds is None or value is None or bounds.joint or bounds.preference_only != preference:
                continue
            if f.name == "beta" and self.stage == "grpo" and value >= 0:
                continue  # grpo's beta 0 is TRL's default: no KL term and no reference pass
            if not bounds.contains(value):
                template = CATALOGUE[bounds.message]
                raise ConfigError(msg(bounds.message, **message_args(template, f.name, value, bounds)))

    def check_model_context(self, context_length: int) -> None:
        if self.cutoff_len > context_length:
            raise ConfigError(msg("config.context", cutoff=self.cutoff_len, context=context_length))

    def check_packages(self) -> None:
        """Optional packages the settings need, checked where a run starts (not when an old
        run's config.yaml is read, which may come from another machine)."""
        if self.report_to == "wandb" and importlib.util.find_spec("wandb") is None:
            raise ConfigError(msg("config.wandb_missing"))

    def check_devices(self, devices: list) -> str:
        """Check precision against the devices; returns the precision to use."""

        names = ", ".join(d.name for d in devices)
        if self.precision == "bf16" and not all(d.supports_bf16 for d in devices):
            raise ConfigError(msg("config.bf16", devices=names))
        if self.use_dora and self.quantization_bits == 8 and any(d.id == "cpu" for d in devices):
            # bitsandbytes 0.50 on the CPU: DoRA's weight norm drops the int8 scale (SCB) after the
            # first step, and the second step fails inside bitsandbytes. 4-bit DoRA trains fine.
            raise ConfigError(msg("config.dora_8bit_cpu"))
        if self.precision == "fp16" and not all(d.supports_fp16 for d in devices):
            raise ConfigError(msg("config.fp16", devices=names))
        self.check_speed_settings(devices)
        return resolve_precision(self.precision, devices)

    def check_speed_settings(self, devices: list) -> None:
        """use_liger_kernel / torch_compile against the devices and the installed packages."""

        on_cpu = all(d.id == "cpu" for d in devices)
        if self.use_liger_kernel and on_cpu:
            raise ConfigError(msg("config.liger_cpu"))
        if self.use_liger_kernel and importlib.util.find_spec("liger_kernel") is None:
            raise ConfigError(msg("config.liger_missing"))
        if self.torch_compile and on_cpu and not (shutil.which("cc") or shutil.which("gcc")):
            raise ConfigError(msg("config.compile_no_compiler"))
        if self.use_vllm and on_cpu:
            raise ConfigError(msg("config.vllm_cpu"))
        if self.use_vllm and importlib.util.find_spec("vllm") is None:
            raise ConfigError(msg("config.vllm_missing"))

    # --- serialisation -------------------------------------------------------
    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False, allow_unicode=True)

    def save(self, path: Path) -> None:
        Path(path).write_text(self.to_yaml(), encoding="utf-8")

    @classmethod
    def from_dict(cls, data: dict) -> RunConfig:
        data = dict(data or {})
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = [k for k in data if k not in known]
        if unknown:
            hints = []
            for key in unknown:
                close = difflib.get_close_matches(key, known, n=1)
                hints.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
            raise ConfigError(msg("config.unknown", names=", ".join(hints)))
        hints = get_type_hints(cls)
        data = {k: _coerce(k, v, hints[k]) for k, v in data.items()}
        if data.get("stage") in STAGE_DEFAULTS:  # settings the file leaves out take the stage's defaults
            data = {**copy.deepcopy(STAGE_DEFAULTS[data["stage"]]), **data}
        return cls(**data)

    @classmethod
    def from_yaml(cls, text: str) -> RunConfig:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as error:
            raise ConfigError(msg("config.yaml", error=error)) from None
        if data is not None and not isinstance(data, dict):
            raise ConfigError(msg("config.not_mapping"))
        return cls.from_dict(data or {})

    @classmethod
    def load(cls, path: Path) -> RunConfig:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(msg("config.no_file", path=path)) from None
        except UnicodeDecodeError:
            raise ConfigError(msg("config.not_text", path=path)) from None
        except OSError as error:
            raise ConfigError(msg("config.unreadable", path=path, error=error.strerror or error)) from None
        if "\0" in text:
            raise ConfigError(msg("config.binary", path=path))
        return cls.from_yaml(text)

    def with_overrides(self, assignments: list[str]) -> RunConfig:
        """Apply `key=value` strings (values parsed as YAML: 4, 1e-4, true, [a, b])."""
        data = self.to_dict()
        given = {}
        for item in assignments:
            key, sep, raw = item.partition("=")
            if not sep:
                raise ConfigError(msg("config.set_syntax", item=item))
            given[key.strip()] = yaml.safe_load(raw) if raw.strip() else None
        if given.get("stage", self.stage) != self.stage:
            data = stage_switch(data, str(given["stage"]))
        return RunConfig.from_dict({**data, **given})

    @staticmethod
    def help_for(name: str) -> str:
        return {f.name: f.metadata["help"] for f in dataclasses.fields(RunConfig)}[name]

    @staticmethod
    def choices_for(name: str) -> tuple | None:
        return {f.name: f.metadata.get("choices") for f in dataclasses.fields(RunConfig)}[name]


if policy_gaps(RunConfig):  # a field added without its policy fails here, naming what it lacks
    raise TypeError("RunConfig field policy incomplete (backend/config_policy.py):\n" + "\n".join(policy_gaps(RunConfig)))


def stage_switch(values: dict, stage: str) -> dict:
    """`values` (a config as a dict) moved to `stage`: each setting still at the
    old stage's default takes the new stage's default; changed ones are kept."""
    old = STAGE_DEFAULTS.get(values.get("stage", "sft"), {})
    new = STAGE_DEFAULTS.get(stage, {})
    defaults = {f.name: f.default_factory() if f.default is dataclasses.MISSING else f.default
                for f in dataclasses.fields(RunConfig)}
    out = dict(values, stage=stage)
    for name in {*old, *new}:
        at_default = [old.get(name, defaults[name])]  # a list, not a set: rewards is a list of mappings
        if values.get("stage", "sft") == "sft" and name in DEMO_TINY:
            at_default.append(DEMO_TINY[name])  # the demo-tiny recipe's sft value is a default too
        if values.get(name) in at_default:
            out[name] = copy.deepcopy(new.get(name, defaults[name]))
    return out


def _example(default: Any) -> str:
    return str(default) if isinstance(default, (int, float)) and not isinstance(default, bool) else "1"


def _choices(name: str) -> tuple:
    field_ = RunConfig.__dataclass_fields__.get(name)
    return field_.metadata.get("choices", ()) if field_ else ()


def _coerce(name: str, value: Any, hint: Any) -> Any:
    """Coerce YAML / form values to the field's type, with a clear error."""
    if value is None:
        return None
    types = [t for t in get_args(hint) if t is not type(None)] if get_origin(hint) is not None and get_origin(hint) is not list else [hint]
    if get_origin(hint) is list and get_args(hint)[0] in (dict, float):
        return _coerce_items(name, value, get_args(hint)[0])
    if get_origin(hint) is list or list in [get_origin(t) for t in types]:
        if isinstance(value, list):
            return [str(v) for v in value]
        if str in types and isinstance(value, str) and "," not in value:
            return value  # a single name such as 'all-linear'
        if isinstance(value, str):
            return [v.strip() for v in value.split(",") if v.strip()]
    for kind in types:
        if kind is bool:
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0"):
                return value.lower() in ("true", "yes", "1")
            continue
        if kind in (int, float) and not isinstance(value, bool):
            try:
                number = float(value)
            except (TypeError, ValueError):
                continue
            if not math.isfinite(number):  # NaN and infinity: never a usable setting
                raise ConfigError(msg("config.not_finite", name=name, value=value,
                                      example=_example(RunConfig.__dataclass_fields__[name].default)))
            if kind is int:
                if number != int(number):
                    continue
                return int(number)
            return number
        if kind is str and isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
        if kind is str and isinstance(value, bool) and {"on", "off"} <= set(_choices(name)):
            return "on" if value else "off"  # YAML 1.1 reads a bare on / off as a boolean
    expected = " or ".join(getattr(t, "__name__", str(t)) for t in types)
    raise ConfigError(msg("config.type", name=name, value=value, expected=expected))


def _coerce_items(name: str, value: Any, kind: type) -> list:
    """A list of mappings (rewards) or of numbers (reward_weights), given as a list or as YAML / JSON text."""
    if isinstance(value, str):
        try:
            value = yaml.safe_load(value) if value.strip() else []
        except yaml.YAMLError as error:
            raise ConfigError(msg("config.yaml", error=error)) from None
    if isinstance(value, (dict, int, float)) and not isinstance(value, bool):
        value = [value]  # one reward, or one weight
    if not isinstance(value, list):
        raise ConfigError(msg("config.type", name=name, value=value, expected=f"a list of {kind.__name__}"))
    if kind is dict:
        if not all(isinstance(item, dict) for item in value):
            raise ConfigError(msg("config.type", name=name, value=value, expected="a list of mappings"))
        return [dict(item) for item in value]
    return [_coerce(name, item, float) for item in value]


# --- derived numbers ---------------------------------------------------------

def split_sizes(num_rows: int, val_size: float) -> tuple[int, int]:
    """(train rows, eval rows) for `val_size`; at least one eval row when asked."""
    eval_rows = 0 if val_size == 0 else max(1, round(num_rows * val_size))
    return num_rows - eval_rows, eval_rows


# More optimizer steps than this and the plan is warned about (Train tab and worker).
MANY_STEPS = 1_000_000
# A learning rate above this trains no model (LoRA trains at 1e-4 to 1e-3): the Plan warns, and the
# worker stops the run when the loss turns NaN or infinite (backend/training/callbacks.py).
ABSURD_LEARNING_RATE = 1.0
# transformers' schedulers run a warmup of W steps at 0, 1/W, ..., (W-1)/W of learning_rate: the
# first optimizer step never moves the weights. On a long run that is one step in hundreds; a run
# of fewer than WARMUP_MIN_STEPS (a handful of vote pairs, a quick try) would lose a real share of
# its training, and at the default warmup_ratio 0.05 its whole warmup would be that one lost step.
# Such a run trains at the full learning rate from its first step (the Plan and train.log say so).
WARMUP_MIN_STEPS = 20


def derived_numbers(config: RunConfig, num_train_rows: int, world_size: int = 1) -> dict:
    """The numbers the UI shows next to the form: effective batch, optimizer
    steps per epoch, total steps and warmup steps (the worker hands the Trainer these steps)."""
    effective_batch = config.per_device_train_batch_size * config.gradient_accumulation_steps * world_size
    batches_per_device = math.ceil(num_train_rows / (config.per_device_train_batch_size * world_size)) if num_train_rows else 0
    # Rounded up, as the Trainer does: a last partial accumulation is one more optimizer step.
    steps_per_epoch = max(1, math.ceil(batches_per_device / config.gradient_accumulation_steps)) if num_train_rows else 0
    if config.stage == "grpo" and num_train_rows:
        # A batch counts completions (num_generations per prompt), and TRL's sampler drops the prompts
        # of a last, partial step (floor): fewer prompts than one step trains nothing.
        steps_per_epoch = num_train_rows * config.num_generations // effective_batch
    if config.max_steps > 0:
        total_steps = config.max_steps
    else:
        total_steps = math.ceil(config.num_train_epochs * steps_per_epoch)
    return {
        "effective_batch": effective_batch,
        "steps_per_epoch": steps_per_epoch,
        "total_steps": total_steps,
        # as the Trainer counts a ratio (rounded up); none on a short run (WARMUP_MIN_STEPS)
        "warmup_steps": math.ceil(config.warmup_ratio * total_steps) if total_steps >= WARMUP_MIN_STEPS else 0,
        "epochs": round(total_steps / steps_per_epoch, 2) if steps_per_epoch else 0.0,
    }


def import_reference(ref: str) -> Any:
    """Import 'package.module:Name' (user callbacks and loss functions)."""
    module_name, _, attr = ref.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ConfigError(msg("config.import_module", module=module_name, ref=ref, error=error)) from None
    except (Exception, SystemExit) as error:  # the module's own code failed, or ended the process (sys.exit)
        raise ConfigError(msg("config.import_module", module=module_name, ref=ref,
                              error=f"{type(error).__name__}: {error}")) from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ConfigError(msg("config.import_name", module=module_name, name=attr, ref=ref)) from None
