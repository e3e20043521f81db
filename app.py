"""FineTune Studio: `python app.py` serves the UI on http://127.0.0.1:7860.

parse flags -> refuse unsafe ones -> build the UI -> launch. Training never runs
here: the UI starts worker processes and reads what they write.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
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
# How long the page may take to answer its first request before the start is given up (seconds): the
# first page builds the whole UI's config, which took more than gradio's 3 s on a loaded 2-core machine.
ANSWER_WITHIN_S = 180


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="app.py", description="FineTune Studio: fine-tune language models locally.")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, this machine only)")
    parser.add_argument("--port", type=int, default=7860, help="port to listen on (default: 7860)")
    parser.add_argument("--workspace", default=os.environ.get("FINETUNE_STUDIO_WORKSPACE", "workspace"),
                        help="folder holding datasets, runs, models and settings (default: ./workspace)")
    parser.add_argument("--allow-remote", nargs="*", default=None, metavar="NAME",
                        help="allow --host to be an address other computers can reach (use with --auth); the NAMEs "
                             "are the host names browsers use besides --host (requests under any other are refused)")
    parser.add_argument("--allow-remote-code", action="store_true",
                        help="with --allow-remote or --share: let people signed in from other computers set what runs "
                             "code on this machine (trust_remote_code, callbacks, loss_function, reward_functions, "
                             "benchmark task files); off by default, when only YAML files and commands set them")
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


def accepts_code(args: argparse.Namespace) -> bool:
    """Whether the browser may set what runs code here: always on this machine alone; an app other
    computers reach (--allow-remote, --share) only with --allow-remote-code (docs/CONTRACTS.md)."""
    return (args.allow_remote is None and not args.share) or args.allow_remote_code


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
    demo = build_app(workspace, recipe=args.recipe, accepts_code=accepts_code(args))
    options = launch_options(demo, workspace, share=args.share, auth=auth, max_file_size=args.max_file_size)
    # Only requests addressed to a name the app listens as, and not sent by another site's page (DNS rebinding, CSRF).
    guard = host_guard(args.host, args.allow_remote or (), share=args.share)
    serve(demo, args.host, args.port, [guard], options)
    # serve() returns once the page answers. Only then the default model's build starts (torch, a
    # conversion, replay answers): started before, it took a core of two from the start-up.
    demo.queue_scheduler.start()  # queued runs start when their devices free up (backend/runs/scheduler.py)
    if not args.no_demo_build:  # the first Start then finds the default model converted or built
        start_default_build(workspace, args.recipe)
    demo.block_thread()


def serve(demo, host: str, port: int, middleware: list, options: dict, answer_within_s: float = ANSWER_WITHIN_S) -> str:
    """Launch `demo` and return its local URL once its page answers; exit 1 with a sentence when it does not
    within `answer_within_s`. gradio's own check (networking.url_ok: one HEAD of the page, 3 s, then "When
    localhost is not accessible, a shareable link must be created") failed the start on a busy machine, where
    the first page takes longer; it is skipped (launch's `_frontend=False` gates only that check) for this one."""
    demo.queue(default_concurrency_limit=4).launch(server_name=host, server_port=port, app_kwargs={"middleware": middleware},
                                                   prevent_thread_lock=True, _frontend=False, **options)
    url = demo.local_url
    problem = page_problem(url, answer_within_s)
    if problem is not None:
        demo.close()
        print(f"error: {msg('app.not_answering', url=url, seconds=round(answer_within_s), problem=problem)}",
              file=sys.stderr)
        raise SystemExit(1)
    return url


def page_problem(url: str, limit_s: float) -> str | None:
    """None once `url` answers (any HTTP status below 500: the server is there), else what the last try got.
    Each try may take the time left, so a page that needs 20 s on a loaded machine still counts."""
    import httpx  # gradio's own HTTP client, imported with it

    deadline, problem = time.monotonic() + limit_s, "no answer"
    # trust_env=False: a proxy from the environment is not between this process and its own server.
    with httpx.Client(trust_env=False, verify=False) as client:
        while (left := deadline - time.monotonic()) > 0:
            try:
                status = client.head(url, timeout=left).status_code
            except httpx.HTTPError as error:
                problem = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
            else:
                if status < 500:
                    return None
                problem = f"HTTP {status}"
            time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
    return problem


def start_default_build(workspace, recipe: str) -> None:
    default = recipe_config(recipe)
    replay = workspace.datasets_dir if default.replay != "off" else None
    start_background_build(workspace.models_dir, default.model_name_or_path, replay_cache=replay)


if __name__ == "__main__":
    main()
