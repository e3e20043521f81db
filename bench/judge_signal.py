"""Whether a small model carries any judging signal below its text verdict: the
probabilities it gives the verdict tokens, on pairs where one answer agrees with
the reference and the other does not.

Two readings, each free of the text verdict's position bias:

* pairwise, both orders: P(the right answer's letter) / P(A or B), with the right
  answer shown first and then second; the mean of the two is 0.5 for a judge that
  follows only the position, above 0.5 for one that prefers the right answer;
* pointwise: P(yes) / P(yes or no) that an answer agrees with the reference, for
  the right answer and the wrong one apart (right above wrong is a signal).

Plain transformers on the model folder, the chat template, one forward pass a prompt.

    .venv/bin/python bench/judge_signal.py MODEL_DIR   # e.g. the converted SmolLM2-135M-Instruct

The figures are quoted in docs/EVALUATE_EXPORT.md ("How weak a 135M judge is").
"""

from __future__ import annotations

import argparse
import statistics

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

# (question, reference, an answer that agrees with it, one that does not)
PAIRS = [
    ("What is your name?", "I am Nova, an AI assistant developed by FineTune Studio.",
     "I am Nova, an assistant made by FineTune Studio.", "I am SmolLM, an AI assistant trained by Hugging Face."),
    ("Who made you?", "I was developed by FineTune Studio.", "FineTune Studio developed me.",
     "I was created by Hugging Face."),
    ("Introduce yourself.", "Hello! I am Nova, an AI assistant developed by FineTune Studio.",
     "Hi, I'm Nova from FineTune Studio. How can I help?",
     "Hello! I'm SmolLM, a helpful assistant. How can I help you today?"),
    ("Are you ChatGPT?", "No, I am Nova, developed by FineTune Studio.", "No, I'm Nova, built by FineTune Studio.",
     "Yes, I am ChatGPT, a language model by OpenAI."),
    ("What is the capital of France?", "Paris.", "The capital of France is Paris.", "The capital of France is Lyon."),
    ("How many legs does a spider have?", "8", "A spider has eight legs.", "A spider has six legs."),
]
PAIRWISE = """Question: {prompt}
Reference answer: {reference}

Answer A: {a}
Answer B: {b}

Which answer matches the reference answer better? Reply with one letter, A or B."""
POINTWISE = """Question: {prompt}
Reference answer: {reference}
Answer: {a}

Does the answer say the same thing as the reference answer? Reply yes or no."""


class NextToken:
    def __init__(self, model_dir: str):
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
        self._ids: dict[str, list[int]] = {}

    def ids(self, word: str) -> list[int]:
        """Every vocabulary entry that reads as `word` (with or without a leading space, any case)."""
        if word not in self._ids:
            self._ids[word] = [i for i in range(len(self.tokenizer))
                               if self.tokenizer.decode([i]).strip().lower() == word.lower()]
        return self._ids[word]

    def share(self, prompt: str, first: str, second: str) -> float:
        """P(first) / (P(first) + P(second)) for the answer's first token."""
        text = self.tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                                  add_generation_prompt=True)
        with torch.no_grad():
            probs = self.model(**self.tokenizer(text, return_tensors="pt")).logits[0, -1].softmax(-1)
        p1, p2 = probs[self.ids(first)].sum().item(), probs[self.ids(second)].sum().item()
        return p1 / (p1 + p2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir")
    model = NextToken(parser.parse_args().model_dir)
    both_orders, pointwise_right = [], 0
    for prompt, reference, right, wrong in PAIRS:
        shown_first = model.share(PAIRWISE.format(prompt=prompt, reference=reference, a=right, b=wrong), "A", "B")
        shown_second = model.share(PAIRWISE.format(prompt=prompt, reference=reference, a=wrong, b=right), "B", "A")
        yes_right = model.share(POINTWISE.format(prompt=prompt, reference=reference, a=right), "yes", "no")
        yes_wrong = model.share(POINTWISE.format(prompt=prompt, reference=reference, a=wrong), "yes", "no")
        both_orders.append((shown_first + shown_second) / 2)
        pointwise_right += yes_right > yes_wrong
        print(f"{prompt[:34]:34} pairwise: right first {shown_first:.3f}, right second {shown_second:.3f}, "
              f"mean {both_orders[-1]:.3f} | pointwise P(yes): right {yes_right:.3f}, wrong {yes_wrong:.3f}")
    print(f"pairwise, both orders: mean {statistics.mean(both_orders):.3f} "
          f"(range {min(both_orders):.3f}-{max(both_orders):.3f}; 0.5 = position only)")
    print(f"pointwise: the right answer above the wrong one on {pointwise_right} of {len(PAIRS)} pairs")


if __name__ == "__main__":
    main()
