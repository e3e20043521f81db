"""A process that needs the replay answers another process is generating says whom it waits for
and how far that one is, instead of "step 0 / ?" for minutes: the run's stage (status.json), the
Runs tab's bar and the Plan's Measure speed. The lock is the real file lock, held by this test as
a holder holds it; the waiter is the worker's own replay source."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from backend.config_recipes import tiny_config
from backend.data.general_prompts import REPLAY_PROMPTS
from backend.models.loading import load_tokenizer
from backend.runs.files import read_status
from backend.runs.jobs import RUNNING
from backend.training.cli import Job
from backend.training.replay import CACHE_DIR, model_cache_key
from backend.training.replay_lock import holder_file, replay_lock
from backend.training.session import _replay_source
from tests.polling import wait_for
from ui.panels import estimate_panel
from ui.views import run_view


def test_a_run_waiting_for_the_replay_answers_says_whose_they_are_and_how_far(ctx, demo_model_dir):
    workspace, tokenizer = ctx.workspace, load_tokenizer(str(demo_model_dir))
    config = tiny_config(devices="cpu", replay="on")
    run_id = ctx.store.create(config)  # queued: the worker's status before it trains
    job = Job(config=config, run_dir=ctx.store.runs_dir / run_id, workspace=workspace)
    cache = Path(workspace.datasets_dir) / CACHE_DIR / f"{model_cache_key(str(demo_model_dir), tokenizer)}.jsonl"
    cache.parent.mkdir(parents=True, exist_ok=True)
    replay = _replay_source(config, str(demo_model_dir), tokenizer, job)
    rows: list = []

    with replay_lock(cache, "20260101-000000-first") as shared:  # another run generates them
        shared(None)(41, 88)
        waiter = threading.Thread(target=lambda: rows.extend(replay(12)), daemon=True)
        waiter.start()
        stage = wait_for(lambda: (read_status(job.run_dir).get("stage") or None), "the waiting run's stage")
        assert stage == {"name": "replay_wait", "holder": "20260101-000000-first", "done": 41, "total": 88}
        bar = run_view.progress_html(lambda key, **v: ctx.msg("en", key, **v), ctx.store.get(run_id), [])
        assert "waiting for run 20260101-000000-first, which answers the same replay prompts: 41 of 88 base answers" in bar
        zh = run_view.progress_html(lambda key, **v: ctx.msg("zh", key, **v), ctx.store.get(run_id), [])
        assert "正在等待运行 20260101-000000-first" in zh and "41 / 88" in zh
        # The Plan's Measure speed reads the same stage of its scratch run.
        said = estimate_panel.probe_text(ctx, "en", {"state": RUNNING, "run_dir": str(job.run_dir)}, time.time())
        assert said.startswith("⏳ Measuring speed, before its first step: waiting for run 20260101-000000-first")
        assert "41 of 88 base answers" in said
        cache.write_text("".join(json.dumps({"prompt": p, "answer": "Fine."}) + "\n" for p in REPLAY_PROMPTS))
    waiter.join(timeout=120)
    # The holder let go: the waiter read its answers (nothing generated) and its stage is gone.
    assert rows and all(row["messages"][1]["content"] == "Fine." for row in rows)
    assert read_status(job.run_dir).get("stage") is None and not holder_file(cache).exists()


def test_the_app_s_background_preparation_is_named_as_such(ctx, tmp_path):
    cache, heard = tmp_path / "key.jsonl", []
    with replay_lock(cache) as shared:  # owner None: the app's background job
        shared(None)(3, 88)
        waiter = threading.Thread(target=lambda: replay_lock(cache, "run-b", heard.append).__enter__(), daemon=True)
        waiter.start()
        wait_for(lambda: heard, "the waiter to hear the holder")
    waiter.join(timeout=30)
    assert heard[0]["owner"] is None and (heard[0]["done"], heard[0]["total"]) == (3, 88)
    text = ctx.msg("en", "runs.stage.replay_wait_app", done=3, total=88, elapsed="5 s", holder="")
    assert text.startswith("waiting for the default model's background preparation") and "3 of 88" in text
