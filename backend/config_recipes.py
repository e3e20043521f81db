"""Settings that follow the model: what the Train form proposes when a model is
picked, and the named recipes the command line and the tests start from.

RunConfig's own defaults are the starter recipe: SmolLM2-135M-Instruct learns
the identity dataset with replay (measured: docs/DEMO.md, bench/starter_recipe.py).
The tiny demo model learns at other settings (its 2M parameters take a
learning rate that would wreck a real model): `demo-tiny`, the fast model of
the test suite. Sizes beyond what this machine could measure follow the common
practice of the field (LoRA around 2e-4 for 1-10B models), and say so.
"""

from __future__ import annotations

from backend.config import DEMO_TINY, RunConfig
from backend.messages import Message, msg

# DEMO_TINY (backend/config.py): the tiny demo model and its bilingual fact rows (docs/DEMO.md).
RECIPES: dict[str, dict] = {
    "starter": {},  # RunConfig's defaults
    "demo-tiny": DEMO_TINY,
}

# (upper bound of parameters, settings, where the numbers come from)
SIZE_SETTINGS = (
    (50_000_000, {"learning_rate": 3e-3, "num_train_epochs": 12.0}, "recipe.why.tiny"),
    (1_000_000_000, {"learning_rate": 5e-4, "num_train_epochs": 5.0}, "recipe.why.small"),
    (10_000_000_000, {"learning_rate": 2e-4, "num_train_epochs": 3.0}, "recipe.why.medium"),
    (None, {"learning_rate": 1e-4, "num_train_epochs": 2.0}, "recipe.why.large"),
)


def recipe_config(name: str, **overrides) -> RunConfig:
    """RunConfig of a named recipe, with `overrides` on top."""
    return RunConfig(**{**RECIPES[name], **overrides})


def tiny_config(**overrides) -> RunConfig:
    """The demo-tiny recipe: the tiny demo model on its own dataset (the test suite's fast runs)."""
    return recipe_config("demo-tiny", **overrides)


def suggested_settings(model: str, num_parameters: int | None, method: str = "lora") -> tuple[dict, Message | None]:
    """(settings, where they come from) the form proposes for `model`: learning rate and epochs for
    its size. Full fine-tuning moves every weight, so it takes a tenth of LoRA's learning rate."""
    if model in ("demo", "demo-tiny"):
        return {k: v for k, v in DEMO_TINY.items() if k in ("learning_rate", "num_train_epochs")}, msg(SIZE_SETTINGS[0][2])
    if not num_parameters:
        return {}, None
    for limit, settings, why in SIZE_SETTINGS:
        if limit is None or num_parameters < limit:
            chosen = dict(settings)
            if method == "full":
                chosen["learning_rate"] = chosen["learning_rate"] / 10
            return chosen, msg(why)
    return {}, None
