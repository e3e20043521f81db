"""Every shell command in README.md and docs/*.md works as written.

The command blocks (fenced bash / plain blocks and indented blocks) are read
from the docs; each command is either run here, in order, in a temporary
workspace with the tiny demo model (placeholders such as `<run-id>` filled
with the run an earlier command made, and a long run cut with the smaller
setting the README names: `--recipe demo-tiny`, `--set max_steps=8`,
`--model demo`, `--max-samples 8`), or listed below with the reason it is not. A command added
to the docs fails the first test until it is put in one of the two lists.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import seed_answers

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELL_BLOCKS = {"", "bash", "sh", "shell", "console"}
# A command line: optional VAR=value and nice, then python or make.
COMMAND = re.compile(r"^(?:[A-Z_]+=\S+ )*(?:nice(?: -n ?\d+)? )?(?:\.venv/bin/)?(?:python3?|make) ")
PYTHON = re.compile(r"(^|&& )(?:\.venv/bin/)?python3? ")

# documented command -> what runs here, in this order. `{name}` is the run folder that the entry
# binding `name` created; where the documented command differs, only placeholders are filled and
# the README's smaller setting is added.
RUNS: list[tuple[str, str, str | None]] = [
    (".venv/bin/python -m backend.train --print-default-config > run.yaml",
     ".venv/bin/python -m backend.train --print-default-config --recipe demo-tiny > run.yaml", None),
    (".venv/bin/python -m backend.train --config run.yaml --set method=qlora --set max_steps=50",
     ".venv/bin/python -m backend.train --config run.yaml --set method=qlora --set max_steps=50 --set max_steps=8",
     None),
    (".venv/bin/python -m backend.train --config run.yaml --queue",
     ".venv/bin/python -m backend.train --config run.yaml --queue --set max_steps=8", None),
    (".venv/bin/python -m backend.train --config run.yaml --dry-run",
     ".venv/bin/python -m backend.train --config run.yaml --dry-run", None),
    (".venv/bin/python -m backend.train --config run.yaml --sweep sweep.yaml --dry-run",
     "printf 'grid: {{learning_rate: [1.0e-3, 3.0e-3], lora_r: [4, 8]}}\\n' > sweep.yaml"  # {{ }}: str.format
     " && .venv/bin/python -m backend.train --config run.yaml --sweep sweep.yaml --dry-run", None),
    ("python -m backend.train --workspace WS --recipe demo-tiny --run-dir WS/runs/sft",
     "python -m backend.train --workspace workspace --recipe demo-tiny --run-dir workspace/runs/sft"
     " --set max_steps=8 --set save_steps=4", None),
    (".venv/bin/python -m backend.train --resume workspace/runs/<run-id>",
     ".venv/bin/python -m backend.train --resume workspace/runs/sft", None),
    (".venv/bin/python -m backend.train --set stage=dpo --set dataset=demo-pairs"
     " --set init_adapter=workspace/runs/<sft-run>/final",
     ".venv/bin/python -m backend.train --set stage=dpo --set dataset=demo-pairs"
     " --set init_adapter=workspace/runs/sft/final --recipe demo-tiny --set max_steps=2", None),
    ("python -m backend.train --set stage=dpo --set dataset=demo-pairs --set init_adapter=RUN/final",
     "python -m backend.train --set stage=dpo --set dataset=demo-pairs --set init_adapter=workspace/runs/sft/final"
     " --recipe demo-tiny --set max_steps=2", None),
    ("python -m backend.train --workspace WS --recipe demo-tiny --set stage=dpo --set dataset=demo-pairs"
     " --set init_adapter=WS/runs/sft/final",
     "python -m backend.train --workspace workspace --recipe demo-tiny --set stage=dpo --set dataset=demo-pairs"
     " --set init_adapter=workspace/runs/sft/final --set max_steps=8 --set save_steps=4", "dpo"),
    ("python -m backend.evaluate --run WS/runs/<dpo run> --checkpoint base checkpoint-80 final",
     "python -m backend.evaluate --run workspace/runs/{dpo} --checkpoint base checkpoint-4 final --max-samples 8", None),
    ("python -m backend.train --config RUN/config.yaml --run-dir RUN",  # what the run store starts
     "mkdir workspace/runs/by-hand && cp workspace/runs/sft/config.yaml workspace/runs/by-hand/"
     " && python -m backend.train --config workspace/runs/by-hand/config.yaml --run-dir workspace/runs/by-hand", None),
    ("python -m backend.train --config run.yaml --set 'callbacks=[examples.custom_training:LossSpikeAlert]'"
     " --set loss_function=examples.custom_training:label_smoothed_loss",
     "python -m backend.train --config run.yaml --set 'callbacks=[examples.custom_training:LossSpikeAlert]'"
     " --set loss_function=examples.custom_training:label_smoothed_loss --set max_steps=8", None),
    (".venv/bin/python -m backend.data check data.json --model smollm2-135m-instruct --cutoff 512 [--json]",
     ".venv/bin/python -m backend.data check data.json --model smollm2-135m-instruct --cutoff 512 --json", None),
    ("python -m backend.data check FILE --model gemma-3-270m --show-template 0",
     "python -m backend.data check data.json --model gemma-3-270m --show-template 0", None),
    (".venv/bin/python -m backend.data fix data.json --out my-dataset --drop-duplicates --strip-html --fill product=Studio",
     ".venv/bin/python -m backend.data fix data.json --out my-dataset --drop-duplicates --strip-html --fill product=Studio",
     None),
    ('.venv/bin/python -m backend.chat --model smollm2-135m-instruct --checkpoint workspace/runs/<id>/final'
     ' --prompt "Who are you?" --greedy',
     '.venv/bin/python -m backend.chat --model demo --checkpoint workspace/runs/sft/final'
     ' --prompt "Who are you?" --greedy', None),
    (".venv/bin/python -m backend.evaluate --run workspace/runs/<run-id>",
     ".venv/bin/python -m backend.evaluate --run workspace/runs/sft --max-samples 8", None),
    ("python -m backend.evaluate --run workspace/runs/<run-id> [--checkpoint base checkpoint-50 final]"
     " [--data eval.jsonl] [--max-samples 200] [--max-new-tokens 128] [--json]",
     "python -m backend.evaluate --run workspace/runs/sft --checkpoint base checkpoint-4 final"
     " --data data.json --max-samples 8 --max-new-tokens 16 --json", None),
    ("python -m backend.evaluate --run workspace/runs/<run-id> --benchmark studio_facts_choice studio_general_choice"
     " [--checkpoint base checkpoint-50 final] [--max-samples 20] [--no-chat-template] [--json]",
     "python -m backend.evaluate --run workspace/runs/sft --benchmark studio_facts_choice studio_general_choice"
     " --checkpoint base final --max-samples 4 --json", None),
    ("python -m backend.evaluate --run workspace/runs/<run-id> --learning [--checkpoint final] [--json]",
     "python -m backend.evaluate --run workspace/runs/sft --learning --checkpoint final --json", None),
    (".venv/bin/python -m backend.export --checkpoint workspace/runs/<id>/final --out merged --merge",
     ".venv/bin/python -m backend.export --checkpoint workspace/runs/sft/final --out merged --merge", None),
    ("python -m backend.export --checkpoint workspace/runs/<run-id>/final --out workspace/exports/my-model"
     " [--merge] [--base FOLDER_OR_HUB_ID] [--shard-size 2GB] [--dtype auto|bf16|fp16|fp32] [--overwrite]"
     " [--no-zip] [--json]",
     "python -m backend.export --checkpoint workspace/runs/sft/final --out workspace/exports/my-model"
     " --shard-size 2GB --dtype auto --no-zip --json", None),
    ("python -m backend.train --recipe demo-tiny --set stage=grpo --set dataset=demo --set \"rewards=[{kind: rouge_l}]\""
     " --set max_completion_length=16 --set learning_rate=2e-3 --set max_steps=24",
     "python -m backend.train --recipe demo-tiny --set stage=grpo --set dataset=demo"
     " --set \"rewards=[{{kind: rouge_l}}]\""  # {{ }}: str.format
     " --set max_completion_length=16 --set learning_rate=2e-3 --set max_steps=2", None),
    ("python -m backend.train --recipe demo-tiny --set stage=grpo --set dataset=demo --set max_steps=8"
     " --set 'reward_functions=[examples.custom_rewards:close_to_reference, examples.custom_rewards:one_line]'"
     " --set 'reward_weights=[1.0, 0.5]'",
     "python -m backend.train --recipe demo-tiny --set stage=grpo --set dataset=demo --set max_steps=2"
     " --set 'reward_functions=[examples.custom_rewards:close_to_reference, examples.custom_rewards:one_line]'"
     " --set 'reward_weights=[1.0, 0.5]'", None),
]

SERVER = "starts a server that runs until stopped; tests/serve/ start and query it"
NOT_RUN = {
    "make run": "sets up and opens the app, a server that runs until stopped (tests/test_app_startup.py starts it)",
    "make test": "the whole test suite (18-28 minutes on this host), of which this test is a part",
    ".venv/bin/python -m backend.serve --run workspace/runs/<run-id> --port 8000": SERVER,
    ".venv/bin/python -m backend.serve --run workspace/runs/<run-id> [--port 8000]": SERVER,
    "python -m torch.distributed.run --standalone --nproc-per-node=N -m backend.train ...":
        "a line of the process diagram: `...` stands for the worker's arguments (tests/test_runs_worker.py "
        "runs the worker under torchrun)",
    ".venv/bin/python -m backend.serve --folder ~/.cache/huggingface/hub/models--Org--Name/snapshots/<commit>"
    " --name Org-Name [--device cuda:0]": SERVER + " (tests/serve/test_local.py serves a hub snapshot with --folder)",
    "python bench/gpu_check.py": "needs a CUDA GPU",
    ".venv/bin/python -m backend.train --config run.yaml --sweep sweep.yaml":
        "trains one run per combination; tests/test_sweeps.py runs a 2x2 sweep through this command",
}


def not_run_reason(command: str) -> str | None:
    """Why a documented command is not run here (None: it is run, from RUNS)."""
    if "--gguf" in command:
        return ("GGUF needs a model llama.cpp's converter accepts, and the demo model's own tokenizer is refused; "
                "tests/test_export_gguf.py, test_chat_gguf.py and serve/test_gguf.py run these commands' code "
                "on SmolLM2 cut to two layers")
    if command in NOT_RUN:
        return NOT_RUN[command]
    if "--judge " in command:
        return ("needs a judge: an OpenAI-compatible server; tests/test_judge_http.py runs these flags against a real "
                "local server, tests/test_judge_starter.py against backend.serve answering as the starter")
    if "--print-judge-prompts" in command:
        return "R stands for a run folder; tests/test_judge_logic.py runs it and reads the templates it prints"
    if re.search(r"\bbench/\S+\.py\b", command):
        return ("a benchmark: minutes to hours of measurement on real-size models or large files, some writing "
                "docs/*.json; the script must exist (test_benchmark_scripts_exist)")
    return None


def code_blocks(text: str) -> list[list[str]]:
    """The lines of each shell block: fenced without a language or as bash/sh, and indented by 4 spaces."""
    blocks, lines, i, after_blank = [], text.splitlines(), 0, True
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            language, body, i = line[3:].strip(), [], i + 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            if language in SHELL_BLOCKS:
                blocks.append(body)
            after_blank, i = False, i + 1
            continue
        if line.startswith("    ") and after_blank:
            body = []
            while i < len(lines) and (lines[i].startswith("    ") or not lines[i].strip()):
                body.append(lines[i][4:])
                i += 1
            blocks.append(body)
            after_blank = False
            continue
        after_blank = not line.strip()
        i += 1
    return blocks


def block_commands(block: list[str]) -> list[str]:
    """Commands of a block: continuation lines joined, ` # comments` dropped, spaces collapsed."""
    joined, current = [], ""
    for line in block:
        current += line.strip()
        if current.endswith("\\"):
            current = current[:-1].rstrip() + " "
            continue
        joined.append(current)
        current = ""
    commands = [" ".join(re.sub(r"\s+#\s.*$", "", c).split()) for c in joined]
    return [c for c in commands if COMMAND.match(c + " ")]


def documented_commands() -> list[tuple[str, str]]:
    return [(doc.relative_to(REPO).as_posix(), command)
            for doc in DOCS for block in code_blocks(doc.read_text(encoding="utf-8"))
            for command in block_commands(block)]


def test_every_documented_command_is_run_or_has_a_reason():
    documented = {command for _, command in documented_commands()}
    runs = {doc for doc, _, _ in RUNS}
    unlisted = [f"{doc}: {command}" for doc, command in documented_commands()
                if command not in runs and not_run_reason(command) is None]
    assert not unlisted, "documented commands neither in RUNS nor with a reason not to run:\n" + "\n".join(unlisted)
    both = [c for c in runs if not_run_reason(c) is not None]
    assert not both, f"in RUNS and also not run: {both}"
    stale = sorted((runs | set(NOT_RUN)) - documented)
    assert not stale, f"listed here but no longer in the docs (update the lists): {stale}"


def test_every_run_command_fills_from_the_runs_before_it():
    """A command's placeholders name runs bound earlier; a literal brace is written {{ }} (str.format)."""
    bound: dict[str, str] = {}
    for documented, command, bind in RUNS:
        try:
            command.format(**bound)
        except (KeyError, IndexError, ValueError) as error:
            pytest.fail(f"{documented}: its run command does not fill ({error!r}); write a literal brace as {{{{ }}}}")
        if bind:
            bound[bind] = f"run-of-{bind}"


