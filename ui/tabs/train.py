"""Train tab: pick a model and a recipe, see what it will cost, start it.

The form is a view of RunConfig (ui/forms.py). Start hands the config to the
RunStore, which launches a worker process: nothing trains in this process.
Handlers are module functions taking the UIContext first, so tests call them
with the values a browser would send.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import gradio as gr

from backend.config import RunConfig
from backend.config_policy import ConfigError
from backend.config_recipes import suggested_settings
from backend.data.identity_rows import IDENTITY_FIELDS
from backend.data.saved_datasets import list_workspace_datasets
from backend.models.hardware import as_dicts, detect_devices
from backend.models.loading import has_own_chat_template
from backend.models.memory import architecture_for
from backend.models.offline import OFFLINE_MODELS
from backend.models.presets import PRESETS
from backend.runs import queue
from backend.runs.store import RunError
from backend.storage.safe_names import UnsafeName, clean_name, path_inside
from ui import forms, grpo_form
from ui.context import UIContext
from ui.i18n import localize
from ui.panels import estimate_panel, grpo_section, local_models_panel, sweep_panel
from ui.run_actions import resume, stop
from ui.views import grpo_plan, scale_view
from ui.views import train_summary as summary
from ui.warmup import import_heavy_libraries

_ = forms._label
TEXT: dict[str, dict[str, str]] = {
    **forms.FIELD_TEXT,
    **forms.HELP_TEXT,
    **forms.PLACEHOLDER_TEXT,
    **forms.CHOICE_TEXT,
    **estimate_panel.TEXT,
    **local_models_panel.TEXT,
    **sweep_panel.TEXT,
    **grpo_form.TEXT,
    **grpo_plan.TEXT,
    "train.model": _("Model", "模型"),
    "train.model.info": _("'demo', a preset hub id, or the path of a local model folder.",
                          "'demo'、预设的 Hub ID，或本地模型文件夹路径。"),
    "train.model.demo": _("The tiny demo model (2M parameters): a small Qwen2 built on this machine for fast tests; "
                          "it only knows its own fact rows (dataset demo).",
                          "微型演示模型（2M 参数）：在本机构建、用于快速测试的小型 Qwen2；只认识自己的事实数据（数据集 demo）。"),
    "train.model.offline": _("{label}: {params:.0f} M parameters, context {context} tokens. A real pretrained model "
                             "from the package registry, converted once from its GGUF file into {folder} ({state}). "
                             "Original: {hub_id}. Licence: {licence}.",
                             "{label}：{params:.0f} M 参数，上下文 {context} token。来自软件包仓库的真实预训练模型，"
                             "从其 GGUF 文件一次性转换到 {folder}（{state}）。原始模型：{hub_id}。许可：{licence}。"),
    "train.model.offline.ready": _("converted", "已转换"),
    "train.model.offline.pending": _("converted on first use, about half a minute", "首次使用时转换，约半分钟"),
    "train.model.preset": _("{label}: {params:.2f} B parameters, context {context} tokens (loaded from the hub or its local cache).",
                            "{label}：{params:.2f} B 参数，上下文 {context} token（从 Hub 或本地缓存加载）。"),
    "train.model.ok": _("✅ Model folder looks complete: {architecture}, about {params:.0f} M parameters, context {context} tokens, tokenizer present.",
                        "✅ 模型文件夹完整：{architecture}，约 {params:.0f} M 参数，上下文 {context} token，含分词器。"),
    "train.model.problems": _("❌ This model folder cannot be trained yet:", "❌ 该模型文件夹暂时无法训练："),
    "train.remote_warning": _("⚠️ Trust remote code runs Python files shipped with the model on this machine. Tick it only for a model whose source you trust.",
                              "⚠️ 信任远程代码会在本机运行模型自带的 Python 文件。仅对来源可信的模型勾选。"),
    "train.dataset": _("Dataset", "数据集"),
    "train.dataset.info": _("'demo', a dataset saved in the Data tab, or a file path.",
                            "'demo'、在数据页保存的数据集，或文件路径。"),
    "train.hardware.detecting": _("Detecting hardware…", "正在检测硬件…"),
    "train.hardware.header": _("**Hardware**", "**硬件**"),
    "train.hardware.auto": _("`auto` trains on {devices} in **{precision}**.", "`auto` 将在 {devices} 上以 **{precision}** 训练。"),
    "train.hardware.threads": _("A run started now takes **{threads}** CPU thread(s): {idle} of {cpus} CPUs are idle "
                                "(measured again when it starts).",
                                "现在开始的运行将使用 **{threads}** 个 CPU 线程：{cpus} 个 CPU 中有 {idle} 个空闲（运行开始时会重新测量）。"),
    "train.hardware.threads_set": _("A run takes **{threads}** CPU thread(s), as OMP_NUM_THREADS says.",
                                    "运行按 OMP_NUM_THREADS 使用 **{threads}** 个 CPU 线程。"),
    "train.section.lora": _("LoRA", "LoRA"),
    "train.section.training": _("Training", "训练"),
    "train.section.preference": _("Stage: preference tuning (DPO / ORPO / SimPO / KTO) or rewards (GRPO)",
                                  "训练阶段：偏好训练（DPO / ORPO / SimPO / KTO）或奖励（GRPO）"),
    "train.section.advanced": _("Advanced", "高级"),
    "train.section.scale": _("Several GPUs and machines", "多 GPU 与多机"),
    "train.section.plan": _("Plan", "计划"),
    "train.derived": _("**{rows}** training rows → effective batch **{effective_batch}**, **{steps_per_epoch}** steps per epoch, **{total_steps}** steps in all (**{epochs}** epochs), **{warmup_steps}** warmup steps.",
                       "**{rows}** 条训练数据 → 有效批大小 **{effective_batch}**，每轮 **{steps_per_epoch}** 步，共 **{total_steps}** 步（**{epochs}** 轮），预热 **{warmup_steps}** 步。"),
    "train.derived.many_steps": _("⚠ **{total_steps:,}** optimizer steps: the worker will say how long that takes after its first step. Lower {knob} unless you mean it.",
                                  "⚠ 共 **{total_steps:,}** 个优化步：训练第一步后会给出预计用时。除非确有此意，请调低 {knob}。"),
    "train.derived.no_warmup": _("No warmup: a run of fewer than {min_steps} steps trains at the full learning rate from its first step (a warmup's first step runs at learning rate 0 and would learn nothing).",
                                 "不预热：少于 {min_steps} 步的运行从第一步起就用完整的学习率（预热的第一步学习率为 0，什么也学不到）。"),
    "train.derived.absurd_lr": _("⚠ learning_rate **{lr:g}** is far above any that trains (LoRA: 1e-4 to 1e-3, full: 1e-5 to 1e-4): the loss would become NaN within a few steps, and the worker would then stop the run. Lower it unless you mean it.",
                                 "⚠ learning_rate **{lr:g}** 远高于任何能正常训练的值（LoRA：1e-4 到 1e-3，全量：1e-5 到 1e-4）：损失几步之内就会变成 NaN，随后训练进程会停止这次运行。除非确有此意，请调低它。"),
    "train.derived.learning": _(
        "Learning report: the base and each checkpoint answer **{learned}** prompts of your data{identity} and "
        "**{kept}** general questions (the base answers all {questions} once per model), at most {limit} new tokens "
        "each, in about {share:.0%} of the training time: the base and final/ always, the checkpoints between "
        "while the budget lasts.",
        "学习报告：基础模型和每个检查点回答你数据中的 **{learned}** 个提示{identity}和 **{kept}** 个通用问题"
        "（基础模型每个模型回答全部 {questions} 个一次），每个回答最多 {limit} 个新 token，耗时约为训练时间的 "
        "{share:.0%}：基础模型和 final/ 总会打分，中间的检查点在预算内打分。"),
    "train.derived.learning_identity": _(" (and {count} identity questions)", "（以及 {count} 个身份问题）"),
    "train.derived.learning_rows": _(
        "No held-out split to score ({rows} rows; val_size 0, or fewer than {minimum} rows): the report scores "
        "training rows, which says what the run memorised, not what it generalised.",
        "没有可打分的留出集（{rows} 条；val_size 为 0，或少于 {minimum} 条）：报告为训练数据打分，反映的是记住了什么，"
        "而不是泛化了什么。"),
    "train.derived.replay": _("Replay ({setting}): up to **{replay}** of the base model's own answers to general prompts "
                              "are mixed into your **{rows}** rows, so the model keeps what it knew (generated once "
                              "per model, then cached; answers that do not end are left out, so the step count above "
                              "is the most it can be). Set replay to off to train on your rows alone.",
                              "回放（{setting}）：把基础模型自己对通用问题的至多 **{replay}** 条回答混入你的 **{rows}** 条数据，"
                              "让模型保留原有能力（每个模型只生成一次并缓存；没有结束的回答不用，所以上面的步数是上限）。"
                              "把 replay 设为 off 则只用你的数据训练。"),
    "train.derived.replay_cached": _("Replay ({setting}): **{replay}** of the base model's own answers to general "
                                     "prompts are mixed into your **{rows}** rows, so the model keeps what it knew "
                                     "(counted from this model's cache of answers, as the run will pick them). Set "
                                     "replay to off to train on your rows alone.",
                                     "回放（{setting}）：把基础模型自己对通用问题的 **{replay}** 条回答混入你的 **{rows}** 条数据，"
                                     "让模型保留原有能力（按该模型已缓存的回答计数，与运行时的挑选一致）。"
                                     "把 replay 设为 off 则只用你的数据训练。"),
    "train.derived.learned_stop": _(
        "Stops once it knows your rows: from epoch {first} on, at each epoch's end the model answers **{probe}** of "
        "your training rows; when {goal} of them are right and end, the run stops there, so the {epochs:g} epochs above "
        "are a ceiling. Turn off “Stop once it knows your rows” to train every epoch.",
        "学会即停：从第 {first} 轮起，每轮结束时模型回答你的 **{probe}** 条训练数据；其中 {goal} 条答对并结束时就停在那里，"
        "所以上面的 {epochs:g} 轮是上限。关闭“学会你的数据后停止”则训练全部轮数。"),
    "train.suggest": _("For a model of this size ({size} parameters; {why}): {settings}.",
                       "对于这个规模的模型（{size} 参数；{why}）：{settings}。"),
    "train.suggest.now": _("now", "当前"),
    "train.suggest.apply": _("Use these settings", "使用这些设置"),
    "train.derived.at_most": _("These are the most steps the run can make: rows that cutoff_len leaves out are counted when "
                               "the run starts (train.log and summary.json say how many).",
                               "这是运行最多会走的步数：因截断长度而略过的行在运行开始时才统计（train.log 和 summary.json 会写明数量）。"),
    "train.derived.pairs_left_out": _("⚠ **{count}** rows are left out: their prompt alone fills cutoff_len {cutoff}, so no "
                                      "answer token would be left to compare. cutoff_len {needed} keeps every row whole.",
                                      "⚠ 有 **{count}** 行会被略过：仅提问就占满截断长度 {cutoff}，不剩任何回答词元可比较。"
                                      "截断长度设为 {needed} 可完整保留所有行。"),
    "train.derived.pairs_cut": _("{count} rows are over cutoff_len {cutoff}: they train with their answers cut at the end "
                                 "(cutoff_len {needed} keeps every row whole).",
                                 "{count} 行超过截断长度 {cutoff}：训练时回答末尾会被截掉（截断长度设为 {needed} 可完整保留所有行）。"),
    "train.derived.pairs_unusable": _("{count} rows are left out for an empty answer or chosen equal to rejected "
                                      "(the Data tab's checks list them).",
                                      "{count} 行因回答为空或 chosen 与 rejected 相同而被略过（数据页的检查会列出它们）。"),
    "train.derived.kto_pairs": _("kto trains one row per answer: {pairs} pairs are {rows} rows.",
                                 "kto 每个回答训练一行：{pairs} 对即 {rows} 行。"),
    "train.derived.no_rows": _("Step numbers appear once the dataset can be read. {error}", "数据集可读后显示步数。{error}"),
    "train.estimate.unknown": _("No memory estimate: {reason}", "无法估算显存：{reason}"),
    "train.estimate.header": _("{params:.1f} M parameters, {trainable:.2f} M trainable, computing in {precision}.",
                               "{params:.1f} M 参数，其中 {trainable:.2f} M 可训练，计算精度 {precision}。"),
    "train.estimate.checkpointing.on": _("Gradient checkpointing: on.", "梯度检查点：开。"),
    "train.estimate.checkpointing.off": _("Gradient checkpointing: off.", "梯度检查点：关。"),
    "train.estimate.checkpointing.auto_on": _("Gradient checkpointing: on (auto: the run would not fit without it).",
                                              "梯度检查点：开（自动：不开则放不下）。"),
    "train.estimate.checkpointing.auto_off": _("Gradient checkpointing: off (auto: the run fits without it).",
                                               "梯度检查点：关（自动：不开也放得下）。"),
    "train.estimate.weights": _("Weights", "权重"),
    "train.estimate.adapters": _("Adapters", "适配器"),
    "train.estimate.gradients": _("Gradients", "梯度"),
    "train.estimate.optimizer": _("Optimizer state", "优化器状态"),
    "train.estimate.activations": _("Activations", "激活值"),
    "train.estimate.runtime": _("Runtime overhead", "运行时开销"),
    "train.estimate.reference": _("Reference model (preference stage)", "参考模型（偏好阶段）"),
    "train.estimate.overlap": _("Gradients reuse freed activations (backward)", "反向传播时梯度复用已释放的激活值"),
    "train.estimate.total": _("Total", "合计"),
    "train.estimate.fits": _("✅ Fits on {device}: about {total:.2f} GiB of {memory:.1f} GiB.",
                             "✅ {device} 放得下：约 {total:.2f} GiB / {memory:.1f} GiB。"),
    "train.estimate.too_big": _("❌ Does not fit on {device}: about {total:.2f} GiB needed, {memory:.1f} GiB there (10% kept free).",
                                "❌ {device} 放不下：约需 {total:.2f} GiB，设备仅 {memory:.1f} GiB（保留 10%）。"),
    "train.estimate.per_gpu": _("Per GPU: {sharding} shards the state over {world} GPUs.",
                                "每块 GPU：{sharding} 将状态分片到 {world} 块 GPU。"),
    "train.estimate.cpu_offload": _("Offloaded to CPU memory: about {cpu:.2f} GiB per GPU process.",
                                    "卸载到 CPU 内存：每个 GPU 进程约 {cpu:.2f} GiB。"),
    "train.gpus": _("GPUs to train on", "训练用的 GPU"),
    "train.gpus.info": _("Ticks set Devices; all ticked = auto.", "勾选即设置“设备”；全选 = auto。"),
    "train.scale.processes": _("**{world}** training process(es) on {nodes} machine(s), {engine}, started by {how}.",
                               "**{world}** 个训练进程，{nodes} 台机器，{engine}，由 {how} 启动。"),
    "train.scale.node_command": _("on node {rank} (same run folder, shared storage):", "在节点 {rank} 上运行（同一运行目录，共享存储）："),
    "train.start": _("Start", "开始训练"),
    "train.stop": _("Stop", "停止"),
    "train.resume": _("Resume", "继续"),
    "train.show_command": _("Show command", "显示命令"),
    "train.save_yaml": _("Save config (YAML)", "保存配置（YAML）"),
    "train.load_yaml": _("Load config (YAML)", "加载配置（YAML）"),
    "train.command": _("Command", "命令"),
    "train.yaml": _("run.yaml", "run.yaml"),
    "train.msg.started": _("✅ Started run **{run_id}**. Watch it in the Runs tab.", "✅ 已开始运行 **{run_id}**，可在“运行”页查看。"),
    "train.msg.queued": _("⏳ Run **{run_id}** is queued behind run **{behind}**: it starts by itself when its "
                          "devices are free. See the queue in the Runs tab.",
                          "⏳ 运行 **{run_id}** 已排在运行 **{behind}** 之后：设备空闲时会自动开始。可在“运行”页查看队列。"),
    "train.msg.invalid": _("❌ {error}", "❌ {error}"),
    "train.msg.command": _("Save the YAML below as `run.yaml` and run this from the repository folder:",
                           "将下面的 YAML 保存为 `run.yaml`，并在仓库目录运行："),
    "train.msg.saved": _("Saved the config as {path}.", "配置已保存为 {path}。"),
    "train.msg.loaded": _("Loaded the config from {name}.", "已从 {name} 加载配置。"),
}


def _msg(ctx: UIContext, lang: str | None):
    return lambda key, **values: ctx.msg(lang, key, **values)


# --- handlers ---------------------------------------------------------------

def restore_form(ctx: UIContext) -> list:
    """(model, dataset, *form values) from the saved settings, for every page load: the components'
    own values are those of the app's start, so a reload would show them and Start would train on them."""
    config = forms.form_defaults(ctx)  # the last started config, read fresh
    dataset = ctx.saved().get("dataset") or config.dataset  # saved in Data, or used by the last Start
    return [config.model_name_or_path, gr.update(value=dataset, choices=_dataset_choices(ctx)),
            *forms.form_values(config)]


