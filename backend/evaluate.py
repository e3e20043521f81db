"""`python -m backend.evaluate`: score checkpoints (backend/evaluation/evaluator.py)."""

import sys

from backend.evaluation.evaluator import main

if __name__ == "__main__":
    sys.exit(main())
