"""The diagnostics zip (backend/runs/diagnose.py): a run folder laid out on disk by hand (no training), each
kind of secret planted in it, and the real zip read back member by member: no secret value in any byte,
the home folder as ~, the run's files, versions and hardware present, train.log cut to its last 500 lines;
refusals of a bad run id or output path; the CLI in process and once as a command."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from collections import Counter
from importlib import metadata

import pytest

from backend.runs import diagnose
from backend.runs.cli import main
from backend.runs.diagnose import DiagnoseError, diagnostics_zip
from backend.runs.redaction import Redactor
from backend.runs.workspace import Workspace
from tests.conftest import REPO

API_KEY = "sk-studio-7f3a9c1e5b2d4f60"          # the API server's key: FINETUNE_STUDIO_API_KEY and --api-key
PASSWORD = "s3cret"                              # app.py --auth alice:s3cret
WEBHOOK = "https://hooks.slack.com/services/T0ABCDEF1/B0GHIJKL2/xYz123AbC456dEf789GhI012"
ENV_SECRETS = {"MY_API_KEY": "mykey-9c8b7a6d5e4f3210", "HF_TOKEN": "hf_QwErTyUiOpAsDfGhJkLz1234",
               "SOME_SECRET": "shh-0n1y-f0r-m3-4242"}
# A webhook the log names that settings.json does not: removed by its token-looking path.
OTHER_HOOK_TOKEN = "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
SECRET_VALUES = [API_KEY, OTHER_HOOK_TOKEN, PASSWORD, "alice:" + PASSWORD, WEBHOOK, "xYz123AbC456dEf789GhI012", *ENV_SECRETS.values()]
APP_ARGV = ["app.py", "--auth", f"alice:{PASSWORD}", "--port", "7861"]
RUN = "20250101-120000-planted"
EXPECTED = {"config.yaml", "status.json", "summary.json", "train.log", "metrics.jsonl", "settings.json",
            "versions.json", "hardware.json", "system.json", "manifest.json"}


@pytest.fixture
def planted(tmp_path, monkeypatch):
    """(workspace, home) with one run holding every kind of secret, in the environment and on disk."""
    home = tmp_path / "home-of-alice"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("FINETUNE_STUDIO_API_KEY", API_KEY)
    for name, value in ENV_SECRETS.items():
        monkeypatch.setenv(name, value)
    # No nvidia-smi on PATH: on a GPU machine the fast suite would otherwise start it (test_gpu_section runs it).
    monkeypatch.setenv("PATH", str(tmp_path / "no-programs"))
    ws = Workspace(tmp_path / "workspace").ensure()
    run = ws.runs_dir / RUN
    run.mkdir()
    (run / "config.yaml").write_text(f"model_name_or_path: {home}/models/smollm2\ndataset: {home}/data/rows.jsonl\n"
                                     f"api_key: {API_KEY}\nrun_name: planted\n")
    command = [f"{home}/venv/bin/python", "-m", "backend.train", "--run-dir", str(run), "--auth",
               f"alice:{PASSWORD}", "--api-key", API_KEY]
    (run / "status.json").write_text(json.dumps({"state": "failed", "run_id": RUN, "command": command,
                                                 "error": f"HTTP 401 with token {ENV_SECRETS['HF_TOKEN']}"}))
    (run / "summary.json").write_text(json.dumps({"global_step": 12, "tokens_per_second": 812.5}))
    (run / "metrics.jsonl").write_text(json.dumps({"step": 1, "kind": "train", "loss": 2.5,
                                                   "tokens_per_second": 812.5, "tokens_seen": 4096}) + "\n")
    early = [f"step {i}: {API_KEY} {PASSWORD}\n" for i in range(100)]
    late = [f"step {i}: loss 1.0\n" for i in range(100, 590)]
    tail = [f"loading {home}/.cache/huggingface/hub\n", f"Authorization: Bearer {API_KEY}\n",
            f"serve --api-key {API_KEY} --auth alice:{PASSWORD}\n", f"posting to {WEBHOOK}\n",
            f"retry https://discord.com/api/webhooks/123456789012345678/{OTHER_HOOK_TOKEN}\n",
            *[f"{name}={value} seen\n" for name, value in ENV_SECRETS.items()],
            f"{ENV_SECRETS['SOME_SECRET']} {ENV_SECRETS['MY_API_KEY']}\n", "the last line\n"]
    (run / "train.log").write_text("".join(early + late + tail))
    assert len(early + late + tail) == 600
    ws.settings_file.write_text(json.dumps({"language": "en", "webhook_url": WEBHOOK,
                                            "notify": {"ntfy_webhook": "https://ntfy.sh/alice-private-topic"}}))
    return ws, home


def members(path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def test_no_planted_secret_in_any_member(planted, tmp_path):
    ws, home = planted
    report = diagnostics_zip(ws, RUN, tmp_path / "diag.zip", app_argv=APP_ARGV)
    files = members(report.path)
    assert set(files) == EXPECTED
    for name, data in files.items():
        for secret in [*SECRET_VALUES, "alice-private-topic", str(home)]:
            assert secret.encode() not in data, f"{secret!r} is in {name}"
    log = files["train.log"].decode()
    assert "loading ~/.cache/huggingface/hub" in log
    assert "dataset: ~/data/rows.jsonl" in files["config.yaml"].decode()
    assert "Authorization: Bearer <redacted" in log and "serve --api-key <redacted" in log
    assert "HF_TOKEN=<redacted:env> seen" in log and "posting to <redacted:webhook>" in log
    assert "retry https://discord.com/<redacted:url>" in log
    manifest = json.loads(files["manifest.json"])
    assert {"env", "auth", "home", "webhook"} <= set(manifest["redacted"])
    assert set(ENV_SECRETS) | {"FINETUNE_STUDIO_API_KEY"} <= set(manifest["redacted_env"])
    assert manifest["missing"] == [] and {f["name"] for f in manifest["files"]} == EXPECTED - {"manifest.json"}


def test_numbers_and_files_survive_and_sections_are_there(planted, tmp_path):
    ws, _ = planted
    files = members(diagnostics_zip(ws, RUN, tmp_path / "diag.zip", app_argv=APP_ARGV).path)
    assert json.loads(files["metrics.jsonl"]) == {"step": 1, "kind": "train", "loss": 2.5,
                                                  "tokens_per_second": 812.5, "tokens_seen": 4096}
    assert json.loads(files["summary.json"])["tokens_per_second"] == 812.5
    versions = json.loads(files["versions.json"])
    assert versions["torch"] == metadata.version("torch") and versions["peft"] == metadata.version("peft")
    assert versions["vllm"] is None or isinstance(versions["vllm"], str)
    hardware = json.loads(files["hardware.json"])
    assert hardware["cpu"]["logical_cores"] >= 1 and hardware["ram_total_gb"] > 0
    assert hardware["workspace_free_gb"] > 0
    assert hardware.get("gpus") == "none" or "nvidia_driver_gpus" in hardware
    system = json.loads(files["system.json"])
    assert system["app_flags"] == ["--auth", "<redacted:auth>", "--port", "7861"]
    assert system["environment"]["HF_TOKEN"] == "<redacted:env>"
    assert system["launch_command"][:3] == ["~/venv/bin/python", "-m", "backend.train"]


def test_train_log_keeps_its_last_500_lines(planted, tmp_path):
    ws, _ = planted
    report = diagnostics_zip(ws, RUN, tmp_path / "diag.zip")
    lines = members(report.path)["train.log"].decode().splitlines()
    assert len(lines) == 500 and lines[0] == "step 100: loss 1.0" and lines[-1] == "the last line"
    assert next(f for f in report.files if f["name"] == "train.log")["source"] == "the last 500 lines of train.log"
    # A file shorter than the limit is whole; one longer than a read block still ends where the file ends.
    short = tmp_path / "short.log"
    short.write_text("a\nb\n")
    assert diagnose.last_lines(short) == ("a\nb\n", False)
    long = tmp_path / "long.log"
    long.write_text("".join(f"{i}\n" for i in range(3000)))
    text, trimmed = diagnose.last_lines(long, 500, block=64)
    assert trimmed and text.splitlines() == [str(i) for i in range(2500, 3000)]


def test_missing_files_are_listed_not_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "no-programs"))
    ws = Workspace(tmp_path / "ws").ensure()
    (ws.runs_dir / "bare").mkdir()
    (ws.runs_dir / "bare" / "config.yaml").write_text("model_name_or_path: demo\n")
    report = diagnostics_zip(ws, "bare", tmp_path / "bare.zip")
    manifest = json.loads(members(report.path)["manifest.json"])
    assert manifest["missing"] == ["status.json", "summary.json", "train.log", "metrics.jsonl"]
    assert "config.yaml" in members(report.path) and "debug.log" not in members(report.path)  # optional
    # The libraries' warnings, kept out of train.log, come along when the run has them.
    (ws.runs_dir / "bare" / "debug.log").write_text(f"WARNING py.warnings: {tmp_path}/x.py: FutureWarning\n")
    report = diagnostics_zip(ws, "bare", tmp_path / "bare-2.zip")
    assert "FutureWarning" in members(report.path)["debug.log"].decode()


@pytest.mark.parametrize("run_id", ["../../etc", "/etc", "..", "", "no-such-run", f"{RUN}/../{RUN}", None])
def test_a_run_id_that_is_not_a_run_is_refused_with_a_sentence(planted, tmp_path, run_id):
    ws, _ = planted
    with pytest.raises(DiagnoseError, match=r"No run named .* give the id of one of its runs \(the newest: "):
        diagnostics_zip(ws, run_id, tmp_path / "diag.zip")
    assert not (tmp_path / "diag.zip").exists()


def test_bad_output_paths_are_refused(planted, tmp_path):
    ws, _ = planted
    (tmp_path / "old.zip").write_bytes(b"keep me")
    cases = {tmp_path / "diag.txt": "is not a .zip file name", tmp_path / "nowhere" / "d.zip": "does not exist",
             tmp_path / "old.zip": "exists already", ws.runs_dir / RUN / "d.zip": "inside the run folder",
             tmp_path: "is not a .zip file name"}
    for out, words in cases.items():
        with pytest.raises(DiagnoseError, match=words):
            diagnostics_zip(ws, RUN, out)
    assert (tmp_path / "old.zip").read_bytes() == b"keep me" and not (ws.runs_dir / RUN / "d.zip").exists()
    with pytest.raises(DiagnoseError, match="has no runs yet"):
        diagnostics_zip(Workspace(tmp_path / "empty").ensure(), "x", tmp_path / "e.zip")


def test_redactor_leaves_ordinary_text_alone():
    redactor = Redactor(home="/home/alice")
    counts = Counter()
    text = ('eos_token: "<|im_end|>" max_new_tokens: 64 tokens_per_second=12.5 auth: true\n'
            "KeyError: 'lm_head.weight' TOKENIZERS_PARALLELISM=false\n"
            "https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct /home/alicea/x /home/alice")
    assert redactor.text(text, counts) == text[:-len("/home/alice")] + "~"
    assert counts == {"home": 1}
    redactor.add_env({"TOKENIZERS_PARALLELISM": "false", "AWS_SECRET_ACCESS_KEY": "aws-secret-0123456789"})
    assert redactor.env_names == ["AWS_SECRET_ACCESS_KEY"]


def test_cli_main_in_process(planted, tmp_path, capsys):
    ws, _ = planted
    out = tmp_path / "cli.zip"
    assert main(["diagnose", RUN, "--out", str(out), "--workspace", str(ws.root)]) == 0
    printed = capsys.readouterr().out
    assert f"Wrote {out} for run {RUN}" in printed and "the last 500 lines of train.log" in printed
    assert set(members(out)) == EXPECTED
    assert main(["diagnose", "../../etc", "--out", str(tmp_path / "x.zip"), "--workspace", str(ws.root)]) == 2
    assert "error: No run named '../../etc'" in capsys.readouterr().err


def test_cli_refusal_exit_code_without_torch(tmp_path, subprocess_env):
    """The command's exit code, and that a refusal imports neither torch nor transformers (-X importtime)."""
    ws = Workspace(tmp_path / "ws").ensure()
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "backend.runs", "diagnose", "../../etc",
                             "--out", str(tmp_path / "x.zip"), "--workspace", str(ws.root)],
                            cwd=REPO, env=subprocess_env, capture_output=True, text=True)
    assert result.returncode == 2
    assert "error: No run named '../../etc'" in result.stderr and "has no runs yet" in result.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines() if "|" in line}
    assert "backend.runs.diagnose" in imported and not {"torch", "transformers"} & imported


@pytest.mark.gpu
def test_gpu_section_names_the_gpus(starts_processes):
    """Where a CUDA device is: the driver's own files and nvidia-smi's table both name it."""
    from backend.runs.machine_report import gpu_info

    report = gpu_info()
    assert report.get("nvidia_driver_gpus") and "Model:" in report["nvidia_driver_gpus"][0]
    assert report["nvidia_smi"].startswith("index, name, memory.total") and "NVIDIA" in report["nvidia_smi"]
