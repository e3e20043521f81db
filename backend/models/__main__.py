"""python -m backend.models: see backend/models/local/cli.py."""

import sys

from backend.models.local.cli import main

sys.exit(main())
