"""Every GGUF level judged by thresholds on its answers and its KL from f16, the Modelfile over the
smallest level that passed, with num_ctx and its stop strings as Ollama reads them, and the
verdicts in the report's lines (the CLI, the model card) and the Export tab.

The measurements are the starter's run as docs/EVALUATE_EXPORT.md records them (SmolLM2-135M-
Instruct, 10 held-out prompts); the files are real files of those sizes, so the Modelfile's level is
chosen from what is on disk, as the export chooses it."""

from __future__ import annotations

from backend.export.gguf_export import _write_modelfile
from backend.export.gguf_judgement import LEVEL_MAX_KL, judge_level, levels_summary, modelfile_level
from backend.export.model_card import gguf_lines
from backend.export.modelfile import FAMILIES, TemplateMatch, build_modelfile, modelfile_context
from backend.messages import CATALOGUE, Message, render_message
from backend.runs.workspace import Workspace
from ui.context import UIContext
from ui.i18n import merge_texts
from ui.tabs import export

# level: (MB, greedy answers equal to the adapter's, agree over the first 8 tokens, mean KL vs f16, top-1)
STARTER = {"f16": (271, 10, 10, None, None), "q8_0": (145, 9, 9, 0.0025, 0.980), "q6_k": (138, 9, 9, 0.0070, 0.987),
           "q5_k_m": (112, 3, 5, 0.2507, 0.869), "q4_k_m": (105, 6, 6, 0.0429, 0.954)}
CHATML = TemplateMatch(next(f for f in FAMILIES if f.name == "chatml"), "You are a helpful AI assistant")


def measured(level: str) -> dict:
    _, equal, agree, kl, top1 = STARTER[level]
    entry = {"equal": equal, "agree_first_8": agree, "total": 10, "rows": [], "same_prompt_tokens": 10}
    return entry if kl is None else {**entry, "mean_kl": kl, "top1_agreement": top1, "positions": 240}


def judged(levels) -> dict[str, dict]:
    return {level: judge_level(level, measured(level)) for level in levels}


def files_of(tmp_path, levels) -> dict:
    files = {}
    for level in levels:
        path = tmp_path / f"mine-{level}.gguf"
        path.write_bytes(b"\0" * (STARTER[level][0] * 1000))  # kB for MB: the order of the sizes is what counts
        files[level] = path
    return files


def test_each_level_passes_or_fails_by_its_answers_and_its_kl():
    levels = judged(STARTER)
    assert [name for name, entry in levels.items() if entry["passed"]] == ["f16", "q8_0", "q6_k"]
    # q5_k_m: 5 of 10 answers and KL 0.25, both said with the bound it missed
    q5 = [render_message(Message.from_dict(f), CATALOGUE) for f in levels["q5_k_m"]["failures"]]
    assert q5 == ["q5_k_m: 5 of 10 greedy answers agree with the adapter's over their first 8 tokens; a level passes "
                  "with 8 or more.",
                  f"q5_k_m: mean KL divergence from f16 of 0.251 per token, above the {LEVEL_MAX_KL} a level passes with."]
    # q4_k_m keeps the distribution near f16's but parts from the adapter's answers on 4 prompts
    assert [f["id"] for f in levels["q4_k_m"]["failures"]] == ["gguf_export.level_answers"]
    assert levels["q8_0"]["failures"] == [] and levels["q8_0"]["needed_agree"] == 8
    # f16 is the reference: its own bound (9 of 10), no KL
    assert judge_level("f16", {**measured("f16"), "agree_first_8": 8})["failures"][0]["args"]["needed"] == 9
    # a level close to f16 in distribution but not in its answers fails; one with the answers but far in KL fails too
    assert not judge_level("q8_0", {**measured("q8_0"), "mean_kl": 0.15})["passed"]


def test_the_modelfile_runs_the_smallest_level_that_passed(tmp_path):
    wanted = ["q4_k_m", "q5_k_m", "q6_k", "q8_0", "f16"]
    files = files_of(tmp_path, wanted)
    checks = {"levels": judged(wanted)}
    modelfile = tmp_path / "Modelfile"
    chosen = _write_modelfile(modelfile, files, checks, wanted, CHATML, ["<|im_end|>"], 8192)
    assert chosen == "q6_k"  # q4_k_m and q5_k_m are smaller, and failed
    text = modelfile.read_text(encoding="utf-8")
    assert text.startswith("FROM ./mine-q6_k.gguf\n") and "PARAMETER num_ctx 8192\n" in text
    summary = render_message(Message.from_dict(checks["levels_summary"]), CATALOGUE)
    assert summary.startswith("q4_k_m, q5_k_m did not pass") and "The Modelfile runs q6_k" in summary
    assert modelfile_level(checks["levels"], {k: v.stat().st_size for k, v in files.items()}, ["q8_0", "f16"]) == "q8_0"


