"""LLaMA-Factory's data folder as its data/README.md documents it: every kind of dataset_info.json entry
(ranking, kto_tag, columns, tags, formatting, hub-only) and every kind of row it ships a demo of is
either read with all it holds or refused with a sentence that says what it is and what to do.

The files are built here in the demos' own shapes (dpo_en_demo, kto_en_demo, mllm_*, c4_demo)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backend.config_policy import ConfigError
from backend.data.cli import main as data_cli
from backend.data.errors import DataError
from backend.data.load import load_file_rows
from backend.data.resolve import check_dataset
from backend.runs.workspace import Workspace

ROLE_TAGS = {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant"}


def _turns(question: str, answer: str) -> list[dict]:
    return [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]


def lf_folder(root: Path, entries: dict[str, tuple[dict, list[dict] | None]]) -> Path:
    """A data folder: dataset_info.json with each entry, and each entry's rows as its file_name."""
    folder = root / "data"
    folder.mkdir(exist_ok=True)
    info = {}
    for name, (entry, rows) in entries.items():
        info[name] = entry
        if rows is not None:
            (folder / entry["file_name"]).write_text(json.dumps(rows, ensure_ascii=False, indent=2), encoding="utf-8")
    (folder / "dataset_info.json").write_text(json.dumps(info, indent=2), encoding="utf-8")
    return folder


# kto_en_demo: OpenAI messages whose last turn is the answer, and a boolean `label` named by kto_tag.
KTO_ROWS = [{"messages": _turns(f"Question {i}?", f"Answer {i}."), "label": i % 3 != 0} for i in range(6)]
KTO_ENTRY = {"file_name": "kto_en_demo.json", "formatting": "sharegpt",
             "columns": {"messages": "messages", "kto_tag": "label"}, "tags": ROLE_TAGS}
DPO_ROWS = [{"conversations": [{"from": "human", "value": f"Question {i}?"}],
             "chosen": {"from": "gpt", "value": f"Answer {i}."}, "rejected": {"from": "gpt", "value": "No idea."}}
            for i in range(4)]
DPO_ENTRY = {"file_name": "dpo_en_demo.json", "ranking": True, "formatting": "sharegpt",
             "columns": {"messages": "conversations", "chosen": "chosen", "rejected": "rejected"}}


@pytest.fixture
def workspace_only(tmp_path) -> Workspace:
    return Workspace(tmp_path / "workspace").ensure()


def test_sft_on_preference_data_is_refused_with_the_stage_to_choose(tmp_path, workspace_only):
    folder = lf_folder(tmp_path, {"dpo_en_demo": (DPO_ENTRY, DPO_ROWS), "kto_en_demo": (KTO_ENTRY, KTO_ROWS)})
    with pytest.raises(ConfigError, match="stage sft .* holds preference pairs .*choose stage dpo, orpo or simpo"):
        check_dataset(str(folder), workspace_only, "dpo_en_demo", "sft")
    # The project's own pairs, a workspace dataset, are refused the same way.
    with pytest.raises(ConfigError, match="demo-pairs holds preference pairs"):
        check_dataset("demo-pairs", workspace_only, None, "sft")
    with pytest.raises(ConfigError, match="holds KTO rows .*learn the undesirable ones too; choose stage kto"):
        check_dataset(str(folder), workspace_only, "kto_en_demo", "sft")
    assert check_dataset(str(folder), workspace_only, "dpo_en_demo", "dpo") == folder


