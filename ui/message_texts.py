"""Chinese for every message id of backend/messages.py (the English is there).

Same placeholders as the English template; tests/test_i18n.py fails when an
id lacks its Chinese or a placeholder differs, naming the ids.
"""

from __future__ import annotations

ZH: dict[str, str] = {
    # --- RunConfig validation ------------------------------------------------------------------
    "config.not_choice": "{name} = {value!r} 不是可选值之一：{allowed}。",
    "config.bits_without_qlora": "quantization_bits = {bits} 只适用于 qlora 方法；请选择 qlora 或清空 quantization_bits。",
    "config.above_zero": "{name} 必须大于 0（当前为 {value}）。",
    "config.share": "{name} 必须在 [0, 1) 之间（当前为 {value}）。",
    "config.val_size": "val_size 是数据的比例，必须在 [0, 1) 之间（当前为 {value}）。",
    "config.no_length": "请把 num_train_epochs 或 max_steps 设为大于 0。",
    "config.not_negative": "{names} 不能为负数。",
    "config.needs_eval_split": "{name} 需要验证集：请把 val_size 设为大于 0，或清空 {name}。",
    "config.at_least_one": "{name} 必须至少为 1，或留空（当前为 {value}）。",
    "config.empty_target": "lora_target 为空：请使用 'all-linear' 或至少指定一个模块。",
    "config.reference": "{ref!r} 的格式应为 'package.module:Name'。",
    "config.context": "cutoff_len = {cutoff} 超过了模型 {context} token 的上下文长度；请把 cutoff_len 降到 {context} 或以下。",
    "config.wandb_missing": "report_to = 'wandb' 需要 wandb 包，但本机未安装：请运行 `pip install wandb` 并执行 "
                            "`wandb login`（或设置 WANDB_MODE=offline），或把 report_to 改为 none 或 tensorboard。",
    "config.bf16": "{devices} 不支持 bf16；请选择精度 auto、fp16（GPU）或 fp32。",
    "config.fp16": "fp16 训练需要 GPU（{devices} 没有）；请选择精度 auto 或 fp32。",
    "config.unknown": "未知设置 {names}。",
    "config.yaml": "配置不是有效的 YAML：{error}",
    "config.not_mapping": "配置必须是“设置: 值”形式的 YAML 映射。",
    "config.no_file": "配置文件 {path} 不存在。",
    "config.not_text": "配置文件 {path} 不是文本（UTF-8 YAML）文件；请提供 YAML 文件，例如 "
                       "`python -m backend.train --print-default-config` 输出的那种。",
    "config.unreadable": "无法读取配置文件 {path}：{error}。",
    "config.binary": "配置文件 {path} 是二进制文件，不是 YAML；请提供 YAML 文件，例如 "
                     "`python -m backend.train --print-default-config` 输出的那种。",
    "config.not_finite": "{name} = {value} 不是有限的数；请给出一个数，例如 {example}。",
    "config.set_syntax": "--set {item!r} 的格式应为 key=value。",
    "config.type": "{name} = {value!r} 应为 {expected}。",
    "config.import_module": "无法为 {ref!r} 导入模块 {module!r}：{error}。请把它放到 PYTHONPATH 或工作目录中。",
    "config.import_name": "模块 {module!r} 中没有 {name!r}（来自 {ref!r}）。",
    "config.dataset_name": "dataset_name = {dataset_name!r} 只适用于 LLaMA-Factory 数据文件夹（含 dataset_info.json），"
                           "而 {dataset!r} 不是；请清空 dataset_name。",
    # --- runs --------------------------------------------------------------------------------------
    "run.already_started": "运行 {run_id} 已经开始过（状态：{state}）；请用“继续”接着训练，或开始新的运行。",
    "run.not_resumable": "运行 {run_id} 无法继续：{reason}。",
    "run.reason.queued": "它从未开始；请直接开始它",
    "run.reason.running": "它仍在运行",
    "run.reason.completed": "它已完成；请开始新的运行",
    "run.reason.state": "它的状态是 {state!r}",
    "run.no_checkpoint": "运行 {run_id} 没有可继续的完整检查点；请重新开始。",
    "run.resume_config": "无法继续 {run_id}：{error}",
    "run.busy": "{devices} 正被运行 {run_id} 占用；请停止该运行或等它结束后再开始。",
    "run.launch_failed": "无法为 {run_id} 启动训练进程：{error}。",
    "run.not_running": "运行 {run_id} 未在运行（状态：{state}）。",
    "run.delete_running": "运行 {run_id} 仍在运行；请先停止再删除。",
    "run.unknown": "{folder} 中没有名为 {run_id!r} 的运行。",
    "run.no_folder": "无法在 {folder} 中创建新的运行文件夹。",
    "run.config_unreadable": "无法读取 {path}：{error}",
    # --- the worker's failures and advice -----------------------------------------------------------
    "train.advice.config": "请修改上面提到的设置后重新开始。",
    "train.advice.dataset": "请检查数据集路径，或选择在数据页保存的数据集。",
    "train.error.bitsandbytes": "4/8 位加载失败：{error}",
    "train.advice.bitsandbytes": "请安装 bitsandbytes（pip install bitsandbytes==0.50.2），或选择 lora 或 full 方法。",
    "train.advice.model": "请检查 model_name_or_path：本地 Hugging Face 文件夹、'demo' 或预设。",
    "train.error.oom": "GPU 显存不足（{error}）。",
    "train.error.disk": "磁盘空间不足，无法保存检查点：{error}。",
    "train.advice.disk": "请释放磁盘空间或调低 save_total_limit，然后继续：最后一个完整检查点已保留。",
    "train.error.targets": "lora_target 指定了模型中不存在的模块：{error}",
    "train.advice.targets": "请使用 lora_target: all-linear，或模型中的模块名（q_proj、v_proj 等）。",
    "train.error.other": "{kind}：{error}",
    "train.advice.log": "完整的错误堆栈见 train.log。",
    "train.advice.traceback_above": "错误堆栈已打印在上方；如果这句话没有说明要改什么，请报告它。",
    "train.advice.oom_short": "请调低 per_device_train_batch_size 或 cutoff_len，或开启梯度检查点。",
    "train.advice.oom": "可尝试：{steps}。",
    "train.oom.batch": "调低 per_device_train_batch_size（当前 {batch}）并调高 gradient_accumulation_steps"
                       "（当前 {accumulation}），保持有效批大小不变",
    "train.oom.cutoff": "调低 cutoff_len（当前 {cutoff}）",
    "train.oom.checkpointing": "开启梯度检查点（当前关闭）",
    "train.oom.qlora": "使用 qlora 方法并设 quantization_bits 为 4（当前 {method}）",
    # --- chat ---------------------------------------------------------------------------------------
    "chat.device_busy": "训练运行 {run_id} 正在使用 {device}；在上面加载模型可能让它中途显存不足。请改用 CPU，或等该运行结束。",
    "chat.problem.max_tokens": "最大新生成 token 数必须至少为 1（当前为 {value}）。",
    "chat.problem.temperature": "采样时温度必须大于 0（当前为 {value}）；想要确定性的回答请勾选“贪心”。",
    "chat.problem.top_p": "Top-p 必须在 (0, 1] 之间（当前为 {value}）。",
    "chat.problem.top_k": "Top-k 必须为 0（关闭）或更大（当前为 {value}）。",
    "chat.problem.repetition": "重复惩罚必须大于 0（当前为 {value}）；1.0 表示不惩罚。",
    "chat.notice.max_tokens": "最大新生成 token 数从 {asked} 降到 {cap}（模型上下文 {context} token）。",
    "chat.notice.prompt_cut": "提示词已截断以适应上下文：保留了 {full} 个提示 token 中的 {kept} 个"
                              "（上下文 {context} = 提示 + {new} 个新 token）。",
    "chat.notice.prompt_cut_dropped": "提示词已截断以适应上下文：去掉了 {dropped} 轮较早的对话，保留了 {full} 个提示 token 中的 "
                                      "{kept} 个（上下文 {context} = 提示 + {new} 个新 token）。",
    # --- background jobs ----------------------------------------------------------------------------
    "job.stage.starting": "正在启动",
    "job.stage.done": "完成",
    "evaluate.stage.loading": "正在加载模型",
    "evaluate.stage.checkpoint": "正在评估 {name}",
    "export.stage.zipping": "正在打包",
    "export.stage.copy_adapter": "正在复制适配器",
    "export.stage.copy_weights": "正在复制权重",
    "export.stage.verifying": "正在校验",
    "export.stage.load_base": "正在以 {dtype} 加载基础模型",
    "export.stage.check_prompts": "正在用适配器回答校验提示",
    "export.stage.merging": "正在合并",
    "export.stage.saving": "正在保存",
    "export.stage.verify_merged": "正在校验合并后的模型",
}
