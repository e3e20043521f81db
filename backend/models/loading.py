"""Model and tokenizer loading, folder checks, and the offline demo model.

A model is named by "demo" (built locally on first use), a local folder in
Hugging Face format, or a hub id (only loadable where a hub or its cache is
reachable). Every failure a user can cause ends in a sentence saying what is
wrong and what to do.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import re
from pathlib import Path

from backend.messages import Message, UserError, msg
from backend.models.chat_templates import AUTO, TemplateError, apply_for_model, eos_warnings, has_own_template
from backend.models.demo_facts import DEMO_MODEL_VERSION
from backend.models.gguf_header import GGUFLayoutError, read_gguf_header
from backend.models.gguf_source import SOURCE_FILE, GGUFSourceError, converted_is_current, ensure_converted, find_gguf
from backend.models.offline import OFFLINE_MODELS, ensure_offline_model, offline_model_ready
from backend.models.presets import PRESETS, ModelPreset  # noqa: F401  (re-exported for the UI)
from backend.storage.atomic_files import build_folder
from backend.storage.file_lock import file_lock
from backend.storage.safe_names import clean_name

DEMO_MODEL = "demo"
DEMO_NAMES = (DEMO_MODEL, "demo-tiny")  # the tiny demo model: the test suite's fast model
DEMO_VERSION_FILE = "DEMO_VERSION"
BITSANDBYTES_PIN = "bitsandbytes==0.50.2"

TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "spiece.model", "vocab.txt")
WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin", "model*.safetensors.index.json")
CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length", "n_ctx")


class ModelLoadError(UserError, RuntimeError):
    """A model or tokenizer could not be loaded; the message says why and what to do."""


# ---------------------------------------------------------------- the demo model

def demo_model_ready(models_dir: Path) -> bool:
    """True when models_dir/demo is a complete, current build (no build needed)."""
    return _demo_is_current(Path(models_dir) / DEMO_MODEL, DEMO_MODEL_VERSION)


def ensure_demo_model(models_dir: Path, progress=None, **build_options) -> Path:
    """Return models_dir/demo, building it first if it is missing or outdated.

    Built in a temporary sibling folder and renamed into place, under a file
    lock, so a crash never leaves half a model and two processes never build
    at once. `progress(step, steps)` follows the build (see build_demo_model).
    """
    models_dir = Path(models_dir)
    models_dir.mkdir(parents=True, exist_ok=True)
    target = models_dir / DEMO_MODEL
    if _demo_is_current(target, DEMO_MODEL_VERSION):
        return target
    with file_lock(models_dir / f".{DEMO_MODEL}.lock"):
        if _demo_is_current(target, DEMO_MODEL_VERSION):  # another process built it meanwhile
            return target

        def build(staging: Path) -> None:
            from backend.models.demo import build_demo_model  # torch and transformers: only to build

            build_demo_model(staging, progress=progress, **build_options)
            # The version file last: a folder with a current version is complete.
            (staging / DEMO_VERSION_FILE).write_text(DEMO_MODEL_VERSION + "\n", encoding="utf-8")
        return build_folder(target, f".{DEMO_MODEL}-build-", build)


def _demo_is_current(folder: Path, version: str) -> bool:
    try:
        return (folder / DEMO_VERSION_FILE).read_text(encoding="utf-8").strip() == version
    except OSError:
        return False


# A file named by its digest (Ollama's blobs/sha256-<hex>): its stem says nothing to a person.
CONTENT_ADDRESSED = re.compile(r"^sha256[-:][0-9a-f]{64}$")


def resolve_model_path(name_or_path: str, models_dir: Path, progress=None) -> str:
    """'demo' -> the built demo folder; an offline model's name or a GGUF file -> its converted
    folder in models_dir (converted on first use, `progress(step, steps)` following it); a
    local folder -> its path; else the hub id unchanged."""

    if name_or_path in DEMO_NAMES:
        return str(ensure_demo_model(models_dir, progress=progress))
    try:
        folder = converted_folder(name_or_path, models_dir, progress)
    except GGUFSourceError as error:
        raise ModelLoadError(error.catalogued or str(error)) from error
    if folder is not None:
        return str(folder)
    candidate = Path(name_or_path).expanduser()
    if candidate.is_dir():
        return str(candidate)
    return name_or_path


def converted_folder(name_or_path: str, models_dir: Path, progress=None) -> Path | None:
    """The Hugging Face folder for an offline model's name or a GGUF file (or a folder holding
    one), converted first when needed; None for any other name."""

    if name_or_path in OFFLINE_MODELS:
        return ensure_offline_model(name_or_path, models_dir, progress=progress)
    gguf_file = find_gguf(name_or_path)
    if gguf_file is None:
        return None
    return ensure_converted(gguf_file, gguf_folder(gguf_file, models_dir), progress=progress)


def needs_build(name_or_path: str, models_dir: Path) -> bool:
    """True when using this model first builds or converts it (minutes): a stage of the run."""

    if name_or_path in DEMO_NAMES:
        return not demo_model_ready(models_dir)
    if name_or_path in OFFLINE_MODELS:
        return not offline_model_ready(name_or_path, models_dir)
    try:
        gguf_file = find_gguf(name_or_path)
    except GGUFSourceError:
        return False  # resolving says why
    return gguf_file is not None and not converted_is_current(
        gguf_folder(gguf_file, models_dir), gguf_file.resolve())


def gguf_model_name(path: Path) -> str:
    """The workspace folder name for a GGUF file: its stem as a safe name, never the folder of the
    demo model or of an offline model (a user's gemma-3-270m.gguf must not replace the packaged one)."""

    name = clean_name(_gguf_title(path) if CONTENT_ADDRESSED.match(path.name) else path.stem, "gguf-model",
                      max_len=64)
    reserved = {n.lower() for n in (*DEMO_NAMES, *OFFLINE_MODELS)}
    return f"{name}-gguf" if name.lower() in reserved else name


def _gguf_title(path: Path) -> str:
    """A content-addressed file's own name (general.name and size_label of its header), so an Ollama
    blob converts into workspace/models/SmolLM2-135M, not sha256-<64 hex digits>."""

    try:
        fields = read_gguf_header(path).fields
    except (OSError, ValueError, GGUFLayoutError):
        return "gguf-model"
    name, size = str(fields.get("general.name") or "gguf-model"), str(fields.get("general.size_label") or "")
    return name if size.lower() in name.lower() else f"{name} {size}"


def gguf_folder(path: Path, models_dir: Path) -> Path:
    """models_dir/<gguf_model_name>, or, when that folder holds another file's conversion (two
    downloads both called model.gguf), a folder named after this file's path too: converting one
    never replaces the other."""

    folder = Path(models_dir) / gguf_model_name(path)
    try:
        recorded = json.loads((folder / SOURCE_FILE).read_text(encoding="utf-8")).get("path")
    except (OSError, ValueError, AttributeError):
        return folder
    source = str(Path(path).expanduser().resolve())
    if recorded in (None, source):
        return folder
    return folder.with_name(f"{folder.name}-{hashlib.sha256(source.encode()).hexdigest()[:8]}")


def has_own_chat_template(name_or_path: str, models_dir: Path) -> bool:
    """Whether the model ships a chat template, without loading it: the demo model and the offline
    instruct model do, a folder says so in its files, a hub id is taken to (the presets are chat models)."""

    if name_or_path in DEMO_NAMES:
        return True
    if name_or_path in OFFLINE_MODELS:
        return OFFLINE_MODELS[name_or_path].kind == "instruct"
    folder = Path(name_or_path).expanduser()
    if folder.is_dir():
        return _has_chat_template(folder)
    if folder.suffix.lower() == ".gguf":
        return _gguf_has_chat_template(folder)
    return True


def _gguf_has_chat_template(path: Path) -> bool:
    """A GGUF file's header holds its chat template (tokenizer.chat_template), which its conversion keeps."""
    try:
        import gguf

        from backend.models.gguf_header import check_gguf_header

        check_gguf_header(path)  # before gguf's reader, which trusts the header's counts
        return "tokenizer.chat_template" in gguf.GGUFReader(str(path)).fields
    except (ImportError, OSError, ValueError, IndexError, KeyError):
        return False


# ---------------------------------------------------------------- folder checks

def _read_config(folder: Path) -> dict | None:
    try:
        return json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _text_config(config: dict) -> dict:
    """Multimodal configs keep the language model's numbers under text_config."""
    return config.get("text_config") or config


def _has_chat_template(folder: Path) -> bool:
    if (folder / "chat_template.jinja").is_file() or (folder / "chat_template.json").is_file():
        return True
    try:
        tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return bool(tokenizer_config.get("chat_template"))


def _has_tokenizer(folder: Path) -> bool:
    return any((folder / name).is_file() for name in TOKENIZER_FILES)


def _has_weights(folder: Path) -> bool:
    return any(any(folder.glob(pattern)) for pattern in WEIGHT_PATTERNS)


def estimate_num_parameters(config: dict) -> int | None:
    """Parameter count from config numbers (decoder-only, gated MLP assumed when unknown)."""
    config = _text_config(config)
    hidden = config.get("hidden_size") or config.get("n_embd")
    layers = config.get("num_hidden_layers") or config.get("n_layer")
    vocab = config.get("vocab_size")
    if not (hidden and layers and vocab):
        return None
    heads = config.get("num_attention_heads") or config.get("n_head") or 1
    kv_heads = config.get("num_key_value_heads") or heads
    head_dim = config.get("head_dim") or hidden // heads
    intermediate = config.get("intermediate_size") or config.get("n_inner") or 4 * hidden
    attention = hidden * head_dim * (2 * heads + 2 * kv_heads)
    gated = config.get("model_type") not in ("gpt2", "gpt_neox", "opt", "bloom", "falcon", "phi")
    mlp = (3 if gated else 2) * hidden * intermediate
    embeddings = vocab * hidden * (1 if config.get("tie_word_embeddings", False) else 2)
    return int(layers * (attention + mlp + 2 * hidden) + embeddings + hidden)


def model_context_length(path: str | Path) -> int:
    """The model's context window in tokens, from config.json."""
    config = _read_config(Path(path))
    if config is None:
        raise ModelLoadError(msg("model.no_config", config=Path(path) / "config.json", path=path))
    text = _text_config(config)
    for key in CONTEXT_KEYS:
        if isinstance(text.get(key), int) and text[key] > 0:
            return text[key]
    raise ModelLoadError(msg("model.no_context", config=Path(path) / "config.json", keys=", ".join(CONTEXT_KEYS)))


def inspect_model_folder(path: str | Path, chat_template: str = "auto") -> dict:
    """Check a local model folder; `problems` holds one sentence per thing to fix (English),
    `problem_messages` the same as catalogued messages (translated by the UI). `template`: the
    chat template `chat_template` gives it (a sentence; a choice that does not fit is a problem),
    `warning_messages`: what does not block training but would stop answers from stopping."""
    folder = Path(path).expanduser()
    report = {"ok": False, "problems": [], "problem_messages": [], "architecture": None, "context_length": None,
              "num_parameters": None, "has_chat_template": False, "has_tokenizer": False,
              "template": None, "warnings": [], "warning_messages": []}
    problems = report["problem_messages"]
    if not folder.is_dir():
        problems.append(msg("model.not_folder", folder=folder))
        report["problems"] = [str(p) for p in problems]
        return report
    config = _read_config(folder)
    if config is None:
        problems.append(msg("model.config_invalid" if (folder / "config.json").exists() else "model.config_missing",
                            folder=folder))
    else:
        report["architecture"] = (config.get("architectures") or [config.get("model_type")])[0]
        with contextlib.suppress(ModelLoadError):
            report["context_length"] = model_context_length(folder)
        report["num_parameters"] = estimate_num_parameters(config)
    report["has_tokenizer"] = _has_tokenizer(folder)
    if not report["has_tokenizer"]:
        problems.append(msg("model.no_tokenizer", files=", ".join(TOKENIZER_FILES), folder=folder))
    report["has_chat_template"] = _has_chat_template(folder)
    if report["has_tokenizer"]:  # a base model without a template trains with the one chosen for it
        check = folder_template_check(folder, chat_template)
        report["template"], report["warning_messages"] = check["plan"], list(check["warnings"])
        if check["problem"] is not None:
            problems.append(check["problem"])
        report["warnings"] = [str(w) for w in report["warning_messages"]]
    if not _has_weights(folder):
        problems.append(msg("model.no_weights", folder=folder))
    report["problems"] = [str(p) for p in problems]
    report["ok"] = not problems
    return report


def folder_template_check(folder, choice: str = AUTO) -> dict:
    """What a model folder's tokenizer does with `choice`, for the model check and the Plan:
    {"plan": the sentence (or None), "problem": why the choice does not fit (or None),
     "warnings": [EOS sentences]}. Cached per folder state: the Train tab asks on every change."""
    folder = Path(folder).expanduser()
    stamp = tuple(_mtime(folder / name) for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja",
                                                      "generation_config.json", "config.json"))
    return dict(_folder_check(str(folder), choice, stamp))


