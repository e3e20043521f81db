"""Chat tab: one prompt to the base model and up to four checkpoints, answers
streaming into side-by-side columns; blind mode for preference votes.

State: one ChatEngine per UI process, made on first use inside build()'s
closure (so the base model stays loaded across prompts, browser sessions and
tabs, and torch is not imported while the page starts). Per browser session:
a gr.State dict with the columns' histories and the blind order. Votes live
on disk in each run's preferences.json.
"""

from __future__ import annotations

import random
import threading
import time

import gradio as gr

from backend.chat.catalog import MAX_COLUMNS, catalog, dropdown_choices, header, run_ids_of
from backend.chat.preferences import TIE, PreferenceStore, blind_letter, blind_order, tally_rows
from backend.runs.files import list_run_ids
from ui import serve_panel, vote_panel
from ui.context import UIContext
from ui.i18n import localize

# Seconds between UI updates while streaming: fast enough to look live, few enough messages.
STREAM_INTERVAL_S = 0.1
REFRESH_EVERY_S = 5.0

TEXT: dict[str, dict[str, str]] = {
    "chat.runs": {"en": "Runs", "zh": "训练运行"},
    "chat.checkpoints": {"en": "Base and checkpoints (up to 5 columns)", "zh": "基座与检查点（最多 5 列）"},
    "chat.refresh": {"en": "Refresh", "zh": "刷新"},
    "chat.device": {"en": "Device", "zh": "设备"},
    "chat.prompt": {"en": "Your message", "zh": "你的消息"},
    "chat.prompt_placeholder": {"en": "Type once; every column answers.", "zh": "输入一次，每一列都会回答。"},
    "chat.send": {"en": "Send", "zh": "发送"},
    "chat.stop": {"en": "Stop", "zh": "停止"},
    "chat.clear": {"en": "Clear", "zh": "清空"},
    "chat.use_cpu": {"en": "Use the CPU instead", "zh": "改用 CPU"},
    "chat.unload": {"en": "Unload models", "zh": "卸载模型"},
    "chat.settings": {"en": "Generation settings", "zh": "生成设置"},
    "chat.system": {"en": "System prompt", "zh": "系统提示词"},
    "chat.greedy": {"en": "Greedy (deterministic)", "zh": "贪心解码（确定性）"},
    "chat.temperature": {"en": "Temperature", "zh": "温度"},
    "chat.top_p": {"en": "Top-p", "zh": "Top-p"},
    "chat.top_k": {"en": "Top-k (0 = off)", "zh": "Top-k（0 为关闭）"},
    "chat.repetition_penalty": {"en": "Repetition penalty (1 = none)", "zh": "重复惩罚（1 为不惩罚）"},
    "chat.max_new_tokens": {"en": "Max new tokens", "zh": "最大新生成 token 数"},
    "chat.seed": {"en": "Seed (sampling)", "zh": "随机种子（采样时）"},
    "chat.blind": {"en": "Blind mode: hide which column is which", "zh": "盲评模式：隐藏每列对应的模型"},
    "chat.vote": {"en": "Which answer is better?", "zh": "哪个回答更好？"},
    "chat.vote_button": {"en": "Record vote", "zh": "记录投票"},
    "chat.tally": {"en": "Preference tally", "zh": "偏好统计"},
    # Messages made by handlers (ctx.msg).
    "chat.msg_cpu_shared": {"en": "Training run {run} also uses the CPU: answers come slower until it ends.",
                            "zh": "训练运行 {run} 也在使用 CPU：在它结束前回答会慢一些。"},
    "chat.msg_no_runs": {"en": "No runs yet: train one in the Train tab; its checkpoints appear here as they are saved.",
                         "zh": "还没有训练运行：请在“训练”页开始训练，检查点保存后会出现在这里。"},
    "chat.msg_pick": {"en": "Pick the base and/or checkpoints to chat with first.", "zh": "请先选择要对话的基座和/或检查点。"},
    "chat.msg_too_many": {"en": "At most {n} columns: keep the base and up to four checkpoints.",
                          "zh": "最多 {n} 列：基座加最多四个检查点。"},
    "chat.msg_empty": {"en": "Type a message first.", "zh": "请先输入消息。"},
    "chat.msg_gone": {"en": "{what} is no longer on disk (deleted or its run removed); refresh and pick again.",
                      "zh": "{what} 已不在磁盘上（被删除或运行已移除）；请刷新后重新选择。"},
    "chat.msg_loading": {"en": "Loading models …", "zh": "正在加载模型……"},
    "chat.msg_generating_all": {"en": "{n} column(s) answering together …", "zh": "{n} 列正在同时回答……"},
    "chat.msg_done": {"en": "Done.", "zh": "完成。"},
    "chat.msg_stopped": {"en": "Stopped.", "zh": "已停止。"},
    "chat.msg_vote_first": {"en": "Send a prompt in blind mode, then pick the better answer.",
                            "zh": "请先在盲评模式下发送消息，再选出更好的回答。"},
    "chat.msg_voted": {"en": "Vote recorded for answer {letter}: it was {label}.",
                       "zh": "已记录对回答 {letter} 的投票：它是 {label}。"},
    "chat.msg_already_voted": {"en": "This prompt already has a vote; send the next prompt.",
                               "zh": "这条消息已经投过票；请发送下一条。"},
    "chat.msg_unloaded": {"en": "Unloaded {models} model(s): process memory {before} → {after} MiB.",
                          "zh": "已卸载 {models} 个模型：进程内存 {before} → {after} MiB。"},
    "chat.answer": {"en": "Answer {letter}", "zh": "回答 {letter}"},
    "chat.msg_empty_answer": {"en": "(empty answer: the model ended at once)", "zh": "（空回答：模型立即结束了）"},
    "chat.msg_speed": {"en": "{label}: {tokens} tokens in {seconds} s ({rate} tokens/s)",
                       "zh": "{label}：{tokens} 个 token，用时 {seconds} 秒（每秒 {rate} 个）"},
    "chat.msg_error": {"en": "{label}: {error}", "zh": "{label}：{error}"},
    **serve_panel.TEXT,
    **vote_panel.TEXT,
}


