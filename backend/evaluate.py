"""`python -m backend.evaluate`: score checkpoints (backend/evaluation/cli.py)."""

import sys

from backend.evaluation.cli import main

if __name__ == "__main__":
    sys.exit(main())
