"""Sweeps: a grid over one to three RunConfig settings, run as queued runs, compared by a target.

grid.py         the sweep file (grid or list, target, budget), each combination through RunConfig's validation
queueing.py     a sweep becoming queued runs that share a sweep id, its record in workspace/sweeps/, the time
                estimate added up
sweep_table.py  one row per run (swept values, target, time, tokens/s, peak memory) and the best run
cli.py          python -m backend.train --config run.yaml --sweep sweep.yaml [--dry-run]
"""
