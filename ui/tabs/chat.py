"""Chat tab: one prompt to the base model and up to four checkpoints, answers
streaming into side-by-side columns; blind mode for preference votes.

State: one ChatServices per app (made by build): the ChatEngine, made on
first use (so the base model stays loaded across prompts, browser sessions
and tabs, and torch is not imported while the page starts), and each
session's Stop signal. Per browser session: a ChatSession (ui/chat_session.py)
in a gr.State. Votes live on disk in each run's preferences.json.

The handlers are module-level functions taking the ChatServices first and
the values a browser sends, so tests call them without a browser; build()
only places components and wires them.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import gradio as gr

from backend.chat.catalog import MAX_COLUMNS, catalog, dropdown_choices
from backend.chat.local_targets import local_targets
from backend.chat.preferences import TIE, PreferenceStore, blind_letter, tally_rows
from backend.export.exporter import exports_dir
from backend.models.hardware import detect_devices
from backend.models.loading import DEMO_MODEL, resolve_model_path
from backend.runs.files import list_run_ids
from ui.chat_session import ChatSession, Say, column_notes, column_views, vote_answers
from ui.context import UIContext
from ui.i18n import localize
from ui.panels import learning_panel, local_models_panel, serve_panel, vote_panel
from ui.texts.chat_texts import TEXT  # noqa: F401  (read here by the shell and the tabs)
from ui.warmup import import_heavy_libraries

if TYPE_CHECKING:   # for the annotations only: importing the engine imports torch, which start-up leaves out
    from backend.chat.engine import ChatEngine

# Seconds between UI updates while streaming: fast enough to look live, few enough messages.
STREAM_INTERVAL_S = 0.1
REFRESH_EVERY_S = 5.0

class _EngineHolder:
    """The tab's one engine, created on first use (imports torch then, not at start-up)."""

    def __init__(self) -> None:
        self._engine: ChatEngine | None = None
        self._lock = threading.Lock()

    def get(self) -> ChatEngine:
        with self._lock:
            if self._engine is None:
                from backend.chat.engine import ChatEngine

                import_heavy_libraries()

                self._engine = ChatEngine()
            return self._engine


@dataclass
class ChatServices:
    """What the Chat tab's handlers share across browser sessions (one per app)."""

    ctx: UIContext
    engine: _EngineHolder = field(default_factory=_EngineHolder)
    preferences: PreferenceStore = field(default_factory=PreferenceStore)
    stops: dict[str, threading.Event] = field(default_factory=dict)  # ChatSession.id -> its Stop signal
    device_ids: list[str] = field(default_factory=list)              # "cpu", "cuda:0", ... once detected

    @property
    def runs_dir(self) -> Path:
        return self.ctx.workspace.runs_dir

    def resolve(self, name: str) -> str:
        """config.yaml's model name -> folder. Never builds the demo model here (a list refresh
        must not block on a build): a run that trained on it has it in the workspace already."""

        if name == DEMO_MODEL:
            return str(self.ctx.workspace.models_dir / DEMO_MODEL)
        return resolve_model_path(name, self.ctx.workspace.models_dir)

    def targets(self, run_ids: list[str] | None) -> dict:
        """Chat targets (base models, checkpoints, GGUF exports) of the chosen runs, then the models on
        this machine from the scan's cache (never a scan here), by dropdown value."""

        runs = catalog(self.runs_dir, list(run_ids or []), self.resolve, exports_dir(self.ctx.workspace))
        return {**runs, **local_targets(self.ctx.workspace.root)}

    def say(self, lang: str | None) -> Say:
        return lambda key, **values: self.ctx.msg(lang, key, **values)


# --- choices ------------------------------------------------------------------

def refresh_choices(chat: ChatServices, lang, chosen_runs, chosen, current_device, known):
    """New runs / checkpoints / devices into the lists. Unchanged lists are skipped,
    so a tick never disturbs a dropdown the user is working in.
    (runs, picks, device, notice, use-CPU button, what the lists now hold)."""
    ids = list_run_ids(chat.runs_dir)
    kept_runs = [r for r in (chosen_runs or []) if r in ids] or ids[:1]
    targets = chat.targets(kept_runs)
    options = dropdown_choices(targets)
    kept = [c for c in (chosen or []) if c in targets]
    now = {"runs": ids, "kept_runs": kept_runs, "options": [list(o) for o in options], "kept": kept}
    message, offer_cpu = plan_outputs(chat, lang, kept_runs, kept, current_device)
    if not ids and not options:   # the models on this machine can answer without a run
        message = chat.ctx.msg(lang, "chat.msg_no_runs")
    if now == known:
        return gr.skip(), gr.skip(), gr.skip(), message, offer_cpu, known
    # A list is set only when its choices changed or a chosen item left them: a tick
    # carries the picks of the moment it fired, and setting them back would undo a
    # pick the user made while it ran.
    known = known or {}
    same_runs = ids == known.get("runs") and kept_runs == list(chosen_runs or [])
    same_picks = now["options"] == known.get("options") and kept == list(chosen or [])
    devices = gr.update(choices=detected_devices(chat), value=current_device or "cpu")
    return (gr.skip() if same_runs else gr.update(choices=ids, value=kept_runs),
            gr.skip() if same_picks else gr.update(choices=options, value=kept), devices, message, offer_cpu, now)


