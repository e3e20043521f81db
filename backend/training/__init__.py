"""Parts of the training worker (`python -m backend.train`).

dataset.py    canonical rows -> encoded train / eval datasets (split, overflow)
collator.py   dynamic padding to the longest row of a length-grouped batch
model.py      base model + LoRA / QLoRA / full set-up
arguments.py  RunConfig -> transformers TrainingArguments
callbacks.py  metrics.jsonl, checkpoint markers + rotation, graceful stop, disk check
cli.py        command line, run folder, resume reconciliation, logging
errors.py     exceptions -> one sentence + advice
summary.py    summary.json
"""
