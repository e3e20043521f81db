"""The texts of ui/forms.py, English and Chinese (the rule: ui/texts/__init__.py): the Train form's
labels by field name, the empty optional numbers' placeholders and the radios' choices. ui/forms.py
checks them against the form's fields and keys them `train.field.*` / `train.placeholder.*`; the
fields' help comes from RunConfig (English) and config_help.py (Chinese)."""

from __future__ import annotations


def _(en: str, zh: str) -> dict[str, str]:
    return {"en": en, "zh": zh}


# What the two radios show for their values, in both languages (translated in the browser).
CHOICE_TEXT: dict[str, dict[str, str]] = {
    "train.choice.method_choice.lora": {"en": "LoRA", "zh": "LoRA"},
    "train.choice.method_choice.qlora4": {"en": "QLoRA 4-bit", "zh": "QLoRA 4 位"},
    "train.choice.method_choice.qlora8": {"en": "QLoRA 8-bit", "zh": "QLoRA 8 位"},
    "train.choice.method_choice.full": {"en": "Full", "zh": "全参数"},
    "train.choice.gradient_checkpointing.auto": {"en": "auto", "zh": "自动"},
    "train.choice.gradient_checkpointing.on": {"en": "on", "zh": "开"},
    "train.choice.gradient_checkpointing.off": {"en": "off", "zh": "关"},
}