def join_shared_run(chat: ChatServices, run: str | None, chosen_runs: list[str] | None):
    """The run opened elsewhere joins the chosen ones, with the list's choices set in the same update:
    this can fire before the page load's refresh has filled them, and a value outside its choices
    makes every later event on the list fail gradio's check (the list would never refresh)."""
    chosen_runs, ids = list(chosen_runs or []), list_run_ids(chat.runs_dir)
    if not run or run in chosen_runs or run not in ids:
        return gr.skip()
    return gr.update(choices=ids, value=[*(r for r in chosen_runs if r in ids), run])


def start_local_scan(chat: ChatServices) -> None:
    """On page load: the models on this machine scanned in the background when no scan is cached."""
    local_models_panel.ensure_scan(chat.ctx.workspace.root)


def detected_devices(chat: ChatServices) -> list[str]:
    """Detected once per UI process (it imports torch), after the page is up."""
    if not chat.device_ids:
        import_heavy_libraries()
        chat.device_ids.extend(d.id for d in detect_devices())
    return chat.device_ids


def plan_text(chat: ChatServices, lang, chosen_runs, chosen, current_device, busy_devices: dict) -> str:
    """The memory cost of what is picked, and any training run on the device, before loading."""
    from backend.chat.engine import device_notice

    lines = []
    busy = device_notice(current_device or "cpu", busy_devices)
    if busy:
        lines.append(f"⚠️ {localize(busy, lang)}")
    elif (current_device or "cpu") == "cpu" and "cpu" in busy_devices:
        lines.append(chat.ctx.msg(lang, "chat.msg_cpu_shared", run=busy_devices["cpu"]))
    targets = chat.targets(chosen_runs)
    picked = [targets[c] for c in (chosen or []) if c in targets]
    if picked:
        lines += [f"- {line}" for line in chat.engine.get().plan(picked, current_device or "cpu")]
    return "\n".join(lines)


def plan_outputs(chat: ChatServices, lang, chosen_runs, chosen, current_device):
    """(plan text, the "Use the CPU" button shown only while a run holds the chosen GPU)."""
    from backend.chat.engine import device_notice

    busy_devices = chat.ctx.store.busy_devices()
    busy = device_notice(current_device or "cpu", busy_devices) is not None
    return plan_text(chat, lang, chosen_runs, chosen, current_device, busy_devices), gr.update(visible=busy)


# --- sending ------------------------------------------------------------------

def answer_outputs(chat: ChatServices, lang, keys, targets, session: ChatSession, message: str, revealed=False,
                   vote_choices=None) -> tuple:
    """(column visibility x5, headers x5, chat values x5, status, session, vote choices)."""
    visible, heads, values = column_views(session, keys, targets, revealed, chat.say(lang))
    vote_update = gr.update(choices=vote_choices, value=None) if vote_choices is not None else gr.update()
    return (*[gr.update(visible=v) for v in visible], *heads, *values, message, session, vote_update)


def send_refusal(chat: ChatServices, lang, targets: dict, chosen: list[str], text, settings, device) -> str | None:
    """Why this prompt cannot be sent now (nothing picked, too many columns, no text,
    a target gone from disk, a bad setting, the device busy training), or None."""
    from backend.chat.engine import device_notice

    say = chat.say(lang)
    if not chosen:
        return say("chat.msg_pick")
    if len(chosen) > MAX_COLUMNS:
        return say("chat.msg_too_many", n=MAX_COLUMNS)
    if not (text or "").strip():
        return say("chat.msg_empty")
    missing = [c for c in chosen if c not in targets]
    if missing:
        return say("chat.msg_gone", what=", ".join(missing))
    return " ".join(localize(p, lang) for p in settings.problems()) or localize(device_notice(
        device, chat.ctx.store.busy_devices()), lang) or None