def test_the_block_reader_finds_fenced_indented_and_continued_commands():
    text = ("Intro\n\n```bash\npython -m a --x 1   # comment\nmake run\n```\n\n```python\nprint(1)\n```\n"
            "\n    OMP_NUM_THREADS=1 nice -n 5 .venv/bin/python bench/b.py --y \\\n        --z\n\ntext\n")
    assert [c for b in code_blocks(text) for c in block_commands(b)] == [
        "python -m a --x 1", "make run", "OMP_NUM_THREADS=1 nice -n 5 .venv/bin/python bench/b.py --y --z"]


def test_benchmark_scripts_exist():
    scripts = {m for _, c in documented_commands() for m in re.findall(r"\bbench/\S+\.py\b", c)}
    assert scripts and not [s for s in scripts if not (REPO / s).is_file()]


# data.json of the README: what check flags (exit 1: error-severity findings) and fix repairs.
DATA = """[
  {"instruction": "What is the capital of <b>France</b>?", "output": "Paris."},
  {"instruction": "What is the capital of <b>France</b>?", "output": "Paris."},
  {"instruction": "Who are you?", "output": "I am {{name}}."},
  {"instruction": "What colour is the sky?", "output": "Blue."}
]
"""


@pytest.mark.slow
@pytest.mark.timeout(3600)  # every documented command in turn: 502 s at load 6 on 2 cores
def test_documented_commands_run_as_written(tmp_path, subprocess_env, demo_model_dir, starter_model_dir,
                                            gemma_model_dir, warm_answers):
    """Each command of RUNS in one workspace (./workspace, the default), in order: exit code 0."""
    workspace = tmp_path / "workspace"
    (workspace / "models").mkdir(parents=True)
    seed_answers(workspace / "datasets", warm_answers)  # as the app's start leaves a workspace
    for name, folder in (("demo", demo_model_dir), ("smollm2-135m-instruct", starter_model_dir),
                         ("gemma-3-270m", gemma_model_dir)):
        (workspace / "models" / name).symlink_to(folder, target_is_directory=True)
    (tmp_path / "data.json").write_text(DATA, encoding="utf-8")
    env = {k: v for k, v in subprocess_env.items() if k != "FINETUNE_STUDIO_WORKSPACE"}
    runs_dir, bound, failed, ran = workspace / "runs", {}, [], set()
    for documented, command, bind in RUNS:
        command = PYTHON.sub(lambda m: m.group(1) + shlex.quote(sys.executable) + " ", command.format(**bound))
        if command in ran and not bind:
            continue  # two docs' spellings of one command (`python` and `.venv/bin/python`): run once
        ran.add(command)
        before = set(runs_dir.iterdir()) if runs_dir.is_dir() else set()
        # No timeout: each ends on its own; a slow machine is still a passing one.
        done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True)
        # `backend.data check` answers 1 for a file with error-severity findings (this one has them).
        if done.returncode not in ((0, 1) if " backend.data check " in command else (0,)):
            failed.append(f"{documented}\n  exit {done.returncode}: {(done.stderr or done.stdout)[-1500:]}")
        if bind:
            made = sorted(set(runs_dir.iterdir()) - before)
            assert len(made) == 1, f"{documented} made {made}"
            bound[bind] = made[0].name
    assert not failed, "documented commands that fail:\n" + "\n\n".join(failed)