# Labels of the form's fields (help texts come from RunConfig, in English).
FIELD_LABELS: dict[str, dict[str, str]] = {
    "trust_remote_code": _("Trust this model's remote code", "信任此模型的远程代码"),
    "chat_template": _("Chat template", "对话模板"),
    "dataset_name": _("Dataset in the folder (LLaMA-Factory)", "文件夹中的数据集（LLaMA-Factory）"),
    "method_choice": _("Method", "方法"),
    "precision": _("Precision", "精度"),
    "lora_r": _("LoRA rank r", "LoRA 秩 r"),
    "lora_alpha": _("LoRA alpha", "LoRA alpha"),
    "lora_dropout": _("LoRA dropout", "LoRA dropout"),
    "lora_target": _("Target modules", "目标模块"),
    "use_rslora": _("rsLoRA", "rsLoRA"),
    "use_dora": _("DoRA", "DoRA"),
    "learning_rate": _("Learning rate", "学习率"),
    "num_train_epochs": _("Epochs", "训练轮数"),
    "max_steps": _("Max steps (-1: use epochs)", "最大步数（-1：按轮数）"),
    "per_device_train_batch_size": _("Batch size per device", "每设备批大小"),
    "gradient_accumulation_steps": _("Gradient accumulation", "梯度累积"),
    "cutoff_len": _("Cutoff length (tokens)", "截断长度（token）"),
    "lr_scheduler_type": _("LR scheduler", "学习率调度器"),
    "warmup_ratio": _("Warmup ratio", "预热比例"),
    "val_size": _("Eval split", "验证集比例"),
    "eval_steps": _("Eval every N steps", "每 N 步评估"),
    "save_steps": _("Save every N steps", "每 N 步保存"),
    "save_total_limit": _("Keep at most N checkpoints", "最多保留 N 个检查点"),
    "gradient_checkpointing": _("Gradient checkpointing", "梯度检查点"),
    "train_on_prompt": _("Train on prompt", "在提示词上训练"),
    "identity_name": _("Name for {{name}}", "{{name}} 填入的名字"),
    "identity_author": _("Maker for {{author}}", "{{author}} 填入的开发者"),
    "replay": _("Replay (keep what the model knew)", "回放（保留模型原有能力）"),
    "replay_share": _("Replay share of the rows", "回放数据占比"),
    "devices": _("Devices", "设备"),
    "stage": _("Stage", "训练阶段"),
    "init_adapter": _("Start from adapter (SFT run's final/ or checkpoint)", "从适配器继续（SFT 运行的 final/ 或检查点）"),
    "beta": _("beta", "beta"),
    "loss_type": _("Loss type", "损失类型"),
    "label_smoothing": _("Label smoothing", "标签平滑"),
    "rpo_alpha": _("SFT term weight (rpo_alpha)", "SFT 项权重（rpo_alpha）"),
    "simpo_gamma": _("SimPO gamma", "SimPO gamma"),
    "desirable_weight": _("KTO desirable weight", "KTO 正例权重"),
    "undesirable_weight": _("KTO undesirable weight", "KTO 负例权重"),
    "precompute_ref_log_probs": _("Precompute reference log-probs", "预先计算参考模型对数概率"),
    "num_generations": _("Completions per prompt (num_generations)", "每个提示的回答数（num_generations）"),
    "max_completion_length": _("Max completion tokens", "回答最大 token 数"),
    "temperature": _("Sampling temperature", "采样温度"),
    "use_vllm": _("Generate with vLLM (GPU)", "用 vLLM 生成（GPU）"),
    "num_processes": _("Processes", "进程数"),
    "weight_decay": _("Weight decay", "权重衰减"),
    "max_grad_norm": _("Gradient clipping", "梯度裁剪"),
    "early_stopping_patience": _("Early stopping patience", "早停耐心"),
    "early_stopping_threshold": _("Early stopping threshold", "早停阈值"),
    "stop_when_learned": _("Stop once it knows your rows", "学会你的数据后停止"),
    "learning_report": _("Learning report (learned / kept per checkpoint)", "学习报告（每个检查点的学到 / 保留）"),
    "neftune_noise_alpha": _("NEFTune noise alpha", "NEFTune 噪声 alpha"),
    "seed": _("Seed", "随机种子"),
    "optim": _("Optimizer", "优化器"),
    "per_device_eval_batch_size": _("Eval batch size per device", "每设备评估批大小"),
    "logging_steps": _("Log every N steps", "每 N 步记录"),
    "overflow": _("Longer than cutoff", "超过截断长度时"),
    "group_by_length": _("Group by length", "按长度分组"),
    "packing": _("Padding-free packing", "无填充打包"),
    "torch_compile": _("torch.compile", "torch.compile 编译"),
    "use_liger_kernel": _("Liger kernels (CUDA)", "Liger 内核（CUDA）"),
    "dataloader_num_workers": _("Data loader workers", "数据加载进程"),
    "report_to": _("Also report to", "同时记录到"),
    "run_name": _("Run name", "运行名称"),
    "distributed": _("Parallelism", "并行方式"),
    "cpu_offload": _("Offload to CPU memory (ZeRO)", "卸载到 CPU 内存（ZeRO）"),
    "deepspeed": _("Own DeepSpeed JSON (optional)", "自定义 DeepSpeed JSON（可选）"),
    "nnodes": _("Machines (nodes)", "机器数（节点）"),
    "node_rank": _("This machine's node rank", "本机节点序号"),
    "master_addr": _("Node 0 address", "0 号节点地址"),
    "master_port": _("Node 0 port", "0 号节点端口"),
    "node_join_timeout": _("Node join timeout (s)", "节点加入超时（秒）"),
    "ray_address": _("Ray address (empty: no Ray)", "Ray 地址（留空：不用 Ray）"),
    "ray_num_workers": _("Ray workers", "Ray 工作进程数"),
    "ray_use_gpu": _("One GPU per Ray worker", "每个 Ray 工作进程一块 GPU"),
    "ray_cpus_per_worker": _("CPUs per Ray worker", "每个 Ray 工作进程的 CPU 数"),
}

# What an empty optional number means, shown inside the empty box.
PLACEHOLDERS: dict[str, dict[str, str]] = {
    "eval_steps": _("empty: at each save", "留空：每次保存时"),
    "save_total_limit": _("empty: keep all", "留空：全部保留"),
    "early_stopping_patience": _("empty: off", "留空：关闭"),
    "num_processes": _("empty: one per device", "留空：每个设备一个"),
    "neftune_noise_alpha": _("empty: off", "留空：关闭"),
}
