"""Fixtures of the serve tests: a short real demo training run (the LoRA run of
tests/eval_export_runs.py: 16 optimizer steps on the demo data, checkpoint-8,
checkpoint-16 and final, cached beside the demo model) and ONE server process
for this package (stopped when its tests end, not held for the rest of the
suite), started with an API key, a small body limit, a 24-place queue and
room for 2 of the run's 3 adapters,
shared by the client tests and the error tests."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.eval_export_runs import cached_run, link_demo_model
from tests.serve.support import (
    KEY,
    MAX_ADAPTERS,
    MAX_BODY,
    MAX_QUEUE,
    MAX_TOKENS,
    PROMPT,
    REPO,
    RUN_ID,
    ServerProcess,
    server_env,
)


@pytest.fixture(scope="session")
def serve_workspace(tmp_path_factory, demo_model_dir):
    """A workspace holding the short demo run as runs/demo-run."""
    from backend.runs.workspace import Workspace

    workspace = Workspace(tmp_path_factory.mktemp("serve") / "workspace").ensure()
    link_demo_model(workspace, demo_model_dir)
    cached_run(workspace, demo_model_dir, "lora", RUN_ID)
    return workspace


@pytest.fixture(scope="package")
def chat_cli(serve_workspace, demo_model_dir):
    """`python -m backend.chat --greedy` for base and final, the reference answers: started
    before the server, so the two processes load side by side (communicate() collects it)."""
    final = serve_workspace.runs_dir / RUN_ID / "final"
    command = [sys.executable, "-m", "backend.chat", "--model", str(demo_model_dir), "--checkpoint", str(final),
               "--prompt", PROMPT, "--greedy", "--max-new-tokens", str(MAX_TOKENS), "--json"]
    process = subprocess.Popen(command, cwd=REPO, env=server_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    yield process
    if process.poll() is None:
        process.kill()
        process.communicate()


@pytest.fixture(scope="package")
def server(serve_workspace, chat_cli):
    process = ServerProcess(serve_workspace.runs_dir / RUN_ID, "--api-key", KEY, "--max-queue", str(MAX_QUEUE),
                            "--max-body", str(MAX_BODY), "--max-adapters", str(MAX_ADAPTERS)).start()
    yield process
    assert process.stop() == 0, process.tail()
    assert "Traceback" not in process.tail()
