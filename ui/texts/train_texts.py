"""The texts of ui/tabs/train.py, English and Chinese (the rule: ui/texts/__init__.py); the tab's TEXT
puts the form's and its panels' tables before them."""

from __future__ import annotations

from ui.texts import both as _

TEXT: dict[str, dict[str, str]] = {
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
