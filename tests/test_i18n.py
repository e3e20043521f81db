"""The Chinese interface is complete: every backend message id, every
RunConfig help text and the Runs tab's charts and tables have Chinese; a
failed run's error and advice are shown in the user's language.

When one of these fails after you added a message or a RunConfig field, its
message names what to add and where."""

from __future__ import annotations

import ast
import dataclasses
import json
import string
from pathlib import Path

import pytest

from backend.config import RunConfig
from backend.config_policy import ConfigError
from backend.config_recipes import tiny_config
from backend.messages import CATALOGUE, Message, message_of, msg
from backend.runs.files import read_status, update_status
from backend.runs.info import InfoReader
from backend.training.errors import explain, oom_advice
from ui import forms
from ui.context import UIContext
from ui.i18n import localize, merge_texts
from ui.tabs import runs, train
from ui.texts.config_help import HELP_ZH
from ui.texts.message_texts import ZH
from ui.views import run_view

REPO = Path(__file__).resolve().parents[1]
# Modules whose user-facing errors all go through backend/messages.py.
CATALOGUED_MODULES = ("backend/config.py", "backend/runs/store.py", "backend/runs/info.py", "backend/training/errors.py",
                      "backend/training/session.py", "backend/chat/generation.py", "backend/chat/engine.py",
                      "backend/models/loading.py", "backend/data/saved_datasets.py", "backend/models/hardware.py", "backend/models/memory.py",
                      "backend/export/exporter.py", "backend/export/outputs.py", "backend/evaluation/evaluator.py",
                      "backend/evaluation/scoring.py",
                      "backend/training/cli.py", "backend/storage/safe_names.py", "backend/data/fixes.py",
                      "backend/chat/targets.py", "backend/chat/cli.py", "backend/chat/vote_data.py",
                      "backend/evaluation/benchmarks.py", "backend/evaluation/benchmark_specs.py",
                      "backend/scoring/errors.py", "backend/scoring/scorer_specs.py", "backend/scoring/structured.py",
                      "backend/scoring/text_match.py", "backend/scoring/length_bounds.py",
                      "backend/judge/client.py", "backend/judge/templates.py", "backend/judge/sources.py",
                      "backend/judge/evalset.py", "backend/judge/judgement_file.py", "backend/judge/cli.py")
USER_ERRORS = {"ConfigError", "RunError", "ModelLoadError", "DatasetRefused", "DatasetExists", "DeviceChoiceError",
               "EstimateUnavailable", "ExportError", "EvalError", "UnsafeName", "FixRefused", "TargetError",
               "VoteDataError", "BenchmarkError", "ScorerError", "JudgeError", "JudgeTemplateError", "JudgeSourceError",
               "EvalSetError", "UserError"}


def _fields(template: str) -> set[str]:
    return {name.split("!")[0].split(".")[0] for _, name, _, _ in string.Formatter().parse(template) if name}


def test_every_backend_message_has_chinese_with_the_same_placeholders():
    missing = sorted(set(CATALOGUE) - set(ZH))
    assert not missing, ("backend/messages.py ids without Chinese: add them to ZH in ui/texts/message_texts.py:\n"
                         + "\n".join(f'    "{k}": "",  # {CATALOGUE[k]}' for k in missing))
    stale = sorted(set(ZH) - set(CATALOGUE))
    assert not stale, f"ui/texts/message_texts.py translates ids that backend/messages.py no longer has: {stale}"
    differ = [k for k in CATALOGUE if _fields(CATALOGUE[k]) != _fields(ZH[k])]
    assert not differ, "placeholders differ between English and Chinese: " + ", ".join(differ)
    for template in ZH.values():  # every template renders
        template.format(**{name: 1 for name in _fields(template)})