def _mtime(path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


@functools.lru_cache(maxsize=16)
def _folder_check(folder: str, choice: str, stamp: tuple) -> tuple:
    try:
        tokenizer = load_tokenizer(folder)
    except (ModelLoadError, OSError, ValueError):
        return (("plan", None), ("problem", None), ("warnings", ()))  # the folder check names what is missing
    warnings = eos_warnings(tokenizer, folder) if has_own_template(tokenizer) else []
    try:
        plan = apply_for_model(tokenizer, choice, folder)
    except TemplateError as error:
        return (("plan", None), ("problem", error.catalogued), ("warnings", tuple(warnings)))
    return (("plan", plan.describe()), ("problem", None), ("warnings", tuple(warnings)))


# ---------------------------------------------------------------- loading

def _require_local_or_hub(path: str | Path) -> None:
    """Fail early and clearly for paths that look local but are not there."""
    text = str(path)
    looks_local = text.startswith((".", "/", "~")) or Path(text).expanduser().exists() or text.count("/") > 1
    if looks_local and not Path(text).expanduser().is_dir():
        raise ModelLoadError(msg("model.folder_missing", path=text))


def _offline_message(path: str | Path, error: Exception) -> Message:
    return msg("model.offline", path=path, kind=type(error).__name__,
               error=str(error).splitlines()[0] if str(error) else "")


def load_tokenizer(path: str | Path, trust_remote_code: bool = False):
    """AutoTokenizer with a pad token guaranteed (eos, then unk, as stand-ins)."""
    from transformers import AutoTokenizer

    _require_local_or_hub(path)
    folder = Path(path).expanduser()
    if folder.is_dir() and not _has_tokenizer(folder) and not (folder / "tokenizer_config.json").exists():
        raise ModelLoadError(msg("model.tokenizer_missing", folder=folder, files=", ".join(TOKENIZER_FILES)))
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path), trust_remote_code=trust_remote_code)
    except OSError as error:
        if folder.is_dir():
            raise ModelLoadError(msg("model.tokenizer_failed", folder=folder, error=error)) from error
        raise ModelLoadError(_offline_message(path, error)) from error
    if tokenizer.pad_token is None:
        # Padding positions are masked out of attention and loss, so any token works.
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
        if tokenizer.pad_token is None:
            raise ModelLoadError(msg("model.no_pad", path=path))
    return tokenizer


