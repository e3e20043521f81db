"""python -m backend.chat --model PATH|demo [--checkpoint DIR ...] --prompt TEXT

Prints each model's answer, labelled: the base first, then each checkpoint in
the order given. Exit 0 on success, 2 on bad input (with a one-line reason)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from backend.chat.engine import ChatEngine
from backend.chat.generation import ChatError, GenerationSettings
from backend.chat.targets import ChatTarget, TargetError, check_checkpoint_folder, target_for_folder
from backend.messages import msg
from backend.models import loading
from backend.models.hardware import device_problems
from backend.runs.workspace import DEFAULT_WORKSPACE, Workspace


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m backend.chat", description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="base model: 'demo', or a local model folder")
    parser.add_argument("--checkpoint", action="extend", nargs="+", default=[], metavar="DIR",
                        help="checkpoint folders (LoRA adapter or full weights); repeatable")
    parser.add_argument("--prompt", required=True, help="the user message")
    parser.add_argument("--system", default="", help="system prompt")
    parser.add_argument("--greedy", action="store_true", help="greedy decoding (default: sampling)")
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--top-p", type=float, default=0.9)
    parser.add_argument("--top-k", type=int, default=50)
    parser.add_argument("--repetition-penalty", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0, help="sampling seed (same seed, same answers)")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--quantization-bits", type=int, choices=(4, 8), default=None, help="load the base in 4 or 8 bits")
    parser.add_argument("--device", default="cpu", help="cpu or cuda:N")
    parser.add_argument("--no-base", action="store_true", help="skip the base model's answer")
    parser.add_argument("--json", action="store_true", help="print one JSON object per answer instead")
    parser.add_argument("--workspace", default=str(DEFAULT_WORKSPACE), help="where 'demo' is built / found")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    settings = GenerationSettings(
        greedy=args.greedy, temperature=args.temperature, top_p=args.top_p, top_k=args.top_k,
        repetition_penalty=args.repetition_penalty, max_new_tokens=args.max_new_tokens,
        seed=args.seed, system_prompt=args.system,
    )
    try:
        targets = build_targets(args)
        problems = settings.problems() + device_problems(args.device)
        if problems:
            raise TargetError(" ".join(str(p) for p in problems))
    except (TargetError, loading.ModelLoadError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    engine = ChatEngine()
    for target in targets:
        try:
            reply = engine.answer(target, args.prompt, settings, device=args.device)
        except (loading.ModelLoadError, ChatError) as error:
            print(f"error: {target.label}: {error}", file=sys.stderr)
            return 2
        print_reply(target, reply, args.json)
    return 0


def build_targets(args: argparse.Namespace) -> list[ChatTarget]:
    for folder in args.checkpoint:  # first: a wrong path is told before 'demo' is built (a minute, once)
        check_checkpoint_folder(folder)
    model = loading.resolve_model_path(args.model, Workspace(Path(args.workspace)).models_dir)
    checkpoints = [target_for_folder(model, folder, args.quantization_bits) for folder in args.checkpoint]
    # The base answers through the checkpoints' run template (a base model has none of its own).
    template = checkpoints[0].chat_template if checkpoints else "auto"
    base = ChatTarget(model=model, quantization_bits=args.quantization_bits, chat_template=template)
    if args.no_base and not checkpoints:
        raise TargetError(msg("chat.no_base_nothing"))
    return ([] if args.no_base else [base]) + checkpoints


def print_reply(target: ChatTarget, reply, as_json: bool) -> None:
    if as_json:
        print(json.dumps({"label": target.label, "checkpoint": target.checkpoint, "answer": reply.text,
                          "new_tokens": reply.new_tokens, "seconds": round(reply.seconds, 3),
                          "finish": reply.finish, "notices": [str(n) for n in reply.notices], "error": reply.error},
                         ensure_ascii=False), flush=True)
        return
    where = f" ({target.checkpoint})" if target.checkpoint else f" ({target.model})"
    print(f"=== {target.label}{where} ===")
    for notice in reply.notices:
        print(f"[notice] {notice}")
    print(reply.error if reply.error else reply.text)
    print(f"[{reply.new_tokens} tokens, {reply.seconds:.2f} s, {reply.finish}]\n", flush=True)