def test_every_runconfig_field_has_chinese_help():
    fields = {f.name: f.metadata["help"] for f in dataclasses.fields(RunConfig)}
    missing = [name for name in fields if not HELP_ZH.get(name)]
    assert not missing, ("RunConfig fields without Chinese help: add them to HELP_ZH in ui/texts/config_help.py:\n"
                         + "\n".join(f'    "{n}": "",  # {fields[n]}' for n in missing))
    stale = sorted(set(HELP_ZH) - set(fields))
    assert not stale, f"ui/texts/config_help.py has help for fields RunConfig no longer has: {stale}"
    for name in forms.FIELD_NAMES:  # what the form shows under each field (and under the GRPO rewards' widgets)
        assert forms.HELP_TEXT[f"train.help.{name}"]["zh"] != forms.HELP_TEXT[f"train.help.{name}"]["en"], name
    assert all(text["zh"] != text["en"] for text in forms.HELP_TEXT.values())


def _plain_user_errors(path: Path) -> list[str]:
    """`raise ConfigError("...")` / `RunError(f"...")` with literal text instead of a catalogued message."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
            name = getattr(node.exc.func, "id", None)
            if name in USER_ERRORS and isinstance(node.exc.args[0], (ast.Constant, ast.JoinedStr)):
                found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    return found


def test_user_errors_of_catalogued_modules_have_message_ids():
    plain = [hit for module in CATALOGUED_MODULES for hit in _plain_user_errors(REPO / module)]
    assert not plain, ("user errors raised with plain text (give them an id in backend/messages.py, Chinese in "
                       "ui/texts/message_texts.py, and raise ConfigError(msg(id, ...))): " + ", ".join(plain))


def test_errors_render_in_english_for_the_cli_and_in_chinese_for_the_ui():
    with pytest.raises(ConfigError) as info:
        tiny_config(val_size=1.5)
    assert str(info.value) == "val_size is a share of the data in [0, 1) (got 1.5)."  # the CLI prints this
    assert localize(info.value, "zh") == "val_size 是数据的比例，必须在 [0, 1) 之间（当前为 1.5）。"
    assert localize(info.value, "en") == str(info.value)
    assert localize("a library's own words", "zh") == "a library's own words"
    advice = oom_advice(tiny_config())
    assert Message.from_dict(json.loads(json.dumps(advice.to_dict()))) == advice
    assert localize(advice, "zh").startswith("可尝试：调低 per_device_train_batch_size（当前 8）")
    assert message_of(msg("train.advice.log")) == msg("train.advice.log")


def test_a_failed_run_shows_error_and_advice_in_chinese(tmp_path):
    run_dir = tmp_path / "20260101-000000-x"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text(tiny_config().to_yaml(), encoding="utf-8")
    try:
        tiny_config(lora_target=[])
    except ConfigError as error:
        explained = explain(error)
    update_status(run_dir, state="failed", **explained.status_fields())
    status = read_status(run_dir)
    assert status["error"] == "lora_target is empty: use 'all-linear' or name at least one module."  # English kept
    info = InfoReader().read(run_dir, status)
    texts = merge_texts(runs.TEXT)
    zh = run_view.alert_text(lambda k, **v: texts[k]["zh"].format(**v), info, "zh")
    assert "lora_target 为空" in zh and "请修改上面提到的设置后重新开始" in zh
    # A later plain-text error (e.g. written by the store) replaces the catalogued one.
    update_status(run_dir, error="The worker exited with code 9; see train.log.")
    info = InfoReader().read(run_dir, read_status(run_dir))
    assert info.error_message is None and info.advice_message is not None


def test_a_lost_run_tells_its_story_in_chinese(tmp_path):
    from backend.runs.store import RunStore
    from backend.runs.workspace import Workspace

    store = RunStore(Workspace(tmp_path / "ws").ensure())
    run_dir = store.runs_dir / "20260101-000000-lost"
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(tiny_config().to_yaml(), encoding="utf-8")
    update_status(run_dir, state="running", pid=2**22 + 12345, create_time=1.0, started_at=1.0)  # no such process
    info = store.get(run_dir.name)
    assert info.state == "lost" and "ended without recording a final state" in info.error  # English on disk
    texts = merge_texts(runs.TEXT)
    zh = run_view.alert_text(lambda k, **v: texts[k]["zh"].format(**v), info, "zh")
    assert "结束时没有记录最终状态" in zh and "没有完成任何检查点" in zh


def test_runs_tab_charts_and_table_in_chinese(workspace):
    ctx = UIContext(workspace=workspace, texts=merge_texts(train.TEXT, runs.TEXT), i18n=None)
    records = [{"kind": "train", "step": s, "loss": 2.0 / s, "learning_rate": 1e-3, "grad_norm": 1.0, "time": s}
               for s in range(1, 4)] + [{"kind": "eval", "step": 3, "eval_loss": 1.0, "time": 3}]
    loss, lr, *_ = runs.figures(ctx, "zh", records)
    assert [t.name for t in loss.data] == ["训练损失", "训练损失（平滑）", "验证损失"]
    assert loss.layout.xaxis.title.text == "步数" and lr.data[0].name == "学习率"
    table = runs.table_value(lambda k, **v: ctx.msg("zh", k, **v), [])
    assert table["headers"][:3] == ["运行", "状态", "模型"]


def test_data_errors_read_in_chinese_and_stay_english_for_the_cli(tmp_path):
    from backend.data.checks import check_file
    from backend.data.errors import DataError

    path = tmp_path / "bad.json"
    path.write_bytes(b'[{"instruction": "a", "output": "b"},\n {"instruction": "c" "output": "d"}]')
    with pytest.raises(DataError) as info:
        check_file(path)
    assert str(info.value) == (f"{path} (line 2, column 22): invalid JSON in row 1: Expecting ',' delimiter. "
                               "Fix the JSON at that spot (a missing comma or quote, or a trailing comma?)")
    zh = localize(info.value, "zh")
    assert zh == (f"{path}（第 2 行第 22 列）：第 1 条记录的 JSON 无效：Expecting ',' delimiter。"
                  "请修正该处的 JSON（缺少逗号或引号，或多了结尾逗号？）")


def test_data_errors_of_the_data_layer_have_message_ids():
    """Every DataError raised in backend/data/ (but the command line's own) gives its problem as a message id."""
    plain = []
    for path in sorted((REPO / "backend" / "data").rglob("*.py")):
        if path.name == "cli.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            call = node.exc if isinstance(node, ast.Raise) else node.value if isinstance(node, ast.Return) else None
            if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "DataError" and len(call.args) > 1 \
                    and isinstance(call.args[1], (ast.Constant, ast.JoinedStr)):
                plain.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not plain, "DataError with plain text (give it an id in backend/messages.py): " + ", ".join(plain)


def test_train_tab_model_check_in_chinese(workspace, tmp_path):
    ctx = UIContext(workspace=workspace, texts=merge_texts(train.TEXT, runs.TEXT), i18n=None)
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "config.json").write_text("{}")
    report = train.check_model(ctx, "zh", str(tmp_path / "half"))
    assert "没有分词器文件" in report and "没有权重" in report and "No tokenizer" not in report


