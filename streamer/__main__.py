"""``python -m streamer``: the same as the ``streamer`` console script.

Handy where the script is not on ``PATH`` (a venv that is not activated, a cluster
node with the package on ``PYTHONPATH`` only).
"""

import sys

from streamer.cli import main

if __name__ == "__main__":
    sys.exit(main())
