"""Checks: every shared file loads with the right shape and row count, and each
check's count equals an independent computation written here."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest
from data_cases.toks import CHATML, build_tokenizer

from backend.data.checks import check_file, check_rows

SHARED = {
    "alpaca_en_demo.json": "alpaca",
    "alpaca_zh_demo.json": "alpaca",
    "identity.json": "alpaca",
    "glaive_toolcall_zh_demo.json": "sharegpt",
}
PLACEHOLDER = re.compile(r"\{\{[^{}]+\}\}")
# As browsers parse it: a tag name follows '<' (or '</') at once; "< noinput >" is text.
TAG = re.compile(r"</?[a-zA-Z][\w-]*(\s[^<>]*)?/?>|&(#\d+|#x[0-9a-fA-F]+|[a-zA-Z]\w+);")


def _raw(shared_data, name):
    return json.loads((shared_data / name).read_text(encoding="utf-8"))


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _rows_where(raw, predicate):
    return [i for i, r in enumerate(raw) if predicate(r)]


def _repeats(keys):
    seen, out = set(), []
    for i, k in enumerate(keys):
        if k in seen:
            out.append(i)
        seen.add(k)
    return out


def _conflicts(prompts, answers):
    groups = {}
    for i, (p, a) in enumerate(zip(prompts, answers)):
        groups.setdefault(p, []).append((i, a))
    return sorted(i for g in groups.values() if len({a for _, a in g}) > 1 for i, _ in g)


@pytest.fixture(scope="module")
def reports(shared_data):
    return {name: check_file(shared_data / name) for name in SHARED}


@pytest.mark.parametrize("name", SHARED)
def test_shared_file_detected_with_row_count(shared_data, reports, name):
    raw = _raw(shared_data, name)
    report = reports[name]
    assert report.format == SHARED[name] and report.file_type == "json" and report.encoding == "utf-8"
    assert report.rows == report.usable_rows == len(raw)
    assert report.check("schema").count == 0


@pytest.mark.parametrize("name", SHARED)
def test_duplicates_placeholders_html_match_independent_counts(shared_data, reports, name):
    raw = _raw(shared_data, name)
    report = reports[name]
    keys = [json.dumps({k: v for k, v in r.items() if v not in ("", None)}, sort_keys=True, ensure_ascii=False) for r in raw]
    assert report.check("duplicate").rows == _repeats(keys)
    assert report.check("placeholder").rows == _rows_where(raw, lambda r: any(PLACEHOLDER.search(s) for s in _strings(r)))
    html_fields = ("conversations",) if SHARED[name] == "sharegpt" else ("instruction", "input", "output")
    assert report.check("html").rows == _rows_where(
        raw, lambda r: any(TAG.search(s) for f in html_fields for s in _strings(r.get(f))))


@pytest.mark.parametrize("name", [n for n, shape in SHARED.items() if shape == "alpaca"])
def test_alpaca_conflicts_empty_inputs_short_and_outliers(shared_data, reports, name):
    raw = _raw(shared_data, name)
    report = reports[name]
    prompts = [(r["instruction"], r.get("input", "")) for r in raw]
    assert report.check("conflicting_answers").rows == _conflicts(prompts, [r["output"] for r in raw])
    assert report.check("empty_input").rows == _rows_where(raw, lambda r: not r.get("input", "").strip())
    assert report.check("short_response").rows == _rows_where(raw, lambda r: 0 < len(r["output"].strip()) < 3)
    assert report.check("empty_field").rows == _rows_where(raw, lambda r: not r["instruction"].strip() or not r["output"].strip())
    chars = np.array([len(r["instruction"]) + (len(r["input"]) + 1 if r["input"] else 0) + len(r["output"]) for r in raw])
    q1, q3 = np.percentile(chars, [25, 75])
    assert report.check("length_outlier").rows == [int(i) for i in np.flatnonzero(chars > q3 + 3 * (q3 - q1))]


def test_identity_has_its_known_defects_found(reports, shared_data):
    # Not a copied literal: the placeholders are recounted in the test above; here the
    # two conflicting prompts must form exactly two groups of two.
    raw = _raw(shared_data, "identity.json")
    rows = reports["identity.json"].check("conflicting_answers").rows
    assert len({raw[i]["instruction"] for i in rows}) == len(rows) // 2
    assert reports["identity.json"].exit_code == 1  # no run values given: its placeholders are errors
    assert reports["alpaca_en_demo.json"].exit_code == 0


def test_identity_placeholders_that_train_fills_are_no_error(shared_data, capsys):
    """LLaMA-Factory's identity.json as it is: Train fills {{name}} / {{author}} from identity_name /
    identity_author, so the check reports no placeholder error, lists the rows as info and looks at
    them filled; `check` takes RunConfig's values unless given others."""
    from backend.config import RunConfig
    from backend.data.cli import main
    from backend.data.identity_rows import identity_values

    path, raw = shared_data / "identity.json", _raw(shared_data, "identity.json")
    with_placeholders = _rows_where(raw, lambda r: any(PLACEHOLDER.search(s) for s in _strings(r)))
    defaults = RunConfig()
    report = check_file(path, identity=identity_values(defaults))
    assert report.check("placeholder").count == 0 and report.exit_code == 0
    filled = report.check("identity_fill")
    assert filled.severity == "info" and filled.rows == with_placeholders
    first = with_placeholders[0]
    assert str(filled.details[first]).endswith(f"Train fills {{{{name}}}} = {defaults.identity_name!r}, "
                                               f"{{{{author}}}} = {defaults.identity_author!r}")
    # The other checks see the filled rows: the same findings as on a copy filled by hand.
    by_hand = [{**r, "output": r["output"].replace("{{name}}", defaults.identity_name)
                .replace("{{author}}", defaults.identity_author)} for r in raw]
    assert report.check("conflicting_answers").rows == _conflicts(
        [(r["instruction"], r["input"]) for r in by_hand], [r["output"] for r in by_hand])

    assert main(["check", str(path), "--json"]) == 0  # in-process: RunConfig's values
    data = json.loads(capsys.readouterr().out)
    checks = {c["id"]: c for c in data["checks"]}
    assert checks["placeholder"]["count"] == 0 and checks["identity_fill"]["count"] == len(with_placeholders)
    assert any(f"{{{{name}}}} = {defaults.identity_name!r} (identity_name)" in note for note in data["notes"])

    assert main(["check", str(path), "--identity-name", "Aria", "--identity-author", "Open Lab"]) == 0
    text = capsys.readouterr().out
    assert "ERROR" not in text and "Train fills {{name}} = 'Aria', {{author}} = 'Open Lab'" in text
    assert "Nova" not in text

    # An empty identity_name leaves {{name}} as it is: an error again, {{author}} still filled.
    assert main(["check", str(path), "--identity-name", "", "--json"]) == 1
    checks = {c["id"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    assert checks["placeholder"]["count"] == len(_rows_where(raw, lambda r: "{{name}}" in r["output"])) > 0
    assert checks["placeholder"]["details"][str(first)].endswith(": {{name}}")


def test_identity_rows_show_the_filled_name_through_the_template(shared_data):
    """`check --show-template ROW` renders the row as the run trains it: the name filled in."""
    from backend.data.cli import build_parser, show_template

    raw = _raw(shared_data, "identity.json")
    row = next(i for i, r in enumerate(raw) if "{{name}}" in r["output"])
    args = build_parser().parse_args(["check", str(shared_data / "identity.json"), "--show-template", str(row),
                                      "--identity-name", "Aria"])
    shown = "".join(text for text, _ in show_template(args, build_tokenizer(CHATML), None)["pieces"])
    assert raw[row]["output"].replace("{{name}}", "Aria").replace("{{author}}", "FineTune Studio") in shown
    assert "{{" not in shown


def test_unknown_placeholders_stay_errors_beside_the_filled_ones(shared_data, tmp_path):
    from backend.data.identity_rows import identity_values

    rows = _raw(shared_data, "identity.json")
    rows += [{"instruction": "Where do you live?", "input": "", "output": "In {{foo}}."},
             {"instruction": "Who wrote you?", "input": "", "output": "{{author}} did, in {{ city }} for {{name}}."}]
    path = tmp_path / "identity_plus.json"
    path.write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
    report = check_file(path, identity=identity_values({"identity_name": "Aria", "identity_author": "Open Lab"}))
    foo, city = len(rows) - 2, len(rows) - 1
    assert report.check("placeholder").rows == [foo, city] and report.exit_code == 1
    assert str(report.check("placeholder").details[foo]).endswith(": {{foo}}")
    assert str(report.check("placeholder").details[city]).endswith(": {{city}}")  # {{name}}, {{author}} filled
    assert city in report.check("identity_fill").rows and foo not in report.check("identity_fill").rows


def _msg(user, assistant, system=None):
    messages = [{"role": "system", "content": system}] if system else []
    return {"messages": [*messages, {"role": "user", "content": user}, {"role": "assistant", "content": assistant}]}


def test_each_text_check_flags_exactly_its_rows():
    rows = [
        _msg("What is the capital of France?", "Paris is the capital."),       # 0 clean
        _msg("what is the capital of france", "Paris is the capital!"),        # 1 near duplicate of 0
        _msg("What is the capital of France?", "Paris is the capital."),       # 2 exact duplicate of 0
        _msg("Bold?", "Use <b>bold</b> &amp; more"),                            # 3 html
        _msg("Zero\u200bwidth", "bad \ufffd char\x07"),                          # 4 control chars
        _msg("   ", "An answer to nothing"),                                    # 5 empty field
        _msg("Who are you?", "I am {{ name }} by {{author}}."),                  # 6 placeholder
        _msg("请把这句话翻译成英文", "Please translate this sentence."),           # 7 prompt cjk, response latin
        _msg("2+2?", "4"),                                                       # 8 short
        _msg("What is the capital of France?", "Lyon."),                         # 9 conflicts with 0 and 2
    ]
    report = check_rows(rows)
    assert report.check("near_duplicate").rows == [1]
    assert report.check("duplicate").rows == [2]
    assert report.check("html").rows == [3]
    assert report.check("control_chars").rows == [4]
    assert report.check("empty_field").rows == [5]
    assert report.check("placeholder").rows == [6]
    assert str(report.check("placeholder").details[6]).endswith("{{name}}, {{author}}")
    assert report.check("language_mix").rows == [7]
    assert report.check("short_response").rows == [8]
    assert report.check("conflicting_answers").rows == [0, 2, 9]
    text = "".join(m["content"] for r in rows for m in r["messages"])
    cjk = sum(1 for c in text if "\u4e00" <= c <= "\u9fff")
    latin = sum(1 for c in text if c.isascii() and c.isalpha())
    assert report.language["cjk_char_share"] == round(cjk / (cjk + latin), 4)
    flags = report.row_flags()
    assert flags[2] == ["duplicate", "conflicting_answers"]
    assert 0 not in report.check("duplicate").rows
    # Each note names the other rows of its prompt group, never the row it is on.
    details = {row: str(note) for row, note in report.check("conflicting_answers").details.items()}
    assert details == {0: "same prompt as rows 2, 9, answers differ", 2: "same prompt as rows 0, 9, answers differ",
                       9: "same prompt as rows 0, 2, answers differ"}


def test_token_lengths_and_over_cutoff_match_the_template_count(shared_data):
    tok = build_tokenizer(CHATML)
    cutoff = 300
    report = check_file(shared_data / "identity.json", tokenizer=tok, model="chatml", cutoff_len=cutoff)
    raw = _raw(shared_data, "identity.json")
    lengths = np.array([
        len(tok(tok.apply_chat_template([{"role": "user", "content": r["instruction"] + ("\n" + r["input"] if r["input"] else "")},
                                         {"role": "assistant", "content": r["output"]}], tokenize=False),
                add_special_tokens=False)["input_ids"])
        for r in raw
    ])
    stats = report.token_lengths
    assert stats.count == len(raw) and stats.max == lengths.max()
    assert stats.p50 == int(np.ceil(np.percentile(lengths, 50))) and stats.mean == pytest.approx(lengths.mean(), abs=0.01)
    assert report.check("over_cutoff").rows == [int(i) for i in np.flatnonzero(lengths > cutoff)]
    assert stats.over_cutoff == int((lengths > cutoff).sum()) > 0
    hist = stats.histogram
    assert sum(hist["counts"]) == len(raw) and hist["edges"][0] <= cutoff <= hist["edges"][-1]
    assert hist["cutoff_len"] == cutoff


def test_response_cut_flags_rows_whose_prompt_fills_the_cutoff():
    tok = build_tokenizer(CHATML)
    rows = [_msg("hello " * 5, "short answer"), _msg("hello " * 300, "short answer"), _msg("hi", "world " * 300)]
    prompt_len = [len(tok(tok.apply_chat_template(r["messages"][:1], tokenize=False, add_generation_prompt=True),
                          add_special_tokens=False)["input_ids"]) for r in rows]
    full_0 = len(tok(tok.apply_chat_template(rows[0]["messages"], tokenize=False), add_special_tokens=False)["input_ids"])
    cutoff = full_0 + 5
    assert prompt_len[1] >= cutoff > prompt_len[2]
    report = check_rows(rows, tokenizer=tok, cutoff_len=cutoff)
    assert report.check("over_cutoff").rows == [1, 2]
    assert report.check("response_cut").rows == [1]
    assert report.exit_code == 1


def test_report_dict_is_the_cli_json_contract(reports):
    data = json.loads(json.dumps(reports["identity.json"].to_dict()))
    assert {"file", "format", "rows", "token_lengths", "checks"} <= set(data)
    placeholder = next(c for c in data["checks"] if c["id"] == "placeholder")
    assert placeholder["severity"] == "error" and placeholder["count"] == reports["identity.json"].check("placeholder").count
    assert placeholder["examples"] == reports["identity.json"].check("placeholder").rows[:10]


def test_cli_check_with_demo_model(shared_data, workspace, subprocess_env):
    proc = subprocess.run(
        [sys.executable, "-m", "backend.data", "check", str(shared_data / "identity.json"), "--model", "demo",
         "--workspace", str(workspace.root), "--cutoff", "64", "--json"],
        capture_output=True, text=True, env=subprocess_env, timeout=300,
    )
    # {{name}} / {{author}} are filled with RunConfig's identity values: no error-severity finding left.
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["format"] == "alpaca" and data["rows"] == 91 and data["summary"]["error"] == 0
    assert data["token_lengths"]["count"] == 91 and data["token_lengths"]["cutoff_len"] == 64
    over = next(c for c in data["checks"] if c["id"] == "over_cutoff")
    assert over["count"] == data["token_lengths"]["over_cutoff"] > 0


def test_check_streams_a_large_file(tmp_path):
    path = tmp_path / "big.jsonl"
    text = "lorem ipsum dolor sit amet " * 80
    with open(path, "w", encoding="utf-8") as f:
        for i in range(4_000):
            f.write(json.dumps({"instruction": f"question {i} {text}", "input": "", "output": f"answer {i} {text}"}) + "\n")
    size = path.stat().st_size
    tracemalloc.start()
    report = check_file(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert report.rows == report.usable_rows == 4_000
    # Rows are not kept: the peak stays far below the file itself.
    assert peak < size / 4, (peak, size)


def test_rows_the_chat_template_refuses_become_schema_findings():
    strict = CHATML.replace(
        "{% for message in messages %}",
        "{% for message in messages %}{% if loop.index0 > 0 and message['role'] == messages[loop.index0 - 1]['role'] %}"
        "{{ raise_exception('Conversation roles must alternate') }}{% endif %}",
    )
    tok = build_tokenizer(strict)
    rows = [_msg("a", "b"), {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                                          {"role": "assistant", "content": "c"}]}, _msg("c", "d")]
    report = check_rows(rows, tokenizer=tok, cutoff_len=1000)
    assert report.check("schema").rows == [1]
    assert "roles must alternate" in str(report.check("schema").details[1])
    assert report.token_lengths.count == 2


def test_over_cutoff_says_what_the_overflow_setting_does_with_the_rows():
    """overflow: truncate cuts an over-long row in training, overflow: drop leaves it out (the worker's rule)."""
    tok = build_tokenizer(CHATML)
    rows = [_msg("hello", "short answer"), _msg("hi", "world " * 300)]
    cut = check_rows(rows, tokenizer=tok, cutoff_len=64).check("over_cutoff")
    dropped = check_rows(rows, tokenizer=tok, cutoff_len=64, overflow="drop").check("over_cutoff")
    assert cut.rows == dropped.rows == [1]
    assert "cut in training" in cut.spec.title and "left out" not in cut.spec.title
    assert "left out of training" in dropped.spec.title and "cut in training" not in dropped.spec.title
    assert "overflow to truncate" in dropped.spec.hint
    assert dropped.to_dict()["text_id"] == "over_cutoff_drop" and cut.to_dict()["text_id"] == "over_cutoff"


def test_cli_check_follows_overflow(tmp_path, workspace, subprocess_env):
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({"instruction": "Tell a story", "output": "once upon a time " * 40}) + "\n")
    titles = {}
    for overflow in ("truncate", "drop"):
        proc = subprocess.run(
            [sys.executable, "-m", "backend.data", "check", str(path), "--model", "demo", "--workspace",
             str(workspace.root), "--cutoff", "32", "--overflow", overflow, "--json"],
            capture_output=True, text=True, env=subprocess_env, timeout=300)
        assert proc.returncode == 0, proc.stderr
        titles[overflow] = next(c for c in json.loads(proc.stdout)["checks"] if c["id"] == "over_cutoff")["title"]
    assert "cut in training" in titles["truncate"] and "left out of training" in titles["drop"]


def test_check_defaults_to_the_cutoff_a_default_run_trains_with(tmp_path, demo_model_dir, capsys):
    """`check` without --cutoff counts against RunConfig's cutoff_len, so a row the default run cuts
    is flagged over_cutoff (it was checked at 1024 and passed)."""
    from backend.config import RunConfig
    from backend.data.cli import main
    from backend.data.encode import count_tokens
    from backend.models.loading import load_tokenizer

    cutoff = RunConfig().cutoff_len
    tokenizer = load_tokenizer(demo_model_dir)
    text = "a long answer about the sea"
    while count_tokens(tokenizer, [{"messages": [{"role": "user", "content": "Tell me."},
                                                 {"role": "assistant", "content": text}]}])[0] <= cutoff + 20:
        text += " and the waves"
    path = tmp_path / "long.jsonl"
    path.write_text(json.dumps({"instruction": "Tell me.", "output": text}) + "\n", encoding="utf-8")
    assert main(["check", str(path), "--model", str(demo_model_dir), "--json"]) == 0  # a warning, not an error
    data = json.loads(capsys.readouterr().out)
    assert data["token_lengths"]["cutoff_len"] == cutoff < data["token_lengths"]["max"] < 1024
    assert {c["id"]: c for c in data["checks"]}["over_cutoff"]["count"] == 1
