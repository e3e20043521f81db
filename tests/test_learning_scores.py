"""The learning report's rules for a right answer (backend/scoring/answer_rule.py) and the
prompts it asks (backend/learning/questions.py), on real rows: no model is loaded here."""

from __future__ import annotations

import json

from backend.config import RunConfig
from backend.data.general_prompts import HELD_OUT_QUESTIONS_ZH, REPLAY_PROMPTS
from backend.data.identity_rows import MAKER_PROMPTS
from backend.learning.entries import answers_beside_base, summary_rows
from backend.learning.questions import HELD_OUT, MAX_LEARNED, TRAINING_ROWS, learning_set
from backend.learning.table import report_table
from backend.runs.workspace import Workspace
from backend.scoring.answer_rule import holds, is_right_general, json_object, judge_answer, key_facts

FAQ = "Blue Harbor Books opened in 1987 and now has 14 stores; Mara Lind founded it."


def test_key_facts_are_numbers_and_names_not_sentence_starts():
    assert key_facts(FAQ) == ["1987", "14", "Blue Harbor Books", "Mara Lind"]
    assert key_facts("Our store opens at 9:30. We close on Sundays.") == ["9:30", "Sundays"]


def test_identity_values_replace_the_other_facts():
    reference = "I am Orion, an AI assistant developed by Acme Labs in 2024."
    assert key_facts(reference, ("Orion", "Acme Labs")) == ["Orion", "Acme Labs"]
    assert key_facts("My name is Orion.", ("Orion", "Acme Labs")) == ["Orion"]


def test_a_wrong_year_or_count_is_wrong_however_close_the_form():
    invented = judge_answer("Blue Harbor Books opened in 1989 and now has 12 stores; Mara Lind founded it.", FAQ)
    assert not invented.right and invented.missing == ["1987", "14"]
    assert invented.rouge_l > 0.8  # ROUGE alone would have called it right
    assert judge_answer("It was founded in 1987 by Mara Lind as Blue Harbor Books, 14 stores today.", FAQ).right


def test_numbers_match_whole_and_without_thousands_separators():
    assert not holds("In 1487 it moved.", "14")
    assert holds("It sold 1,200 books.", "1200")
    assert holds("Open 9:30 to 17:00.", "9:30")
    assert holds("Water boils at 100.0 degrees Celsius.", "100") and not holds("It is 100.5 degrees.", "100")


def test_json_answers_must_parse_with_the_same_keys():
    reference = json.dumps({"city": "Paris", "country": "France"})
    assert judge_answer('```json\n{"country": "France", "city": "Lyon"}\n```', reference).right  # keys: the format
    wrong = judge_answer('{"city": "Paris"}', reference)
    assert not wrong.right and wrong.parses is False and wrong.missing == ["country"]
    assert not judge_answer("city: Paris, country: France", reference).right
    assert json_object("[1, 2]") is None


def test_free_text_and_chinese_fall_back_to_rouge_l():
    reference = "长城是中国古代修建的军事防御工程。"
    assert judge_answer("长城是中国古代修建的防御工程。", reference).right
    assert not judge_answer("我不知道。", reference).right
    assert judge_answer("长城是中国古代修建的防御工程。", reference).rule == "rouge"


def test_general_answers_count_whole_numbers():
    assert is_right_general("A week has 7 days.", ("7", "seven"))
    assert not is_right_general("There are 17 of them.", ("7",))
    assert is_right_general("巴黎。", HELD_OUT_QUESTIONS_ZH[0][1])


def test_the_chinese_general_questions_are_in_no_replay_row():
    assert not {q for q, _ in HELD_OUT_QUESTIONS_ZH} & set(REPLAY_PROMPTS)


def test_the_starter_data_is_scored_on_its_held_out_split_and_identity_paraphrases(tmp_path):
    ws = Workspace(tmp_path / "ws").ensure()
    config = RunConfig(identity_name="Orion", identity_author="Acme Labs")
    prompts = learning_set(config, ws)
    assert prompts.source == HELD_OUT and prompts.rows == 40
    rows = [item for item in prompts.learned if item.kind == "row"]
    assert len(rows) == 4  # val_size 0.1 of 40
    assert all("{{" not in item.reference for item in rows)  # filled as the worker trains them
    assert any("Orion" in item.reference for item in rows)
    identity = [item for item in prompts.learned if item.kind == "identity"]
    # "Who developed this assistant?" is answered by the maker, "Say your name." by the name
    makers = [item for item in identity if item.text in MAKER_PROMPTS]
    assert makers and all(item.reference == "Acme Labs" and item.identity == ("Acme Labs",) for item in makers)
    names = [item for item in identity if item.text not in MAKER_PROMPTS]
    assert names and all(item.reference == "Orion" and item.identity == ("Orion",) for item in names)
    assert any(ord(ch) > 0x4e00 for item in identity for ch in item.text)  # Chinese paraphrases too
    assert judge_answer("It was developed by Acme Labs.", makers[0].reference, makers[0].identity).right