class _EngineHolder:
    """The tab's one engine, created on first use (imports torch then, not at start-up)."""

    def __init__(self) -> None:
        self._engine = None
        self._lock = threading.Lock()

    def get(self):
        with self._lock:
            if self._engine is None:
                from backend.chat.engine import ChatEngine
                from ui.warmup import import_heavy_libraries

                import_heavy_libraries()

                self._engine = ChatEngine()
            return self._engine


def _new_session() -> dict:
    # keys: selected values in column order; histories: value -> messages;
    # order: blind position -> column index; voted: the last blind prompt has its vote.
    return {"keys": [], "histories": {}, "order": [], "blind": False, "voted": True, "prompt": "", "runs": []}


def vote_answers(state: dict, keys: list[str], targets: dict, winner) -> tuple[dict, list[dict]]:
    """({target key: the answer shown}, the conversation before the answers) for a vote;
    columns that failed (an error shown instead of an answer) are left out."""
    answers, context = {}, None
    for key in keys:
        history = state["histories"].get(key) or []
        if key in targets and history and history[-1]["role"] == "assistant" \
                and not history[-1]["content"].startswith("⚠️"):
            answers[targets[key].key] = history[-1]["content"]
            if context is None or (winner is not None and targets[key].key == winner.key):
                context = history[:-1]
    return answers, context or [{"role": "user", "content": state["prompt"]}]


