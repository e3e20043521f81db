"""Mechanics on the real starter (slow): the starter run's base model (SmolLM2-135M-Instruct), served by
this project's own server (`python -m backend.serve`), judges final against base on the held-out identity
prompts of the run's learning report, through the command line. It checks the mechanics, not the judge's
quality: both orders are asked, a rerun is answered by the cache with 0 calls, and the agreement with
planted votes is what the verdicts in the result file give. The measured figures are printed (-s) and
quoted in docs/EVALUATE_EXPORT.md."""

from __future__ import annotations

import json

import pytest

from backend.chat.preferences import PreferenceStore
from backend.evaluate import main
from backend.evaluation.judge_results import judge_dir
from backend.judge.estimates import cohen_kappa
from backend.judge.sources import learning_rows
from tests.serve.support import ServerProcess

ROWS = 3  # identity prompts judged: 6 calls on a CPU judge
# A template a 135M model answers with a letter (the default one it answers in character, unreadable):
# the edited-template path of --judge-prompt, with 8 tokens an answer.
SHORT_TEMPLATE = """Question: {prompt}
Reference answer: {reference}

Answer A: {answer_a}
Answer B: {answer_b}

Which answer matches the reference answer better? Reply with one letter, A or B."""


@pytest.fixture(scope="module")
def starter_judge(starter_short_run, starts_processes):
    process = ServerProcess(starter_short_run).start()
    yield process
    assert process.stop() == 0, process.tail()


def test_the_starter_base_judges_final_against_base(starter_short_run, starter_judge, capsys, tmp_path):
    run = starter_short_run
    template = tmp_path / "short.txt"
    template.write_text(SHORT_TEMPLATE, encoding="utf-8")
    common = ["--run", str(run), "--judge", starter_judge.url, "--judge-model", "base", "--judge-max-tokens", "8",
              "--max-samples", str(ROWS), "--judge-prompt", str(template), "--json"]
    assert main([*common, "--pairwise", "final", "base"]) == 0, capsys.readouterr().err
    first = json.loads(capsys.readouterr().out)
    with capsys.disabled():
        print("\npairwise:", {k: first[k] for k in ("rows", "wins", "losses", "ties", "inconsistent", "identical",
                                                    "unparsed_rows", "win_rate", "interval", "calls")})
        print("verdicts:", [(r["verdict"], r["answer"]) for r in
                            json.loads((judge_dir(run) / "pairwise-final-vs-base.json").read_text())["records"]])
    saved = json.loads((judge_dir(run) / "pairwise-final-vs-base.json").read_text(encoding="utf-8"))
    asked = saved["records"]
    differing = [row for row in first["per_row"] if row["answer_a"].strip() != row["answer_b"].strip()]
    assert len(asked) == 2 * len(differing) > 0  # each differing row in both orders
    for row in differing:  # one prompt shows final's answer as A, the other base's
        shown = [r["prompt"].split("Answer A: ", 1)[1] for r in asked if row["prompt"] in r["prompt"]]
        assert len(shown) == 2 and sorted(s.startswith(row["answer_a"]) for s in shown) == [False, True]
    assert first["calls"] >= len(asked)

    assert main([*common, "--pairwise", "final", "base"]) == 0
    rerun = json.loads(capsys.readouterr().out)
    assert rerun["calls"] == 0 and rerun["from_cache"] == first["calls"]
    assert rerun["win_rate"] == first["win_rate"]

    # Planted votes: the user prefers final (the new name) on every identity prompt judged.
    rows = learning_rows(run, identity_only=True)[:ROWS]
    store = PreferenceStore()
    for row in rows:
        store.record([run], ["final", "base"], "final", row.prompt, {k: row.answers[k] for k in ("final", "base")})
    assert main([*common, "--calibrate"]) == 0
    calibration = json.loads(capsys.readouterr().out)
    judged = [v for v in calibration["per_vote"] if v["judge"] is not None]
    assert calibration["votes"] == len(judged)
    assert calibration["agreement"] == pytest.approx(sum(v["judge"] == v["user"] for v in judged) / len(judged))
    assert calibration["kappa"] == pytest.approx(cohen_kappa([v["judge"] for v in judged],
                                                             [v["user"] for v in judged]))
    assert any("too few to tell" in w for w in calibration["warnings"])  # 6 votes < 20
    with capsys.disabled():
        print("calibration:", {k: calibration[k] for k in ("votes", "agreement", "kappa")})
