"""Export a checkpoint: the adapter as it is (+ a zip), or a merged model.

    python -m backend.export --checkpoint RUN/final --out DIR [--merge] [--gguf LEVEL ...] [--json]

The export itself, its dtype rule (`--dtype auto`) and its staging are
exporter.py's. Prints what was written (one JSON object with --json); under
the UI's background launcher (`--progress`) the job reports through its
progress file. Exit 0 on success, 2 on a refusal (with a one-line reason),
1 when a GGUF file failed its check.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from backend.export.exporter import DEFAULT_SHARD_SIZE, export_checkpoint
from backend.export.model_card import gguf_lines
from backend.export.outputs import ExportError
from backend.messages import msg
from backend.runs.jobs import COMPLETED, run_job, write_progress


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m backend.export", description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True, help="checkpoint-<step> or final folder of a run")
    parser.add_argument("--out", required=True, help="output folder (must not exist unless --overwrite)")
    parser.add_argument("--merge", action="store_true", help="merge the LoRA adapter into the base model")
    parser.add_argument("--shard-size", default=DEFAULT_SHARD_SIZE, help="largest safetensors shard, e.g. 2GB, 500MB")
    parser.add_argument("--dtype", default="auto", choices=("auto", "bf16", "fp16", "fp32"),
                        help="dtype of the merged weights (auto: see the module docs)")
    parser.add_argument("--base", help="base model folder or hub id (default: the run's model_name_or_path; "
                                           "a hub id is found in the Hugging Face cache, offline)")
    parser.add_argument("--gguf", nargs="+", metavar="LEVEL",
                        help="also write GGUF files for llama.cpp / Ollama from the merged model (implies --merge): "
                             "q4_k_m (Ollama's default), q5_k_m, q6_k, q8_0, f16, bf16; checked by running them")
    parser.add_argument("--gguf-lora", choices=("f16", "q8_0"),
                        help="also write the adapter alone as a GGUF LoRA (llama.cpp --lora, Ollama ADAPTER)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output folder")
    parser.add_argument("--no-zip", action="store_true", help="do not write <out>.zip")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    parser.add_argument("--progress", type=Path, help=argparse.SUPPRESS)  # set by the UI's background launcher
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report, refused = run_job(lambda: export_checkpoint(Path(args.checkpoint), Path(args.out), merge=args.merge,
                                                        shard_size=args.shard_size, dtype=args.dtype,
                                                        overwrite=args.overwrite, make_zip=not args.no_zip,
                                                        base=args.base, progress=args.progress, gguf=args.gguf,
                                                        gguf_lora=args.gguf_lora),
                              args.progress, ExportError, "export failed")
    if refused:
        return refused
    write_progress(args.progress, state=COMPLETED, stage=msg("job.stage.done"), result=report)
    print(json.dumps(report, indent=2, ensure_ascii=False) if args.json else _summary(report))
    # A GGUF whose check failed is kept for inspection, but a script must not take it for a good one.
    return 1 if report.get("gguf") and not report["gguf"]["passed"] else 0


def _summary(report: dict) -> str:
    lines = [report["message"], f"Written to {report['out']}"]
    if report.get("zip"):
        lines.append(f"Zip: {report['zip']}")
    if report.get("verification"):
        lines.append("Verification: " + report["verification"]["summary"])
    lines.extend(report.get("notes", []))
    if report.get("gguf"):
        lines.extend(gguf_lines(report["gguf"]))
    return "\n".join(lines)