def restore_changes(restored: list, start: list, current: list) -> list:
    """restore_form's values, each as an update only where it changes what the page shows and the user
    has not edited it yet (the page's value is still the app start's): a page load that set every field
    fired every field's change handlers (the Plan, the rows, the estimate) at once, and one that ran late,
    on a busy machine, overwrote what the user had just typed."""
    def value(item):
        return item.get("value") if isinstance(item, dict) else item

    return [gr.skip() if not _same(now, was) or _same(value(new), now) else new
            for new, was, now in zip(restored, start, current, strict=True)]


def _same(a, b) -> bool:
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and not isinstance(b, bool):
        return float(a) == float(b)
    return a == b


def detect_hardware(ctx: UIContext, lang: str) -> tuple[str, list[dict]]:
    import_heavy_libraries()

    devices = detect_devices()
    return summary.hardware_text(_msg(ctx, lang), devices), as_dicts(devices)


def check_model(ctx: UIContext, lang: str, model: str) -> str:
    return summary.model_text(_msg(ctx, lang), (model or "").strip(), ctx.workspace, lang)


def suggest(ctx: UIContext, lang: str, model: str, *values) -> tuple[str, list[Any] | None]:
    """(text, form values) proposing the learning rate and epochs for the picked model's size, as a
    change the user takes with a click or leaves; ("", None) when the form already has them."""

    model = (model or "").strip()
    try:
        current = forms.config_from_values(list(values), model, "identity")
        size = None if model in ("demo", "demo-tiny") else architecture_for(model, ctx.workspace.models_dir).num_parameters()
    except (ConfigError, ValueError, OSError):
        return "", None
    settings, why = suggested_settings(model, size, current.method)
    changes = {k: v for k, v in settings.items() if k in forms.NAMES and getattr(current, k) != v}
    if not changes:
        return "", None
    listed = ", ".join(f"`{k}` {v:g} ({_msg(ctx, lang)('train.suggest.now')} {getattr(current, k):g})"
                       for k, v in changes.items())
    text = _msg(ctx, lang)("train.suggest", size=f"{size / 1e6:,.0f} M" if size else "2 M", settings=listed,
                           why=localize(why, lang))
    return text, forms.form_values(dataclasses.replace(current, **changes))


