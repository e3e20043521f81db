"""The Evaluate tab's Judge section called with the values a browser sends, in-process: the number
of calls before anything starts (and 0 once the cache holds them), the refusals as sentences in
English and Chinese, and the run's judgements read back into the table, one row per checkpoint
for a graded one. The judge is the real local chat-completions server of tests/judge_server.py."""

from __future__ import annotations

import json

import pandas as pd

from backend.judge import runner
from backend.judge.templates import GRADED_TEMPLATE, PAIRWISE_TEMPLATE, RUBRICS
from backend.runs.workspace import Workspace
from tests.browser.harness import free_port
from tests.judge_server import ChatServer
from tests.test_judge_http import _run_folder, name_judge
from ui.context import UIContext
from ui.i18n import merge_texts
from ui.panels import evalset_panel, judge_panel
from ui.tabs import evaluate

SKIP = {"__type__": "update"}


def _ctx(tmp_path):
    run = _run_folder(tmp_path)  # tmp_path/workspace/runs/r1 with a learning report
    return UIContext(workspace=Workspace(tmp_path / "workspace"), texts=merge_texts(evaluate.TEXT), i18n=None), run


def values(url, mode="pairwise", **changes):
    chosen = {"url": url, "model": "judge", "key": "", "mode": mode, "a": "final", "b": "base", "names": "",
              "source": "identity", "rubric_kind": "facts", "limit": 0, **changes}
    return list(chosen.values())


def test_the_calls_are_counted_before_and_after_a_judgement(tmp_path):
    ctx, run = _ctx(tmp_path)
    (run / "summary.json").write_text(json.dumps({"global_step": 10}), encoding="utf-8")
    with ChatServer(name_judge) as server:
        assert judge_panel.count_calls(ctx, "en", "r1", *values(server.url)) == (
            "6 judge calls to make (0 of 6 prompts from the cache, 3 rows).")
        runner.run_judgement(runner.prepare_judgement(judge_panel.judgement(ctx, "r1", *values(server.url))))
        graded = judge_panel.judgement(ctx, "r1", *values(server.url, "graded", names="base final"))
        runner.run_judgement(runner.prepare_judgement(graded))
        assert judge_panel.count_calls(ctx, "zh", "r1", *values(server.url)).startswith("需要调用评判模型 0 次")
    stage, table, figure, seen = judge_panel.poll(ctx, "en", "r1")
    assert judge_panel.poll(ctx, "en", "r1", seen)[1:] == (SKIP, SKIP, seen)  # nothing new: nothing redrawn
    # The chart: the win rate at final's step (10, summary.json), the mean grades at base's (0) and final's.
    assert list(judge_panel.step_points(run)) == ["win rate over base (judge)", "mean grade (judge)"]
    assert [(list(t.x), list(t.y)) for t in figure.data] == [([10], [1.0]), ([0, 10], [2.0, 5.0])]
    assert stage == "" and list(table.columns)[:3] == ["judgement", "checkpoint", "win rate / mean grade / agreement"]
    rows = table.values.tolist()
    assert rows[0][:3] == ["pairwise-final-vs-base", "final vs base", "1.00"]
    assert [row[1:3] for row in rows[1:]] == [["base", "2.00"], ["final", "5.00"]]


def test_refusals_are_sentences_in_both_languages(tmp_path):
    ctx, run = _ctx(tmp_path)
    closed = f"http://127.0.0.1:{free_port()}"
    assert judge_panel.count_calls(ctx, "en", None, *values(closed)) == "Pick a run first."
    said = judge_panel.start(ctx, "en", "r1", *values("127.0.0.1:8000"))
    assert said.startswith("Cannot judge: The judge URL '127.0.0.1:8000' is not an http://")
    said = judge_panel.start(ctx, "zh", "r1", *values(closed, a="checkpoint-9"))
    assert said.startswith("无法评判：评测集没有可评判的行") and "checkpoint-9" in said
    said = judge_panel.count_calls(ctx, "en", "r1", *values(closed, "calibration"))
    assert said == "Cannot judge: Run r1 has no blind votes on two answers to the same conversation to compare " \
                   "the judge with; vote in the Chat tab's blind comparison first."
    assert not (run / "eval" / "judge" / "progress.json").exists()  # nothing was started


def test_a_background_judgement_reports_and_fills_the_table(tmp_path, starts_processes):
    from tests.polling import wait_for

    ctx, run = _ctx(tmp_path)
    with ChatServer(name_judge, key="secret-key") as server:
        said = judge_panel.start(ctx, "en", "r1", *values(server.url, key="secret-key"))
        assert said.startswith("The judge started in the background (pid ")
        wait_for(lambda: judge_panel.poll(ctx, "en", "r1")[0] in ("done", "完成")
                 or judge_panel.poll(ctx, "en", "r1")[0].startswith("The judge failed"), "the judge job")
        stage, table, _, _ = judge_panel.poll(ctx, "en", "r1")
    assert stage == "done", (run / "eval" / "judge" / "judge.log").read_text(encoding="utf-8")[-2000:]
    assert table.values.tolist()[0][:3] == ["pairwise-final-vs-base", "final vs base", "1.00"]
    assert len(server.prompts) == 6  # the key reached the job through its environment
    command = json.loads((run / "eval" / "judge" / "progress.json").read_text(encoding="utf-8"))["command"]
    assert "--judge" in command and "secret-key" not in " ".join(command)


