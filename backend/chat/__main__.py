import sys

from backend.chat.cli import main

sys.exit(main())
