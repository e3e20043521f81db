"""Chinese help for every RunConfig field, keyed by field name (the English is
the field's own `help` in backend/config.py).

tests/test_i18n.py fails when a RunConfig field has no entry here and prints
the missing names with their English help: a new field is translated where
it lands. The app itself falls back to English, so it never refuses to start.
"""

from __future__ import annotations

HELP_ZH: dict[str, str] = {
    "model_name_or_path": "基础模型：'demo'（离线演示模型）、Hugging Face 格式的本地文件夹，或 Hub ID。",
    "trust_remote_code": "运行此模型自带的 Python 代码，仅限本次运行。只对可信的模型开启；应用不会为其他模型或下次启动记住它。",
    "chat_template": "渲染训练数据所用的对话模板。auto：模型自带的；没有自带模板的基础模型，使用与其分词器相符的已知模板"
                     "（Gemma、Llama 3、ChatML），否则使用 ChatML 并添加它的 token（扩展嵌入层并训练新增的行）。"
                     "模板的回合结束符会成为 EOS；两者都随每个检查点保存。",
    "dataset": "训练数据：'demo'、工作区数据集名称，或文件（JSON、JSONL、CSV、Parquet）。",
    "stage": "sft：指令数据；dpo / orpo / simpo：chosen-rejected 样本对；kto：带标签的单个回答；grpo：提示，由模型采样回答并按奖励打分（TRL 的训练器）。",
    "init_adapter": "从 SFT 运行的适配器开始（RUN/final 或 RUN/checkpoint-N）并继续训练它；参考模型是冻结的该适配器。"
                    "留空：在基础模型上新建适配器，参考模型为基础模型（关闭适配器）。",
    "beta": "TRL beta：dpo / kto 中模型可偏离参考模型的程度（越大越接近）；orpo 中几率比项的权重；simpo 中奖励缩放（常用 2.0）；grpo 中相对参考模型的 KL 项权重（0：不用，也不计算参考模型）。",
    "loss_type": "TRL loss_type。dpo：sigmoid（默认）、hinge、ipo、robust、bco_pair、sppo_hard、nca_pair、apo_zero、"
                 "apo_down；kto：kto（默认）、apo_zero_unpaired；grpo：dapo（默认）、grpo、dr_grpo、bnpo、cispo、sapo。",
    "label_smoothing": "TRL label_smoothing：假定被标反的偏好比例（robust / conservative DPO、SimPO），在 [0, 0.5) 之间。",
    "rpo_alpha": "dpo：SFT 项的权重，即 chosen 回答的平均 token 损失，加到偏好损失上（RPO；TRL 1.16 中为 "
                 "loss_type [..., 'sft'] 配 loss_weights [1, rpo_alpha]）。保住训练起点的回答；0 = 关闭。",
    "simpo_gamma": "TRL simpo_gamma：SimPO 的目标奖励差。",
    "desirable_weight": "TRL desirable_weight（kto）：标签为 true 的样本权重。",
    "undesirable_weight": "TRL undesirable_weight（kto）：标签为 false 的样本权重。",
    "precompute_ref_log_probs": "TRL precompute_ref_log_probs（dpo）：训练前对数据做一次参考模型计算，而不是每步一次。",
    "num_generations": "TRL num_generations（grpo）：每个提示采样的回答数，在同组内相互比较。有效批大小（按回答计）必须是它的整数倍。",
    "max_completion_length": "TRL max_completion_length（grpo）：采样回答最多的 token 数（TRL 默认 512；每个 token 逐个生成）。",
    "temperature": "TRL temperature（grpo）：采样回答的温度；一组回答需要有差异才能比较。",
    "rewards": "grpo 奖励预设，每项 {kind, weight, ...}：exact_match（答案与数据中的参考答案比较，数字归一化）、format（整个回答须匹配的正则 `pattern`；默认 <think>...</think><answer>...</answer>）、length（回答 token 数 `min` / `max`）、contains / not_contains（`text`）。",
    "reward_functions": "自己的 grpo 奖励函数，写作 'module:function'，签名同 TRL：f(prompts, completions, **kwargs) -> list[float]；参考答案以关键字 `answer` 传入。",
    "reward_weights": "reward_functions 的权重，按其顺序（留空：各为 1）。",
    "use_vllm": "TRL use_vllm（grpo）：用 vLLM 生成回答，与训练共用 GPU（仅限 CUDA 且装有 vllm 包）。",
    "dataset_name": "LLaMA-Factory 数据文件夹（其 dataset_info.json）中用于训练的数据集；文件夹只含一个时留空。",
    "cutoff_len": "每条样本的最大 token 数（套用对话模板之后）。",
    "overflow": "样本长于 cutoff_len 时如何处理。",
    "val_size": "留作验证的数据比例（0 = 不划分验证集）；数据集自带验证集时使用自带的。",
    "train_on_prompt": "同时在提示词 token 上计算损失（默认只在助手回复上计算）。",
    "identity_name": "填入训练数据中的 {{name}}：模型从 identity 数据集（以及任何带 {{name}} 占位符的文件，如 LLaMA-Factory 的 identity.json）学到的名字。留空则保留占位符。",
    "identity_author": "填入训练数据中的 {{author}}：模型自称的开发者。",
    "replay": "把基础模型自己对通用问题的回答混入训练数据，让小规模微调保留模型原有能力（每个模型生成一次并缓存）。auto：SFT 数据少于 500 条且模型有自己的对话模板时启用。",
    "replay_share": "混合后训练数据中回放数据所占的比例（每个通用问题最多一条）。",
    "group_by_length": "把长度相近的样本放进同一批，减少花在填充上的计算（仅用于填充批次：打包批次没有填充，随机抽取）。",
    "method": "lora：训练小型适配器；qlora：在 4/8 位基础模型上训练适配器；full：训练全部权重。",
    "quantization_bits": "qlora 的基础模型位数（4 = 带双重量化的 NF4，8 = LLM.int8）。",
    "lora_r": "LoRA 秩：适配器的容量。",
    "lora_alpha": "LoRA 缩放分子（缩放 = alpha / r；rsLoRA 时为 alpha / sqrt(r)）。",
    "lora_dropout": "LoRA 输入上的 dropout。大于 0 时 peft 会为每个适配层的输入保留一份 dropout 后的副本："
                    "在演示模型上 0.05 比 0 的 LoRA 步骤慢 1.48 倍（135M 的数据见 docs/BENCHMARKS.md）。",
    "lora_target": "加适配器的模块：'all-linear' 或模块名列表（q_proj、v_proj 等）。",
    "use_rslora": "秩稳定的 LoRA 缩放（alpha / sqrt(r)）。",
    "use_dora": "权重分解的 LoRA（DoRA）。",
    "precision": "auto：支持时用 bf16，否则 GPU 上用 fp16，再否则 fp32。",
    "gradient_checkpointing": "在反向传播中重算激活值：省内存，约慢 30%。auto：仅当显存估算表明不开就放不下时才开启。",
    "packing": "无填充批次：一个批次的样本拼成一条序列、没有填充（每条样本仍只看到自己）。模型不支持时回退到按长度分组的"
               "填充批次，并在日志中说明。",
    "torch_compile": "用 torch.compile 编译模型：启动更慢，在 GPU 上步骤通常更快。",
    "use_liger_kernel": "Liger 的融合 Triton 内核（RMSNorm、RoPE、SwiGLU、线性交叉熵）：更省显存、更快。"
                        "仅限 CUDA，需要 liger-kernel 包（requirements-gpu.txt）。",
    "learning_rate": "峰值学习率。",
    "num_train_epochs": "遍历训练数据的轮数（max_steps > 0 时忽略）。",
    "max_steps": "在这么多优化步后停止（-1：按 num_train_epochs）。",
    "per_device_train_batch_size": "每个设备每次前向传播的样本数。",
    "per_device_eval_batch_size": "每个设备每次评估的样本数。",
    "gradient_accumulation_steps": "每个优化步包含的前向传播次数。",
    "optim": "优化器。auto：AdamW，在 CUDA GPU 上融合为一个内核（CPU 上用普通实现，实测更快）。",
    "lr_scheduler_type": "学习率调度方式。",
    "warmup_ratio": "总步数中用于学习率预热的比例（少于 20 步的运行不预热，否则它的第一步什么也学不到）。",
    "weight_decay": "AdamW 权重衰减。",
    "max_grad_norm": "梯度裁剪范数（0 = 不裁剪）。",
    "neftune_noise_alpha": "NEFTune 嵌入噪声（常用 5）；留空 = 关闭。",
    "seed": "数据顺序、划分和初始化的随机种子。",
    "logging_steps": "每 N 个优化步记录一次训练指标。",
    "eval_steps": "每 N 步评估一次（留空 = 每次保存时评估）。",
    "save_steps": "每 N 步保存一个检查点（结束时也保存）。",
    "save_total_limit": "最多保留 N 个检查点（最好的那个总会保留）；留空 = 全部保留。",
    "early_stopping_patience": "连续 N 次评估验证损失没有改善就停止；留空 = 关闭。",
    "early_stopping_threshold": "算作改善的最小验证损失下降。",
    "stop_when_learned": "SFT：从第二轮起，每轮结束时检查模型能否答对并结束你的 16 条训练数据；14 条答对即停止"
                         "（num_train_epochs 成为上限）。",
    "learning_report": "训练时为基础模型和各检查点打分：你的数据中留出的提示（学到）、基础模型答对的通用问题（保留）、"
                       "以结束符结束的回答（eval/learning.json），耗时约为训练时间的 10%。",
    "devices": "auto：所有 GPU（没有则用 CPU）；'cpu'；或 GPU 编号，如 '0,1'。",
    "num_processes": "训练进程数（留空：每个设备一个）。大于 1 时用 torchrun（DDP）启动。",
    "dataloader_num_workers": "准备数据批次的进程数。",
    "report_to": "同时记录到 TensorBoard（运行文件夹内）或 Weights & Biases。",
    "callbacks": "你自己的 transformers TrainerCallback 类，写作 'module:Class'。",
    "loss_function": "可选的 'module:function'，替换损失函数：fn(outputs, labels, num_items_in_batch) -> tensor。",
    "run_name": "运行的标签（运行 ID 自动生成）。",
    "distributed": "auto：单进程，或多进程 DDP；ddp：同上；fsdp：FSDP2 将权重、梯度和优化器状态分片到各 GPU；"
                   "deepspeed_zero2：DeepSpeed 分片梯度和优化器状态；deepspeed_zero3：连权重也分片。FSDP 与 ZeRO 需要 CUDA。",
    "cpu_offload": "把优化器状态（ZeRO-3 时连同权重）放在 CPU 内存：省显存，但每步更慢。仅限 DeepSpeed ZeRO。",
    "deepspeed": "用你自己的 DeepSpeed JSON 文件代替自动生成的配置（其中的 'auto' 值由本次运行的设置填入）；留空：自动生成。",
    "nnodes": "参与训练的机器数（torchrun）。应用启动 0 号节点，并给出其他每个节点要运行的命令。",
    "node_rank": "本机在 nnodes 中的序号：0 号主持汇合（rendezvous），1..nnodes-1 加入。",
    "master_addr": "0 号节点的地址，其他节点都必须能访问（nnodes > 1 时必填）。",
    "master_port": "0 号节点上用于汇合的空闲 TCP 端口（nnodes > 1）。",
    "node_join_timeout": "各节点互相等待的秒数，超时后运行失败并给出说明。",
    "ray_address": "通过 Ray Train 训练：留空（不用 Ray）、'local'（在本机启动 Ray）、'auto' 或 'ray://host:10001'（已有集群）。",
    "ray_num_workers": "Ray Train 工作进程数，每个一个训练进程。",
    "ray_use_gpu": "每个 Ray 工作进程分配一块 GPU。",
    "ray_cpus_per_worker": "Ray 为每个工作进程预留的 CPU 数。",
}


def help_zh(name: str, english: str) -> str:
    """The Chinese help of a field, English until it is translated (the test names the gap)."""
    return HELP_ZH.get(name) or english
