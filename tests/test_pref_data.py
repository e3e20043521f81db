"""Preference data: every pairwise / KTO format loads to canonical rows, each
pair check finds its planted rows, the fixes remove them, malformed files get
a sentence and an exit code (never a traceback), and `python -m backend.data
check` works on pairwise files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from backend.data.checks import check_file
from backend.data.errors import DataError
from backend.data.fixes import FixPlan, apply_fixes
from backend.data.load import load_file_rows

REPO = Path(__file__).resolve().parents[1]
U = {"role": "user", "content": "What is 2+2?"}
A4, A5 = {"role": "assistant", "content": "4."}, {"role": "assistant", "content": "5."}
CANONICAL = {"prompt": [U], "chosen": [A4], "rejected": [A5]}


def write(path: Path, rows, jsonl: bool = True) -> Path:
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows) if jsonl else json.dumps(rows)
    path.write_text(text, encoding="utf-8")
    return path


FORMATS = {
    "trl-strings": ([{"prompt": "What is 2+2?", "chosen": "4.", "rejected": "5."}], "pairwise"),
    "trl-messages": ([{"prompt": [U], "chosen": [A4], "rejected": [A5]}], "pairwise"),
    "lf-alpaca": ([{"instruction": "What is", "input": "2+2?", "chosen": "4.", "rejected": "5."}], "pairwise-alpaca"),
    "hh-transcript": ([{"chosen": "\n\nHuman: What is 2+2?\n\nAssistant: 4.",
                        "rejected": "\n\nHuman: What is 2+2?\n\nAssistant: 5."}], "pairwise-transcript"),
    "transcript-messages": ([{"chosen": [U, A4], "rejected": [U, A5]}], "pairwise-transcript"),
    "sharegpt-messages": ([{"conversations": [{"from": "human", "value": "What is 2+2?"}],
                            "chosen": {"from": "gpt", "value": "4."}, "rejected": {"from": "gpt", "value": "5."}}],
                          "pairwise-sharegpt"),
}


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_every_pairwise_format_loads_to_the_canonical_pair(tmp_path, name):
    rows, shape = FORMATS[name]
    loaded = load_file_rows(write(tmp_path / f"{name}.jsonl", rows))
    assert loaded.source.shape.name == shape
    expected = dict(CANONICAL)
    if name == "lf-alpaca":
        expected["prompt"] = [{"role": "user", "content": "What is\n2+2?"}]
    assert loaded.rows == [expected]


def test_llama_factory_ranking_folder_and_kto_rows(tmp_path):
    folder = tmp_path / "lf"
    folder.mkdir()
    (folder / "dataset_info.json").write_text(json.dumps({"pairs": {
        "file_name": "pairs.json", "formatting": "sharegpt", "ranking": True,
        "columns": {"messages": "conversations", "chosen": "chosen", "rejected": "rejected"}}}))
    write(folder / "pairs.json", FORMATS["sharegpt-messages"][0], jsonl=False)
    assert load_file_rows(folder).rows == [CANONICAL]
    kto = load_file_rows(write(tmp_path / "kto.jsonl", [{"prompt": "What is 2+2?", "completion": "4.", "label": True},
                                                    {"prompt": "What is 2+2?", "completion": "5.", "label": 0}]))
    assert kto.source.shape.name == "kto"
    assert kto.rows == [{"prompt": [U], "completion": [A4], "label": True},
                        {"prompt": [U], "completion": [A5], "label": False}]


def test_column_mapping_for_other_names(tmp_path):
    path = write(tmp_path / "m.jsonl", [{"question": "What is 2+2?", "good": "4.", "bad": "5."}])
    with pytest.raises(DataError):
        load_file_rows(path)
    loaded = load_file_rows(path, mapping={"prompt": "question", "chosen": "good", "rejected": "bad"})
    assert loaded.rows == [CANONICAL] and loaded.source.shape.origin == "mapping"


def planted(tmp_path: Path) -> Path:
    rows = [
        {"prompt": "What is 2+2?", "chosen": "4.", "rejected": "5."},            # 0 contradicts 3
        {"prompt": "Say yes", "chosen": "yes", "rejected": "yes"},                # 1 same answer
        {"prompt": "Empty?", "chosen": "", "rejected": "no"},                     # 2 empty answer
        {"prompt": "What is 2+2?", "chosen": "5.", "rejected": "4."},            # 3 contradicts 0
        {"prompt": "Long " + "word " * 60, "chosen": "a much longer answer", "rejected": "no"},  # 4 prompt fills cutoff
    ]
    return write(tmp_path / "planted.jsonl", rows)


def test_each_pair_check_finds_its_planted_rows_and_the_length_bias(tmp_path, demo_model_dir):
    from backend.models.loading import load_tokenizer

    report = check_file(planted(tmp_path), tokenizer=load_tokenizer(demo_model_dir), cutoff_len=40)
    assert report.format == "pairwise" and report.exit_code == 1
    assert report.check("same_answer").rows == [1]
    assert report.check("empty_answer").rows == [2]
    assert report.check("contradicting_pair").rows == [0, 3]
    assert report.check("prompt_fills_cutoff").rows == [4]  # training leaves it out: not "cut"
    assert report.check("over_cutoff").rows == []
    bias = report.to_dict()["preference"]
    assert bias["pairs"] == 5 and bias["chosen_longer_share"] == 0.2  # only row 4's chosen is longer
    assert bias["chosen_chars"]["max"] == len("a much longer answer") and bias["rejected_chars"]["max"] == 3
    assert any(n.startswith("length bias: the chosen answer is longer in 20% of 5 pairs") for n in report.notes)


def test_the_check_the_worker_and_the_plan_agree_on_long_pairs(tmp_path, demo_model_dir):
    """One rule for long pairs: a prompt that fills cutoff_len leaves the pair out (the check says so,
    the worker drops it, the Plan does not count it); a longer answer is cut and trained."""
    from backend.config_recipes import tiny_config
    from backend.data.pair_rows import CUT, measure, stage_rows, trained_rows
    from backend.models.loading import load_tokenizer
    from backend.training.dataset import RowCounts
    from backend.training.preference import usable

    tokenizer, cutoff = load_tokenizer(demo_model_dir), 40
    raw = [{"prompt": "What is 2+2?", "chosen": "4.", "rejected": "5."},                         # 0 fits
           {"prompt": "Long " + "word " * 60, "chosen": "yes", "rejected": "no"},                # 1 prompt fills it
           {"prompt": "Short?", "chosen": "a long answer " * 12, "rejected": "no"}]               # 2 answer over it
    report = check_file(write(tmp_path / "long.jsonl", raw), tokenizer=tokenizer, cutoff_len=cutoff)
    assert report.check("prompt_fills_cutoff").rows == [1] and report.check("over_cutoff").rows == [2]
    rows = stage_rows(load_file_rows(tmp_path / "long.jsonl").rows, "dpo", "long.jsonl")
    counts = RowCounts()
    kept = usable(tokenizer, rows, tiny_config(stage="dpo", cutoff_len=cutoff), counts)
    assert kept == [rows[0], rows[2]] and counts.reasons == {CUT: 1} and counts.truncated == 1
    plan = trained_rows(measure(tokenizer, rows), "dpo", cutoff)
    assert (plan.rows, plan.cut, plan.left_out) == (2, 1, {CUT: 1})
    assert plan.needed == max(t.longest for t in measure(tokenizer, rows)) > cutoff
    assert trained_rows(measure(tokenizer, rows), "dpo", plan.needed).rows == 3  # what the Plan says fits all
    kto = trained_rows(measure(tokenizer, rows), "kto", cutoff)
    assert (kto.rows, kto.left_out) == (4, {CUT: 2})  # a row per answer, both of pair 1 left out


def test_fixes_remove_the_first_three_findings(tmp_path):
    loaded = load_file_rows(planted(tmp_path))
    fixed = apply_fixes(loaded.rows, loaded.indices, FixPlan(drop_empty=True, drop_identical_pairs=True,
                                                              conflicts="drop"))
    assert fixed.indices == [4]
    assert {s.id: s.removed for s in fixed.steps} == {"drop_empty": [2], "drop_identical_pairs": [1],
                                                      "conflicts": [0, 3]}
    kept = apply_fixes(loaded.rows, loaded.indices, FixPlan(conflicts="keep-first"))
    assert kept.indices == [0, 1, 2, 4]


MALFORMED = {
    "missing-rejected.jsonl": ([{"prompt": "a", "chosen": "b"}], 2, "has a 'chosen' column but no 'rejected'"),
    "rejected-missing-later.jsonl": ([{"prompt": "a", "chosen": "b", "rejected": "c"}, {"prompt": "a", "chosen": "b"}],
                                     1, "rejected is missing"),
    "list-for-string.jsonl": ([{"instruction": "a", "input": "", "chosen": "b", "rejected": ["c"]}], 2,
                              "rejected is a list, expected text"),
    "empty-pairs.jsonl": ([{"prompt": "a", "chosen": None, "rejected": None}, {"prompt": "b", "chosen": "", "rejected": ""}],
                          1, "chosen and rejected empty"),
    "bad-label.jsonl": ([{"prompt": "a", "completion": "b", "label": "maybe"}], 2, "a KTO label is true"),
}


@pytest.mark.usefixtures("starts_processes")
@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_pairwise_files_give_a_sentence_and_an_exit_code(tmp_path, name):
    from backend.data.cli import main

    rows, code, words = MALFORMED[name]
    path = write(tmp_path / name, rows)
    result = subprocess.run([sys.executable, "-m", "backend.data", "check", str(path)], cwd=REPO,
                            capture_output=True, text=True, timeout=120) if name == "missing-rejected.jsonl" else None
    if result is not None:  # one real CLI process; the rest through main() in this process
        assert result.returncode == code and "Traceback" not in result.stderr
        assert words in result.stderr
        return
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert main(["check", str(path)]) == code
    assert words in out.getvalue() + err.getvalue()


def test_stage_defaults_and_refused_settings():
    from backend.config import RunConfig
    from backend.config_policy import ConfigError

    dpo = RunConfig().with_overrides(["stage=dpo"])
    assert (dpo.learning_rate, dpo.cutoff_len, dpo.per_device_train_batch_size) == (1e-4, 64, 4)
    kept = RunConfig().with_overrides(["learning_rate=1e-5", "stage=simpo"])
    assert kept.learning_rate == 1e-5 and kept.beta == 2.0  # a changed setting stays; beta takes simpo's
    back = kept.with_overrides(["stage=sft"])
    assert back.cutoff_len == 256 and back.beta == 0.1 and back.learning_rate == 1e-5
    assert RunConfig.from_yaml(dpo.to_yaml()) == dpo
    for sets, words in ((["stage=kto", "loss_type=ipo"], "does not apply to stage kto"),
                        (["stage=orpo", "loss_type=sigmoid"], "clear loss_type"),
                        (["stage=dpo", "method=full", "init_adapter=/x"], "merge it first"),
                        (["stage=dpo", "beta=0"], "beta must be above 0")):
        with pytest.raises(ConfigError, match=words):
            RunConfig().with_overrides(sets)


def test_memory_estimate_counts_two_sequences_and_the_reference():
    from backend.models.memory import Architecture, estimate_memory

    arch = Architecture(256, 1024, 2, 4, 2, 1000, 64, True)
    common = dict(method="lora", precision="fp32", batch_size=4, cutoff_len=64, device_kind="cpu")
    sft, dpo, orpo = (estimate_memory(arch, **common, stage=s) for s in ("sft", "dpo", "orpo"))
    assert dpo.activations_gb == pytest.approx(2 * sft.activations_gb) == pytest.approx(orpo.activations_gb)
    assert sft.reference_gb == orpo.reference_gb == 0 < dpo.reference_gb
    full = estimate_memory(arch, **{**common, "method": "full"}, stage="dpo")
    assert full.reference_gb * 2**30 >= arch.num_parameters() * 4  # a second fp32 copy
    assert dpo.total_gb > orpo.total_gb > sft.total_gb


def test_data_tab_shows_a_pair_side_by_side_and_its_fixes(workspace, tmp_path):
    from ui.context import UIContext
    from ui.i18n import build_i18n, merge_texts
    from ui.shell import TEXT as SHELL_TEXT
    from ui.tabs import data

    texts = merge_texts(SHELL_TEXT, data.TEXT)
    ctx = UIContext(workspace=workspace, texts=texts, i18n=build_i18n(texts))
    out = data.open_upload(ctx, "en", str(planted(tmp_path)), "", 256, None)
    assert "pairwise" in out["status"]
    assert out["preview"].count('class="ft-pair"') == 5 and "✗ rejected" in out["preview"]
    fixed = data.apply_fix(ctx, "en", out["state"], "drop_identical_pairs", "")
    assert "Say yes" not in fixed["preview"] and "Empty?" in fixed["preview"]
    fixed = data.apply_fix(ctx, "en", fixed["state"], "contradicting_drop", "")
    assert fixed["preview"].count('class="ft-pair"') == 2


@pytest.mark.usefixtures("starts_processes")
def test_the_shape_comes_from_the_first_row_that_has_one(tmp_path):
    """One valid pair after rows of no shape: a pair file with 3 unusable rows, not a refusal of row 0;
    the check says how many rows cannot be used."""
    path = tmp_path / "mostly-broken.jsonl"
    path.write_text('{"text": "stray"}\n{"prompt": "q", "chosen": "half a pair"}\n'
                    '{"prompt": "Is it?", "chosen": "Yes.", "rejected": "No."}\n[1, 2]\n', encoding="utf-8")
    loaded = load_file_rows(path)
    assert loaded.source.shape.name == "pairwise" and loaded.total == 4 and len(loaded.rows) == 1
    assert [r.index for r in loaded.rejected] == [0, 1, 3]
    result = subprocess.run([sys.executable, "-m", "backend.data", "check", str(path)], cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert "pairwise" in result.stdout.splitlines()[0] and "rows: 4 in the file, 1 usable" in result.stdout
    assert "chosen is missing" in result.stdout and "Traceback" not in result.stderr


def test_too_few_rows_to_hold_an_eval_split_out_are_told_so(tmp_path, workspace):
    """One pair (or one instruction row) and the default val_size: the split would leave nothing to train
    on, and the refusal says that, with what to do (val_size 0, or more rows); not 'instruction rows'."""
    from backend.config import RunConfig
    from backend.config_policy import ConfigError
    from backend.models.loading import load_tokenizer
    from backend.training.dataset import build_datasets
    from backend.training.preference import build_preference_datasets

    tokenizer = load_tokenizer(workspace.models_dir / "demo")
    pair = write(tmp_path / "one.jsonl", [{"prompt": "What is 2+2?", "chosen": "4.", "rejected": "5."}])
    row = write(tmp_path / "row.jsonl", [{"instruction": "What is 2+2?", "output": "4."}])
    dpo = RunConfig().with_overrides(["stage=dpo", f"dataset={pair}"])
    assert dpo.val_size == RunConfig().val_size > 0
    for build, config in ((build_preference_datasets, dpo), (build_datasets, RunConfig(dataset=str(row)))):
        with pytest.raises(ConfigError) as refused:
            build(tokenizer, config, workspace)
        text = str(refused.value)
        assert "holds 1 usable row" in text and "val_size" in text and "set val_size to 0" in text, text
        assert "instruction rows" not in text and "cutoff_len" not in text
    train, evaluation, counts = build_preference_datasets(tokenizer, dpo.with_overrides(["val_size=0"]), workspace)
    assert len(train) == 1 and evaluation is None and counts.train == 1
