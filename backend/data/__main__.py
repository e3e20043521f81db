"""python -m backend.data: see backend/data/cli.py."""

import sys

from backend.data.cli import main

sys.exit(main())
