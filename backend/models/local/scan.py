"""The scan of every place: what it found, what it skipped and why, cached in the workspace.

Each tool's layout has its own finder: the hub cache's models--Org--Name/snapshots/<commit>/, Ollama's
manifests/<registry>/<namespace>/<name>/<tag> (JSON naming the model layer's blob), and for LM Studio,
llama.cpp and the folders a person adds any *.gguf file or folder with a config.json. The result
is kept in workspace/.cache/local_models.json with the places it scanned, so the list is read back
at once and rescanned on demand or when the places change; a scan started by the UI runs in a
thread (one at a time, through a lock file) and writes how many it found so far beside it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from backend.messages import Message, msg
from backend.models.hardware import detect_devices
from backend.models.local.describe import LocalModel, SkipModel, describe_folder, describe_gguf
from backend.models.local.fit import fit_on, supported_gguf_architectures
from backend.models.local.places import Place
from backend.models.local.walk import Limits, Walk
from backend.storage.atomic_files import atomic_write_json, read_json
from backend.storage.file_lock import try_file_lock

CACHE_DIR = ".cache"  # under the workspace
CACHE_FILE, PROGRESS_FILE, LOCK_FILE = "local_models.json", "local_models.progress.json", ".local_models.lock"
OLLAMA_MODEL_LAYER = "application/vnd.ollama.image.model"
OLLAMA_DEFAULT = ("registry.ollama.ai", "library")  # names Ollama shows without a prefix


@dataclass
class ScanResult:
    models: list[LocalModel] = field(default_factory=list)
    skipped: list[tuple[str, Message]] = field(default_factory=list)
    stopped_early: bool = False
    seconds: float = 0.0
    places: list[str] = field(default_factory=list)  # Place.key() of each place scanned: the cache's key

    def to_dict(self) -> dict:
        return {"models": [m.to_dict() for m in self.models], "stopped_early": self.stopped_early,
                "skipped": [{"path": p, "reason": r.to_dict()} for p, r in self.skipped],
                "seconds": self.seconds, "places": self.places}

    @classmethod
    def from_dict(cls, data: dict) -> ScanResult:
        skipped = [(s["path"], Message.from_dict(s["reason"])) for s in data.get("skipped", [])]
        return cls([LocalModel.from_dict(m) for m in data.get("models", [])],
                   [(p, r) for p, r in skipped if r is not None], bool(data.get("stopped_early")),
                   float(data.get("seconds", 0)), list(data.get("places", [])))


def scan(places: list[Place], limits: Limits = Limits(), devices: list | None = None,
         found: Callable[[int], None] | None = None) -> ScanResult:
    """Every model in `places`; `devices` (detect_devices()) decides the fit, `found(n)` follows progress."""
    walk, models = Walk(limits), []
    supported = supported_gguf_architectures()
    for place in places:
        if place.source == "folder" and not place.root.is_dir():
            walk.skip(place.root, msg("local.not_folder", path=place.root))
            continue
        if not place.root.is_dir() or walk.out_of_time(place.root) or not walk.enter(place.root, quiet=True):
            continue  # a tool that is not installed has no folder: nothing to say
        for kind, path, name in FINDERS[place.source](walk, place.root):
            try:
                model = (describe_folder(path, name, place.source) if kind == "hf"
                         else describe_gguf(path, name, place.source, supported))
            except SkipModel as error:
                walk.skip(path, error.catalogued)
                continue
            if devices is not None:
                model.fits, model.memory_gb, model.device = fit_on(model.config or {}, devices)
            models.append(model)
            if found:
                found(len(models))
    return ScanResult(models, walk.skipped, walk.stopped_early, round(time.monotonic() - walk.started, 3),
                      [p.key() for p in places])


def _hub_models(walk: Walk, root: Path) -> Iterator[tuple[str, Path, str]]:
    for repo in walk.folders(root):
        owner, _, name = repo.name.removeprefix("models--").partition("--")
        if not repo.name.startswith("models--") or not name:
            continue  # datasets--, spaces--, .locks
        snapshots = [s for s in walk.folders(repo / "snapshots") if (s / "config.json").exists()] \
            if (repo / "snapshots").is_dir() else []
        for snapshot in snapshots:
            suffix = f"@{snapshot.name[:7]}" if len(snapshots) > 1 else ""
            yield "hf", snapshot, f"{owner}/{name}{suffix}"


def _ollama_models(walk: Walk, root: Path) -> Iterator[tuple[str, Path, str]]:
    manifests = root / "manifests"
    if not manifests.is_dir():
        return
    for registry in walk.folders(manifests):
        for namespace in walk.folders(registry):
            for model in walk.folders(namespace):
                for entry in walk.entries(model):
                    tag = Path(entry.path)
                    if not tag.is_file():
                        continue
                    prefix = "" if (registry.name, namespace.name) == OLLAMA_DEFAULT else (
                        f"{namespace.name}/" if registry.name == OLLAMA_DEFAULT[0] else f"{registry.name}/{namespace.name}/")
                    blob = _ollama_blob(walk, tag, root / "blobs")
                    if blob is not None:
                        yield "gguf", blob, f"{prefix}{model.name}:{tag.name}"


def _ollama_blob(walk: Walk, manifest: Path, blobs: Path) -> Path | None:
    """The model layer's blob a manifest names, or None (skipped with the reason)."""
    try:
        layers = json.loads(manifest.read_text(encoding="utf-8")).get("layers")
        digest = next((layer.get("digest") for layer in layers if layer.get("mediaType") == OLLAMA_MODEL_LAYER), None)
    except (OSError, ValueError, AttributeError, TypeError) as error:
        walk.skip(manifest, msg("local.bad_manifest", path=manifest, error=error))
        return None
    if not isinstance(digest, str) or not digest.startswith("sha256:"):
        walk.skip(manifest, msg("local.no_model_layer", path=manifest))
        return None
    blob = blobs / digest.replace(":", "-")  # Ollama names blob files sha256-<hex>
    if "/" in digest or not blob.is_file():
        walk.skip(manifest, msg("local.missing_blob", path=manifest, blob=blob.name))
        return None
    return blob


