"""Fixes change exactly the rows they report, compose, never touch the source
file; saved workspace datasets carry their provenance and split."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest
from data_cases.toks import CHATML, build_tokenizer

from backend.data.checks import check_file, check_rows
from backend.data.encode import count_tokens
from backend.data.fixes import FixPlan, apply_fixes
from backend.data.load import load_file_rows
from backend.data.saved_datasets import (
    list_workspace_datasets,
    load_dataset_rows,
    save_dataset,
    split_positions,
    validate_name,
)


def _sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _changed(before, before_idx, after, after_idx):
    old = dict(zip(before_idx, before))
    return sorted(i for i, row in zip(after_idx, after) if row != old[i])


def _msg(user, assistant):
    return {"messages": [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]}


@pytest.mark.parametrize("plan,check_id", [
    (FixPlan(drop_duplicates=True), "duplicate"),
    (FixPlan(strip_html=True), "html"),
])
def test_fix_matches_its_check_on_real_data(shared_data, plan, check_id):
    path = shared_data / "alpaca_en_demo.json"
    loaded = load_file_rows(path)
    report = check_file(path)
    fixed = apply_fixes(loaded.rows, loaded.indices, plan)
    step = fixed.steps[0]
    assert step.removed == sorted(set(loaded.indices) - set(fixed.indices))
    assert step.changed == _changed(loaded.rows, loaded.indices, fixed.rows, fixed.indices)
    touched = step.removed or step.changed
    assert touched == report.check(check_id).rows
    assert check_rows(fixed.rows).check(check_id).count == 0


def test_fill_placeholders_and_conflicts_on_identity(shared_data):
    path = shared_data / "identity.json"
    before = _sha(path)
    loaded = load_file_rows(path)
    report = check_file(path)
    plan = FixPlan(fill={"name": "Studio", "author": "the Team"}, conflicts="keep-first")
    fixed = apply_fixes(loaded.rows, loaded.indices, plan)
    fill, conflicts = fixed.steps
    assert fill.changed == report.check("placeholder").rows
    groups = report.check("conflicting_answers").rows
    assert conflicts.removed and set(conflicts.removed) < set(groups) and len(conflicts.removed) == len(groups) // 2
    after = check_rows(fixed.rows)
    assert after.check("placeholder").count == 0 and after.check("conflicting_answers").count == 0
    assert "I am Studio, an AI assistant developed by the Team" in json.dumps(fixed.rows)
    assert _sha(path) == before


def test_a_fill_at_odds_with_the_runs_identity_is_named(tmp_path, shared_data, capsys):
    """`fix --fill name=X` writes X where Train would fill identity_name: applied, with a warning that
    names both values; a fill that agrees with the run's value (or fills another placeholder) is not."""
    from backend.data.cli import main

    source, ws = str(shared_data / "identity.json"), str(tmp_path / "ws")
    fix = ["fix", source, "--workspace", ws]
    assert main([*fix, "--out", "aria", "--fill", "name=Aria", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["fixes"][0]["id"] == "fill_placeholders" and result["fixes"][0]["changed"] > 0  # still applied
    assert result["warnings"] == [
        "filling {{name}} with 'Aria' differs from identity_name 'Nova', the value Train fills it with: the saved "
        "rows say 'Aria' and Train finds no {{name}} left to fill. Set identity_name to 'Aria', or leave {{name}} "
        "for Train to fill."]
    rows = load_dataset_rows(tmp_path / "ws" / "datasets" / "aria")
    assert "I am Aria" in json.dumps(rows) and "{{author}}" in json.dumps(rows)  # Train fills that one

    # Text output: the warning line; --fill author= the run's own value is no conflict.
    assert main([*fix, "--out", "aria-text", "--fill", "name=Aria", "--fill", "author=FineTune Studio",
                 "--identity-name", "Nova"]) == 0
    out = capsys.readouterr().out
    warnings = [line for line in out.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1 and "'Aria'" in warnings[0] and "identity_name 'Nova'" in warnings[0]

    # The run's own values (--identity-name as the run will have it): nothing to warn about.
    assert main([*fix, "--out", "agreed", "--fill", "name=Aria", "--identity-name", "Aria", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["warnings"] == []
    # A file without {{name}}: the fill changes nothing, so nothing is at odds with the run.
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps([{"instruction": "Who are you?", "output": "An assistant."}]), encoding="utf-8")
    assert main(["fix", str(plain), "--workspace", ws, "--out", "plain", "--fill", "name=Aria", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["warnings"] == []


def test_conflicts_drop_removes_whole_groups(shared_data):
    loaded = load_file_rows(shared_data / "identity.json")
    groups = check_file(shared_data / "identity.json").check("conflicting_answers").rows
    fixed = apply_fixes(loaded.rows, loaded.indices, FixPlan(conflicts="drop"))
    assert fixed.steps[0].removed == groups


def test_text_fixes_and_removals_compose_and_report_exactly():
    rows = [
        _msg("Hello\u200b there", "Fine \ufffdthanks"),        # 0 control chars
        _msg("Hello there", "Fine thanks"),                    # 1 duplicate of 0 once 0 is cleaned
        _msg("<p>Hi</p>", "<b></b>"),                          # 2 html; answer empty after stripping
        _msg("  Spaces   \r\n\r\n\r\n\r\nend  ", "Cafe\u0301"),  # 3 whitespace + NFC
        _msg("HELLO, there!", "fine thanks"),                  # 4 near duplicate of 1
        _msg("Untouched", "Row"),                              # 5
    ]
    indices = [10, 11, 12, 13, 14, 15]
    plan = FixPlan(remove_control_chars=True, strip_html=True, normalize=True, drop_empty=True,
                   drop_duplicates=True, drop_near_duplicates=True)
    fixed = apply_fixes(rows, indices, plan)
    steps = {s.id: s for s in fixed.steps}
    assert steps["remove_control_chars"].changed == [10]
    assert steps["strip_html"].changed == [12]
    assert steps["normalize"].changed == [13]
    assert steps["drop_empty"].removed == [12]
    assert steps["drop_duplicates"].removed == [11]
    assert steps["drop_near_duplicates"].removed == [14]
    assert fixed.indices == [10, 13, 15]
    assert fixed.rows[1]["messages"][0]["content"] == "Spaces\n\nend"
    assert fixed.rows[1]["messages"][1]["content"] == "Caf\u00e9"
    assert rows[0]["messages"][0]["content"] == "Hello\u200b there"  # inputs untouched


def test_over_cutoff_drop_and_truncate():
    tok = build_tokenizer(CHATML)
    rows = [_msg("hi", "short"), _msg("hi", "word " * 200), _msg("hello " * 200, "answer")]
    lengths = count_tokens(tok, rows)
    cutoff = lengths[0] + 20
    dropped = apply_fixes(rows, [0, 1, 2], FixPlan(over_cutoff="drop"), tok, cutoff)
    assert dropped.steps[0].removed == [1, 2] and dropped.indices == [0]
    cut = apply_fixes(rows, [0, 1, 2], FixPlan(over_cutoff="truncate"), tok, cutoff)
    step = cut.steps[0]
    assert step.changed == [1] and step.removed == [2]  # row 2: the prompt alone is over the cutoff
    new_len = count_tokens(tok, cut.rows)
    assert max(new_len) <= cutoff and new_len[1] > cutoff - 5
    assert cut.rows[1]["messages"][1]["content"] == ("word " * 200)[: len(cut.rows[1]["messages"][1]["content"])]
    with pytest.raises(ValueError, match="give a model"):
        apply_fixes(rows, [0, 1, 2], FixPlan(over_cutoff="drop"))


def test_save_and_load_workspace_dataset(tmp_path, shared_data):
    path = shared_data / "alpaca_zh_demo.json"
    loaded = load_file_rows(path)
    folder = save_dataset(tmp_path / "datasets", "zh-clean", loaded.rows, source={"path": str(path), "sha256": _sha(path)},
                          fixes=[], rows_before=loaded.total, eval_ratio=0.1, seed=7)
    meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    assert meta["source"]["sha256"] == _sha(path) and meta["rows_after"] == len(loaded.rows)
    assert meta["split"] == {"seed": 7, "eval_ratio": 0.1, "train_rows": 900, "eval_rows": 100,
                             "train_file": "data.jsonl", "eval_file": "eval.jsonl"}
    train, held = load_dataset_rows(folder), load_dataset_rows(folder, split="eval")
    assert len(train) == 900 and len(held) == 100
    train_pos, eval_pos = split_positions(len(loaded.rows), 0.1, 7)
    assert train == [loaded.rows[i] for i in train_pos] and held == [loaded.rows[i] for i in eval_pos]
    assert split_positions(1000, 0.1, 7) == (train_pos, eval_pos) != split_positions(1000, 0.1, 8)
    assert load_dataset_rows(path) == loaded.rows
    assert check_file(folder).rows == 900  # a workspace dataset folder checks its train rows
    listed = list_workspace_datasets(tmp_path / "datasets")
    assert [d["name"] for d in listed] == ["zh-clean"]
    with pytest.raises(FileExistsError):
        save_dataset(tmp_path / "datasets", "zh-clean", loaded.rows, source={}, fixes=[], rows_before=1)


@pytest.mark.parametrize("bad", ["../up", "a/b", "..", ".hidden", "", "a\\b", "x" * 65, "a..b"])
def test_dataset_names_are_plain_folder_names(bad):
    with pytest.raises(ValueError, match="not allowed"):
        validate_name(bad)


def test_cli_fix_saves_a_dataset_and_leaves_the_source(tmp_path, shared_data, subprocess_env):
    source = tmp_path / "identity.json"
    source.write_bytes((shared_data / "identity.json").read_bytes())
    before = _sha(source)
    ws = tmp_path / "ws"
    proc = subprocess.run(
        [sys.executable, "-m", "backend.data", "fix", str(source), "--out", "identity-filled", "--workspace", str(ws),
         "--fill", "name=Studio", "--fill", "author=the Team", "--conflicts", "keep-first", "--eval-ratio", "0.1",
         "--json"],
        capture_output=True, text=True, env=subprocess_env, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert [f["id"] for f in result["fixes"]] == ["fill_placeholders", "conflicts"]
    total = len(json.loads(source.read_text(encoding="utf-8")))
    assert result["fixes"][1]["removed"] > 0 and result["rows_after"] == total - result["fixes"][1]["removed"]
    assert _sha(source) == before
    folder = ws / "datasets" / "identity-filled"
    meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    assert meta["source"]["sha256"] == before and meta["source"]["format"] == "alpaca"
    assert meta["rows_before"] == total and meta["rows_after"] == result["rows_after"]
    recheck = subprocess.run([sys.executable, "-m", "backend.data", "check", str(folder / "data.jsonl"), "--json"],
                             capture_output=True, text=True, env=subprocess_env, timeout=120)
    assert recheck.returncode == 0, recheck.stdout
    bad = subprocess.run([sys.executable, "-m", "backend.data", "fix", str(source), "--out", "../escape",
                          "--workspace", str(ws)], capture_output=True, text=True, env=subprocess_env, timeout=120)
    assert bad.returncode == 2 and "not allowed" in bad.stderr and "Traceback" not in bad.stderr


def test_cli_checks_a_saved_dataset_by_its_name(tmp_path, shared_data, subprocess_env):
    """`check NAME` reads the workspace dataset that `fix --out NAME` saved (the name a run trains
    under), from any folder; a name that is no dataset still says it is missing."""
    ws = tmp_path / "ws"
    saved = subprocess.run(
        [sys.executable, "-m", "backend.data", "fix", str(shared_data / "identity.json"), "--out", "named",
         "--workspace", str(ws), "--fill", "name=Studio", "--fill", "author=the Team", "--json"],
        capture_output=True, text=True, env=subprocess_env, timeout=120)
    assert saved.returncode == 0, saved.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    check = [sys.executable, "-m", "backend.data", "check", "--workspace", str(ws), "--json"]
    by_name = subprocess.run([*check, "named"], cwd=elsewhere, capture_output=True, text=True, env=subprocess_env,
                             timeout=120)
    assert by_name.returncode == 0, by_name.stderr
    report = json.loads(by_name.stdout)
    assert report["usable_rows"] == json.loads(saved.stdout)["rows_after"]
    found = {c["id"]: c["count"] for c in report["checks"]}
    assert found["placeholder"] == 0  # the filled rows, not the source file's
    missing = subprocess.run([*check, "unnamed"], cwd=elsewhere, capture_output=True, text=True, env=subprocess_env,
                             timeout=120)
    assert missing.returncode == 2 and "unnamed: no such file or folder" in missing.stderr
