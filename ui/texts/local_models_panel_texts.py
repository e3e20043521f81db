"""The texts of ui/panels/local_models_panel.py, English and Chinese (the rule: ui/texts/__init__.py)."""

from __future__ import annotations

from ui.texts import both as _

TEXT: dict[str, dict[str, str]] = {
    "local.title": _("Models on this machine", "本机已有的模型"),
    "local.intro": _("Found in the Hugging Face cache, Ollama, LM Studio, llama.cpp's cache and the folders of "
                     "Settings → Model folders, read without loading them. The trainable ones are in the model "
                     "list above; a GGUF file is converted once into this workspace when a run starts.",
                     "在 Hugging Face 缓存、Ollama、LM Studio、llama.cpp 缓存以及“设置 → 模型文件夹”中找到，读取时不加载权重。"
                     "可训练的模型已列在上方的模型列表中；GGUF 文件会在运行开始时转换一次，存入本工作区。"),
    "local.rescan": _("Rescan", "重新扫描"),
    "local.scanning": _("Scanning… {found} found", "正在扫描…… 已找到 {found} 个"),
    "local.not_scanned": _("Not scanned yet.", "尚未扫描。"),
    "local.summary": _("{count} model(s) found, {trainable} trainable ({seconds} s).",
                       "找到 {count} 个模型，其中 {trainable} 个可训练（{seconds} 秒）。"),
    "local.stopped_early": _("⚠️ The scan stopped early: the list holds what it found until then.",
                             "⚠️ 扫描提前停止：列表中是到那时为止找到的模型。"),
    "local.none": _("No models found in these places.", "在这些位置没有找到模型。"),
    "local.skipped": _("Skipped ({count}):", "已跳过（{count} 个）："),
    "local.skipped_more": _("… and {count} more (`python -m backend.models list` prints all).",
                            "…… 另有 {count} 个（`python -m backend.models list` 会全部列出）。"),
    "local.col.name": _("name", "名称"), "local.col.source": _("source", "来源"), "local.col.size": _("size", "大小"),
    "local.col.architecture": _("architecture", "架构"), "local.col.parameters": _("parameters", "参数量"),
    "local.col.quantisation": _("quantisation", "量化"), "local.col.licence": _("licence", "许可证"),
    "local.col.fits": _("fits (default run)", "默认运行能否装下"), "local.col.trainable": _("trainable", "可训练"),
    "local.yes": _("yes", "是"), "local.no": _("no", "否"), "local.unknown": _("unknown", "未知"),
    "local.fits": _("yes, about {gb} GiB on {device}", "能，约 {gb} GiB（{device}）"),
    "local.too_big": _("no, about {gb} GiB on {device}", "不能，约需 {gb} GiB（{device}）"),
}