def send_prompt(chat: ChatServices, lang, chosen_runs, chosen, current_device, text, session: ChatSession, blind_on,
                system_prompt, greedy_on, temp, p, k, rep, max_tokens, seed_value):
    """One prompt to every chosen column at once; yields answer_outputs as the texts stream in."""
    from backend.chat.generation import GenerationSettings, Reply

    targets, chosen, device = chat.targets(chosen_runs), list(chosen or []), current_device or "cpu"
    settings = GenerationSettings(greedy=bool(greedy_on), temperature=float(temp), top_p=float(p), top_k=int(k),
                                  repetition_penalty=float(rep), max_new_tokens=int(max_tokens),
                                  seed=int(seed_value or 0), system_prompt=system_prompt or "")
    problem = send_refusal(chat, lang, targets, chosen, text, settings, device)
    if problem:
        yield answer_outputs(chat, lang, session.keys, targets, session, f"⚠️ {problem}")
        return
    session = session.next_turn(chosen, bool(blind_on), text)
    stop_event = chat.stops[session.id] = threading.Event()
    yield answer_outputs(chat, lang, chosen, targets, session, chat.ctx.msg(lang, "chat.msg_loading"))
    keys = session.answering()
    # Loading takes minutes on a busy machine: one column's model at a time, each said (no names: blind).
    for index, key in enumerate(keys):
        if stop_event.is_set():
            break
        yield answer_outputs(chat, lang, chosen, targets, session,
                             chat.ctx.msg(lang, "chat.msg_loading_column", k=index + 1, n=len(keys)))
        try:
            chat.engine.get().prepare([targets[key]], device)
        except Exception:  # noqa: BLE001 - stream_together loads it again and says why in its column
            continue
    # Every column answers at once (one batch per base model); the texts stream in together.
    replies, last = [Reply() for _ in keys], 0.0
    for key in keys:
        session.histories[key].append({"role": "assistant", "content": ""})
    step = chat.ctx.msg(lang, "chat.msg_generating_all", n=len(keys))
    try:
        for texts in chat.engine.get().stream_together([targets[k] for k in keys],
                                                       [session.histories[k][:-2] for k in keys], text, settings,
                                                       device, stop=stop_event, replies=replies):
            for key, partial_text in zip(keys, texts):
                session.histories[key][-1]["content"] = partial_text
            if time.monotonic() - last >= STREAM_INTERVAL_S:
                last = time.monotonic()
                yield answer_outputs(chat, lang, chosen, targets, session, step)
    except Exception as error:  # noqa: BLE001 - said in every column that has no answer yet
        for reply in replies:
            reply.error = reply.error or (None if reply.finish else localize(error, lang))
    finally:  # nothing left to stop: one signal per answer in flight, not one per session ever seen
        if chat.stops.get(session.id) is stop_event:
            del chat.stops[session.id]
    notes = column_notes(session, keys, targets, replies, chat.say(lang), lang)
    done = chat.ctx.msg(lang, "chat.msg_stopped" if stop_event.is_set() else "chat.msg_done")
    letters = [blind_letter(i) for i in range(len(chosen))] if blind_on else []
    if len(letters) > 1:
        letters.append((chat.ctx.msg(lang, "chat.tie"), TIE))
    yield answer_outputs(chat, lang, chosen, targets, session, "  \n".join([f"**{done}**", *notes]),
                         vote_choices=letters)


def stop_all(chat: ChatServices, session: ChatSession) -> None:
    """Stop the session's columns: each keeps what it has said so far."""
    event = chat.stops.get(session.id) if session.id else None
    if event is not None:
        event.set()


def clear_all(chat: ChatServices, lang, chosen_runs, chosen, session: ChatSession) -> tuple:
    """Empty columns for the current selection (targets gone from disk dropped)."""
    targets = chat.targets(chosen_runs)
    session = session.cleared([c for c in (chosen or []) if c in targets])
    return answer_outputs(chat, lang, session.keys, targets, session, "", vote_choices=[])


def unload_all(chat: ChatServices, lang, current_device) -> str:
    report = chat.engine.get().unload(current_device or "cpu")
    return chat.ctx.msg(lang, "chat.msg_unloaded", models=report["models"], before=report["before"]["rss_mib"],
                        after=report["after"]["rss_mib"])


# --- blind votes --------------------------------------------------------------

def tally_table(chat: ChatServices, run_list) -> list[list]:
    """[run, checkpoint, wins, shown, win %] of the runs that are still on disk."""
    return [[run_id, *row] for run_id in (run_list or []) if (chat.runs_dir / run_id).is_dir()
            for row in tally_rows(chat.runs_dir / run_id)]


