"""Where the worker's peak memory goes: the real worker (`backend.train`) run in
this process with a sampler thread that records, every 20 ms, the resident set
(RSS) and what glibc's malloc has handed out and not taken back (mallinfo2:
`in use` = live heap + mmapped blocks; RSS minus that is freed memory the heap
still holds), each tagged with the stage the worker is in.

    OMP_NUM_THREADS=1 nice .venv/bin/python bench/worker_memory_stages.py --model MODEL_DIR \
        [--steps 3] [--set gradient_checkpointing=true ...]

Stages: import, data (tokenizer + encoded rows), model (weights + adapters),
checks (the chunked-loss and packing checks on the loaded model), trainer
(Trainer init), train setup (until the first step), then per step: forward, backward (from the end of the forward
to the optimizer), optimizer, and the step's end. Prints one line per stage
with the RSS when it began, its peak RSS and its peak `in use`.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import resource
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "alpaca_en_demo.json"
sys.path.insert(0, str(REPO))
GIB = 2**30


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


_libc = ctypes.CDLL("libc.so.6")
_libc.mallinfo2.restype = _Mallinfo2


def in_use() -> int:
    info = _libc.mallinfo2()
    return info.uordblks + info.hblkhd


def rss() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class Sampler:
    def __init__(self):
        self.stage = "import"
        self.stats: dict[str, list] = {}  # stage -> [rss at start, peak rss, peak in use]
        self.order: list[str] = []
        self.running = True
        self.enter("import")
        threading.Thread(target=self._loop, daemon=True).start()

    def enter(self, stage: str) -> None:
        now = rss()
        if stage not in self.stats:
            self.stats[stage] = [now, now, in_use()]
            self.order.append(stage)
        self.stage = stage
        self.sample()

    def sample(self) -> None:
        stat = self.stats[self.stage]
        stat[1] = max(stat[1], rss())
        stat[2] = max(stat[2], in_use())

    def _loop(self) -> None:
        while self.running:
            self.sample()
            time.sleep(0.02)


def instrument(sampler: Sampler) -> None:
    from transformers import TrainerCallback

    import backend.training.session as session

    def staged(name, function):
        def wrapper(*args, **kwargs):
            sampler.enter(name)
            try:
                return function(*args, **kwargs)
            finally:
                sampler.sample()
        return wrapper

    session.build_datasets = staged("data", session.build_datasets)
    session.build_model = staged("model", session.build_model)
    session.choose_loss = staged("checks", session.choose_loss)
    session.collator_for = staged("checks", session.collator_for)
    session.StudioTrainer = staged("trainer", session.StudioTrainer)

    class Steps(TrainerCallback):
        def __init__(self):
            self.step = 0

        def on_train_begin(self, args, state, control, model=None, **kwargs):
            def forward_done(*_):
                if torch_grad_enabled():
                    sampler.enter(f"step {self.step} backward")
            model.register_forward_hook(forward_done)

        def on_step_begin(self, args, state, control, **kwargs):
            self.step = state.global_step + 1
            sampler.enter(f"step {self.step} forward")

        def on_pre_optimizer_step(self, args, state, control, **kwargs):
            sampler.enter(f"step {self.step} optimizer")

        def on_step_end(self, args, state, control, **kwargs):
            sampler.enter(f"step {self.step} end")

    original_build = session.build

    def build(job, stop, extra_callbacks=()):
        result = original_build(job, stop, (*extra_callbacks, Steps()))
        sampler.enter("train setup")
        return result

    session.build = build


def torch_grad_enabled() -> bool:
    import torch

    return torch.is_grad_enabled()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--cutoff", type=int, default=512)
    parser.add_argument("--set", nargs="*", default=[], help="more RunConfig settings, key=value")
    args = parser.parse_args()
    sampler = Sampler()
    from backend.config import RunConfig
    from backend.train import main as train_main

    instrument(sampler)
    workspace = Path(tempfile.mkdtemp(prefix="memory-stages-"))
    config = workspace / "run.yaml"
    RunConfig(model_name_or_path=str(args.model), dataset=str(DATA), replay="off", max_steps=args.steps,
              per_device_train_batch_size=args.batch, cutoff_len=args.cutoff, val_size=0, learning_rate=2e-4,
              logging_steps=1, save_steps=100_000, save_total_limit=1).save(config)
    sets = [item for pair in args.set for item in ("--set", pair)]
    code = train_main(["--config", str(config), "--run-dir", str(workspace / "run"), "--workspace", str(workspace),
                       *sets])
    sampler.enter("finish")
    sampler.running = False
    print(f"exit {code}; settings {args.set or 'defaults'}; ru_maxrss "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB")
    print(Path(workspace / "run" / "train.log").read_text())
    shutil.rmtree(workspace, ignore_errors=True)
    print("| stage | RSS at start GiB | peak RSS GiB | peak malloc in use GiB |")
    print("|---|---|---|---|")
    for stage in sampler.order:
        start, peak, used = sampler.stats[stage]
        print(f"| {stage} | {start / GIB:.2f} | {peak / GIB:.2f} | {used / GIB:.2f} |")


if __name__ == "__main__":
    main()
