"""One row as the trainer sees it: rendered through the chat template, the tokens
that train marked apart from the masked ones, and whether each assistant turn
ends with the EOS generation stops on.

Built from backend.data.encode.encode_messages, the worker's own encoding, so
the preview is what trains (`python -m backend.data check FILE --model M
--show-template ROW` and the Data tab's template preview both show it).
"""

from __future__ import annotations

from backend.data.encode import IGNORE_INDEX, encode_messages


def template_preview(tokenizer, messages: list[dict], cutoff_len: int = 0, tools: list | None = None,
                     train_on_prompt: bool = False) -> dict:
    """{"pieces": [[text, trained], ...] in order, "turns": [{"tokens", "ends_with_eos", "last"}],
    token counts, the EOS}. A piece is a run of tokens with the same mask, decoded together."""
    encoded = encode_messages(tokenizer, messages, cutoff_len, train_on_prompt, tools)
    trained = [label != IGNORE_INDEX for label in encoded.labels]
    runs: list[tuple[list[int], bool]] = []
    for token, flag in zip(encoded.input_ids, trained):
        if runs and runs[-1][1] == flag:
            runs[-1][0].append(token)
        else:
            runs.append(([token], flag))
    eos = tokenizer.eos_token_id
    turns = [{"tokens": len(ids), "ends_with_eos": ids[-1] == eos, "last": tokenizer.convert_ids_to_tokens(ids[-1])}
             for ids, flag in runs if flag] if not train_on_prompt else []
    return {
        "pieces": [[tokenizer.decode(ids, skip_special_tokens=False), flag] for ids, flag in runs],
        "turns": turns,
        "tokens": len(encoded.input_ids),
        "trained_tokens": sum(trained),
        "masked_tokens": len(trained) - sum(trained),
        "length": encoded.length,
        "truncated": encoded.truncated,
        "eos_token": tokenizer.eos_token,
        "eos_token_id": eos,
    }


TRAIN_OPEN, TRAIN_CLOSE = "⟦", "⟧"


def preview_text(preview: dict, template: str = "") -> str:
    """The command line's view: trained tokens inside ⟦ ⟧, then one line per assistant turn."""
    marked = "".join(f"{TRAIN_OPEN}{text}{TRAIN_CLOSE}" if flag else text for text, flag in preview["pieces"])
    lines = [f"template preview{f' ({template})' if template else ''}: {TRAIN_OPEN}…{TRAIN_CLOSE} trains (loss), "
             f"the rest is masked (-100); {preview['trained_tokens']} of {preview['tokens']} tokens train"
             + (f", cut from {preview['length']} to the cutoff" if preview["truncated"] else ""),
             "-" * 60, marked, "-" * 60]
    for number, turn in enumerate(preview["turns"], 1):
        verdict = (f"ends with the EOS {preview['eos_token']} (id {preview['eos_token_id']})" if turn["ends_with_eos"]
                   else f"does NOT end with the EOS {preview['eos_token']} (last token {turn['last']}): "
                        "answers learnt from it would not stop")
        lines.append(f"assistant turn {number}: {turn['tokens']} tokens, {verdict}")
    return "\n".join(lines)