def _gguf_and_folders(walk: Walk, root: Path) -> Iterator[tuple[str, Path, str]]:
    for path, is_folder in walk.model_paths(root):
        if is_folder:
            yield "hf", path, path.name
        elif "mmproj" not in path.name.lower():  # a vision projector is a part, not a model
            relative = path.relative_to(root)
            yield "gguf", path, "/".join([*relative.parent.parts[:2], path.stem])


FINDERS = {"hf": _hub_models, "ollama": _ollama_models, "lmstudio": _gguf_and_folders,
           "llamacpp": _gguf_and_folders, "folder": _gguf_and_folders}


# ---------------------------------------------------------------- the workspace's cache

def scan_cache_dir(workspace_root: Path) -> Path:
    """The workspace's cache folder, where the scan keeps its result, its progress and its lock."""
    return Path(workspace_root) / CACHE_DIR


def cached_result(workspace_root: Path, places: list[Place]) -> ScanResult | None:
    """The cached scan of exactly these places, or None (never scanned, other places, unreadable)."""
    data = read_json(scan_cache_dir(workspace_root) / CACHE_FILE)
    try:
        result = ScanResult.from_dict(data) if isinstance(data, dict) else None
    except (KeyError, TypeError, ValueError):
        return None
    return result if result and result.places == [p.key() for p in places] else None


def scan_into_cache(workspace_root: Path, places: list[Place], devices: list | None,
                    limits: Limits = Limits(), lock=None) -> ScanResult | None:
    """Scans and writes the cache; None when another scan of this workspace is running (its result
    comes). `lock`: the scan's lock, already taken by the caller (start_background_scan), released here."""
    folder = scan_cache_dir(workspace_root)
    lock = lock or try_file_lock(folder / LOCK_FILE)
    if lock is None:
        return None
    try:
        progress = folder / PROGRESS_FILE
        atomic_write_json(progress, {"found": 0, "started": time.time()})
        result = scan(places, limits, devices, found=lambda n: atomic_write_json(progress, {"found": n}))
        atomic_write_json(folder / CACHE_FILE, result.to_dict())
        progress.unlink(missing_ok=True)
        return result
    finally:
        lock.close()


def scanning(workspace_root: Path) -> int | None:
    """How many models the running scan found so far, or None when no scan runs."""
    folder = scan_cache_dir(workspace_root)
    lock = try_file_lock(folder / LOCK_FILE)
    if lock is not None:
        lock.close()
        return None
    data = read_json(folder / PROGRESS_FILE) or {}
    return int(data.get("found", 0)) if isinstance(data, dict) else 0


def start_background_scan(workspace_root: Path, places: list[Place],
                          limits: Limits = Limits()) -> threading.Thread | None:
    """A daemon thread that scans into the cache (the devices detected inside it: torch may load);
    None when a scan of this workspace runs already. The lock is taken before the thread starts, so
    `scanning` says so from the moment this returns."""
    lock = try_file_lock(scan_cache_dir(workspace_root) / LOCK_FILE)
    if lock is None:
        return None

    def run() -> None:
        try:
            devices = detect_devices()
        except Exception:  # noqa: BLE001 - no device facts: the list still comes, without the fit
            devices = None
        scan_into_cache(workspace_root, places, devices, limits, lock=lock)

    thread = threading.Thread(target=run, name="local-models-scan", daemon=True)
    thread.start()
    return thread
