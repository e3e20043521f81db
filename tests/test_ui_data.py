"""Data tab handlers against the real backend/data and the demo tokenizer."""

from __future__ import annotations

import hashlib
import json
import re
from html import escape

import pytest

from ui import data_session as ds
from ui.context import UIContext
from ui.i18n import build_i18n, merge_texts
from ui.shell import TEXT as SHELL_TEXT
from ui.tabs import data


@pytest.fixture
def ctx(workspace):
    texts = merge_texts(SHELL_TEXT, data.TEXT)
    return UIContext(workspace=workspace, texts=texts, i18n=build_i18n(texts))


@pytest.fixture
def identity(shared_data):
    return shared_data / "identity.json"


def _counts(summary) -> dict[str, int]:
    return dict(zip(summary.iloc[:, 1], summary.iloc[:, 2]))


def _expected_identity(path):
    """Independent counts: rows with {{...}} anywhere; rows whose prompt has more than one distinct answer."""
    rows = json.loads(path.read_text(encoding="utf-8"))
    placeholder = sum(1 for r in rows if re.search(r"\{\{[^{}]+\}\}", json.dumps(r, ensure_ascii=False)))
    answers: dict[tuple, set] = {}
    for r in rows:
        answers.setdefault((r["instruction"].strip(), r.get("input", "").strip()), set()).add(r["output"].strip())
    conflicting = sum(1 for r in rows if len(answers[(r["instruction"].strip(), r.get("input", "").strip())]) > 1)
    return len(rows), placeholder, conflicting


def test_upload_shows_format_counts_and_fix_buttons(ctx, identity):
    total, placeholder, conflicting = _expected_identity(identity)
    out = data.open_upload(ctx, "en", str(identity), "demo", 256, None)
    assert "alpaca" in out["status"] and f"{total} rows in the file" in out["status"]
    counts = _counts(out["summary"])
    # {{name}} / {{author}} are what Train fills from the form (here its defaults): no error, nothing to fill.
    assert counts["placeholder"] == 0 and counts["identity_fill"] == placeholder > 0
    assert f"Train fills these in {placeholder} rows" in out["status"] and "'Nova' (identity_name)" in out["status"]
    assert counts["conflicting_answers"] == conflicting > 0
    assert out["fix:fill"]["value"] == "Fill placeholders (0)" and out["fix:fill"]["interactive"] is False
    assert out["fix:conflicts_keep_first"]["interactive"] is True
    assert out["fix:drop_duplicates"]["interactive"] is False  # no duplicates in this file
    assert out["fill"] == ""  # no placeholder is left for the user to fill
    assert "Nova" in out["preview"] and "{{name}}" not in out["preview"]  # the rows as the run trains them
    assert out["mapping"] == "instruction=instruction, input=input, output=output"
    assert out["histogram"] is not None  # token lengths through the demo tokenizer
    assert out["preview"].count('class="ft-conv"') == ds.PAGE_SIZE


def test_fixes_compose_then_save_without_touching_the_file(ctx, identity, workspace):
    before = hashlib.sha256(identity.read_bytes()).hexdigest()
    total, placeholder, _ = _expected_identity(identity)
    state = data.open_upload(ctx, "en", str(identity), "demo", 256, None)["state"]
    out = data.apply_fix(ctx, "en", state, "fill", "name=Aria\nauthor=Open Lab")
    assert _counts(out["summary"])["placeholder"] == 0
    assert "Aria" in out["preview"] and "{{name}}" not in out["preview"]
    # The values written into the rows are not the Train form's: the fix says so, naming both.
    assert "filling {{name}} with 'Aria' differs from identity_name 'Nova'" in out["applied"]
    assert "filling {{author}} with 'Open Lab' differs from identity_author 'FineTune Studio'" in out["applied"]
    out = data.apply_fix(ctx, "en", out["state"], "conflicts_drop", "")
    assert _counts(out["summary"])["conflicting_answers"] == 0
    assert f"`fill_placeholders`: {placeholder} changed" in out["applied"]
    message, name = data.save_dataset(ctx, "en", out["state"], "identity-clean", 0.2, 7, False)
    assert name == "identity-clean" and "Saved" in message
    meta = json.loads((workspace.datasets_dir / name / "meta.json").read_text())
    assert [f["id"] for f in meta["fixes"]] == ["fill_placeholders", "conflicts"]
    assert meta["rows_before"] == total and meta["split"]["train_rows"] + meta["split"]["eval_rows"] == meta["rows_after"]
    assert meta["split"]["eval_rows"] > 0
    assert ctx.saved()["dataset"] == name  # restored on the next launch
    # Saving again under the same name asks first; the existing dataset stays.
    again, none = data.save_dataset(ctx, "en", out["state"], name, 0.2, 7, False)
    assert none is None and "already exists" in again
    assert hashlib.sha256(identity.read_bytes()).hexdigest() == before
    # The saved dataset can be opened again from the workspace.
    reopened = data.open_dataset(ctx, "en", name, "demo", 256, None)
    assert f"{meta['split']['train_rows']} rows in the file" in reopened["status"]


