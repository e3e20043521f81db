"""FineTune Studio: `python app.py` serves the UI on http://127.0.0.1:7860.

parse flags -> refuse unsafe ones -> build the UI -> launch. Training never runs
here: the UI starts worker processes and reads what they write.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from backend.config_recipes import recipe_config
from backend.messages import msg
from backend.runs.workspace import Workspace
from backend.serve.hosts import host_guard, is_loopback
from backend.training.model_stage import start_background_build

AUTH_ENV = "FINETUNE_STUDIO_AUTH"
# What gradio's upload limit accepts (gradio.utils._parse_file_size): digits, then a unit.
FILE_SIZE = re.compile(r"^\s*\d+\s*(b|kb|mb|gb|tb)\s*$", re.IGNORECASE)
NO_DEMO_BUILD_ENV = "FINETUNE_STUDIO_NO_DEMO_BUILD"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="app.py", description="FineTune Studio: fine-tune language models locally.")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, this machine only)")
    parser.add_argument("--port", type=int, default=7860, help="port to listen on (default: 7860)")
    parser.add_argument("--workspace", default=os.environ.get("FINETUNE_STUDIO_WORKSPACE", "workspace"),
                        help="folder holding datasets, runs, models and settings (default: ./workspace)")
    parser.add_argument("--allow-remote", nargs="*", default=None, metavar="NAME",
                        help="allow --host to be an address other computers can reach (use with --auth); the NAMEs "
                             "are the host names browsers use besides --host (requests under any other are refused)")
    parser.add_argument("--share", action="store_true", help="also publish a public gradio.live link (off by default)")
    parser.add_argument("--auth", default=os.environ.get(AUTH_ENV),
                        help=f"USER:PASS required to sign in (or set {AUTH_ENV})")
    parser.add_argument("--no-demo-build", action="store_true", default=bool(os.environ.get(NO_DEMO_BUILD_ENV)),
                        help="do not prepare the default model in the background at start (convert the starter's "
                             f"GGUF file, or build the demo model; or set {NO_DEMO_BUILD_ENV}=1); the first run does it then")
    parser.add_argument("--recipe", default="starter", choices=("starter", "demo-tiny"),
                        help="the Train form's defaults on a new workspace: starter (SmolLM2-135M-Instruct learns "
                             "a new identity) or demo-tiny (the 2M demo model, fast)")
    parser.add_argument("--max-file-size", default="200mb", help="largest upload accepted, e.g. 200mb, 2gb (default: 200mb)")
    return parser.parse_args(argv)


def check_args(args: argparse.Namespace) -> tuple[str, str] | None:
    """Refuse unsafe or malformed flags with a sentence (exit 2, as argparse does); returns the parsed --auth."""
    if not 1 <= args.port <= 65535:
        refuse(str(msg("app.port", port=args.port)))
    if not FILE_SIZE.match(args.max_file_size or ""):
        refuse(f"--max-file-size {args.max_file_size!r} is not a size: give a whole number with a unit "
                 "b, kb, mb, gb or tb, e.g. 200mb or 2gb.")
    if not is_loopback(args.host) and args.allow_remote is None:
        refuse(f"Refusing to listen on {args.host}: other computers could reach your data and models. "
                 "Use --host 127.0.0.1, or add --allow-remote (together with --auth USER:PASS) if you mean it.")
    auth = None
    if args.auth:
        user, sep, password = args.auth.partition(":")
        if not sep or not user or not password:
            refuse(f"--auth (or {AUTH_ENV}) must look like USER:PASS, with both parts non-empty.")
        auth = (user, password)
    if args.share:
        print("Warning: --share publishes this app on a public gradio.live address. "
              "Anyone with the link can use it" + ("." if auth else "; add --auth USER:PASS."), file=sys.stderr)
    if not is_loopback(args.host) and not auth:
        print(f"Warning: listening on {args.host} without --auth: anyone on the network can use this app.", file=sys.stderr)
    return auth


def refuse(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    auth = check_args(args)
    root = Path(args.workspace).expanduser().resolve()
    # Uploads land inside the workspace, the only folder the app serves files from.
    os.environ.setdefault("GRADIO_TEMP_DIR", str(root / ".uploads"))
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

    from ui.shell import build_app, launch_options

    workspace = Workspace(root).ensure()
    demo = build_app(workspace, recipe=args.recipe)
    options = launch_options(demo, workspace, share=args.share, auth=auth, max_file_size=args.max_file_size)
    # Only requests addressed to a name the app listens as, and not sent by another site's page (DNS rebinding, CSRF).
    guard = host_guard(args.host, args.allow_remote or (), share=args.share)
    demo.queue(default_concurrency_limit=4).launch(server_name=args.host, server_port=args.port,
                                                   app_kwargs={"middleware": [guard]}, prevent_thread_lock=True,
                                                   **options)
    # launch() returns once the page answers. Only then the default model's build starts (torch, a
    # conversion, replay answers): started before, it took a core of two from the start-up.
    demo.queue_scheduler.start()  # queued runs start when their devices free up (backend/runs/scheduler.py)
    if not args.no_demo_build:  # the first Start then finds the default model converted or built
        start_default_build(workspace, args.recipe)
    demo.block_thread()


def start_default_build(workspace, recipe: str) -> None:
    default = recipe_config(recipe)
    replay = workspace.datasets_dir if default.replay != "off" else None
    start_background_build(workspace.models_dir, default.model_name_or_path, replay_cache=replay)


if __name__ == "__main__":
    main()