def quantization_config(bits: int, compute_dtype=None):
    """BitsAndBytesConfig for 4-bit NF4 with double quantisation, or 8-bit."""
    try:
        import bitsandbytes  # noqa: F401
        from transformers import BitsAndBytesConfig
    except ImportError as error:
        raise ModelLoadError(msg("model.bitsandbytes", bits=bits, pin=BITSANDBYTES_PIN)) from error
    import torch

    if bits == 4:
        return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                                  bnb_4bit_compute_dtype=compute_dtype or torch.float32)
    if bits == 8:
        return BitsAndBytesConfig(load_in_8bit=True)
    raise ModelLoadError(msg("model.bits", bits=bits))


def load_model(path: str | Path, *, quantization_bits: int | None = None, dtype=None, device_map=None,
               trust_remote_code: bool = False, attn_implementation: str | None = None):
    """AutoModelForCausalLM from a local folder (or hub id), optionally 4- or 8-bit."""
    from transformers import AutoModelForCausalLM

    _require_local_or_hub(path)
    folder = Path(path).expanduser()
    if folder.is_dir() and _read_config(folder) is None:
        raise ModelLoadError(msg("model.not_model_folder", config=folder / "config.json", folder=folder))
    kwargs = {"trust_remote_code": trust_remote_code}
    if dtype is not None:
        kwargs["dtype"] = dtype
    if device_map is not None:
        kwargs["device_map"] = device_map
    if attn_implementation is not None:
        kwargs["attn_implementation"] = attn_implementation
    if quantization_bits:
        kwargs["quantization_config"] = quantization_config(quantization_bits, dtype)
    try:
        return AutoModelForCausalLM.from_pretrained(str(path), **kwargs)
    except OSError as error:
        if folder.is_dir():
            raise ModelLoadError(msg("model.load_failed", folder=folder, error=error)) from error
        raise ModelLoadError(_offline_message(path, error)) from error
