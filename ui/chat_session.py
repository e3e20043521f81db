"""One browser session of the Chat tab as a typed value: the columns compared,
what each said, and the blind vote's state. Kept in a gr.State; every function
here works on plain values (no gradio), so the tab's logic is tested directly.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from backend.chat.catalog import MAX_COLUMNS, header, run_ids_of
from backend.chat.preferences import blind_letter, blind_order
from ui.i18n import localize

Message = dict[str, str]   # {"role": "user" | "assistant", "content": ...}
Say = Callable[..., str]   # ctx.msg with the language bound: say(key, **values)


@dataclass
class ChatSession:
    keys: list[str] = field(default_factory=list)                   # chosen targets, in column order
    histories: dict[str, list[Message]] = field(default_factory=dict)  # target -> its conversation
    order: list[int] = field(default_factory=list)                  # blind position -> column index
    blind: bool = False
    voted: bool = True          # the last blind prompt has its vote (or there was none to give)
    prompt: str = ""            # the last prompt, recorded with its vote
    runs: list[str] = field(default_factory=list)  # runs the targets come from: their votes go there
    # Names this browser session's Stop signal; set at the first send (a gr.State's
    # initial value is copied into every session, so it cannot be set here).
    id: str = ""

    def next_turn(self, chosen: list[str], blind: bool, text: str, seed: int | None = None) -> ChatSession:
        """The session after sending `text` to `chosen`: the same conversation when
        the selection and the mode are unchanged, else a new one (empty histories)."""
        session = self
        if chosen != self.keys or blind != self.blind:
            session = ChatSession(keys=list(chosen), id=self.id)
        session.id = session.id or uuid.uuid4().hex
        session.blind, session.runs = blind, run_ids_of(chosen)
        seed = random.SystemRandom().randrange(2**31) if seed is None else seed
        session.order = blind_order(len(chosen), seed) if blind else list(range(len(chosen)))
        session.voted, session.prompt = not blind, text
        for key in chosen:
            session.histories.setdefault(key, []).append({"role": "user", "content": text})
        return session

    def cleared(self, keys: list[str]) -> ChatSession:
        """Empty histories for `keys` (the targets still on disk), the session's Stop kept."""
        return ChatSession(keys=list(keys), order=list(range(len(keys))), id=self.id)

    def answering(self) -> list[str]:
        """The targets in the order their answers are shown (blind positions)."""
        return [self.keys[self.order[position]] for position in range(len(self.keys))]


def column_views(session: ChatSession, keys: list[str], targets: dict, revealed: bool,
                 say: Say) -> tuple[list[bool], list[str], list[list[Message]]]:
    """(visible, header markdown, chat messages) for each of the MAX_COLUMNS columns.
    In blind mode the headers say "Answer A" until the vote reveals the models."""
    visible, headers, values = [], [], []
    for position in range(MAX_COLUMNS):
        if position >= len(keys):
            visible.append(False)
            headers.append("")
            values.append([])
            continue
        key = keys[session.order[position]] if session.blind else keys[position]
        text = header(targets[key]) if key in targets else f"**{key}**"
        if session.blind and not revealed:
            text = f"**{say('chat.answer', letter=blind_letter(position))}**"
        elif session.blind:
            text = f"**{blind_letter(position)}** = {text}"
        visible.append(True)
        headers.append(text)
        values.append(list(session.histories.get(key, [])))
    return visible, headers, values


def vote_answers(session: ChatSession, targets: dict) -> tuple[dict, dict[str, list[Message]]]:
    """({target key: the answer shown}, {target key: its column's conversation before that answer})
    for a vote; columns that failed (an error shown instead of an answer) are left out."""
    answers, contexts = {}, {}
    for key in session.keys:
        history = session.histories.get(key) or []
        if key in targets and history and history[-1]["role"] == "assistant" \
                and not history[-1]["content"].startswith("⚠️"):
            answers[targets[key].key] = history[-1]["content"]
            contexts[targets[key].key] = history[:-1]
    return answers, contexts


def column_notes(session: ChatSession, keys: list[str], targets: dict, replies: list, say: Say,
                 lang: str | None) -> list[str]:
    """Each column's ending into its history (error, empty answer; a column Stop reached before it
    began loses its half turn) and the status lines: speed, errors, notices."""
    notes = []
    for position, (key, reply) in enumerate(zip(keys, replies)):
        history = session.histories[key]
        label = say("chat.answer", letter=blind_letter(position)) if session.blind else targets[key].label
        if reply.error:
            error = localize(reply.error_message or reply.error, lang)
            history[-1]["content"] = f"⚠️ {error}"
            notes.append(say("chat.msg_error", label=label, error=error))
        elif reply.finish == "stopped" and not reply.new_tokens:
            del history[-2:]   # no half turn left in this column's history
        elif not history[-1]["content"].strip():
            history[-1]["content"] = say("chat.msg_empty_answer")
        else:
            notes.append(say("chat.msg_speed", label=label, tokens=reply.new_tokens,
                             seconds=f"{reply.seconds:.1f}", rate=f"{reply.tokens_per_second:.1f}"))
        notes += [f"{label}: {localize(n, lang)}" for n in reply.notices]
    return notes