def test_identity_placeholders_follow_the_train_forms_values(ctx, identity):
    """The shared "identity" state (the Train form's identity_name / identity_author) decides what
    {{name}} / {{author}} become; an empty field leaves its placeholder, an error again."""
    raw = json.loads(identity.read_text(encoding="utf-8"))
    with_name = sum(1 for r in raw if "{{name}}" in json.dumps(r, ensure_ascii=False))
    form = {"identity_name": "Aria", "identity_author": "Open Lab"}
    out = data.open_upload(ctx, "en", str(identity), "", 256, None, "truncate", form)
    assert _counts(out["summary"])["placeholder"] == 0
    assert "Aria" in out["preview"] and "Open Lab" in out["preview"] and "Nova" not in out["preview"]
    assert "'Aria' (identity_name)" in out["status"]
    first = next(i for i, r in enumerate(raw) if "{{name}}" in r["output"])
    shown = data.show_check(ctx, "en", out["state"], "identity_fill")
    assert f"Row {first} of the file" in shown and "Train fills {{name}} = &#x27;Aria&#x27;" in shown
    filled = raw[first]["output"].replace("{{name}}", "Aria").replace("{{author}}", "Open Lab")
    assert escape(filled) in shown  # the row as the run trains it
    zh = data.relabel(ctx, "zh", out["state"])
    assert "训练时会在" in zh["status"] and "'Aria'" in zh["status"]
    # The form's name emptied, then "Check again": {{name}} is the user's to fill again.
    again = data.recheck(ctx, "en", out["state"], "", 256, "", "truncate", {**form, "identity_name": ""})
    assert _counts(again["summary"])["placeholder"] == with_name > 0
    assert again["fill"] == "name=" and "{{name}}" in again["preview"] and "Open Lab" in again["preview"]


def test_bad_file_gives_a_sentence_and_keeps_the_state(ctx, tmp_path):
    bad = tmp_path / "broken.json"
    bad.write_text('[{"instruction": "hi", "output": "yo"},\n {"instruction": "x" "output": 1}]', encoding="utf-8")
    out = data.open_upload(ctx, "en", str(bad), "demo", 256, None)
    assert set(out) == {"status"}  # nothing else on screen changes
    assert "broken.json" in out["status"] and "line 2" in out["status"] and "Nothing was changed" in out["status"]
    zh = data.open_upload(ctx, "zh", str(bad), "demo", 256, None)
    assert "未做任何更改" in zh["status"]


def test_column_mapping_corrects_an_unknown_shape(ctx, tmp_path):
    path = tmp_path / "qa.csv"
    path.write_text("question,answer\nWhat is 2+2?,4\nCapital of France?,Paris\n", encoding="utf-8")
    out = data.open_upload(ctx, "en", str(path), "demo", 256, None)
    assert set(out) == {"status"} and "mapping" in out["status"].lower()
    state = data.new_state(str(path), "demo", 256)
    out = data.recheck(ctx, "en", state, "demo", 256, "instruction=question, output=answer")
    assert "2 rows in the file, 2 usable" in out["status"]
    assert "Paris" in out["preview"]
    assert out["state"]["mapping"] == {"instruction": "question", "output": "answer"}


def test_check_rows_are_escaped_and_chinese_labels(ctx, tmp_path):
    path = tmp_path / "html.jsonl"
    rows = [{"instruction": "Say hi", "output": "<script>alert(1)</script> hi &amp; bye"},
            {"instruction": "你好", "output": "你好！"}]
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
    out = data.open_upload(ctx, "zh", str(path), "demo", 256, None)
    assert "文件共 2 行" in out["status"]
    html = data.show_check(ctx, "zh", out["state"], "html")
    assert "<script>" not in html and "&lt;script&gt;" in html and "文件第 0 行" in html
    fixed = data.apply_fix(ctx, "en", out["state"], "strip_html", "")
    assert _counts(fixed["summary"])["html"] == 0