def record_vote(chat: ChatServices, lang, letter, chosen_runs, session: ChatSession) -> tuple:
    """The blind vote for answer `letter` (or a tie) into each run's preferences.json;
    reveals the models. answer_outputs + (tally table or no change,)."""
    say, targets, keys = chat.say(lang), chat.targets(chosen_runs), session.keys
    if not session.blind or not letter or not keys:
        return answer_outputs(chat, lang, keys, targets, session, say("chat.msg_vote_first")) + (gr.update(),)
    if session.voted:
        return answer_outputs(chat, lang, keys, targets, session, say("chat.msg_already_voted"),
                              revealed=True) + (gr.update(),)
    shown = [targets[k].key for k in keys if k in targets]
    winner = targets[keys[session.order["ABCDE".index(letter)]]] if letter != TIE else None
    answers, contexts = vote_answers(session, targets)
    chat.preferences.record([chat.runs_dir / r for r in session.runs], shown, winner.key if winner else TIE,
                            session.prompt, answers, contexts)
    session.voted = True
    message = say("chat.msg_voted", letter=letter, label=winner.label) if winner else say("chat.tie")
    return answer_outputs(chat, lang, keys, targets, session, message, revealed=True,
                          vote_choices=[]) + (tally_table(chat, session.runs),)


# --- layout -------------------------------------------------------------------

def build(ctx: UIContext) -> None:
    c: dict = {"session": gr.State(ChatSession()), "known": gr.State({})}
    with gr.Row(equal_height=True):
        c["runs"] = gr.Dropdown(label=ctx.t("chat.runs"), multiselect=True, choices=[], scale=2, elem_id="chat-runs")
        c["picks"] = gr.Dropdown(label=ctx.t("chat.checkpoints"), multiselect=True, choices=[],
                                 max_choices=MAX_COLUMNS, scale=4, elem_id="chat-checkpoints")
        c["device"] = gr.Dropdown(label=ctx.t("chat.device"), choices=["cpu"], value="cpu", scale=1,
                                  elem_id="chat-device")
        c["refresh"] = gr.Button(ctx.t("chat.refresh"), scale=0, elem_id="chat-refresh")
    with gr.Row(equal_height=True):
        c["notice"] = gr.Markdown(elem_id="chat-notice")
        # Shown only while a live training run holds the chosen GPU: the other choice is to wait.
        c["use_cpu"] = gr.Button(ctx.t("chat.use_cpu"), visible=False, size="sm", scale=0, elem_id="chat-use-cpu")
    c["columns"], c["headers"], c["bots"] = [], [], []
    with gr.Row(equal_height=False):
        for index in range(MAX_COLUMNS):
            with gr.Column(visible=False, min_width=220, elem_id=f"chat-col-{index}") as column:
                c["headers"].append(gr.Markdown(elem_id=f"chat-head-{index}"))
                c["bots"].append(gr.Chatbot(show_label=False, height=380, buttons=["copy", "copy_all"],
                                            elem_id=f"chat-answer-{index}", feedback_options=None))
            c["columns"].append(column)
    with gr.Row(equal_height=True):
        c["prompt"] = gr.Textbox(label=ctx.t("chat.prompt"), placeholder=ctx.t("chat.prompt_placeholder"), lines=2,
                                 scale=6, elem_id="chat-prompt")
        c["send"] = gr.Button(ctx.t("chat.send"), variant="primary", scale=1, elem_id="chat-send")
        c["stop"] = gr.Button(ctx.t("chat.stop"), variant="stop", scale=1, elem_id="chat-stop")
        c["clear"] = gr.Button(ctx.t("chat.clear"), scale=1, elem_id="chat-clear")
    c["status"] = gr.Markdown(elem_id="chat-status")
    _settings(ctx, c)
    with gr.Row(equal_height=True):
        c["blind"] = gr.Checkbox(label=ctx.t("chat.blind"), value=False, elem_id="chat-blind")
        c["vote"] = gr.Radio(label=ctx.t("chat.vote"), choices=[], elem_id="chat-vote", scale=3)
        c["vote_button"] = gr.Button(ctx.t("chat.vote_button"), elem_id="chat-vote-button", scale=1)
    c["tally"] = gr.Dataframe(headers=["run", "checkpoint", "wins", "shown", "win %"], label=ctx.t("chat.tally"),
                              interactive=False, elem_id="chat-tally")
    _wire(ChatServices(ctx), c)
    vote_panel.build(ctx, c["runs"])
    learning_panel.build_chat(ctx, c["runs"])  # the base and a checkpoint on the held-out prompts
    serve_panel.build(ctx)   # its own module: start / stop the API server for a run


