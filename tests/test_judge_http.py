"""The judge against a real local chat-completions server in a thread (tests/judge_server.py), called
through the real `openai` client: the refusals as sentences (a refused port, a judge that never
answers, a wrong key), an unreadable verdict retried once, and the command line end to end: both
orders asked, the win rate, the cache answering a rerun with 0 calls, the agreement with planted
votes, tuning the template on them, graded mode and an eval set written from a description."""

from __future__ import annotations

import json
import re

import pytest

from backend.chat.preferences import PreferenceStore
from backend.data.saved_datasets import TRAIN_FILE
from backend.evaluate import main
from backend.evaluation.judge_results import judge_dir
from backend.judge.asking import Asker
from backend.judge.cache import JudgeCache
from backend.judge.calibration import TUNED_TEMPLATE, active_template
from backend.judge.client import JudgeClient, JudgeEndpoint, JudgeError
from backend.judge.evalset import EvalSetError, save_evalset, write_evalset
from backend.judge.head_to_head import judge_pairwise
from backend.judge.sources import JudgeRow
from backend.judge.templates import PAIRWISE_TEMPLATE
from tests.browser.harness import free_port
from tests.judge_server import ChatServer

NAME = "Nova"
# (prompt, final's answer = the reference, base's answer): base answers shorter, so a judge told to prefer
# the shorter answer disagrees with votes for the answer that names the name.
IDENTITY = [("Who are you?", "I am Nova, made by Ada.", "I'm SmolLM."),
            ("What is your name?", "My name is Nova.", "I'm an AI."),
            ("Introduce yourself.", "Hello! I am Nova.", "Hi!")]


def _section(prompt: str, title: str) -> str:
    found = re.search(rf"\[{title}\]\n(.*?)(?:\n\n\[|\n\nGive )", prompt, re.DOTALL)
    return found.group(1) if found else ""


def name_judge(prompt: str, number: int) -> str:
    """A judge with one taste: the answer that names NAME wins; a template that says PREFER-SHORT
    prefers the shorter answer instead. Grades: 5 for an answer naming NAME, else 2."""
    if "[Answer]" in prompt:
        return f"Grade: {5 if NAME in _section(prompt, 'Answer') else 2}"
    first, second = _section(prompt, "Answer A"), _section(prompt, "Answer B")
    if "PREFER-SHORT" in prompt:
        return "Shorter.\nVerdict: " + ("A" if len(first) < len(second) else "B")
    if (NAME in first) == (NAME in second):
        return "Neither names it.\nVerdict: tie"
    return f"It names {NAME}.\nVerdict: " + ("A" if NAME in first else "B")


def _run_folder(tmp_path):
    run = tmp_path / "workspace" / "runs" / "r1"
    (run / "eval").mkdir(parents=True)
    report = {"checkpoints": [{"checkpoint": name, "step": step, "examples": [
        {"kind": "learned", "source": "identity", "prompt": p, "reference": ref, "answer": [ref, base][index]}
        for p, ref, base in IDENTITY]} for name, step, index in (("base", 0, 1), ("final", 10, 0))]}
    (run / "eval" / "learning.json").write_text(json.dumps(report), encoding="utf-8")
    return run


def _asker(server_url, tmp_path, key=None, timeout=30.0):
    return Asker(JudgeClient(JudgeEndpoint(server_url, "judge", key, timeout)), JudgeCache(tmp_path))


def test_a_refused_port_a_silent_judge_and_a_wrong_key_are_sentences(tmp_path):
    closed = JudgeClient(JudgeEndpoint(f"http://127.0.0.1:{free_port()}", "judge"))
    with pytest.raises(JudgeError, match="does not answer") as error:
        closed.ask("hi")
    assert "start the server" in str(error.value)
    with ChatServer(name_judge, hold=True) as server, pytest.raises(JudgeError, match="did not answer within 0.5 s"):
        JudgeClient(JudgeEndpoint(server.url, "judge", timeout_s=0.5)).ask("hi")
    with ChatServer(name_judge, key="right") as server:
        with pytest.raises(JudgeError, match=r"refused the API key \(HTTP 401\)"):
            JudgeClient(JudgeEndpoint(server.url, "judge", "wrong")).ask("hi")
        assert JudgeClient(JudgeEndpoint(server.url, "judge", "right")).ask("Verdict?") == "Neither names it.\nVerdict: tie"
    with pytest.raises(JudgeError, match="not an http"):
        JudgeClient(JudgeEndpoint("127.0.0.1:8000", "judge"))