def build(ctx: UIContext) -> None:
    engine = _EngineHolder()
    preferences = PreferenceStore()
    stops: dict[str, threading.Event] = {}   # browser session -> its Stop signal
    device_ids: list[str] = []                # "cpu", "cuda:0", ... once detected
    runs_dir = ctx.workspace.runs_dir

    def resolve(name: str) -> str:
        """config.yaml's model name -> folder. Never builds the demo model here (a list refresh
        must not block on a build): a run that trained on it has it in the workspace already."""
        from backend.models.loading import DEMO_MODEL, resolve_model_path

        if name == DEMO_MODEL:
            return str(ctx.workspace.models_dir / DEMO_MODEL)
        return resolve_model_path(name, ctx.workspace.models_dir)

    def run_ids() -> list[str]:
        return list_run_ids(runs_dir)

    session = gr.State(_new_session())
    with gr.Row(equal_height=True):
        runs = gr.Dropdown(label=ctx.t("chat.runs"), multiselect=True, choices=[], scale=2, elem_id="chat-runs")
        picks = gr.Dropdown(label=ctx.t("chat.checkpoints"), multiselect=True, choices=[], max_choices=MAX_COLUMNS,
                            scale=4, elem_id="chat-checkpoints")
        device = gr.Dropdown(label=ctx.t("chat.device"), choices=["cpu"], value="cpu", scale=1, elem_id="chat-device")
        refresh = gr.Button(ctx.t("chat.refresh"), scale=0, elem_id="chat-refresh")
    with gr.Row(equal_height=True):
        notice = gr.Markdown(elem_id="chat-notice")
        # Shown only while a live training run holds the chosen GPU: the other choice is to wait.
        use_cpu = gr.Button(ctx.t("chat.use_cpu"), visible=False, size="sm", scale=0, elem_id="chat-use-cpu")
    columns, headers, bots = [], [], []
    with gr.Row(equal_height=False):
        for index in range(MAX_COLUMNS):
            with gr.Column(visible=False, min_width=220, elem_id=f"chat-col-{index}") as column:
                headers.append(gr.Markdown(elem_id=f"chat-head-{index}"))
                bots.append(gr.Chatbot(show_label=False, height=380, buttons=["copy", "copy_all"],
                                       elem_id=f"chat-answer-{index}", feedback_options=None))
            columns.append(column)
    with gr.Row(equal_height=True):
        prompt = gr.Textbox(label=ctx.t("chat.prompt"), placeholder=ctx.t("chat.prompt_placeholder"), lines=2,
                            scale=6, elem_id="chat-prompt")
        send = gr.Button(ctx.t("chat.send"), variant="primary", scale=1, elem_id="chat-send")
        stop = gr.Button(ctx.t("chat.stop"), variant="stop", scale=1, elem_id="chat-stop")
        clear = gr.Button(ctx.t("chat.clear"), scale=1, elem_id="chat-clear")
    status = gr.Markdown(elem_id="chat-status")
    with gr.Accordion(ctx.t("chat.settings"), open=False, elem_id="chat-settings"):
        system = gr.Textbox(label=ctx.t("chat.system"), lines=2, elem_id="chat-system")
        with gr.Row():
            greedy = gr.Checkbox(label=ctx.t("chat.greedy"), value=True, elem_id="chat-greedy")
            temperature = gr.Slider(0.05, 2.0, value=0.7, step=0.05, label=ctx.t("chat.temperature"))
            top_p = gr.Slider(0.05, 1.0, value=0.9, step=0.05, label=ctx.t("chat.top_p"))
            top_k = gr.Slider(0, 200, value=50, step=1, label=ctx.t("chat.top_k"))
        with gr.Row():
            repetition = gr.Slider(0.8, 2.0, value=1.0, step=0.05, label=ctx.t("chat.repetition_penalty"))
            max_new = gr.Slider(1, 4096, value=128, step=1, label=ctx.t("chat.max_new_tokens"), elem_id="chat-max-new")
            seed = gr.Number(value=0, precision=0, label=ctx.t("chat.seed"))
        unload = gr.Button(ctx.t("chat.unload"), size="sm", elem_id="chat-unload")
    with gr.Row(equal_height=True):
        blind = gr.Checkbox(label=ctx.t("chat.blind"), value=False, elem_id="chat-blind")
        vote = gr.Radio(label=ctx.t("chat.vote"), choices=[], elem_id="chat-vote", scale=3)
        vote_button = gr.Button(ctx.t("chat.vote_button"), elem_id="chat-vote-button", scale=1)
    tally = gr.Dataframe(headers=["run", "checkpoint", "wins", "shown", "win %"], label=ctx.t("chat.tally"),
                         interactive=False, elem_id="chat-tally")

    # ------------------------------------------------------------ choices

    def refresh_choices(lang, chosen_runs, chosen, current_device, known):
        """New runs / checkpoints / devices into the lists. Unchanged lists are skipped,
        so a tick never disturbs a dropdown the user is working in."""
        ids = run_ids()
        kept_runs = [r for r in (chosen_runs or []) if r in ids] or ids[:1]
        targets = catalog(runs_dir, kept_runs, resolve)
        options = dropdown_choices(targets)
        kept = [c for c in (chosen or []) if c in targets]
        now = {"runs": ids, "kept_runs": kept_runs, "options": [list(o) for o in options], "kept": kept}
        message, offer_cpu = plan_outputs(lang, kept_runs, kept, current_device)
        if not ids:
            message = ctx.msg(lang, "chat.msg_no_runs")
        if now == known:
            return gr.skip(), gr.skip(), gr.skip(), message, offer_cpu, known
        devices = gr.update(choices=_devices(), value=current_device or "cpu")
        return (gr.update(choices=ids, value=kept_runs), gr.update(choices=options, value=kept), devices, message,
                offer_cpu, now)

    def _devices() -> list[str]:
        """Detected once per UI process (it imports torch), after the page is up."""
        if not device_ids:
            from backend.models.hardware import detect_devices
            from ui.warmup import import_heavy_libraries

            import_heavy_libraries()
            device_ids.extend(d.id for d in detect_devices())
        return device_ids

    def _plan(lang, chosen_runs, chosen, current_device, busy_devices: dict) -> str:
        """The memory cost of what is picked, and any training run on the device, before loading."""
        from backend.chat.engine import device_notice

        lines = []
        busy = device_notice(current_device or "cpu", busy_devices)
        if busy:
            lines.append(f"⚠️ {localize(busy, lang)}")
        elif (current_device or "cpu") == "cpu" and "cpu" in busy_devices:
            lines.append(ctx.msg(lang, "chat.msg_cpu_shared", run=busy_devices["cpu"]))
        targets = catalog(runs_dir, chosen_runs or [], resolve)
        picked = [targets[c] for c in (chosen or []) if c in targets]
        if picked:
            lines += [f"- {line}" for line in engine.get().plan(picked, current_device or "cpu")]
        return "\n".join(lines)

    def plan_outputs(lang, chosen_runs, chosen, current_device):
        """(plan text, the "Use the CPU" button shown only while a run holds the chosen GPU)."""
        from backend.chat.engine import device_notice
        busy_devices = ctx.store.busy_devices()
        busy = device_notice(current_device or "cpu", busy_devices) is not None
        return _plan(lang, chosen_runs, chosen, current_device, busy_devices), gr.update(visible=busy)

    known = gr.State({})
    choice_io = dict(inputs=[ctx.lang, runs, picks, device, known], outputs=[runs, picks, device, notice, use_cpu, known],
                     api_visibility="private", show_progress="hidden")
    refresh.click(refresh_choices, **choice_io)
    gr.Timer(REFRESH_EVERY_S).tick(refresh_choices, **choice_io)
    gr.context.Context.root_block.load(refresh_choices, **choice_io)
    runs.input(refresh_choices, **choice_io)
    plan_io = dict(inputs=[ctx.lang, runs, picks, device], outputs=[notice, use_cpu], api_visibility="private")
    picks.input(plan_outputs, **plan_io)
    device.input(plan_outputs, **plan_io)
    use_cpu.click(lambda: "cpu", None, device, api_visibility="private").then(plan_outputs, **plan_io)

    # ------------------------------------------------------------ sending

    def visible_columns(lang, keys, targets, state, revealed):
        """(column updates, header texts, chatbot values) for the current selection."""
        column_updates, header_texts, bot_values = [], [], []
        for position in range(MAX_COLUMNS):
            if position >= len(keys):
                column_updates.append(gr.update(visible=False))
                header_texts.append("")
                bot_values.append([])
                continue
            key = keys[state["order"][position]] if state["blind"] else keys[position]
            column_updates.append(gr.update(visible=True))
            hidden = state["blind"] and not revealed
            text = header(targets[key]) if key in targets else f"**{key}**"
            if hidden:
                text = f"**{ctx.msg(lang, 'chat.answer', letter=blind_letter(position))}**"
            elif state["blind"]:
                text = f"**{blind_letter(position)}** = {text}"
            header_texts.append(text)
            bot_values.append(list(state["histories"].get(key, [])))
        return column_updates, header_texts, bot_values

    def outputs_for(lang, keys, targets, state, message, revealed=False, vote_choices=None):
        cols, heads, values = visible_columns(lang, keys, targets, state, revealed)
        vote_update = gr.update(choices=vote_choices, value=None) if vote_choices is not None else gr.update()
        return (*cols, *heads, *values, message, state, vote_update)

    def send_prompt(lang, chosen_runs, chosen, current_device, text, state, blind_on, system_prompt, greedy_on,
                    temp, p, k, rep, max_tokens, seed_value, request: gr.Request):
        from backend.chat.engine import device_notice
        from backend.chat.generation import GenerationSettings, Reply
        targets = catalog(runs_dir, chosen_runs or [], resolve)
        chosen = list(chosen or [])
        problem = None
        if not chosen:
            problem = ctx.msg(lang, "chat.msg_pick")
        elif len(chosen) > MAX_COLUMNS:
            problem = ctx.msg(lang, "chat.msg_too_many", n=MAX_COLUMNS)
        elif not (text or "").strip():
            problem = ctx.msg(lang, "chat.msg_empty")
        missing = [c for c in chosen if c not in targets]
        if not problem and missing:
            problem = ctx.msg(lang, "chat.msg_gone", what=", ".join(missing))
        settings = GenerationSettings(greedy=bool(greedy_on), temperature=float(temp), top_p=float(p), top_k=int(k),
                                      repetition_penalty=float(rep), max_new_tokens=int(max_tokens),
                                      seed=int(seed_value or 0), system_prompt=system_prompt or "")
        problem = problem or " ".join(localize(p, lang) for p in settings.problems()) or localize(device_notice(
            current_device or "cpu", ctx.store.busy_devices()), lang)
        if problem:
            yield outputs_for(lang, state["keys"], targets, state, f"⚠️ {problem}")
            return
        if chosen != state["keys"] or bool(blind_on) != state["blind"]:
            state = {**_new_session(), "keys": chosen}   # a new comparison starts with empty histories
        state["blind"], state["runs"] = bool(blind_on), run_ids_of(chosen)
        state["order"] = blind_order(len(chosen), random.SystemRandom().randrange(2**31)) if blind_on \
            else list(range(len(chosen)))
        state["voted"], state["prompt"] = not blind_on, text
        stop_event = stops[request.session_hash] = threading.Event()
        for key in chosen:
            state["histories"].setdefault(key, []).append({"role": "user", "content": text})
        yield outputs_for(lang, chosen, targets, state, ctx.msg(lang, "chat.msg_loading"))
        # Every column answers at once (one batch per base model); the texts stream in together.
        keys = [chosen[state["order"][position]] for position in range(len(chosen))]
        replies, last = [Reply() for _ in keys], 0.0
        for key in keys:
            state["histories"][key].append({"role": "assistant", "content": ""})
        step = ctx.msg(lang, "chat.msg_generating_all", n=len(keys))
        try:
            for texts in engine.get().stream_together([targets[k] for k in keys],
                                                      [state["histories"][k][:-2] for k in keys], text, settings,
                                                      current_device or "cpu", stop=stop_event, replies=replies):
                for key, partial in zip(keys, texts):
                    state["histories"][key][-1]["content"] = partial
                if time.monotonic() - last >= STREAM_INTERVAL_S:
                    last = time.monotonic()
                    yield outputs_for(lang, chosen, targets, state, step)
        except Exception as error:  # noqa: BLE001 - said in every column that has no answer yet
            for reply in replies:
                reply.error = reply.error or (None if reply.finish else localize(error, lang))
        notes = _column_notes(ctx, lang, keys, targets, state, replies, blind_on)
        done = ctx.msg(lang, "chat.msg_stopped" if stop_event.is_set() else "chat.msg_done")
        letters = [blind_letter(i) for i in range(len(chosen))] if blind_on else []
        if len(letters) > 1:
            letters.append((ctx.msg(lang, "chat.tie"), TIE))
        yield outputs_for(lang, chosen, targets, state, "  \n".join([f"**{done}**", *notes]), vote_choices=letters)

    answer_outputs = [*columns, *headers, *bots, status, session, vote]
    send_inputs = [ctx.lang, runs, picks, device, prompt, session, blind, system, greedy, temperature, top_p, top_k,
                   repetition, max_new, seed]
    for trigger in (send.click, prompt.submit):
        # One generation at a time per UI process: the engine serialises model work anyway.
        trigger(send_prompt, send_inputs, answer_outputs, api_visibility="private", concurrency_limit=1,
                concurrency_id="chat-send")

    def stop_all(request: gr.Request) -> None:
        event = stops.get(request.session_hash)
        if event is not None:
            event.set()

    stop.click(stop_all, None, None, api_visibility="private", queue=False)

    def clear_all(lang, chosen_runs, chosen):
        state = {**_new_session(), "keys": list(chosen or [])}
        targets = catalog(runs_dir, chosen_runs or [], resolve)
        keys = [c for c in state["keys"] if c in targets]
        state["keys"], state["order"] = keys, list(range(len(keys)))
        return outputs_for(lang, keys, targets, state, "", vote_choices=[])

    clear.click(clear_all, [ctx.lang, runs, picks], answer_outputs, api_visibility="private")
    picks.input(clear_all, [ctx.lang, runs, picks], answer_outputs, api_visibility="private")

    # ------------------------------------------------------------ blind votes

    def tally_table(run_list):
        return [[run_id, *row] for run_id in run_list for row in tally_rows(runs_dir / run_id)]

    def record_vote(lang, letter, chosen_runs, state):
        targets = catalog(runs_dir, chosen_runs or [], resolve)
        if not state["blind"] or not letter or not state["keys"]:
            return outputs_for(lang, state["keys"], targets, state, ctx.msg(lang, "chat.msg_vote_first")) + (gr.update(),)
        if state["voted"]:
            return outputs_for(lang, state["keys"], targets, state, ctx.msg(lang, "chat.msg_already_voted"),
                               revealed=True) + (gr.update(),)
        keys = state["keys"]
        shown = [targets[k].key for k in keys if k in targets]
        winner = targets[keys[state["order"]["ABCDE".index(letter)]]] if letter != TIE else None
        run_dirs = [runs_dir / r for r in state["runs"]]
        answers, context = vote_answers(state, keys, targets, winner)
        preferences.record(run_dirs, shown, winner.key if winner else TIE, state["prompt"], answers, context)
        state["voted"] = True
        message = ctx.msg(lang, "chat.msg_voted", letter=letter, label=winner.label) if winner \
            else ctx.msg(lang, "chat.tie")
        return outputs_for(lang, keys, targets, state, message, revealed=True, vote_choices=[]) + (tally_table(state["runs"]),)

    vote_button.click(record_vote, [ctx.lang, vote, runs, session], [*answer_outputs, tally],
                      api_visibility="private")
    runs.input(lambda r: tally_table([x for x in (r or []) if (runs_dir / x).is_dir()]), runs, tally,
                api_visibility="private")

    vote_panel.build(ctx, runs)

    def unload_all(lang, current_device):
        report = engine.get().unload(current_device or "cpu")
        return ctx.msg(lang, "chat.msg_unloaded", models=report["models"], before=report["before"]["rss_mib"],
                       after=report["after"]["rss_mib"])

    unload.click(unload_all, [ctx.lang, device], status, api_visibility="private")

    serve_panel.build(ctx)   # its own module: start / stop the API server for a run


