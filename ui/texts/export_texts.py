"""The texts of ui/tabs/export.py, English and Chinese (the rule: ui/texts/__init__.py)."""

from __future__ import annotations

TEXT: dict[str, dict[str, str]] = {
    "export.run": {"en": "Run", "zh": "训练运行"},
    "export.checkpoint": {"en": "Checkpoint", "zh": "检查点"},
    "export.refresh": {"en": "Refresh", "zh": "刷新"},
    "export.kind": {"en": "What to export", "zh": "导出内容"},
    "export.kind_adapter": {"en": "Adapter only (small; needs the base model to run)",
                            "zh": "仅适配器（体积小；运行时需要基座模型）"},
    "export.kind_merged": {"en": "Merged model (base + LoRA, runs anywhere)", "zh": "合并后的模型（基座 + LoRA，可独立运行）"},
    "export.name": {"en": "Name (folder under workspace/exports)", "zh": "名称（workspace/exports 下的文件夹）"},
    "export.base": {"en": "Base model to merge into", "zh": "合并所用的基座模型"},
    "export.base_info": {
        "en": "As the run loaded it, a model found on this machine (Settings → Model folders adds places), or type "
              "a folder or a hub id. Merging needs transformers weights: a GGUF model (Ollama, LM Studio) is listed "
              "only once a run or Chat has converted it into this workspace.",
        "zh": "训练时加载的位置、本机找到的模型（可在“设置 → 模型文件夹”中添加位置），或输入文件夹或 Hub ID。合并需要 transformers 权重："
              "GGUF 模型（Ollama、LM Studio）只有在训练或对话已将其转换到本工作区后才会列出。"},
    "export.base_run": {"en": "as the run loaded it: {name}", "zh": "训练时加载的位置：{name}"},
    "export.base_gguf_left": {"en": "{count} GGUF model(s) found on this machine are not listed: not converted into "
                                    "this workspace yet (train or chat with one first).",
                              "zh": "本机找到的 {count} 个 GGUF 模型未列出：尚未转换到本工作区（请先用它训练或对话）。"},
    "export.shard_size": {"en": "Largest safetensors shard", "zh": "safetensors 单个分片上限"},
    "export.dtype": {"en": "Weights dtype (merged)", "zh": "权重精度（合并时）"},
    "export.overwrite": {"en": "Overwrite an existing export of this name", "zh": "覆盖同名的已有导出"},
    "export.zip": {"en": "Also make a zip to download", "zh": "同时生成可下载的 zip"},
    "export.start": {"en": "Export", "zh": "导出"},
    "export.gguf": {"en": "GGUF for llama.cpp / Ollama (from the merged model; each file is checked in llama.cpp)",
                    "zh": "用于 llama.cpp / Ollama 的 GGUF（由合并后的模型生成；每个文件都会在 llama.cpp 中检查）"},
    "export.gguf_lora": {"en": "Also the adapter alone as a GGUF LoRA", "zh": "同时把适配器单独导出为 GGUF LoRA"},
    "export.gguf_sizes": {"en": "GGUF sizes: {sizes}", "zh": "GGUF 大小：{sizes}"},
    "export.gguf_passed": {"en": "GGUF check passed: {summary}", "zh": "GGUF 检查通过：{summary}"},
    "export.gguf_failed": {"en": "GGUF check FAILED (the files are kept for inspection): {summary}",
                           "zh": "GGUF 检查未通过（文件已保留以便检查）：{summary}"},
    "export.gguf_ollama": {"en": "Run it in Ollama:", "zh": "在 Ollama 中运行："},
    "export.jobs": {"en": "Recent exports (kept on disk: shown again after a page refresh or an app restart)",
                    "zh": "最近的导出（保存在磁盘上：刷新页面或重启应用后仍会显示）"},
    "export.download": {"en": "Download", "zh": "下载"},
    "export.dtype_help": {
        "en": "auto: the base model's own 16-bit dtype; a base stored in fp32 stays fp32 on the CPU (bf16 on a GPU). "
              "Choose bf16 or fp16 to halve the size.",
        "zh": "auto：使用基座模型自身的 16 位精度；以 fp32 存储的基座在 CPU 上保持 fp32（GPU 上为 bf16）。选择 bf16 或 fp16 可将体积减半。"},
    "export.note_qlora": {
        "en": "⚠️ This is a QLoRA run: its base was loaded in {bits}-bit for training. Merging LoRA into a quantised "
              "base gives a wrong model, so the export reloads the base in 16 bits (or fp32) and merges there.",
        "zh": "⚠️ 这是 QLoRA 运行：训练时基座以 {bits} 位量化加载。把 LoRA 合并进量化基座会得到错误的模型，"
              "因此导出时会以 16 位（或 fp32）重新加载基座后再合并。"},
    "export.note_full": {
        "en": "This run fine-tuned every weight: there is no adapter to merge; the export copies the weights.",
        "zh": "该运行是全参数微调：没有可合并的适配器，导出会直接复制权重。"},
    "export.msg_pick": {"en": "Pick a run and a checkpoint first.", "zh": "请先选择训练运行和检查点。"},
    "export.msg_exists": {"en": "{path} already exists. Choose another name, or tick Overwrite to replace it.",
                          "zh": "{path} 已存在。请换一个名称，或勾选“覆盖”以替换它。"},
    "export.msg_started": {"en": "Export started in the background (writing {path}).",
                           "zh": "导出已在后台开始（写入 {path}）。"},
    "export.msg_error": {"en": "Cannot export: {error}", "zh": "无法导出：{error}"},
    "export.running": {"en": "Exporting: {stage} …", "zh": "正在导出：{stage}……"},
    "export.failed": {"en": "Export failed: {error}", "zh": "导出失败：{error}"},
    "export.done": {"en": "Export finished: {path}", "zh": "导出完成：{path}"},
    "export.verified": {"en": "Verification passed: {summary}", "zh": "验证通过：{summary}"},
    "export.not_verified": {"en": "Verification FAILED: {summary}", "zh": "验证失败：{summary}"},
    "export.verified_ties": {"en": "Verification not passed (16-bit rounding ties only; the export is kept): {summary}",
                             "zh": "验证未通过（仅有 16 位舍入并列，导出已保留）：{summary}"},
    "export.outcome_equal": {"en": "✅ equal", "zh": "✅ 相同"},
    "export.outcome_tie": {"en": "≈ differs after a 16-bit rounding tie", "zh": "≈ 16 位舍入并列后不同"},
    "export.outcome_differ": {"en": "❌ differs", "zh": "❌ 不同"},
    "export.gguf_unavailable": {"en": "⚠️ GGUF levels cannot be exported on this machine: {reason}",
                                "zh": "⚠️ 本机无法导出 GGUF：{reason}"},
    # Column headers of the verification table and of the GGUF table.
    "export.col.prompt": {"en": "prompt", "zh": "提示"},
    "export.col.expected": {"en": "checkpoint (adapter)", "zh": "检查点（适配器）"},
    "export.col.exported": {"en": "exported", "zh": "导出后"},
    "export.col.outcome": {"en": "outcome", "zh": "结果"},
    "export.gguf_col.file": {"en": "file", "zh": "文件"},
    "export.gguf_col.mb": {"en": "MB", "zh": "MB"},
    "export.gguf_col.equal": {"en": "answers equal to the adapter's", "zh": "与适配器相同的回答"},
    "export.gguf_col.agree": {"en": "agree over 8 first tokens", "zh": "前 8 个 token 一致"},
    "export.gguf_col.kl": {"en": "mean KL vs f16", "zh": "相对 f16 的平均 KL"},
    "export.gguf_col.top1": {"en": "top-1 vs f16", "zh": "相对 f16 的 top-1 一致率"},
}
