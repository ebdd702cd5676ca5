"""Campaign sizes: smoke in ``make test``, full in ``make test-campaigns``.

A crash or fault campaign (pytest marker ``campaign``) runs at the size that
``MOR_CAMPAIGN_SIZE`` names: ``smoke`` (the default, what ``make test`` runs) or ``full``
(``make test-campaigns``: the counts the campaign's docstring promises; ``.ci/run`` runs
both tiers). At full size a campaign claims every phase it knows; at smoke size it pins a
few of them (the kill kinds are fixed, only their places are drawn from the seed), the
ones the smoke runs of the other campaigns do not already reach. Each size asserts the
phases it claims: a smoke run that never reaches a pinned phase fails, it does not pass
quietly.

A campaign's kill points are drawn from its seed (:func:`seeded`): printed when it starts
and in its failure message; ``MOR_CAMPAIGN_SEED`` replays it.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Sized
from pathlib import Path
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


# ---------------------------------------------------------------------------- seeds
#: Replays a campaign: its kill plan (kinds, steps, delays) is drawn from this seed.
ENV_SEED = "MOR_CAMPAIGN_SEED"


def replay_hint(seed: int) -> str:
    return f"campaign seed {seed}, size {campaign_size()}: replay with {ENV_SEED}={seed} {ENV_SIZE}={campaign_size()}"


def campaign_seed(default: int) -> int:
    """The campaign's seed: ``MOR_CAMPAIGN_SEED`` when set (a replay), else ``default``.

    Printed at once (stderr, so it shows beside the kill log of a running campaign)."""
    raw = os.environ.get(ENV_SEED, "").strip()
    try:
        seed = int(raw) if raw else default
    except ValueError:
        raise ValueError(f"{ENV_SEED}={raw!r}: expected an integer") from None
    print(replay_hint(seed), file=sys.stderr, flush=True)
    return seed


@contextlib.contextmanager
def seeded(default: int) -> Iterator[int]:
    """``with seeded(SEED) as seed:`` the seed (see :func:`campaign_seed`); a failure inside
    names it and how to replay it (an assertion's message ends with the hint; any other
    error, ``pytest.fail`` included, carries it as a note)."""
    seed = campaign_seed(default)
    try:
        yield seed
    except AssertionError as e:
        raise AssertionError(f"{e}\n[{replay_hint(seed)}]").with_traceback(e.__traceback__) from None
    except BaseException as e:
        if not isinstance(e, (KeyboardInterrupt, SystemExit, GeneratorExit)):
            e.add_note(f"[{replay_hint(seed)}]")
        raise


# ---------------------------------------------------------------------------- phases
def assert_phases_hit(claimed: Iterable[str], hit: Iterable[str], *, what: str = "kills") -> Counter:
    """Every phase the campaign claims was hit at least once; returns the counts of all hit.

    At both sizes (each with its own claims): a run that never reaches a claimed phase
    fails, it does not pass quietly."""
    counts = Counter(hit)
    missing = [p for p in claimed if counts[p] == 0]
    assert not missing, (
        f"{what}: phases the campaign claims were never hit: {missing}; hit: {dict(counts.most_common())}"
    )
    return counts


def assert_few_missed(missed: Sized, total: int, *, at_most: float, what: str, detail: str = "") -> None:
    """Runs that did not die as planned (a kill step never reached, a run that made no
    progress) are counted against the campaign: at most ``at_most`` of ``total``."""
    bound = max(1, int(total * at_most))
    assert len(missed) <= bound, (
        f"{len(missed)} of {total} {what} did not go as planned (bound {bound}): {detail or missed}"
    )


@contextlib.contextmanager
def held_at(prefix: str, pause: Path) -> Iterator[Path]:
    """The pipeline running on a thread of this process stops at its next step labelled
    ``prefix...`` and writes ``pause`` (:func:`streamer.faults.pause_at`); the block acts on
    the world while it waits. On exit the pause is disarmed and the file removed: the run
    goes on, against whatever the block did."""
    from streamer import faults

    faults.pause_at(prefix, pause)
    try:
        yield pause
    finally:
        faults.pause_at(None)
        pause.unlink(missing_ok=True)