def test_the_prompt_and_rubric_boxes_are_what_the_judge_is_asked(tmp_path):
    ctx, run = _ctx(tmp_path)
    assert judge_panel.default_texts(ctx, "r1", "pairwise", "facts") == (PAIRWISE_TEMPLATE, "")
    assert judge_panel.default_texts(ctx, "r1", "graded", "format") == (GRADED_TEMPLATE, RUBRICS["format"])
    (run / "eval" / "judge").mkdir(parents=True)
    (run / "eval" / "judge" / "pairwise_template.txt").write_text("TUNED {prompt} {answer_a} {answer_b}")
    assert judge_panel.default_texts(ctx, "r1", "pairwise", "facts")[0].startswith("TUNED")  # calibration kept it

    edited = "PREFER-SHORT {prompt}\n[Answer A]\n{answer_a}\n[Answer B]\n{answer_b}\nVerdict?"
    scale = "1: bad\n2: weak\n3: fair\n4: good\n5: EDITED-TOP"
    with ChatServer(name_judge) as server:
        judgement = judge_panel.judgement(ctx, "r1", *values(server.url), edited, "")
        runner.run_judgement(runner.prepare_judgement(judgement))
        assert server.prompts and all(p.startswith("PREFER-SHORT ") for p in server.prompts)
        graded = judge_panel.judgement(ctx, "r1", *values(server.url, "graded", names="final"), "", scale)
        asked = len(server.prompts)
        runner.run_judgement(runner.prepare_judgement(graded))
        assert all("5: EDITED-TOP" in p for p in server.prompts[asked:]) and len(server.prompts) > asked
        said = judge_panel.count_calls(ctx, "en", "r1", *values(server.url), "Which is better?", "")
        assert said.startswith("Cannot judge:") and "{prompt} {answer_a} {answer_b}" in said, said
        said = judge_panel.count_calls(ctx, "zh", "r1", *values(server.url, "graded"), "", "good or bad")
        assert said.startswith("无法评判：") and "1, 2, 3, 4, 5" in said


EVALSET = [{"prompt": "Name a prime number above 10.", "expected": "A prime such as 11 or 13."},
           {"prompt": "What is 7 times 6?", "expected": "42"},
           {"prompt": "Spell 'cat' backwards.", "expected": "tac"}]


def test_an_eval_set_is_written_reviewed_and_saved_as_a_dataset(tmp_path):
    ctx, _ = _ctx(tmp_path)
    with ChatServer(lambda prompt, n: "Here you are:\n" + json.dumps(EVALSET)) as server:
        waiting = evalset_panel.asking(ctx, "en", server.url, "judge", "", 3)
        assert waiting == f"Asking judge at {server.url} for 3 prompts (one call, up to 120 s)..."
        status, rows = evalset_panel.write_rows(ctx, "en", server.url, "judge", "", "arithmetic and words", 3)
        assert server.prompts[0].startswith("Write 3 varied test prompts") and "arithmetic and words" in server.prompts[0]
    assert status.startswith("3 prompts written")
    assert rows == [[r["prompt"], r["expected"]] for r in EVALSET]
    # The user's review, as the browser sends the table: one prompt emptied (left out), one edited.
    reviewed = pd.DataFrame([rows[0], ["", rows[1][1]], [rows[2][0], "tac (reversed)"]], columns=["prompt", "expected"])
    said = evalset_panel.save_rows(ctx, "en", "words-eval", reviewed, "arithmetic and words")
    assert said.startswith("Saved 2 rows as dataset words-eval")
    saved = [json.loads(line) for line in (ctx.workspace.datasets_dir / "words-eval" / "data.jsonl").read_text(
        encoding="utf-8").splitlines()]
    assert [r["messages"][1]["content"] for r in saved] == ["A prime such as 11 or 13.", "tac (reversed)"]
    # Refusals, each a sentence: the same name again, no name, nothing kept, no description, a judge without a list.
    assert evalset_panel.save_rows(ctx, "en", "words-eval", reviewed, "").startswith("Cannot write the eval set:")
    assert evalset_panel.save_rows(ctx, "zh", "", reviewed, "") == "请先给数据集起个名字。"
    emptied = pd.DataFrame([["", "x"]], columns=["prompt", "expected"])
    assert evalset_panel.save_rows(ctx, "en", "none", emptied, "").startswith("Cannot write the eval set:")
    with ChatServer(lambda prompt, n: "I cannot write JSON.") as server:
        assert evalset_panel.write_rows(ctx, "en", server.url, "judge", "", " ", 3)[0].startswith(
            "Cannot write the eval set:")
        status, rows = evalset_panel.write_rows(ctx, "zh", server.url, "judge", "", "arithmetic", 3)
        assert status.startswith("无法编写评测集：") and rows == SKIP and len(server.prompts) == 2  # asked once more
