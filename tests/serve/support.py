"""A real `python -m backend.serve` process on a free port, for the serve tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from backend.models.demo_facts import DEMO_PROMPTS
from tests.browser.harness import free_port, http_status
from tests.polling import wait_for

REPO = Path(__file__).resolve().parents[2]
RUN_ID = "demo-run"
NAMES = ["base", "checkpoint-8", "checkpoint-16", "final"]
KEY = "test-key-123"
MAX_BODY = 8192
MAX_QUEUE = 24
MAX_TOKENS = 24
MAX_ADAPTERS = 2   # of the run's three LoRA checkpoints: one is always unloaded
PROMPT = DEMO_PROMPTS[0][0]


def server_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env.pop("FINETUNE_STUDIO_API_KEY", None)
    return env


class ServerProcess:
    """`python -m backend.serve` as a real process; its output goes to a log file."""

    def __init__(self, run_dir: Path, *extra: str, source: tuple[str, ...] | None = None):
        """`source`: what to serve instead of `--run run_dir` (e.g. ("--gguf", FILE)); the log goes two
        folders above run_dir either way (the workspace)."""
        self.port = free_port()
        self.run_dir = Path(run_dir)
        self.log = self.run_dir.parent.parent / f"serve-{self.port}.log"
        self.command = [sys.executable, "-m", "backend.serve", *(source or ("--run", str(run_dir))),
                        "--port", str(self.port), *extra]
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ServerProcess:
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(self.command, cwd=REPO, env=server_env(), stdout=log,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        wait_for(lambda: self.process.poll() is not None or http_status(f"{self.url}/health") == 200,
                 f"the server on port {self.port}")
        assert self.process.poll() is None, f"the server exited:\n{self.tail()}"
        return self

    def tail(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")[-3000:]

    def stop(self) -> int:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode if self.process else 0