def test_kto_tag_entries_keep_their_labels_from_load_to_fix(tmp_path, workspace_only):
    alpaca_rows = [{"instruction": "Name a colour", "input": "", "output": "Blue.", "tag": True},
                   {"instruction": "Name a colour", "input": "warm", "output": "Seven.", "tag": False}]
    sharegpt_rows = [{"dialog": [{"speaker": "me", "text": "Hi?"}, {"speaker": "bot", "text": "Hello."},
                                 {"speaker": "me", "text": "2+2?"}, {"speaker": "bot", "text": "5."}], "ok": False}]
    folder = lf_folder(tmp_path, {
        "kto_en_demo": (KTO_ENTRY, KTO_ROWS),
        "kto_alpaca": ({"file_name": "kto_alpaca.json", "columns": {"kto_tag": "tag"}}, alpaca_rows),
        "kto_tagged": ({"file_name": "kto_tagged.json", "formatting": "sharegpt",
                        "columns": {"messages": "dialog", "kto_tag": "ok"},
                        "tags": {"role_tag": "speaker", "content_tag": "text", "user_tag": "me",
                                 "assistant_tag": "bot"}}, sharegpt_rows),
    })
    demo = load_file_rows(folder, dataset="kto_en_demo")
    assert demo.source.shape.name == "kto" and demo.total == 6
    assert demo.rows[0] == {"prompt": [{"role": "user", "content": "Question 0?"}],
                            "completion": [{"role": "assistant", "content": "Answer 0."}], "label": False}
    assert [row["label"] for row in demo.rows] == [row["label"] for row in KTO_ROWS]
    alpaca = load_file_rows(folder, dataset="kto_alpaca").rows
    assert alpaca[1] == {"prompt": [{"role": "user", "content": "Name a colour\nwarm"}],
                         "completion": [{"role": "assistant", "content": "Seven."}], "label": False}
    tagged = load_file_rows(folder, dataset="kto_tagged").rows
    assert tagged == [{"prompt": [{"role": "user", "content": "Hi?"}, {"role": "assistant", "content": "Hello."},
                                  {"role": "user", "content": "2+2?"}],
                       "completion": [{"role": "assistant", "content": "5."}], "label": False}]
    assert check_dataset(str(folder), workspace_only, "kto_en_demo", "kto") == folder
    # The same file given alone: a conversation beside a true / false label is KTO too.
    alone = load_file_rows(folder / "kto_en_demo.json")
    assert alone.source.shape.name == "kto" and alone.rows == demo.rows
    # fix saves the rows with their labels.
    assert data_cli(["fix", str(folder), "--dataset", "kto_en_demo", "--workspace", str(workspace_only.root),
                     "--out", "kto", "--drop-empty"]) == 0
    saved = [json.loads(line) for line in (workspace_only.datasets_dir / "kto" / "data.jsonl").open()]
    assert saved == demo.rows


def test_a_ranking_entry_reads_its_own_role_tags(tmp_path):
    rows = [{"dialog": [{"speaker": "me", "text": "2+2?"}], "chosen": {"speaker": "bot", "text": "4."},
             "rejected": {"speaker": "bot", "text": "5."}}]
    folder = lf_folder(tmp_path, {"pairs": ({"file_name": "pairs.json", "formatting": "sharegpt", "ranking": True,
                                             "columns": {"messages": "dialog", "chosen": "chosen",
                                                         "rejected": "rejected"},
                                             "tags": {"role_tag": "speaker", "content_tag": "text", "user_tag": "me",
                                                      "assistant_tag": "bot"}}, rows)})
    assert load_file_rows(folder).rows == [{"prompt": [{"role": "user", "content": "2+2?"}],
                                       "chosen": [{"role": "assistant", "content": "4."}],
                                       "rejected": [{"role": "assistant", "content": "5."}]}]


@pytest.mark.parametrize("column, placeholder", [("images", "<image>"), ("videos", "<video>"), ("audios", "<audio>")])
def test_multimodal_entries_and_rows_are_refused_not_trained_without_their_media(tmp_path, column, placeholder):
    rows = [{"messages": _turns(f"{placeholder}Who are they?", "Players."), column: [f"mllm_demo_data/1.{column}"]}]
    entry = {"file_name": "mllm.json", "formatting": "sharegpt", "columns": {"messages": "messages", column: column},
             "tags": ROLE_TAGS}
    folder = lf_folder(tmp_path, {"mllm": (entry, rows)})
    with pytest.raises(DataError, match=f"dataset 'mllm' is multimodal \\(columns: {column}={column}\\): the app "
                                        "trains text-only models.*Choose a text-only dataset"):
        load_file_rows(folder)
    # The file alone: each row is unusable, and says why.
    with pytest.raises(DataError, match=f"{column} holds 1 item\\(s\\): the app trains text-only models"):
        load_file_rows(folder / "mllm.json")
    # A placeholder without its media column is no plain text either (LLaMA-Factory reads it as media).
    bare = tmp_path / "placeholder.jsonl"
    bare.write_text(json.dumps({"instruction": f"{placeholder}Describe it", "output": "A cat."}) + "\n"
                    + json.dumps({"instruction": "Say hi", "output": "Hi"}) + "\n", encoding="utf-8")
    loaded = load_file_rows(bare)
    assert loaded.indices == [1]
    assert f"holds a {placeholder} placeholder" in str(loaded.rejected[0].problems[0][1])