SUGGESTED_FIELDS = ("learning_rate", "num_train_epochs")  # all that backend.config_recipes.suggested_settings sets


def take_suggestion(proposed: list[Any] | None, *values) -> list[Any]:
    """The form as it is now with only the suggested fields taken from `proposed`: other fields the
    user changed after the proposal was made keep their new values."""
    if not proposed:
        return list(values)
    taken = list(values)
    for name in SUGGESTED_FIELDS:
        if name in forms.NAMES:
            taken[forms.NAMES.index(name)] = proposed[forms.NAMES.index(name)]
    return taken


ROWS_FIELDS = ("chat_template", "stage")  # count_rows' settings after the model


def count_rows(ctx: UIContext, dataset: str, dataset_name: str | None = None, model: str = "",
               chat_template: str = "auto", stage: str = "sft") -> dict:
    return summary.dataset_rows((dataset or "identity").strip(), ctx.workspace, (dataset_name or "").strip() or None,
                                (model or "").strip(), chat_template or "auto", stage or "sft")


def plan(ctx: UIContext, lang: str, model: str, dataset: str, rows: dict, devices: list[dict],
         *values) -> tuple[str, str]:
    """(derived numbers, memory estimate) for the form as it is now."""
    msg = _msg(ctx, lang)
    try:
        config = forms.config_from_values(list(values), model, dataset)
        ctx.check_code_settings(config)  # before the Plan imports a reward function
        config.check_packages()  # e.g. wandb chosen but not installed: say how to install it now
    except ConfigError as error:
        return msg("train.msg.invalid", error=localize(error, lang)), ""
    found = summary.devices_from_state(devices)

    if config.stage == "grpo":  # prompts x completions, and the worker's checks before its model loads
        derived = grpo_plan.plan_text(msg, config, rows, scale_view.world_size(config, found), lang)
    else:
        derived = summary.derived_text(msg, config, rows, scale_view.world_size(config, found),
                                       has_own_chat_template(config.model_name_or_path, ctx.workspace.models_dir))
    template = summary.template_text(config, ctx.workspace, lang)  # the worker's own sentence, or its refusal
    return (derived + "\n\n" + scale_view.launch_text(msg, config, found) + (f"\n\n{template}" if template else ""),
            summary.estimate_text(msg, config, ctx.workspace, found, lang, rows))


