"""The learning report: what a run learned from its data and what it kept of the base model.

questions.py what is asked: the run's held-out rows (filled as trained), identity paraphrases, general questions
entries.py   one model scored into an entry; RUN/eval/learning.json read and written
reporter.py  a run's report entry by entry (the worker's callback and the command line)
table.py     the report as text, and what its numbers were measured on

Whether one answer is right (key facts, a JSON object's keys, else ROUGE-L) is the scorer
library's rule, backend/scoring/answer_rule.py. The report stands below the worker
(backend/training/learning_callback.py scores as the run trains) and evaluation (`python -m backend.evaluate --learning`, backend/evaluation/learning_run.py).
"""