def _settings(ctx: UIContext, c: dict) -> None:
    """The generation settings accordion (and the Unload button) into `c`."""
    with gr.Accordion(ctx.t("chat.settings"), open=False, elem_id="chat-settings"):
        c["system"] = gr.Textbox(label=ctx.t("chat.system"), lines=2, elem_id="chat-system")
        with gr.Row():
            c["greedy"] = gr.Checkbox(label=ctx.t("chat.greedy"), value=True, elem_id="chat-greedy")
            c["temperature"] = gr.Slider(0.05, 2.0, value=0.7, step=0.05, label=ctx.t("chat.temperature"))
            c["top_p"] = gr.Slider(0.05, 1.0, value=0.9, step=0.05, label=ctx.t("chat.top_p"))
            c["top_k"] = gr.Slider(0, 200, value=50, step=1, label=ctx.t("chat.top_k"))
        with gr.Row():
            c["repetition"] = gr.Slider(0.8, 2.0, value=1.0, step=0.05, label=ctx.t("chat.repetition_penalty"))
            c["max_new"] = gr.Slider(1, 4096, value=128, step=1, label=ctx.t("chat.max_new_tokens"),
                                     elem_id="chat-max-new")
            c["seed"] = gr.Number(value=0, precision=0, label=ctx.t("chat.seed"))
        c["unload"] = gr.Button(ctx.t("chat.unload"), size="sm", elem_id="chat-unload")


def _wire(chat: ChatServices, c: dict) -> None:
    private, lang = {"api_visibility": "private"}, chat.ctx.lang
    choice_io = dict(inputs=[lang, c["runs"], c["picks"], c["device"], c["known"]],
                     outputs=[c["runs"], c["picks"], c["device"], c["notice"], c["use_cpu"], c["known"]],
                     show_progress="hidden", **private)
    for trigger in (c["refresh"].click, gr.context.Context.root_block.load, c["runs"].input):
        trigger(partial(refresh_choices, chat), **choice_io)
    chat.ctx.timers.poll(REFRESH_EVERY_S, partial(refresh_choices, chat), choice_io["inputs"], choice_io["outputs"])
    # The models on this machine come from the scan's cache: scanned in the background when none is
    # cached, and the lists' tick picks the result up.
    gr.context.Context.root_block.load(partial(start_local_scan, chat), **private)
    shared_run = chat.ctx.shared.get("run_id")
    if shared_run is not None:  # a run opened from elsewhere (the Runs tab's sweep table) joins the columns
        shared_run.change(partial(join_shared_run, chat), [shared_run, c["runs"]], c["runs"],
                          **private).then(partial(refresh_choices, chat), **choice_io)
    plan_io = dict(inputs=[lang, c["runs"], c["picks"], c["device"]], outputs=[c["notice"], c["use_cpu"]], **private)
    c["picks"].input(partial(plan_outputs, chat), **plan_io)
    c["device"].input(partial(plan_outputs, chat), **plan_io)
    c["use_cpu"].click(lambda: "cpu", None, c["device"], **private).then(partial(plan_outputs, chat), **plan_io)

    answers = [*c["columns"], *c["headers"], *c["bots"], c["status"], c["session"], c["vote"]]
    send_inputs = [lang, c["runs"], c["picks"], c["device"], c["prompt"], c["session"], c["blind"], c["system"],
                   c["greedy"], c["temperature"], c["top_p"], c["top_k"], c["repetition"], c["max_new"], c["seed"]]
    for trigger in (c["send"].click, c["prompt"].submit):
        # One generation at a time per UI process: the engine serialises model work anyway.
        trigger(partial(send_prompt, chat), send_inputs, answers, concurrency_limit=1, concurrency_id="chat-send",
                **private)
    c["stop"].click(partial(stop_all, chat), c["session"], None, queue=False, **private)
    clear_inputs = [lang, c["runs"], c["picks"], c["session"]]
    c["clear"].click(partial(clear_all, chat), clear_inputs, answers, **private)
    c["picks"].input(partial(clear_all, chat), clear_inputs, answers, **private)
    c["vote_button"].click(partial(record_vote, chat), [lang, c["vote"], c["runs"], c["session"]],
                           [*answers, c["tally"]], **private)
    c["runs"].input(partial(tally_table, chat), c["runs"], c["tally"], **private)
    c["unload"].click(partial(unload_all, chat), [lang, c["device"]], c["status"], **private)