def _column_notes(ctx: UIContext, lang: str, keys: list[str], targets: dict, state: dict, replies: list,
                  blind_on: bool) -> list[str]:
    """Each column's ending into its history (error, empty answer; a column Stop reached before it
    began loses its half turn) and the status lines: speed, errors, notices."""
    notes = []
    for position, (key, reply) in enumerate(zip(keys, replies)):
        history = state["histories"][key]
        label = ctx.msg(lang, "chat.answer", letter=blind_letter(position)) if blind_on else targets[key].label
        if reply.error:
            error = localize(reply.error_message or reply.error, lang)
            history[-1]["content"] = f"⚠️ {error}"
            notes.append(ctx.msg(lang, "chat.msg_error", label=label, error=error))
        elif reply.finish == "stopped" and not reply.new_tokens:
            del history[-2:]   # no half turn left in this column's history
        elif not history[-1]["content"].strip():
            history[-1]["content"] = ctx.msg(lang, "chat.msg_empty_answer")
        else:
            notes.append(ctx.msg(lang, "chat.msg_speed", label=label, tokens=reply.new_tokens,
                                 seconds=f"{reply.seconds:.1f}", rate=f"{reply.tokens_per_second:.1f}"))
        notes += [f"{label}: {localize(n, lang)}" for n in reply.notices]
    return notes

