"""``python -m grounding.cli``: the command line (same as the ``grounding`` console script)."""

import sys

from grounding.cli import run

if __name__ == "__main__":
    sys.exit(run())
