import sys

from backend.serve.cli import main

sys.exit(main())