def test_text_parts_with_value_load_and_other_parts_are_named(tmp_path):
    row = {"messages": [{"role": "system", "content": [{"type": "text", "value": "Be brief."}]},
                        {"role": "user", "content": [{"type": "text", "value": "Hi"}, {"type": "text", "text": "!"}]},
                        {"role": "assistant", "content": [{"type": "text", "value": "Hello."}]}]}
    path = tmp_path / "parts.jsonl"
    refused = {kind: {"messages": [{"role": "user", "content": "Hi"},
                                   {"role": "assistant", "content": [{"type": kind, "value": "x"},
                                                                     {"type": "text", "value": "Hello."}]}]}
               for kind in ("reasoning", "tool_call", "image_url")}
    path.write_text("".join(json.dumps(r) + "\n" for r in [row, *refused.values()]), encoding="utf-8")
    loaded = load_file_rows(path)
    assert loaded.rows == [{"messages": [{"role": "system", "content": "Be brief."},
                                         {"role": "user", "content": "Hi!"},
                                         {"role": "assistant", "content": "Hello."}]}]
    for item, kind in zip(loaded.rejected, refused):
        assert item.problems == [("messages[1].content[0]", item.problems[0][1])]
        assert str(item.problems[0][1]).startswith(f"holds a '{kind}' part: only text parts can be trained on")


@pytest.mark.parametrize("entry, words", [
    ({"hf_hub_url": "llamafactory/alpaca_en", "ms_hub_url": "llamafactory/alpaca_en"},
     ["dataset 'alpaca_en' is on the Hugging Face hub (llamafactory/alpaca_en), not a file in this folder",
      "hf download llamafactory/alpaca_en --repo-type dataset"]),
    ({"ms_hub_url": "deepctrl/deepctrl-sft-data"},
     ["on the ModelScope hub (deepctrl/deepctrl-sft-data)", "modelscope download --dataset deepctrl/deepctrl-sft-data"]),
    ({"script_url": "belle_multiturn", "formatting": "sharegpt"},
     ["dataset 'alpaca_en' is not a file in this folder (script_url: belle_multiturn)", "set \"file_name\""]),
])
def test_an_entry_that_lives_elsewhere_is_said_to_be_one(tmp_path, entry, words):
    folder = lf_folder(tmp_path, {"alpaca_en": (entry, None), "dpo_en_demo": (DPO_ENTRY, DPO_ROWS)})
    with pytest.raises(DataError) as refused:
        load_file_rows(folder, dataset="alpaca_en")
    assert all(word in str(refused.value) for word in words), str(refused.value)
    assert "has no local dataset named" not in str(refused.value)


def test_pretraining_text_is_named_with_what_the_app_takes(tmp_path):
    rows = [{"text": "A document about the sea."}, {"text": "Another document."}]
    folder = lf_folder(tmp_path, {"c4_demo": ({"file_name": "c4_demo.json", "columns": {"prompt": "text"}}, rows)})
    expected = "pretraining text.*no answer to train on. The app fine-tunes on rows with answers: alpaca"
    with pytest.raises(DataError, match=f"dataset 'c4_demo' is {expected}"):
        load_file_rows(folder)
    with pytest.raises(DataError, match=f"only a 'text' document each: this is {expected}"):
        load_file_rows(folder / "c4_demo.json")


ALPACA_ROWS = [{"instruction": f"Question {i}?", "input": "", "output": f"Answer {i}."} for i in range(10)]


def test_num_samples_takes_that_many_rows_as_llama_factory_does(tmp_path, workspace_only):
    """num_samples below the file's rows: that many distinct rows, drawn at random (the same ones for every
    reader); above: every row once, then random repeats up to the count. The check says what a run takes;
    a num_samples that is no count is refused with a sentence."""
    from backend.data.checks import check_file
    from backend.data.resolve import dataset_size
    from backend.data.resolve import load_rows as run_rows

    folder = lf_folder(tmp_path, {"few": ({"file_name": "qa.json", "num_samples": 4}, ALPACA_ROWS),
                                  "many": ({"file_name": "qa.json", "num_samples": 25}, None),
                                  "bad": ({"file_name": "qa.json", "num_samples": "all"}, None)})
    every = load_file_rows(folder / "qa.json").rows
    few, _ = run_rows(folder, dataset_name="few")
    assert len(few) == 4 and len({json.dumps(r) for r in few}) == 4 and all(r in every for r in few)
    assert few != every[:4]  # drawn at random, not the file's first rows
    assert run_rows(folder, dataset_name="few")[0] == few  # the worker, the evaluator and the Plan agree
    many, _ = run_rows(folder, dataset_name="many")
    assert len(many) == 25 and all(r in many for r in every) and all(r in every for r in many)
    assert dataset_size(str(folder), workspace_only, "few") == (4, False)
    report = check_file(folder, dataset="few")
    assert report.rows == 10 and any("num_samples = 4" in note for note in report.notes), report.notes
    with pytest.raises(DataError, match="num_samples = 'all'.*whole number"):
        load_file_rows(folder, dataset="bad")


