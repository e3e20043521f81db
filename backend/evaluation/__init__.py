"""Evaluation of checkpoints (`python -m backend.evaluate`).

cli.py          `python -m backend.evaluate`: arguments, the job's end in its progress file, the printed table
evaluator.py    eval loss / perplexity and greedy answers per checkpoint of a run, and its background job
scoring.py      what scoring one model needs: the held-out rows, the models (base once, checkpoints as
                adapters), eval loss, greedy answers and the user's chosen scorers (backend/scoring/);
                shared with the parent comparison
results.py      eval/<checkpoint>/ folders: names, reading results back, checkpoint choices
text_scores.py  the BLEU, ROUGE-1/2/L and exact match columns (0-100), from backend/scoring/
pair_scores.py  preference accuracy and margins of DPO-style runs
heldout.py      held-out identity and general prompts: the new name learned, the base's right answers kept
                (bench/starter_recipe.py's measure; every run's own report is backend/learning/)
learning_run.py `--learning`: the learning report of a finished run, every checkpoint, no time budget
benchmarks.py   lm-evaluation-harness on the base, checkpoints and models on this machine: eval/<checkpoint>/benchmarks.json
benchmark_specs.py  task names, task files and the hub checked before lm-eval runs
benchmark_tasks.py  the project's own lm-eval task files (demo facts, general questions)
"""
