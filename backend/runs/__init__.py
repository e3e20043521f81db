"""Runs on disk and the processes behind them.

store.py       RunStore: create, start, stop, resume, delete, list runs (the UI's one door to runs)
info.py        RunInfo: what a run folder says about itself (state, progress, devices, summary)
files.py       the run folder's files: names, states, status updates, checkpoints, metrics tailing
checkpoint_check.py  is a checkpoint marked complete readable (what resume checks before loading it)
processes.py   detached process launch, identity (pid + start time), stop signals, kill, reap:
               used by training runs, background jobs and the model's background build alike
torchrun.py    `python -m backend.runs.torchrun`: torchrun for several nodes, the join timeout told as a sentence
jobs.py        background evaluation / export jobs reporting through a progress file
queue.py       the run queue in the run folders: enqueue, order, cancel, move, start now, summary
scheduler.py   who starts queued runs: the holder of runs/.scheduler.lock (the app, or a --queue command)
queue_times.py estimated start and end of each queued run
queue_wait.py  `python -m backend.train --config run.yaml --queue`: queue a run and wait for it
workspace.py   the workspace's folders (datasets, runs, models, exports)
model_builds.py  a model's first build or GGUF conversion as a stage of the run: its progress file, mirrored
                 into the run's status.json and train.log
speed_log.py   this machine's measured training speed per settings (runs and speed probes), for the time estimate
diagnose.py    a run's diagnostics zip for a bug report (`python -m backend.runs diagnose`: cli.py), secrets removed
redaction.py   secrets and the home folder's path out of text: known values, secret-looking shapes
machine_report.py  library versions, CPU, GPUs, RAM, disk, OS: read without importing torch

Nothing heavy is imported here: the UI imports these at start-up.
"""
