"""`python -m backend.export`: export a checkpoint (backend/export/cli.py)."""

import sys

from backend.export.cli import main

if __name__ == "__main__":
    sys.exit(main())
