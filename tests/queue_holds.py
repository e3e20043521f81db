"""A callback for the queue's tests: the worker holds after its second step while the
workspace's `.hold` flag exists. The flag is made before the run exists, so a run
that a queue starts at once (no chance to touch a file in its folder first) holds too."""

from __future__ import annotations

import time
from pathlib import Path

from transformers import TrainerCallback


class HoldWhileWorkspaceFlag(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        run_dir = Path(args.output_dir)
        flag = run_dir.parent.parent / ".hold"  # workspace/runs/<id> -> workspace/.hold
        if state.global_step < 2 or not flag.exists():
            return control
        (run_dir / ".held").write_text(str(state.global_step))
        while flag.exists():
            time.sleep(0.05)
        return control
