"""This machine's measured training speed, kept in the workspace: one JSON line per finished
run or speed probe, in workspace/speed/speed_log.jsonl.

    {"time": unix_s, "key": str, "source": "run" | "probe", "host": str, "model": str,
     "seconds_per_step": float, "steps": int, "tokens_per_second": float | None,
     "run_id": str | None, "load": 1-minute load average when it was measured,
     "profile": {"step", "head", "event", "tail", "steps"} seconds, or None (speed_profile)}

`key` names the settings a step's time depends on (the model, the data, the method, batch and
lengths, the devices); the ones it does not depend on (learning rate, seed, the number of
epochs or steps, names) are left out, so a sweep over the learning rate reuses the first
run's speed for the next ones. The time estimate (backend/training/estimate.py) reads it.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import statistics
import time
from pathlib import Path

from backend.config import RunConfig

SPEED_FILE = Path("speed") / "speed_log.jsonl"

# Fields a step's time does not depend on. Everything else in RunConfig is part of the key:
# a new field is taken to change the speed until it is named here.
SPEED_NEUTRAL = frozenset({
    "learning_rate", "num_train_epochs", "max_steps", "lr_scheduler_type", "warmup_ratio", "weight_decay",
    "max_grad_norm", "seed", "identity_name", "identity_author", "run_name", "early_stopping_patience",
    "early_stopping_threshold", "save_total_limit", "lora_alpha", "use_rslora", "label_smoothing", "beta",
    "simpo_gamma", "desirable_weight", "undesirable_weight", "neftune_noise_alpha", "trust_remote_code",
    "master_addr", "master_port", "node_rank", "node_join_timeout", "report_to",
    "save_steps", "eval_steps", "logging_steps",  # their cost is the profile's per-event term
})


def speed_settings(config: RunConfig) -> dict:
    return {name: value for name, value in config.to_dict().items() if name not in SPEED_NEUTRAL}


def speed_key(config: RunConfig) -> str:
    """Same key: the same model, data and step shape on this machine (the host name is part of it)."""
    text = json.dumps({"host": socket.gethostname(), **speed_settings(config)}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def speed_log_path(workspace_root: Path) -> Path:
    return Path(workspace_root) / SPEED_FILE


def event_steps(config: RunConfig, first: int, last: int, has_eval: bool) -> int:
    """Optimizer steps k in [first, last) after which the Trainer saves a checkpoint or evaluates
    (eval_steps, else save_steps: backend/training/arguments.py): each costs an evaluation and a save."""
    every = {config.save_steps} | ({config.eval_steps or config.save_steps} if has_eval else set())
    return sum(1 for k in range(max(1, first), last) if any(k % e == 0 for e in every if e and e > 0))


def speed_profile(metrics: list[dict], wall_s: float, config: RunConfig) -> dict | None:
    """A run's wall time taken apart (seconds): `head` (set-up and the first steps' extra), `step` (one optimizer
    step, all it costs between two train lines with no evaluation or save between them), `event` (one
    evaluation + save in the middle of the run) and `tail` (the last evaluation, save and final/). None
    without two train lines. The end of the run is the "end" system line; its start that minus wall_s."""
    lines = [m for m in metrics if m.get("kind") == "train" and isinstance(m.get("time"), (int, float))]
    end = next((m["time"] for m in reversed(metrics) if m.get("kind") == "system" and m.get("event") == "end"), None)
    if len(lines) < 2 or end is None:
        return None
    has_eval = any(m.get("kind") == "eval" for m in metrics)
    plain, by_tokens = [], []  # seconds a step: between lines with no event, and by tokens over tokens/s
    for before, line in zip(lines, lines[1:]):
        steps = line["step"] - before["step"]
        if steps <= 0:
            continue
        if not event_steps(config, before["step"], line["step"], has_eval):
            plain.append((line["time"] - before["time"]) / steps)
        tokens = (line.get("tokens_seen") or 0) - (before.get("tokens_seen") or 0)
        if tokens > 0 and line.get("tokens_per_second"):
            by_tokens.append(tokens / line["tokens_per_second"] / steps)
    if not (plain or by_tokens):
        return None
    step = statistics.median(plain or by_tokens)
    first, last, total = lines[0]["step"], lines[-1]["step"], int(metrics[-1].get("step") or lines[-1]["step"])
    start = end - wall_s
    events = event_steps(config, first, last, has_eval)
    middle = (lines[-1]["time"] - lines[0]["time"]) - (last - first) * step
    return {"step": step, "head": max(0.0, lines[0]["time"] - start - first * step),
            "event": max(0.0, middle / events) if events else None,
            "tail": max(0.0, end - lines[-1]["time"] - (total - last) * step), "steps": total}


def profile_seconds(profile: dict, config: RunConfig, steps: int, has_eval: bool) -> float:
    """The wall seconds of a run of `steps` steps of `config` by a measured profile. Without a measured
    event (no save or evaluation in the middle of the measured run) one costs what the end cost."""
    event = profile.get("event")
    if event is None:
        event = profile.get("tail") or 0.0
    return (profile.get("head") or 0.0) + steps * profile["step"] + event_steps(config, 1, steps, has_eval) * event \
        + (profile.get("tail") or 0.0)


def record_speed(workspace_root: Path, config: RunConfig, *, source: str, seconds_per_step: float, steps: int,
                 tokens_per_second: float | None = None, run_id: str | None = None,
                 profile: dict | None = None) -> dict:
    """Append one measurement (a line write in append mode: concurrent writers do not mix lines).
    `seconds_per_step`: wall seconds over steps; `profile`: speed_profile's parts, when measured."""
    record = {"time": round(time.time(), 3), "key": speed_key(config), "source": source,
              "host": socket.gethostname(), "model": config.model_name_or_path,
              "seconds_per_step": round(float(seconds_per_step), 5), "steps": int(steps),
              "tokens_per_second": round(float(tokens_per_second), 1) if tokens_per_second else None,
              "run_id": run_id, "load": round(os.getloadavg()[0], 2),
              "profile": {k: (round(v, 5) if isinstance(v, float) else v) for k, v in profile.items()} if profile else None}
    path = speed_log_path(workspace_root)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")
    return record


def matching_records(workspace_root: Path, config: RunConfig, source: str | None = None) -> list[dict]:
    """Measurements of this config's key, oldest first; a line that does not parse is skipped."""
    key, found = speed_key(config), []
    for record in read_lines(speed_log_path(workspace_root)):
        if record.get("key") == key and (source is None or record.get("source") == source) \
                and isinstance(record.get("seconds_per_step"), (int, float)) and record["seconds_per_step"] > 0:
            found.append(record)
    return found


def read_lines(path: Path) -> list[dict]:
    """The JSON objects of a JSON Lines file; a line that does not parse (a torn last line) is skipped."""
    if not Path(path).is_file():
        return []
    out = []
    for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict):
            out.append(record)
    return out
