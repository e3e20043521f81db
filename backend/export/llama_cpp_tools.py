"""llama.cpp's own converter and quantizer, pinned together.

Both come from one release of llama-cpp-python (LLAMA_CPP_VERSION): its
compiled bindings (`llama_cpp`, which expose `llama_model_quantize`) and the
converter scripts vendored in its source distribution (`convert_hf_to_gguf.py`,
`convert_lora_to_gguf.py`, their `conversion/` package and `gguf-py`), which
`make gguf-tools` copies into <venv>/share/llama.cpp with a VERSION file. A
converter from one llama.cpp and a quantizer from another can disagree on a
tensor layout, so a version mismatch is refused rather than tried.

The converter runs as a subprocess (it is a script, and it loads the whole
model); the quantizer runs in this process through the bindings.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from backend.export.outputs import ExportError
from backend.messages import msg

LLAMA_CPP_VERSION = "0.3.36"
TOOLS_ENV = "FINETUNE_STUDIO_LLAMA_CPP"
INSTALL_COMMAND = "make gguf-tools"


@dataclass(frozen=True)
class Level:
    """One GGUF type: written by the converter (`outtype`) or by the quantizer from f16 (`ftype`)."""

    name: str
    bits_per_weight: float  # of the 2-D weights, for the size shown before the export starts
    outtype: str | None = None
    ftype: int | None = None  # llama.cpp's LLAMA_FTYPE_MOSTLY_*


LEVELS = {level.name: level for level in (
    Level("f16", 16.0, outtype="f16"),
    Level("bf16", 16.0, outtype="bf16"),
    Level("q8_0", 8.5, outtype="q8_0"),
    Level("q6_k", 6.56, ftype=18),
    Level("q5_k_m", 5.69, ftype=17),
    Level("q4_k_m", 4.89, ftype=15),
)}
DEFAULT_LEVEL = "q4_k_m"
# Types whose quality depends on an importance matrix (llama.cpp's llama-imatrix over calibration text).
NEEDS_IMATRIX_PREFIXES = ("iq", "q2_k_s", "tq")


def parse_levels(names) -> list[Level]:
    """The levels asked for, in order, once each; unknown and importance-matrix types are refused."""
    levels: list[Level] = []
    for raw in names:
        name = str(raw).strip().lower()
        if not name:
            continue
        if name.startswith(NEEDS_IMATRIX_PREFIXES):
            raise ExportError(msg("gguf_export.needs_imatrix", level=raw, levels=", ".join(LEVELS)))
        if name not in LEVELS:
            raise ExportError(msg("gguf_export.unknown_level", level=raw, levels=", ".join(LEVELS)))
        if LEVELS[name] not in levels:
            levels.append(LEVELS[name])
    if not levels:
        raise ExportError(msg("gguf_export.unknown_level", level="", levels=", ".join(LEVELS)))
    return levels


def tools_folder() -> Path:
    return Path(os.environ.get(TOOLS_ENV) or Path(sys.prefix) / "share" / "llama.cpp")


def check_tools() -> Path:
    """The converter folder, once both halves are present and from the same release."""
    folder = tools_folder()
    try:
        import llama_cpp
    except ImportError:
        raise ExportError(msg("gguf_export.no_tools", part=msg("gguf_export.part_bindings"),
                              command=INSTALL_COMMAND)) from None
    if not (folder / "convert_hf_to_gguf.py").is_file():
        raise ExportError(msg("gguf_export.no_tools", part=msg("gguf_export.part_converter", folder=folder),
                              command=INSTALL_COMMAND))
    converter = (folder / "VERSION").read_text(encoding="utf-8").strip() if (folder / "VERSION").is_file() else "?"
    if converter != llama_cpp.__version__:
        raise ExportError(msg("gguf_export.version_mismatch", converter=converter, quantizer=llama_cpp.__version__,
                              command=INSTALL_COMMAND))
    return folder


def convert_hf_to_gguf(model_dir: Path, out_file: Path, outtype: str, log: Path) -> None:
    """convert_hf_to_gguf.py on a saved model folder; a refusal becomes a sentence, the partial file is removed."""
    folder = check_tools()
    command = [sys.executable, str(folder / "convert_hf_to_gguf.py"), str(model_dir), "--outfile", str(out_file),
               "--outtype", outtype]
    _run(command, out_file, log, model_dir)


def convert_lora(adapter_dir: Path, base_dir: Path, out_file: Path, outtype: str, log: Path) -> None:
    """convert_lora_to_gguf.py: the adapter alone, for llama.cpp's --lora beside the base GGUF."""
    folder = check_tools()
    command = [sys.executable, str(folder / "convert_lora_to_gguf.py"), str(adapter_dir), "--base", str(base_dir),
               "--outfile", str(out_file), "--outtype", outtype]
    _run(command, out_file, log, adapter_dir)


def _run(command: list[str], out_file: Path, log: Path, source: Path) -> None:
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    env.pop("NO_LOCAL_GGUF", None)  # the converter must use its own gguf-py, of its own release
    with open(log, "a", encoding="utf-8") as handle:
        handle.write("$ " + " ".join(command) + "\n")
        handle.flush()
        done = subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    if done.returncode != 0:
        out_file.unlink(missing_ok=True)
        raise converter_error(log.read_text(encoding="utf-8", errors="replace"), source, log)


def converter_error(output: str, source: Path, log: Path) -> ExportError:
    """The converter's refusal in words: which part of the model it does not know, and what to do."""
    if "BPE pre-tokenizer was not recognized" in output:
        return ExportError(msg("gguf_export.tokenizer_refused", model=source, log=log))
    for line in reversed(output.splitlines()):
        if "is not supported" in line or "not supported!" in line:
            return ExportError(msg("gguf_export.architecture_refused", model=source, detail=line.strip()[-300:], log=log))
    if "No space left on device" in output:
        return ExportError(msg("gguf_export.disk_full", folder=source.parent, log=log))
    last = next((line.strip() for line in reversed(output.splitlines()) if line.strip()), "no output")
    return ExportError(msg("gguf_export.convert_failed", model=source, detail=last[-300:], log=log))


def quantize(source: Path, out_file: Path, level: Level, threads: int | None = None) -> None:
    """llama_model_quantize from the f16 file; a failure removes the partial file."""
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = level.ftype
    params.nthread = threads or os.cpu_count() or 1
    try:
        code = llama_cpp.llama_model_quantize(str(source).encode(), str(out_file).encode(), params)
    except OSError as error:
        code = error
    if code != 0:
        out_file.unlink(missing_ok=True)
        raise ExportError(msg("gguf_export.quantize_failed", level=level.name, code=code, folder=out_file.parent))
