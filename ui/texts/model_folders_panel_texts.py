"""The texts of ui/panels/model_folders_panel.py, English and Chinese (the rule: ui/texts/__init__.py)."""

from __future__ import annotations

from ui.texts import both as _

TEXT: dict[str, dict[str, str]] = {
    "settings.folders.title": _("Model folders", "模型文件夹"),
    "settings.folders.box": _("Folders to look for models in, one per line", "查找模型的文件夹，每行一个"),
    "settings.folders.info": _("Besides the Hugging Face cache, Ollama, LM Studio and llama.cpp's cache: any folder "
                               "holding .gguf files or Hugging Face model folders (read only, up to 4 levels deep).",
                               "除 Hugging Face 缓存、Ollama、LM Studio 和 llama.cpp 缓存之外，任何存放 .gguf 文件或 "
                               "Hugging Face 模型文件夹的文件夹（只读，最多 4 层）。"),
    "settings.folders.save": _("Save and rescan", "保存并重新扫描"),
    "settings.folders.saved": _("Saved {count} folder(s); scanning in the background.",
                                "已保存 {count} 个文件夹；正在后台扫描。"),
    "settings.folders.missing": _("Saved, but these are not folders: {paths}.", "已保存，但以下不是文件夹：{paths}。"),
    "settings.folders.no_skips": _("The last scan skipped nothing.", "上次扫描没有跳过任何内容。"),
}