def test_plain_text_is_pretraining_text_and_a_folder_is_said_to_be_one(tmp_path):
    """wiki_demo (a .txt file) is named as the pretraining text it is, as c4_demo is, not as an unknown file
    type; a file_name that names a folder is said to be one, with what LLaMA-Factory reads there."""
    folder = lf_folder(tmp_path, {"wiki_demo": ({"file_name": "wiki_demo.txt", "columns": {"prompt": "text"}}, None),
                                  "shards": ({"file_name": "shards"}, None)})
    (folder / "wiki_demo.txt").write_text("A document about the sea.\nAnother document.\n", encoding="utf-8")
    (folder / "shards").mkdir()
    (folder / "shards" / "part-0.json").write_text(json.dumps(ALPACA_ROWS[:2]), encoding="utf-8")
    for path, dataset, words in ((folder, "wiki_demo", "dataset 'wiki_demo' is pretraining text"),
                                 (folder / "wiki_demo.txt", None, "plain text, which LLaMA-Factory reads as pretraining text")):
        with pytest.raises(DataError) as refused:
            load_file_rows(path, dataset=dataset)
        text = str(refused.value)
        assert words in text and "no answer to train on" in text and "The app fine-tunes on rows with answers" in text
        assert "not supported" not in text
    with pytest.raises(DataError) as refused:
        load_file_rows(folder, dataset="shards")
    text = str(refused.value)
    assert "file_name 'shards' is a folder" in text and "every file in it" in text, text
    assert "is not a file in the folder" not in text


def test_a_system_turn_wins_over_the_system_column_and_roles_must_alternate(tmp_path):
    """As LLaMA-Factory's sharegpt converter: a conversation's own system turn is its system prompt (the
    system column is not joined to it; the tools still are); a row whose roles do not alternate user,
    assistant (human, human, gpt) is skipped, flagged by the check and counted under its own reason."""
    from backend.data.checks import check_file
    from backend.data.resolve import load_rows as run_rows
    from backend.training.dataset import RowCounts

    def turns(*pairs):
        return [{"from": who, "value": text} for who, text in pairs]

    rows = [{"conversations": turns(("system", "Turn prompt."), ("human", "Hi"), ("gpt", "Hello")),
             "system": "Column prompt.", "tools": '[{"name": "lookup"}]'},
            {"conversations": turns(("human", "One"), ("human", "Two"), ("gpt", "Answer"))},
            {"conversations": turns(("human", "Q"), ("gpt", "A")), "system": "Column prompt."},
            {"conversations": turns(("gpt", "Hello first"), ("human", "Q"), ("gpt", "A"))}]
    entry = {"file_name": "chat.json", "formatting": "sharegpt",
             "columns": {"messages": "conversations", "system": "system", "tools": "tools"}}
    folder = lf_folder(tmp_path, {"chat": (entry, rows)})
    loaded = load_file_rows(folder)
    assert loaded.indices == [0, 2]
    system = loaded.rows[0]["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("Turn prompt.\n\n")
    assert "Column prompt." not in system["content"] and "lookup" in system["content"]
    assert loaded.rows[0]["messages"][1:] == [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
    assert loaded.rows[1]["messages"][0] == {"role": "system", "content": "Column prompt."}
    schema = check_file(folder).check("schema")
    assert schema.rows == [1, 3]
    assert "conversations[1]" in str(schema.details[1]) and "alternate" in str(schema.details[1])
    assert "conversations[0]" in str(schema.details[3]) and "alternate" in str(schema.details[3])
    counts = RowCounts()
    assert len(run_rows(folder, counts)[0]) == 2
    from backend.data.resolve import ROLES_REASON  # the worker's reason, in summary.json

    assert counts.reasons == {ROLES_REASON: 2} and counts.dropped == 2