def start(ctx: UIContext, lang: str, model: str, dataset: str, *values) -> tuple[str, str | None]:
    """Launch a worker for the form's config, or queue it behind the run on its devices;
    (message, new run id or None)."""
    msg = _msg(ctx, lang)
    try:
        config = forms.config_from_values(list(values), model, dataset)
        ctx.check_code_settings(config)  # an app open to other computers takes code from this machine only
        summary.check_template(config, ctx.workspace)  # the worker would refuse it the same way (exit 2)
        run_id = queue.enqueue(ctx.store, config)  # starts now when its devices are free, else waits
    except (ConfigError, RunError) as error:
        return msg("train.msg.invalid", error=localize(error, lang)), None
    # The dataset too: the one trained on last wins over one saved in Data before (restore_form).
    ctx.remember(model=config.model_name_or_path, dataset=config.dataset, train=config.to_dict())
    info = ctx.store.get(run_id)
    if info.state == "failed":  # the worker could not even be started (recorded in its status.json)
        return msg("train.msg.invalid", error=localize(info.error_message or info.error, lang)), run_id
    behind = queue.blocker(ctx.store, run_id) if info.waiting else None
    if behind:
        return msg("train.msg.queued", run_id=run_id, behind=behind), run_id
    return msg("train.msg.started", run_id=run_id), run_id