def test_a_cp1252_upload_names_its_encoding_and_reads_the_accents(ctx, tmp_path):
    path = tmp_path / "dessert.json"
    path.write_bytes(json.dumps([{"instruction": "Name a French dessert", "input": "", "output": "crème brûlée"}],
                                ensure_ascii=False).encode("cp1252"))
    out = data.open_upload(ctx, "en", str(path), "", 256, None)
    assert "cp1252 (Windows-1252" in out["status"]
    assert "crème brûlée" in out["preview"]


def test_the_format_line_is_chinese_in_the_chinese_ui(ctx, tmp_path):
    path = tmp_path / "dessert.json"
    path.write_bytes(json.dumps([{"instruction": "Name a French dessert", "input": "", "output": "crème brûlée"}],
                                ensure_ascii=False).encode("cp1252"))
    en = data.open_upload(ctx, "en", str(path), "", 256, None)
    assert ("json, cp1252 (Windows-1252, Western European; Latin-1 text reads the same): "
            "alpaca (instruction, input, output; detected)") in en["status"]  # the English is unchanged
    zh = data.relabel(ctx, "zh", en["state"])  # the language switch, same analysis
    assert "json，cp1252（Windows-1252，西欧文字；Latin-1 文本读法相同）：alpaca（instruction, input, output；自动识别）" in zh["status"]
    mapped = data.recheck(ctx, "zh", en["state"], "", 256, "instruction=instruction, output=output")
    assert "按列映射" in mapped["status"] and "detected" not in mapped["status"]


def test_a_checks_row_notes_are_chinese_in_the_chinese_ui(ctx, tmp_path):
    path = tmp_path / "rows.jsonl"
    rows = [{"instruction": "Say hi", "output": "Hello there"}, {"instruction": "Say hi", "output": "Hello there"},
            {"instruction": "Greet", "output": "<b>Hi</b> friend"}]
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    out = data.open_upload(ctx, "zh", str(path), "demo", 256, None)
    assert "与第 0 行相同" in data.show_check(ctx, "zh", out["state"], "duplicate")
    html = data.show_check(ctx, "zh", out["state"], "html")
    assert "assistant 第 1 条消息：&lt;b&gt;" in html and "message 1" not in html
    assert "same as row 0" in data.show_check(ctx, "en", out["state"], "duplicate")


def test_the_over_cutoff_row_follows_the_overflow_setting(ctx, tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({"instruction": "Tell a story", "output": "once upon a time " * 40}) + "\n")
    meaning = {}
    for overflow in ("truncate", "drop"):
        for lang in ("en", "zh"):
            summary = data.open_upload(ctx, lang, str(path), "demo", 32, None, overflow)["summary"]
            meaning[overflow, lang] = summary[summary.iloc[:, 1] == "over_cutoff"].iloc[0, 3]
    assert "cut in training" in meaning["truncate", "en"] and "left out of training" in meaning["drop", "en"]
    assert "截断" in meaning["truncate", "zh"] and "不参与训练" in meaning["drop", "zh"]
    state = data.open_upload(ctx, "en", str(path), "demo", 32, None, "drop")["state"]
    again = data.recheck(ctx, "en", state, "demo", 32, "", "truncate")["summary"]
    assert "cut in training" in again[again.iloc[:, 1] == "over_cutoff"].iloc[0, 3]


def test_a_first_look_says_each_step_with_the_rows_it_checks(ctx, identity):
    """The report of 91 rows took 90 s behind gradio's spinner alone: each part now has its words."""
    heard = []
    out = data.open_upload(ctx, "en", str(identity), "demo", 256, None,
                           step=lambda name, **values: heard.append((name, values)))
    rows = len(json.loads(identity.read_text(encoding="utf-8")))
    assert heard == [("read", {"file": identity.name}), ("tokenizer", {"model": "demo"}), ("checks", {"rows": rows})]
    assert out["state"]["session"]
    said = []
    step = data.steps_for(ctx, "zh", lambda fraction, desc: said.append((fraction, desc)))
    step("checks", rows=rows)
    assert said == [((2, 3), f"正在检查 {rows} 行并统计 token")]