def test_train_plan_says_why_there_is_no_estimate_in_chinese(tmp_path):
    from backend.models.hardware import as_dicts, detect_devices
    from backend.runs.workspace import Workspace

    fresh = Workspace(tmp_path / "ws").ensure()  # the demo model is not built yet
    ctx = UIContext(workspace=fresh, texts=merge_texts(train.TEXT, runs.TEXT), i18n=None)
    devices = as_dicts(detect_devices())
    _, estimate = train.plan(ctx, "zh", "demo", "demo", {"rows": 10}, devices, *forms.form_values(tiny_config()))
    assert "演示模型尚未构建" in estimate
    _, estimate = train.plan(ctx, "zh", "Qwen/Qwen2.5-0.5B-Instruct", "demo", {"rows": 10}, devices,
                             *forms.form_values(tiny_config(devices="7")))
    assert "没有 GPU cuda:7" in estimate


def test_every_data_check_has_a_chinese_title():
    from backend.data.checks.specs import PAIR_SPECS, SPECS
    from ui.texts.data_texts import TEXT as DATA_TEXT

    missing = sorted({s.id for s in [*SPECS, *PAIR_SPECS]} - {k.removeprefix("data.check.") for k in DATA_TEXT})
    assert not missing, ("data checks without a title in ui/texts/data_texts.py (add "
                         + ", ".join(f'"data.check.{m}": {{"en": ..., "zh": ...}}' for m in missing) + ")")