def show_command(ctx: UIContext, lang: str, model: str, dataset: str, *values) -> tuple[str, str, str]:
    """(message, shell command, YAML) that reproduce the run from a shell."""
    msg = _msg(ctx, lang)
    try:
        config = forms.config_from_values(list(values), model, dataset)
        argv, yaml_text = ctx.store.command_for(config)
        others = ctx.store.node_commands(config)
    except (ConfigError, RunError) as error:
        return msg("train.msg.invalid", error=localize(error, lang)), "", ""
    return msg("train.msg.command"), scale_view.command_text(argv, others, msg), yaml_text


def save_yaml(ctx: UIContext, lang: str, model: str, dataset: str, *values) -> tuple[str, str | None]:
    """Write the config under workspace/configs/ (the app serves files from the workspace only)."""
    msg = _msg(ctx, lang)
    try:
        config = forms.config_from_values(list(values), model, dataset)
    except ConfigError as error:
        return msg("train.msg.invalid", error=localize(error, lang)), None
    folder = ctx.workspace.root / "configs"
    folder.mkdir(parents=True, exist_ok=True)
    try:
        path = path_inside(folder, f"{clean_name(config.run_name, 'train')}-{time.strftime('%Y%m%d-%H%M%S')}.yaml")
    except UnsafeName as error:  # the one check every user-typed file name passes
        return msg("train.msg.invalid", error=localize(error, lang)), None
    config.save(path)
    return msg("train.msg.saved", path=path.name), str(path)


