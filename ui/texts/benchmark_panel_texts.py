"""The texts of ui/panels/benchmark_panel.py, English and Chinese (the rule: ui/texts/__init__.py)."""

from __future__ import annotations

TEXT: dict[str, dict[str, str]] = {
    "bench.title": {"en": "Benchmarks (lm-evaluation-harness)", "zh": "基准测试（lm-evaluation-harness）"},
    "bench.bundled": {"en": "The project's tasks (no hub needed)", "zh": "项目自带的任务（无需连接 hub）"},
    "bench.task.studio_facts_choice": {"en": "demo facts, multiple choice", "zh": "演示事实，多项选择"},
    "bench.task.studio_facts_answer": {"en": "demo prompts, exact short answer", "zh": "演示提示，精确的简短回答"},
    "bench.task.studio_general_choice": {"en": "general questions, multiple choice (forgetting)",
                                         "zh": "常识问题，多项选择（是否遗忘）"},
    "bench.other": {"en": "Other tasks: lm-eval task names (hub) or task YAML files / folders, space-separated",
                    "zh": "其他任务：lm-eval 任务名（需 hub）或任务 YAML 文件 / 文件夹，用空格分隔"},
    "bench.local": {"en": "Also benchmark models on this machine (beside the ticked checkpoints)",
                    "zh": "同时对本机已有的模型做基准测试（与勾选的检查点并列）"},
    "bench.local_info": {
        "en": "Found in the Hugging Face cache, Ollama, LM Studio, llama.cpp and Settings → Model folders (or type a "
              "folder). Each answers with its own tokenizer and chat template; a GGUF file is converted once into "
              "this workspace. Its row is named local-…, and the chart draws it as a dashed line.",
        "zh": "来自 Hugging Face 缓存、Ollama、LM Studio、llama.cpp 以及“设置 → 模型文件夹”（也可输入文件夹）。"
              "每个模型使用自己的分词器和对话模板；GGUF 文件会在本工作区内转换一次。其结果行名为 local-…，图中以虚线表示。"},
    "bench.limit": {"en": "Questions per task (0 = all)", "zh": "每个任务的题数（0 为全部）"},
    "bench.chat_template": {"en": "Prompts in the run's chat template", "zh": "提示使用该运行的对话模板"},
    "bench.start": {"en": "Run benchmarks", "zh": "运行基准测试"},
    "bench.table": {"en": "Benchmark results per checkpoint", "zh": "各检查点的基准测试结果"},
    "bench.chart": {"en": "Benchmarks against the training step", "zh": "基准测试结果随训练步数的变化"},
    "bench.about": {
        "en": "Each checkpoint is the base with its adapter (a full fine-tune: its own folder), run by lm-eval's hf "
              "model. acc: share of questions whose right answer has the highest log-likelihood; exact_match: "
              "share of greedy answers equal to the reference.",
        "zh": "每个检查点为基座加其适配器（全量微调则为检查点文件夹本身），由 lm-eval 的 hf 模型运行。acc：正确答案对数似然最高的题目比例；"
              "exact_match：贪心回答与参考答案完全相同的比例。"},
    "bench.msg_pick_run": {"en": "Pick a run first.", "zh": "请先选择一个训练运行。"},
    "bench.msg_started": {"en": "Benchmarks started in the background (pid {pid}). You can close this page.",
                          "zh": "基准测试已在后台开始（进程 {pid}）。可以关闭本页面。"},
    "bench.msg_error": {"en": "Cannot run benchmarks: {error}", "zh": "无法运行基准测试：{error}"},
    "bench.progress": {"en": "{stage}: {done} of {total} checkpoints", "zh": "{stage}：{done} / {total} 个检查点"},
    "bench.done": {"en": "Benchmarks finished.", "zh": "基准测试完成。"},
    "bench.failed": {"en": "Benchmarks failed: {error}", "zh": "基准测试失败：{error}"},
}
