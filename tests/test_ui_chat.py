"""The Chat tab's handlers called with the values a browser sends, on a real
run folder (real LoRA checkpoints of the demo model) and the real ChatEngine:
choices, refusals, answers streaming into columns, Stop, Clear, a blind vote
written to the run's preferences.json, and unloading."""

from __future__ import annotations

import json

import pytest

from backend.runs.workspace import Workspace
from tests.test_chat_support import make_lora_run, single_thread  # noqa: F401 (fixture)
from ui.chat_session import ChatSession
from ui.context import UIContext
from ui.i18n import merge_texts
from ui.tabs import chat

pytestmark = pytest.mark.usefixtures("single_thread")

# send_prompt / clear_all / record_vote outputs: 5 column updates, 5 headers, 5 chat values, then these.
HEADERS, BOTS, STATUS, SESSION, VOTE, TALLY = 5, 10, 15, 16, 17, 18
BASE, CKPT = "base@run-a", "run-a/checkpoint-20"
# greedy, temperature, top_p, top_k, repetition penalty, max new tokens, seed
SETTINGS = (True, 0.7, 0.9, 50, 1.0, 6, 0)


@pytest.fixture(scope="module")
def services(demo_model_dir, tmp_path_factory):
    """Chat services over a workspace whose run-a has complete checkpoint-10 and -20 (and an incomplete -30)."""
    workspace = Workspace(tmp_path_factory.mktemp("chat-tab") / "ws").ensure()
    make_lora_run(workspace.runs_dir / "run-a", demo_model_dir)
    return chat.ChatServices(UIContext(workspace=workspace, texts=merge_texts(chat.TEXT), i18n=None))


def send(services, session, picks, text="Say hello.", blind=False, settings=SETTINGS, runs=("run-a",)):
    """Every output send_prompt yields, as a list."""
    return list(chat.send_prompt(services, "en", list(runs), list(picks), "cpu", text, session, blind, "", *settings))


def test_choices_list_complete_checkpoints_and_skip_when_nothing_changed(services, tmp_path):
    runs, picks, device, notice, use_cpu, known = chat.refresh_choices(services, "en", [], [], "cpu", {})
    assert runs["choices"] == ["run-a"] and runs["value"] == ["run-a"]
    values = [value for _label, value in picks["choices"]]
    assert values == [BASE, "run-a/checkpoint-10", CKPT] and picks["value"] == []  # checkpoint-30 is incomplete
    assert "cpu" in device["choices"] and use_cpu["visible"] is False and notice == ""
    again = chat.refresh_choices(services, "en", ["run-a"], [CKPT], "cpu", known)
    # The pick changed what the lists hold, but a tick never sets the picks back to
    # what they were when it fired: the user may have picked another meanwhile.
    assert again[:2] == ({"__type__": "update"},) * 2 and again[5] != known
    same = chat.refresh_choices(services, "en", ["run-a"], [CKPT], "cpu", again[5])
    assert same[:3] == ({"__type__": "update"},) * 3  # a timer tick leaves an open dropdown alone
    plan, _ = chat.plan_outputs(services, "en", ["run-a"], [BASE, CKPT], "cpu")
    assert "base model demo" in plan
    empty = chat.ChatServices(UIContext(workspace=Workspace(tmp_path / "ws").ensure(),
                                        texts=services.ctx.texts, i18n=None))
    assert "No runs yet" in chat.refresh_choices(empty, "en", [], [], "cpu", {})[3]


def test_a_run_opened_elsewhere_joins_with_the_lists_choices(services):
    """It can arrive before the page load has filled the list: a value outside the choices
    would make gradio refuse every later event on the list."""
    import gradio as gr

    joined = chat.join_shared_run(services, "run-a", [])
    assert joined["choices"] == ["run-a"] and joined["value"] == ["run-a"]
    runs = gr.Dropdown(multiselect=True, choices=joined["choices"], value=joined["value"])
    assert runs.preprocess(joined["value"]) == ["run-a"]
    assert chat.join_shared_run(services, "run-a", ["run-a"]) == gr.skip()      # already there
    assert chat.join_shared_run(services, "run-gone", ["run-a"]) == gr.skip()   # not on disk


@pytest.mark.parametrize(("picks", "text", "settings", "said"), [
    ([], "hi", SETTINGS, "Pick the base and/or checkpoints"),
    ([BASE, CKPT], "  ", SETTINGS, "Type a message first"),
    ([BASE, "run-a/checkpoint-99"], "hi", SETTINGS, "run-a/checkpoint-99 is no longer on disk"),
    ([BASE], "hi", (False, 0.0, 0.9, 50, 1.0, 6, 0), "Temperature must be above 0"),
])
def test_a_prompt_that_cannot_be_sent_says_why_and_keeps_the_session(services, picks, text, settings, said):
    before = ChatSession(keys=[BASE], histories={BASE: [{"role": "user", "content": "earlier"}]})
    (only,) = send(services, before, picks, text, settings=settings)
    assert only[STATUS].startswith("⚠️") and said in only[STATUS]
    assert only[SESSION] is before and only[BOTS] == [{"role": "user", "content": "earlier"}]