def load_yaml(ctx: UIContext, lang: str, path: str | None) -> list:
    """(message, model, dataset, *form values); on a bad file only the message changes."""
    msg = _msg(ctx, lang)
    keep = [gr.update()] * (2 + len(forms.NAMES))
    if not path:
        return [gr.update(), *keep]
    try:
        config = RunConfig.load(Path(path))
    except ConfigError as error:
        return [msg("train.msg.invalid", error=f"{Path(path).name}: {localize(error, lang)}"), *keep]
    return [msg("train.msg.loaded", name=Path(path).name), config.model_name_or_path, config.dataset,
            *forms.form_values(config)]


# --- layout -----------------------------------------------------------------

def _dataset_choices(ctx: UIContext) -> list[str]:
    # The data backend's own listing: exactly the folders the worker accepts.

    names = [d["name"] for d in list_workspace_datasets(ctx.workspace.datasets_dir)]
    return ["identity", "demo", *[n for n in names if n not in ("identity", "demo")]]


def build(ctx: UIContext) -> None:
    defaults = forms.form_defaults(ctx)
    t = ctx.t
    model_choices = [*[(f"{m.label} · {name}", name) for name, m in OFFLINE_MODELS.items()],
                     ("Tiny demo model (2M, tests) · demo", "demo"),
                     *[(f"{p.label} ({hub_id})", hub_id) for hub_id, p in PRESETS.items() if hub_id not in OFFLINE_MODELS]]
    c: dict = {}
    with gr.Row():
        with gr.Column(scale=3):
            c["model"] = gr.Dropdown(model_choices, value=defaults.model_name_or_path, allow_custom_value=True,
                                     label=t("train.model"), info=t("train.model.info"), elem_id="train-model")
            c["model_check"] = gr.Markdown(elem_id="train-model-check")
            local_models_panel.build(ctx, c["model"], model_choices)  # the models other tools keep on disk
            with gr.Row():
                c["suggest"] = gr.Markdown(elem_id="train-suggest")
                c["suggest_apply"] = gr.Button(t("train.suggest.apply"), visible=False, size="sm", scale=0,
                                               elem_id="train-suggest-apply")
            c["suggested"] = gr.State(None)
            # A decision for the model shown above: off for any other model (see do_model_picked).
            inputs = forms.build_inputs(ctx, forms.MODEL_FIELDS, defaults)
            c["remote_warning"] = gr.Markdown(t("train.remote_warning"), visible=defaults.trust_remote_code)
        with gr.Column(scale=2):
            c["dataset"] = gr.Dropdown(_dataset_choices(ctx), value=defaults.dataset, allow_custom_value=True,
                                       label=t("train.dataset"), info=t("train.dataset.info"), elem_id="train-dataset")
            inputs |= forms.build_inputs(ctx, forms.DATA_FIELDS, defaults)
    with gr.Row():
        with gr.Column(scale=3):
            inputs |= forms.build_inputs(ctx, forms.METHOD_FIELDS, defaults)
        with gr.Column(scale=2):
            c["hardware"] = gr.Markdown(t("train.hardware.detecting"), elem_id="train-hardware")
            c["gpus"] = gr.CheckboxGroup([], label=t("train.gpus"), info=t("train.gpus.info"), visible=False,
                                         elem_id="train-gpus")
    for section, fields, is_open in (("lora", forms.LORA_FIELDS, True), ("training", forms.TRAIN_FIELDS, True),
                                     ("preference", grpo_section.preference_specs(), defaults.stage != "sft"),
                                     ("advanced", forms.ADVANCED_FIELDS, False), ("scale", forms.SCALE_FIELDS, False)):
        with gr.Accordion(t(f"train.section.{section}"), open=is_open,
                          elem_id=f"train-section-{section}") as c[f"section_{section}"], gr.Row():
            inputs |= forms.build_inputs(ctx, fields, defaults)
        if section == "preference":  # shown for stage grpo only
            c["section_grpo"], grpo_inputs = grpo_section.build(ctx, defaults)
            inputs |= grpo_inputs
    with gr.Accordion(t("train.section.plan"), open=True):
        with gr.Row():
            c["derived"] = gr.Markdown(elem_id="train-derived")
            c["estimate"] = gr.Markdown(elem_id="train-estimate")
        time_panel = estimate_panel.build(ctx)  # the time estimate and Measure speed
    with gr.Row():
        for key, variant in (("start", "primary"), ("stop", "stop"), ("resume", "secondary"),
                             ("show_command", "secondary"), ("save_yaml", "secondary")):
            c[key] = gr.Button(t(f"train.{key}"), variant=variant, elem_id=f"train-{key.replace('_', '-')}")
        c["load_yaml"] = gr.UploadButton(t("train.load_yaml"), file_types=[".yaml", ".yml"], elem_id="train-load-yaml")
    c["message"] = gr.Markdown(elem_id="train-message")
    # The watched run's bar and loss line, drawn by the Runs tab's one timer (ui/tabs/runs.py:train_view).
    ctx.shared["train_progress"] = gr.HTML(elem_id="train-progress")
    c["saved_file"] = gr.File(visible=False, interactive=False, height=60, show_label=False)
    c["command"] = gr.Code(language="shell", label=t("train.command"), interactive=False, visible=False)
    c["yaml"] = gr.Code(language="yaml", label=t("train.yaml"), interactive=False, visible=False)
    c["devices"], c["rows"] = gr.State(None), gr.State(None)
    c["trust"], c["dataset_name"] = inputs["trust_remote_code"], inputs["dataset_name"]
    c["stage"], c["last_stage"] = inputs["stage"], gr.State(defaults.stage)
    _wire(ctx, c, [inputs[name] for name in forms.NAMES])
    _wire_stage(ctx, c, [inputs[name] for name in forms.NAMES])
    _wire_identity(ctx, [inputs[name] for name in IDENTITY_FIELDS.values()])
    head = [ctx.lang, c["model"], c["dataset"]]
    estimate_panel.wire(ctx, time_panel, head, c["devices"], [inputs[name] for name in forms.NAMES])
    sweep_panel.build(ctx, head, [inputs[name] for name in forms.NAMES])  # a grid over the form's settings


