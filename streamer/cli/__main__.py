"""``python -m streamer.cli``: the same as the ``streamer`` console script."""

import sys

from streamer.cli import main

sys.exit(main())