def test_columns_answer_and_the_conversation_continues_then_clear(services):
    outputs = send(services, ChatSession(), [BASE, CKPT])
    assert outputs[0][STATUS] == "Loading models …"
    last = outputs[-1]
    session = last[SESSION]
    assert last[STATUS].startswith("**Done.**") and "tokens/s" in last[STATUS]
    assert session.id not in services.stops  # the answer's Stop signal is let go when it ends
    assert [u["visible"] for u in last[:5]] == [True, True, False, False, False]
    assert last[HEADERS].startswith("**base**") and "step 20" in last[HEADERS + 1]
    for key, shown in ((BASE, last[BOTS]), (CKPT, last[BOTS + 1])):
        assert [m["role"] for m in session.histories[key]] == ["user", "assistant"] and shown[-1]["content"]
    assert session.id and last[VOTE] == {"__type__": "update", "choices": [], "value": None}  # no vote unless blind
    again = send(services, session, [BASE, CKPT], "And again?")[-1][SESSION]
    assert again is session and len(session.histories[BASE]) == 4  # the same comparison goes on

    cleared = chat.clear_all(services, "en", ["run-a"], [CKPT, "run-a/gone"], session)
    assert cleared[SESSION].keys == [CKPT] and cleared[SESSION].histories == {}
    assert cleared[SESSION].id == session.id and cleared[BOTS] == []  # Stop still reaches this session


def test_stop_before_the_first_token_leaves_no_half_turn(services):
    generator = chat.send_prompt(services, "en", ["run-a"], [BASE], "cpu", "Count to fifty.", ChatSession(), False,
                                 "", *SETTINGS)
    loading = next(generator)
    chat.stop_all(services, loading[SESSION])   # the Stop button, before the engine starts
    *_, last = generator
    assert last[STATUS].startswith("**Stopped.**")
    assert all(m["content"] for m in last[SESSION].histories[BASE])  # no empty half turn kept
    chat.stop_all(services, ChatSession())     # a session that never sent: nothing to stop, no error


def test_a_blind_vote_is_recorded_in_the_run_and_reveals_the_models(services):
    said = chat.record_vote(services, "en", "A", ["run-a"], ChatSession())
    assert "Send a prompt in blind mode" in said[STATUS] and said[TALLY] == {"__type__": "update"}
    last = send(services, ChatSession(), [BASE, CKPT], "Which is better?", blind=True)[-1]
    session = last[SESSION]
    assert [last[HEADERS], last[HEADERS + 1]] == ["**Answer A**", "**Answer B**"]
    assert last[VOTE]["choices"] == ["A", "B", ("Tie", "tie")] and not session.voted
    voted = chat.record_vote(services, "en", "B", ["run-a"], session)
    winner = session.keys[session.order[1]]
    assert "Vote recorded for answer B" in voted[STATUS] and voted[HEADERS + 1].startswith("**B** = ")
    stored = json.loads((services.runs_dir / "run-a" / "preferences.json").read_text())
    assert len(stored["votes"]) == 1 and stored["votes"][0]["prompt"] == "Which is better?"
    assert stored["votes"][0]["winner"] == ("base" if winner == BASE else "checkpoint-20")
    assert {row[1] for row in voted[TALLY]} == {"base", "checkpoint-20"}
    assert chat.tally_table(services, ["run-a", "deleted-run"]) == voted[TALLY]
    again = chat.record_vote(services, "en", "A", ["run-a"], session)
    assert "already has a vote" in again[STATUS]
    assert "Unloaded" in chat.unload_all(services, "en", "cpu")


def test_each_column_streams_its_answer_before_the_last_one_is_done(services, monkeypatch):
    """Every yield is a snapshot the page shows at once: the columns' texts grow in it, each before
    any column has finished (the handler's pacing set to every token, so the count of yields does
    not depend on how fast this machine is)."""
    monkeypatch.setattr(chat, "STREAM_INTERVAL_S", 0.0)
    longer = (True, 0.7, 0.9, 50, 1.0, 24, 0)
    snapshots = []
    for out in chat.send_prompt(services, "en", ["run-a"], [BASE, CKPT], "cpu", "Count to ten.", ChatSession(),
                                False, "", *longer):
        snapshots.append([(out[BOTS + i] or [{}])[-1].get("content", "") for i in range(2)] + [out[STATUS]])
    final = snapshots[-1][:2]
    # Before that, each column's model is loaded in turn, and said.
    loading = [s[2] for s in snapshots if s[2].startswith("Loading the model of column")]
    assert loading == ["Loading the model of column 1 of 2 …", "Loading the model of column 2 of 2 …"]
    assert all(final) and snapshots[-1][2].startswith("**Done.**")
    partial = [s for s in snapshots[:-1] if "answering together" in s[2]]
    # Both columns showed words before either was done, and what they showed grew into the answer.
    assert any(s[0] and s[1] and s[:2] != final for s in partial)
    for column in range(2):
        shown = [s[column] for s in partial if s[column]]
        assert shown and all(final[column].startswith(text) for text in shown)