def test_when_no_level_passes_the_modelfile_says_so_above_from(tmp_path):
    wanted = ["q4_k_m", "q5_k_m"]
    files = files_of(tmp_path, ["f16", *wanted])
    checks = {"levels": judged(["f16", *wanted])}
    assert _write_modelfile(tmp_path / "Modelfile", files, checks, wanted, CHATML, ["<|im_end|>"], 4096) is None
    lines = (tmp_path / "Modelfile").read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("# No level passed (q4_k_m, q5_k_m;") and lines[1] == "FROM ./mine-q4_k_m.gguf"
    assert checks["levels_summary"]["id"] == "gguf_export.levels_none_passed"


def test_num_ctx_holds_what_training_saw_within_the_models_context():
    assert modelfile_context(8192, 256) == 4096      # a short cutoff never gives less than Ollama's own default
    assert modelfile_context(32768, 6000) == 6000    # the run's cutoff_len
    assert modelfile_context(8192, 16384) == 8192    # never past the model's context
    assert modelfile_context(2048, None) == 2048     # no run config: Ollama's default, within the model's


def test_stop_strings_are_written_as_ollama_reads_them():
    text = build_modelfile("m.gguf", TemplateMatch(None, None), ["<|im_end|>", 'say "stop"', "back\\slash"], 4096)
    assert 'PARAMETER stop "<|im_end|>"\n' in text
    assert 'PARAMETER stop "say "stop""\n' in text and 'PARAMETER stop "back\\slash"\n' in text  # no escapes added
    assert "TEMPLATE" not in text and "#" not in text


def report_of(tmp_path) -> dict:
    wanted = ["q4_k_m", "q5_k_m", "q8_0"]
    files = files_of(tmp_path, ["f16", *wanted])
    levels = judged(["f16", *wanted])
    checks = {"levels": levels, "passed": False, "failed": ["q4_k_m", "q5_k_m"],
              "summary": {"id": "gguf_export.check_summary", "args": {"agree": 10, "total": 10, "tokens": 8}},
              "levels_summary": levels_summary(levels, wanted, "q8_0", "q4_k_m").to_dict()}
    return {"files": {lv: {"file": p.name, "bytes": p.stat().st_size} for lv, p in files.items() if lv != "f16"},
            "checks": checks, "passed": False, "ollama": "ollama create mine -f Modelfile", "template_note": "",
            "modelfile_level": "q8_0", "failed_levels": ["q4_k_m", "q5_k_m"]}


def test_the_report_lines_flag_each_failed_level(tmp_path):
    lines = gguf_lines(report_of(tmp_path))
    assert lines[0].startswith("GGUF (CHECK FAILED")
    q5 = next(line for line in lines if "mine-q5_k_m.gguf" in line)
    assert "FAILED: q5_k_m: 5 of 10 greedy answers agree" in q5 and "mean KL divergence from f16 of 0.251" in q5
    assert next(line for line in lines if "mine-q8_0.gguf" in line).endswith(" - passed")
    assert any(line.startswith("q4_k_m, q5_k_m did not pass") for line in lines)


def test_the_export_tab_flags_each_failed_level_in_chinese(tmp_path):
    ctx = UIContext(workspace=Workspace(tmp_path / "workspace").ensure(), texts=merge_texts(export.TEXT), i18n=None)
    view = export._gguf_view(ctx, "zh", report_of(tmp_path))
    assert "GGUF 检查未通过" in view and "❌ mine-q5_k_m.gguf" in view and "❌ mine-q4_k_m.gguf" in view
    assert "❌ mine-q8_0.gguf" not in view
    assert "q5_k_m：10 个贪心回答中有 5 个与适配器的回答前 8 个 token 一致；达到 8 个才算通过。" in view
    assert "Modelfile 使用通过的级别中最小的 q8_0" in view
