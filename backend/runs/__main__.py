import sys

from backend.runs.cli import main

sys.exit(main())