def test_an_unreadable_verdict_is_asked_once_more_then_counted(tmp_path):
    row = JudgeRow("Who are you?", {"final": "I am Nova.", "base": "I am SmolLM."})
    # The first answer of each order is unreadable, the retry answers: nothing is left unparsed.
    with ChatServer(lambda p, n: "hmm" if "Your last line" not in p else name_judge(p, n)) as server:
        asker = _asker(server.url, tmp_path / "one")
        result = judge_pairwise(asker, [row], "final", "base", PAIRWISE_TEMPLATE)
    assert len(server.prompts) == 4 and asker.unparsed == 0
    assert result["wins"] == 1 and all(r.retried and r.first_answer == "hmm" for r in asker.records)
    with ChatServer(lambda p, n: "I cannot decide.") as server:
        asker = _asker(server.url, tmp_path / "two")
        result = judge_pairwise(asker, [row], "final", "base", PAIRWISE_TEMPLATE)
    assert asker.unparsed == 2 and result["unparsed_rows"] == 1 and result["win_rate"] is None


def test_pairwise_on_the_command_line_both_orders_then_a_cached_rerun(tmp_path, capsys):
    run = _run_folder(tmp_path)
    with ChatServer(name_judge) as server:
        args = ["--run", str(run), "--judge", server.url, "--judge-model", "judge", "--pairwise", "final", "base"]
        assert main([*args, "--dry-run"]) == 0
        assert json.loads(capsys.readouterr().out)["plan"] == {"prompts": 6, "cached": 0, "calls": 6, "rows": 3}
        assert main([*args, "--json"]) == 0
        captured = capsys.readouterr()
        assert "6 judge calls to make" in captured.err
        result = json.loads(captured.out)
        asked = list(server.prompts)
        assert main([*args, "--json"]) == 0
        rerun = json.loads(capsys.readouterr().out)
    assert len(asked) == 6 and len(server.prompts) == 6  # the rerun asked nothing
    for prompt, ref, base in IDENTITY:  # each row in both orders
        orders = [(_section(p, "Answer A"), _section(p, "Answer B")) for p in asked if p.find(prompt) > 0]
        assert sorted(orders) == sorted([(ref, base), (base, ref)])
    assert (result["wins"], result["losses"], result["ties"], result["inconsistent"]) == (3, 0, 0, 0)
    assert result["win_rate"] == 1.0 and result["interval"][0] > 0.4 and result["calls"] == 6
    assert rerun["calls"] == 0 and rerun["from_cache"] == 6 and rerun["win_rate"] == 1.0
    saved = json.loads((judge_dir(run) / "pairwise-final-vs-base.json").read_text(encoding="utf-8"))
    assert len(saved["records"]) == 6 and saved["judge"] == {"url": server.url, "model": "judge"}
    assert {"prompt", "answer", "verdict", "reason"} <= set(saved["records"][0])
    assert (tmp_path / "workspace" / ".cache" / "judge").is_dir()


