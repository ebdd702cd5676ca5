"""Moved to :mod:`tests.support.block_tables`; this alias is for ``benchmarks/bench_services.py``.

Tests import ``tests.support.block_tables``. Remove this module once the benchmark does too.
"""

from tests.support.block_tables import *  # noqa: F403
