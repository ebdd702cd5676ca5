"""Campaign sizes: smoke in ``make test``, full in ``make test-campaigns``.

A crash or fault campaign (pytest marker ``campaign``) runs at the size that
``MOR_CAMPAIGN_SIZE`` names: ``smoke`` (the default, what ``make test`` runs: every kill
kind and phase the campaign claims, with few repetitions) or ``full`` (``make
test-campaigns``: the counts the campaign's docstring promises). Both sizes assert the
same phases; only the repetitions differ, so a smoke run still fails when a phase is
never reached.
"""

from __future__ import annotations

import os
from typing import TypeVar

ENV_SIZE = "MOR_CAMPAIGN_SIZE"
SIZES = ("smoke", "full")

T = TypeVar("T")


def campaign_size() -> str:
    """``smoke`` or ``full``; anything else is a setup error naming the variable."""
    size = os.environ.get(ENV_SIZE, "smoke").strip().lower() or "smoke"
    if size not in SIZES:
        raise ValueError(f"{ENV_SIZE}={size!r}: expected one of {', '.join(SIZES)}")
    return size


def sized(*, smoke: T, full: T) -> T:
    """The value for the running campaign size."""
    return full if campaign_size() == "full" else smoke