def _wire_stage(ctx: UIContext, c: dict, form: list) -> None:
    """Stage changes move the stage defaults; "Train on these votes" (Chat) prefills the form."""
    private = {"api_visibility": "private"}

    def do_stage(previous, *values):
        return [*forms.stage_form_values(list(values), previous), values[forms.NAMES.index("stage")]]

    c["stage"].input(do_stage, [c["last_stage"], *form], [*form, c["last_stage"]], **private)
    c["stage"].change(lambda stage: gr.update(visible=grpo_section.visible(stage)), c["stage"], c["section_grpo"],
                      **private)
    prefill = ctx.shared.get("train_prefill")
    if prefill is not None:
        def do_prefill(values):
            if not values:
                return [gr.update()] * (4 + len(form))
            model, dataset, *rest = forms.prefill_values(values)
            return [model, gr.update(value=dataset, choices=_dataset_choices(ctx)), *rest, values.get("stage", "sft"),
                    gr.Accordion(open=True)]  # the preference settings in view

        prefill.change(do_prefill, prefill, [c["model"], c["dataset"], *form, c["last_stage"], c["section_preference"]],
                       **private)


def _wire_identity(ctx: UIContext, fields: list) -> None:
    """The form's identity_name / identity_author to the shared "identity" state: what the Data tab
    checks `{{name}}` / `{{author}}` as filled with (ui/context.py)."""
    identity = ctx.shared.get("identity")
    if identity is None:
        return
    for box in fields:
        box.change(lambda *values: dict(zip(IDENTITY_FIELDS.values(), values)), fields, identity,
                   api_visibility="private")