def test_evaluate_and_export_refusals_in_chinese(tmp_path):
    from backend.evaluation.evaluator import start_evaluation
    from backend.evaluation.scoring import EvalError
    from backend.export.outputs import ExportError, parse_size
    from backend.runs.jobs import FAILED, read_progress, stage_of, write_progress

    with pytest.raises(EvalError) as info:
        start_evaluation(tmp_path, [])
    assert localize(info.value, "zh") == "请至少选择一个检查点（或基础模型）进行评估。"
    with pytest.raises(ExportError) as info:
        parse_size("big")
    assert "不是有效的大小" in localize(info.value, "zh") and "is not a size" in str(info.value)
    progress = tmp_path / "job.json"  # a job's failure as the detached process records it
    write_progress(progress, state=FAILED, error=info.value.catalogued)
    state = read_progress(progress)
    assert state["error"] == str(info.value) and "不是有效的大小" in localize(stage_of(state, "error"), "zh")


def _alert_zh(info) -> str:
    texts = merge_texts(runs.TEXT)
    return run_view.alert_text(lambda k, **v: texts[k]["zh"].format(**v), info, "zh")


def test_resume_refusals_and_warnings_in_chinese(tmp_path):
    from backend.training.cli import _prepare_resume, parse_args

    run_dir = tmp_path / "20260101-000000-r"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text(tiny_config().to_yaml(), encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        _prepare_resume(parse_args(["--resume", str(run_dir), "--set", "lora_alpha=64"]))
    assert "different model or adapter shape or scale (lora_alpha 32 -> 64)" in str(info.value)
    update_status(run_dir, state="failed", **explain(info.value).status_fields())
    zh = _alert_zh(InfoReader().read(run_dir, read_status(run_dir)))
    assert "不能在更换模型、适配器形状或缩放后继续训练（lora_alpha 32 -> 64）" in zh
    job = _prepare_resume(parse_args(["--resume", str(run_dir), "--set", "seed=8"]))
    assert str(job.warnings[0]).startswith("resuming with seed changed from 42 to 8")  # train.log
    assert localize(job.warnings[0], "zh").startswith("继续训练时 seed 从 42 改为 8")
    update_status(run_dir, state="running", resume_warnings=[job.warnings[0].to_dict()])  # as the worker records it
    assert _alert_zh(InfoReader().read(run_dir, read_status(run_dir))).startswith("⚠ 继续训练时 seed 从 42 改为 8")


def test_unsafe_names_refused_in_chinese(workspace):
    from backend.data.saved_datasets import validate_name
    from backend.export.exporter import ExportError, export_folder
    from backend.storage.safe_names import UnsafeName, path_inside
    from ui.tabs import data
    from ui.texts.data_texts import TEXT as DATA_TEXT

    with pytest.raises(UnsafeName) as info:
        validate_name("../x")
    assert str(info.value).startswith("dataset name '../x' is not allowed")
    ctx = UIContext(workspace=workspace, texts=merge_texts(DATA_TEXT), i18n=None)
    assert "数据集名称 '../x' 不可用" in data.error_text(ctx, "zh", info.value)  # the Data tab's save
    with pytest.raises(ExportError) as info:
        export_folder(workspace, "a/b")
    assert "导出名称 'a/b' 不可用" in localize(info.value, "zh") and "Export name" in str(info.value)
    with pytest.raises(UnsafeName) as info:
        path_inside(workspace.root, "../x")
    assert "会跳出" in localize(info.value, "zh")


def test_fix_and_chat_target_errors_in_chinese(tmp_path):
    from backend.chat.targets import TargetError, target_for_folder
    from backend.data.fixes import FixPlan, FixRefused

    with pytest.raises(FixRefused) as info:
        FixPlan(conflicts="merge")
    assert str(info.value).startswith("conflicts must be one of") and "必须是" in localize(info.value, "zh")
    with pytest.raises(TargetError) as info:
        target_for_folder("demo", tmp_path / "nope")
    assert "does not exist" in str(info.value) and "不存在：请检查路径" in localize(info.value, "zh")
    (tmp_path / "empty").mkdir()
    with pytest.raises(TargetError) as info:
        target_for_folder("demo", tmp_path / "empty")
    assert "既没有 PEFT 适配器" in localize(info.value, "zh")


def test_a_stopped_run_explains_its_stop_in_chinese(tmp_path):
    from backend.runs.store import RunStore
    from backend.runs.workspace import Workspace

    store = RunStore(Workspace(tmp_path / "ws").ensure())
    run_dir = store.runs_dir / "20260101-000000-stop"
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(tiny_config().to_yaml(), encoding="utf-8")
    update_status(run_dir, state="running", pid=2**22 + 12345, create_time=1.0, started_at=1.0,  # no such process
                  stop_requested_at=2.0, stop_note=msg("run.note.killed", grace_s=1.0).to_dict())
    info = store.get(run_dir.name)
    assert info.state == "stopped" and info.advice.startswith("The worker did not stop within 1 s and was killed.")
    assert _alert_zh(info).startswith("⏹ 训练进程在 1 秒内没有停止，已被强制终止。")


def test_row_problems_of_the_schema_check_in_chinese(workspace, tmp_path):
    from ui.tabs import data
    from ui.texts.data_texts import TEXT as DATA_TEXT

    ctx = UIContext(workspace=workspace, texts=merge_texts(DATA_TEXT), i18n=None)
    path = tmp_path / "rows.jsonl"
    rows = [{"instruction": "a", "output": "b"}, {"instruction": "c"}, {"instruction": 7, "output": "d"}]
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    out = data.open_upload(ctx, "zh", str(path), "", 256, None)
    html = data.show_check(ctx, "zh", out["state"], "schema")
    assert "output: 缺失" in html and "instruction: 是数字（7），应为文本：请加上引号" in html
    assert "is missing" not in html
    english = data.show_check(ctx, "en", out["state"], "schema")
    assert "output: is missing" in english and "instruction: is a number (7), expected text" in english


def test_a_chat_column_error_in_chinese(workspace):
    from backend.chat.generation import Reply, _explain
    from backend.chat.targets import ChatTarget
    from ui.chat_session import ChatSession, column_notes
    from ui.tabs import chat

    reply = Reply()
    reply.fail(_explain(RuntimeError("CUDA out of memory. Tried to allocate 2 GiB")))
    assert reply.error.startswith("The device ran out of memory while generating")  # the command line
    ctx = UIContext(workspace=workspace, texts=merge_texts(chat.TEXT), i18n=None)
    session = ChatSession(histories={"a": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": ""}]})
    say = chat.ChatServices(ctx).say("zh")
    notes = column_notes(session, ["a"], {"a": ChatTarget(model="demo")}, [reply], say, "zh")
    assert any("生成时设备内存不足" in n for n in notes)
    assert session.histories["a"][-1]["content"].startswith("⚠️ 生成时设备内存不足")


# --- no English left in the Chinese UI -----------------------------------------------------------------
# Latin-letter words a Chinese page may show: names (of formats, methods, programs, TRL's pair fields), units.
LATIN_ALLOWED = {"GGUF", "LoRA", "QLoRA", "DoRA", "KL", "MB", "GiB", "MLP", "CPU", "GPU", "token", "top", "Ollama",
                 "chosen", "rejected", "TFLOP", "GFLOPs", "min", "auto", "English", "Python"}


def english_words(text: str) -> list[str]:
    """The words of `text` a Chinese page should not show in English: HTML tags, code, and tokens that are
    identifiers or file names (with _ . / = or a digit: q4_k_m, llama.cpp, top-1) left aside."""
    import html
    import re

    text = re.sub(r"<code>.*?</code>|`[^`]*`", " ", text)
    text = html.unescape(re.sub(r"<[^>]+>", " ", text))
    tokens = [t for t in re.split(r"[\s（）()，、：；。,;]+", text) if t and not re.search(r"[_./\\=\d]", t)]
    return [w for t in tokens for w in re.findall(r"[A-Za-z]{2,}", t) if w not in LATIN_ALLOWED]


def test_export_tables_in_chinese(workspace, tmp_path):
    """The verification and GGUF tables of a finished export, as the detached job records it."""
    from backend.runs.jobs import COMPLETED, write_progress
    from ui.tabs import export

    ctx = UIContext(workspace=workspace, texts=merge_texts(export.TEXT), i18n=None)
    summary = msg("gguf_export.check_summary", tokens=8, agree=10, total=10).to_dict()
    check = {"equal": 9, "agree_first_8": 10, "total": 10, "mean_kl": 0.01, "top1_agreement": 0.97}
    result = {"out": str(tmp_path / "x"), "message": "", "notes": [],
              "verification": {"verdict": "passed", "summary": "", "rows": [
                  {"prompt": "你好", "expected": "你好！", "exported": "你好！", "outcome": "equal"}]},
              "gguf": {"passed": True, "ollama": "ollama create x -f Modelfile",
                       "files": {"q4_k_m": {"file": "x-q4_k_m.gguf", "bytes": 2e6}},
                       "checks": {"summary": summary, "levels": {"q4_k_m": check}}}}
    progress = tmp_path / "job.json"
    write_progress(progress, state=COMPLETED, result=result)
    report, _ = export.poll(ctx, "zh", str(progress))
    import re

    headers = re.findall(r"<th>(.*?)</th>", report)
    assert len(headers) == 10 and not english_words(" ".join(headers)), headers
    assert "<th>prompt</th>" in export.poll(ctx, "en", str(progress))[0]


def test_export_says_the_gguf_tools_are_missing_before_start(workspace, tmp_path, monkeypatch):
    """Without llama.cpp's tools the GGUF levels would fail at their step: the tab says so before Start,
    with the command that installs them, and Start with a GGUF level is refused."""
    from backend.export import llama_cpp_tools
    from ui.tabs import export

    monkeypatch.setenv(llama_cpp_tools.TOOLS_ENV, str(tmp_path / "no-llama.cpp"))  # an empty install folder
    ctx = UIContext(workspace=workspace, texts=merge_texts(export.TEXT), i18n=None)
    english, note = export.gguf_tools_note(ctx, "en"), export.gguf_tools_note(ctx, "zh")
    assert "cannot be exported on this machine" in english and "`make gguf-tools`" in english, english
    assert "`make gguf-tools`" in note and not english_words(note), note  # the missing part in Chinese too
    form = ["20260101-000000-x", "checkpoint-8", "merged", "x", "2GB", "auto", False, True, ""]
    said, job = export.start_job(ctx, "zh", *form, ["q4_k_m"], export.NO_LORA)
    assert job is None and said == note
    said, job = export.start_job(ctx, "zh", *form, [], "f16")  # the LoRA alone as GGUF needs them too
    assert job is None and said == note


def test_data_drill_down_heading_in_chinese(workspace, tmp_path):
    from ui.tabs import data
    from ui.texts.data_texts import TEXT as DATA_TEXT

    ctx = UIContext(workspace=workspace, texts=merge_texts(DATA_TEXT), i18n=None)
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [{"instruction": "a", "output": "b"}, {"instruction": "c"}]),
                    encoding="utf-8")
    out = data.open_upload(ctx, "zh", str(path), "demo", 256, None)
    html = data.show_check(ctx, "zh", out["state"], "schema")
    assert html.startswith("<h4>无法使用的行（无法读取、缺少字段、类型错误）</h4>"), html[:80]
    assert data.show_check(ctx, "en", out["state"], "schema").startswith("<h4>Rows that cannot be used")


def test_runs_tab_charts_have_no_english_traces_in_chinese(workspace):
    ctx = UIContext(workspace=workspace, texts=merge_texts(train.TEXT, runs.TEXT), i18n=None)
    records = [{"kind": "train", "step": s, "loss": 1.0, "learning_rate": 1e-3, "grad_norm": 1.0, "time": s,
                "tokens_per_second": 9.0, "memory_allocated_gb": 1.0, "memory_reserved_gb": 2.0,
                "memory_rss_gb": 3.0, "grad_norms": {"attn": [1.0, 2.0], "mlp": [3.0, 4.0]},
                "rewards/chosen": 0.1, "rewards/rejected": -0.1, "rewards/margins": 0.2, "rewards/accuracies": 0.5}
               for s in range(1, 3)]
    records.append({"kind": "eval", "step": 2, "eval_loss": 1.0, "eval_rewards/margins": 0.3, "time": 2})
    shown = []
    for figure in runs.figures(ctx, "zh", records):
        layout = figure.layout
        shown += [layout.title.text or "", layout.xaxis.title.text or "", layout.yaxis.title.text or ""]
        shown += [t.name or "" for t in figure.data] + [str(y) for t in figure.data if t.type == "heatmap" for y in t.y]
    assert not english_words(" | ".join(shown)), english_words(" | ".join(shown))
    memory = runs.figures(ctx, "en", records)[4]
    assert [t.name for t in memory.data] == ["allocated", "reserved", "rss"]  # English as before


def _run_folder(store, name: str, state: str, **settings):
    run_dir = store.runs_dir / name
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(tiny_config(**settings).to_yaml(), encoding="utf-8")
    update_status(run_dir, state=state, started_at=1.0, ended_at=2.0)
    lines = [{"kind": "train", "step": 1, "loss": 1.0, "time": 1.0}]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    return run_dir.name


def test_runs_table_states_in_chinese_and_no_reward_charts_for_an_sft_run(ctx):
    sft = _run_folder(ctx.store, "20260101-000000-sft", "stopped")
    dpo = _run_folder(ctx.store, "20260101-000001-dpo", "completed", stage="dpo", dataset="demo-pairs")
    rows, ids, _ = runs.list_runs(ctx, lang="zh")
    states = [row[run_view.TABLE_COLUMNS.index("state")] for row in rows]
    assert sorted(states) == ["⏹ 已停止", "✅ 已完成"], states
    assert "⏹ stopped" in [row[1] for row in runs.list_runs(ctx, lang="en")[0]]
    out = runs.tick(ctx, "zh", None, sft)
    assert [u.get("visible") for u in out[-2:]] == [False, False]  # no empty reward charts for an sft run
    out = runs.tick(ctx, "zh", None, dpo)
    assert [u.get("visible") for u in out[-2:]] == [True, True] and out[-2]["value"].layout.title.text


def test_markdown_bold_in_chinese_texts_renders(workspace):
    """`**队列：**{n}`: markdown does not end bold after a full-width colon followed by a letter, so the
    page showed the asterisks. Every Chinese text with ** renders bold (markdown-it follows CommonMark)."""
    from markdown_it import MarkdownIt

    from ui import shell

    texts = merge_texts(shell.TEXT, shell.run_notice.TEXT, *(m.TEXT for m in shell.TABS.values()))
    render = MarkdownIt("commonmark").render
    literal = []
    for key, entry in [*texts.items(), *((k, {"zh": v}) for k, v in ZH.items())]:
        zh = entry["zh"].replace("**kwargs", "")  # Python's, not markdown's
        if "**" in zh:
            text = zh.format(**{name: 1 for name in _fields(zh)})
            if "**" in render(text):
                literal.append(key)
    assert not literal, f"Chinese texts whose ** shows as asterisks (put the punctuation outside): {literal}"


def test_estimate_from_flops_says_measured_in_chinese():
    from backend.training.estimate import Estimate

    estimate = Estimate(60.0, 120.0, 240.0, "flops", 1.2, 100,
                        detail={"tokens": "512", "gflops": "0.1", "device": "CPU", "rate": "0.2",
                                "rate_kind": "measured", "share": "30%"})
    zh = localize(estimate.message(), "zh")
    assert "（实测）" in zh and not english_words(zh), english_words(zh)
    assert "(measured)" in str(estimate.message())


def test_train_form_choices_are_translated(workspace):
    """The method and gradient checkpointing radios show their choices in the page's language."""
    import gradio as gr

    from ui.i18n import build_i18n

    texts = merge_texts(train.TEXT, runs.TEXT)
    ctx = UIContext(workspace=workspace, texts=texts, i18n=build_i18n(texts))
    with gr.Blocks():
        built = forms.build_inputs(ctx, forms.ALL_FIELDS, RunConfig())
    shown = {}
    for name in ("method_choice", "gradient_checkpointing"):
        labels = [label for label, _ in built[name].choices]
        assert all(isinstance(label, gr.i18n.I18nData) for label in labels), (name, labels)
        shown[name] = [texts[label.key]["zh"] for label in labels]
    assert shown == {"method_choice": ["LoRA", "QLoRA 4 位", "QLoRA 8 位", "全参数"],
                     "gradient_checkpointing": ["自动", "开", "关"]}


def test_the_language_switch_gives_gradio_a_locale_it_has_its_own_words_in(tmp_path, starts_processes):
    """gradio's own words (the upload area's "Drop File Here", "Click to Upload") come from its frontend's
    locale bundles, which are named zh-CN and zh-TW, none "zh": the switch set "zh", so they stayed English.
    The switch's script, run in node against a stand-in of gradio's core module, must set a locale gradio
    ships those words in (svelte-i18n then finds our texts, kept under "zh", by trying zh-CN, zh, en)."""
    import re
    import shutil
    import subprocess

    import gradio

    from ui.i18n import APPLY_LANGUAGE_JS

    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the switch's script cannot run outside a browser here")
    assets = tmp_path / "assets"
    assets.mkdir()
    (tmp_path / "package.json").write_text('{"type": "module"}', encoding="utf-8")
    (assets / "core-test.js").write_text("export function changeLocale(locale) { globalThis.told(locale); }\n",
                                         encoding="utf-8")
    script = f"""
const told = new Promise((resolve) => {{ globalThis.told = resolve; }});
globalThis.performance = {{getEntriesByType: () => [{{name: {json.dumps((assets / "core-test.js").as_uri())}}}]}};
globalThis.document = {{querySelectorAll: () => [], documentElement: {{setAttribute: () => {{}}}}}};
({APPLY_LANGUAGE_JS})(process.argv[1]);
console.log(await told);
"""
    def locale_set(lang: str) -> str:
        return subprocess.run([node, "--input-type=module", "-e", script, lang], capture_output=True, text=True,
                              check=True, cwd=tmp_path, timeout=60).stdout.strip()

    # gradio's own words by locale, as its core module loads them: "./lang/zh-CN.json": ... import(`./zh-CN-<hash>.js`)
    assets = Path(gradio.__file__).parent / "templates" / "frontend" / "assets"
    core = next(assets.glob("core-*.js")).read_text(encoding="utf-8")
    bundles = dict(re.findall(r'"\./lang/([\w-]+)\.json":\(\)=>[^`]*`\./([^`]+)`', core))
    locale = locale_set("zh")
    assert locale in bundles, f"gradio has no words of its own for locale {locale!r}, only for {sorted(bundles)}"
    assert "点击上传" in (assets / bundles[locale]).read_text(encoding="utf-8")  # "Click to Upload"
    assert locale_set("en") == "en" and "en" in bundles
