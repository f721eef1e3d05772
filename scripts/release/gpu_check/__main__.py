"""`python -m scripts.release.gpu_check`: the command (command.py)."""

import sys

from .command import main

if __name__ == "__main__":
    sys.exit(main())