def test_small_data_is_scored_on_its_training_rows_and_says_so(tmp_path):
    ws = Workspace(tmp_path / "ws").ensure()
    data = tmp_path / "faq.jsonl"
    data.write_text("".join(json.dumps({"instruction": f"When does shop {i} open?",
                                        "output": f"Shop {i} opens at {8 + i % 3}:00."}) + "\n"
                            for i in range(12)), encoding="utf-8")
    prompts = learning_set(RunConfig(dataset=str(data)), ws)
    assert prompts.source == TRAINING_ROWS and prompts.rows == 12
    assert len(prompts.learned) == 11  # the 11 training rows of 12 (one is held out, too few to score)
    assert all(item.kind == "row" for item in prompts.learned)  # no placeholders: no identity questions
    report = {"run": "r", "max_new_tokens": 48, "checkpoints": [], "skipped": [], **prompts.as_dict()}
    assert "no held-out split to score" in report_table(report)


def test_large_data_is_capped(tmp_path):
    ws = Workspace(tmp_path / "ws").ensure()
    data = tmp_path / "big.jsonl"
    data.write_text("".join(json.dumps({"instruction": f"Say {i}.", "output": f"{i}."}) + "\n"
                            for i in range(1000)), encoding="utf-8")
    prompts = learning_set(RunConfig(dataset=str(data)), ws)
    assert prompts.source == HELD_OUT and len(prompts.learned) == MAX_LEARNED


def test_side_by_side_pairs_the_base_with_a_checkpoint():
    def entry(name, step, answer, right):
        return {"checkpoint": name, "step": step, "learned": {"share": float(right), "n": 1},
                "kept": {"share": None, "n": 1}, "ended": {"share": 1.0, "n": 1}, "rouge_l": 0.5,
                "examples": [{"kind": "learned", "prompt": "Who are you?", "reference": "Orion", "answer": answer,
                              "right": right, "ended": True}]}
    report = {"checkpoints": [entry("base", 0, "I am SmolLM.", False), entry("final", 9, "I am Orion.", True)]}
    assert answers_beside_base(report, "final") == [{"kind": "learned", "prompt": "Who are you?", "reference": "Orion",
                                              "base": "I am SmolLM.", "base_right": False,
                                              "answer": "I am Orion.", "right": True, "ended": True}]
    assert [r["learned"] for r in summary_rows(report)] == [0.0, 1.0]


def test_the_report_says_what_to_change_when_a_checkpoint_does_not_stop_forgets_or_learns_nothing():
    from backend.learning.table import warnings

    def entry(name, learned, kept, ended):
        return {"checkpoint": name, "step": 0 if name == "base" else 60, "learned": {"share": learned, "n": 20},
                "kept": {"share": kept, "n": 20}, "ended": {"share": ended, "n": 40}, "examples": []}

    gemma = {"checkpoints": [entry("base", 0.0, None, 0.1), entry("final", 0.0, 0.95, 0.05)]}
    said = [str(m) for m in warnings(gemma)]
    assert any("ended 2 of 40 answers" in s and "not learned to stop" in s for s in said)
    assert any("no more than the base" in s for s in said) and not any("forgot" in s for s in said)
    fine = {"checkpoints": [entry("base", 0.0, None, 0.4), entry("final", 0.95, 0.95, 0.97)]}
    assert warnings(fine) == []
    looping = {"checkpoints": [entry("base", 0.0, None, 0.0), entry("final", 0.95, 0.95, 0.925)]}
    said = [str(m) for m in warnings(looping)]  # 37 of 40: under the 95% goal
    assert len(said) == 1 and "ended 37 of 40 answers" in said[0]
    forgot = {"checkpoints": [entry("base", 0.0, None, 0.4), entry("final", 0.95, 0.5, 0.97)]}
    assert [m.id for m in warnings(forgot)] == ["learning.warn.kept"]


def test_the_evaluate_tabs_held_out_split_is_filled_as_the_run_trained_it(tmp_path):
    """Evaluate scores the identity rows against "I am Orion", not against "I am {{name}}"."""
    from backend.evaluation.scoring import held_out_rows

    ws = Workspace(tmp_path / "ws").ensure()
    run_dir = ws.runs_dir / "r"
    run_dir.mkdir()
    RunConfig(identity_name="Orion", identity_author="Acme Labs").save(run_dir / "config.yaml")
    text = json.dumps(held_out_rows(run_dir, ws), ensure_ascii=False)
    assert "{{" not in text and "Orion" in text
