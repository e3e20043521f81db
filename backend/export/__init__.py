"""Export of a checkpoint (`python -m backend.export`).

cli.py         `python -m backend.export`: arguments, the job's end in its progress file, the printed report
exporter.py    adapter copy or merged model, staged and renamed into place; the background job
outputs.py     output names inside the workspace, the base model of a run, sizes, the zip
model_card.py  README.md of an export (base model, data, settings, verification verdict)
verify.py      the merged model's greedy answers against the adapter's: equal, tie or differ
"""
