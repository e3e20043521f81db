"""`python -m backend.export`: export a checkpoint (backend/export/exporter.py)."""

import sys

from backend.export.exporter import main

if __name__ == "__main__":
    sys.exit(main())