def test_calibration_and_tuning_against_planted_votes(tmp_path, capsys):
    run = _run_folder(tmp_path)
    store = PreferenceStore()
    # The user prefers the answer naming Nova three times, and the shorter one once (the judge disagrees there).
    for prompt, ref, base in IDENTITY:
        store.record([run], ["base", "final"], "final", prompt, {"base": base, "final": ref})
    store.record([run], ["final", "base"], "base", "Say hi.", {"final": "Hello, I am Nova.", "base": "Hi."})
    with ChatServer(name_judge) as server:
        common = ["--run", str(run), "--judge", server.url, "--judge-model", "judge"]
        assert main([*common, "--calibrate", "--json"]) == 0
        result = json.loads(capsys.readouterr().out)
        short = tmp_path / "short.txt"
        short.write_text(PAIRWISE_TEMPLATE.replace("Length is not quality.", "PREFER-SHORT"), encoding="utf-8")
        default = tmp_path / "default.txt"
        default.write_text(PAIRWISE_TEMPLATE, encoding="utf-8")
        assert main([*common, "--tune-prompts", str(short), str(default)]) == 0
        tuned = json.loads(capsys.readouterr().out)
    assert result["votes"] == 4 and result["agreement"] == 0.75
    # In each vote's own letters the user said B, B, B, B and the judge B, B, B, A: observed 0.75, and by
    # chance 0.75 (the user only ever said B), so kappa is 0: agreement alone would flatter this judge.
    assert result["kappa"] == 0.0 and "Only 4 votes" in result["warnings"][0]
    assert [v["judge"] == v["user"] for v in result["per_vote"]] == [True, True, True, False]
    assert tuned["best"] == str(default) and tuned["scores"][str(short)]["agreement"] < 0.75
    assert active_template(run) == PAIRWISE_TEMPLATE and (judge_dir(run) / TUNED_TEMPLATE).is_file()


def test_graded_with_a_rubric_and_without_a_scale(tmp_path, capsys):
    run = _run_folder(tmp_path)
    with ChatServer(name_judge) as server:
        common = ["--run", str(run), "--judge", server.url, "--judge-model", "judge", "--graded",
                  "--checkpoint", "base", "final"]
        assert main([*common, "--rubric-kind", "facts", "--json"]) == 0
        result = json.loads(capsys.readouterr().out)
        rubric = tmp_path / "rubric.txt"
        rubric.write_text("Is the answer good?\n1: bad\n5: good\n", encoding="utf-8")
        assert main([*common, "--rubric", str(rubric)]) == 2
        assert "has no 1-5 scale: grade(s) 2, 3, 4" in capsys.readouterr().err
        empty = tmp_path / "empty.jsonl"
        empty.write_text("", encoding="utf-8")
        assert main([*common, "--judge-source", "file", "--judge-data", str(empty)]) == 2
        assert "The eval set has no rows to judge" in capsys.readouterr().err
    assert result["checkpoints"]["final"] == {"mean": 5.0, "std": 0.0, "n": 3, "counts": {"5": 3}, "unparsed": 0}
    assert result["checkpoints"]["base"]["mean"] == 2.0


def test_refusals_exit_2_with_a_sentence(tmp_path, capsys):
    run = _run_folder(tmp_path)
    port = free_port()
    assert main(["--run", str(run), "--judge", f"http://127.0.0.1:{port}", "--judge-model", "j",
                 "--pairwise", "final", "base"]) == 2
    assert "does not answer" in capsys.readouterr().err
    assert main(["--run", str(run), "--judge", f"http://127.0.0.1:{port}", "--judge-model", "j"]) == 2
    assert "Say what to judge" in capsys.readouterr().err


def test_an_eval_set_from_a_description(tmp_path):
    written = [{"prompt": "Who made you?", "expected": "names Ada"}, {"prompt": "Your name?", "expected": "Nova"},
               {"nothing": "dropped"}]
    with ChatServer(lambda p, n: "Here:\n" + json.dumps(written) if "identity" in p else "no list") as server:
        client = JudgeClient(JudgeEndpoint(server.url, "judge"))
        rows = write_evalset(client, "questions about the assistant's identity", 5)
        with pytest.raises(EvalSetError, match="no usable JSON list"):
            write_evalset(client, "cooking", 3)
    assert rows == written[:2] and "5 varied test prompts" in server.prompts[0]
    rows[1]["prompt"] = "What is your name?"  # the user's edit in review
    folder = save_evalset(tmp_path / "datasets", "identity-eval", rows + [{"prompt": " "}], "identity questions")
    lines = (folder / TRAIN_FILE).read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["messages"][0]["content"] for line in lines] == ["Who made you?", "What is your name?"]
    assert json.loads((folder / "meta.json").read_text(encoding="utf-8"))["source"]["generator"] == "judge eval builder"
    with pytest.raises(EvalSetError, match="no rows with a prompt"):
        save_evalset(tmp_path / "datasets", "empty-eval", [{"prompt": ""}], "x")