def _wire(ctx: UIContext, c: dict, form: list) -> None:
    lang, shared_dataset = ctx.lang, ctx.shared.get("dataset")
    private = {"api_visibility": "private"}
    head = [lang, c["model"], c["dataset"]]
    plan_inputs = [*head, c["rows"], c["devices"], *form]
    plan_outputs = [c["derived"], c["estimate"]]
    # A preference stage's rows are measured with the model's tokenizer: they follow these too.
    rows_inputs = [c["dataset"], c["dataset_name"], c["model"], *[form[forms.NAMES.index(n)] for n in ROWS_FIELDS]]

    def do_plan(*values):
        return plan(ctx, *values)

    def do_rows(*values):
        return count_rows(ctx, *values)

    def do_model(lang, model):
        return check_model(ctx, lang, model)

    def do_hardware_text(lang, devices):
        return summary.hardware_text(_msg(ctx, lang), summary.devices_from_state(devices))

    devices_box = form[forms.NAMES.index("devices")]

    def do_picker(devices, setting):
        found = summary.devices_from_state(devices)
        choices = scale_view.gpu_choices(found)
        return gr.update(choices=choices, value=scale_view.picked_from_setting(setting or "auto", found),
                         visible=bool(choices))

    def do_picked(picked, devices, setting):
        return scale_view.setting_from_picked(picked, summary.devices_from_state(devices), setting or "auto")

    c["gpus"].input(do_picked, [c["gpus"], c["devices"], devices_box], devices_box, **private)
    page = gr.context.Context.root_block
    restorable = [c["model"], c["dataset"], *form]
    start = [component.value for component in restorable]  # the app start's, what a fresh page shows
    page.load(lambda *current: restore_changes(restore_form(ctx), start, list(current)), restorable, restorable,
              **private)
    page.load(lambda lang: detect_hardware(ctx, lang), lang, [c["hardware"], c["devices"]], **private).then(
        do_picker, [c["devices"], devices_box], c["gpus"], **private).then(
        do_rows, rows_inputs, c["rows"], **private).then(do_plan, plan_inputs, plan_outputs, **private)
    for trigger in (page.load, c["model"].change, lang.change):
        trigger(do_model, [lang, c["model"]], c["model_check"], **private)

    def do_suggest(lang, model, *values):
        text, proposed = suggest(ctx, lang, model, *values)
        return text, gr.update(visible=proposed is not None), proposed

    def do_take(proposed, *values):
        return take_suggestion(proposed, *values)

    c["model"].change(do_suggest, [lang, c["model"], *form], [c["suggest"], c["suggest_apply"], c["suggested"]],
                      **private)
    c["suggest_apply"].click(do_take, [c["suggested"], *form], form, **private).then(
        lambda: ("", gr.update(visible=False), None), None, [c["suggest"], c["suggest_apply"], c["suggested"]],
        **private)
    lang.change(do_hardware_text, [lang, c["devices"]], c["hardware"], **private)
    for trigger in (c["dataset"].change, c["dataset_name"].change, c["model"].change,
                    *[form[forms.NAMES.index(n)].change for n in ROWS_FIELDS]):
        trigger(do_rows, rows_inputs, c["rows"], **private)
    c["dataset"].focus(lambda: gr.update(choices=_dataset_choices(ctx)), None, c["dataset"], **private)
    if shared_dataset is not None:  # a dataset saved in Data becomes the one to train on
        shared_dataset.change(lambda name: gr.update(value=name, choices=_dataset_choices(ctx)) if name else gr.update(),
                              shared_dataset, c["dataset"], **private)
    c["trust"].change(lambda on: gr.update(visible=on), c["trust"], c["remote_warning"], **private)
    # The user picked another model: trusting one model's code never carries over to the next.
    c["model"].input(lambda: False, None, c["trust"], **private)
    gr.on([c["model"].change, c["rows"].change, lang.change, *[f.change for f in form]],
          do_plan, plan_inputs, plan_outputs, trigger_mode="always_last", **private)

    _wire_actions(ctx, c, form)


def _wire_actions(ctx: UIContext, c: dict, form: list) -> None:
    """Start, Stop, Resume, the command and the YAML: the buttons under the form."""
    lang, shared_run, private = ctx.lang, ctx.shared.get("run_id"), {"api_visibility": "private"}
    head = [lang, c["model"], c["dataset"]]
    run_target = shared_run if shared_run is not None else gr.State(None)

    def do_start(*values):
        text, run_id = start(ctx, *values)
        return text, run_id or gr.update()  # a refused start keeps the selected run

    def do_command(*values):
        text, command, yaml_text = show_command(ctx, *values)
        return text, gr.update(value=command, visible=bool(command)), gr.update(value=yaml_text, visible=bool(yaml_text))

    def do_save(*values):
        text, path = save_yaml(ctx, *values)
        return text, gr.update(value=path, visible=bool(path))

    c["start"].click(do_start, [*head, *form], [c["message"], run_target], **private)
    c["stop"].click(lambda lang, r: stop(ctx, lang, r), [lang, run_target], c["message"], **private)
    c["resume"].click(lambda lang, r: resume(ctx, lang, r), [lang, run_target], c["message"], **private)
    c["show_command"].click(do_command, [*head, *form], [c["message"], c["command"], c["yaml"]], **private)
    c["save_yaml"].click(do_save, [*head, *form], [c["message"], c["saved_file"]], **private)
    c["load_yaml"].upload(lambda lang, p: load_yaml(ctx, lang, p), [lang, c["load_yaml"]],
                          [c["message"], c["model"], c["dataset"], *form], **private)
