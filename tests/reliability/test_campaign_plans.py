"""The kill campaigns' plans, without running them: replayable from the seed, and steered
so that every phase a campaign claims has a kill meant for it (at the running size)."""

from __future__ import annotations

import functools
import random

import pytest

from tests.reliability import test_shared_table_kill, test_streamer_kill, test_streamer_poison_kill
from tests.reliability.streamer_kills import (
    BETWEEN,
    COMMIT,
    FIRST,
    KIND_PHASE,
    ROLLBACK,
    Kill,
    phase_of,
    service,
)

CAMPAIGNS = {
    "poison": (test_streamer_poison_kill._plan, test_streamer_poison_kill.PHASES),
    **{f"shared table {p}": (functools.partial(test_shared_table_kill._plan, phases=phases), phases)
       for p, phases in test_shared_table_kill.PHASES.items()},
    **{f"kafka {s}": (functools.partial(test_streamer_kill._plan, phases=phases), phases)
       for s, phases in test_streamer_kill.PHASES.items()},
}


def _meant_for(kill: Kill) -> str | None:
    return kill.expect if kill.kind == "inside" else KIND_PHASE.get(kill.kind)


@pytest.mark.parametrize("name", sorted(CAMPAIGNS))
@pytest.mark.parametrize("seed", [1, 20_261_122, 987_654_321])
def test_a_plan_is_replayable_and_steers_a_kill_into_every_claimed_phase(name, seed):
    make, phases = CAMPAIGNS[name]
    plan = make(random.Random(seed))
    assert plan == make(random.Random(seed)), "the same seed must give the same plan"
    assert plan[0] == Kill("outside"), "the first run has no standby ahead of it: it is killed from outside"
    meant = {_meant_for(k) for k in plan}
    assert not [p for p in phases if p not in meant], f"{name}: phases with no kill meant for them: {plan}"
    real = [k for k in plan if k.kind != "startup"]  # startup runs never take the lease
    for i, kill in enumerate(real):
        if kill.expect == ROLLBACK:
            assert real[i - 1] == Kill("inside", "before complete", expect=COMMIT), (
                f"{name}: a rollback kill must follow a kill before a commit completed: {real}")
        if kill.kind == "takeover":
            assert i > 0, f"{name}: a takeover needs a holder before it: {real}"


@pytest.mark.parametrize(("trace", "phase"), [
    ([], FIRST),
    (["requested", "inflight", "markers x", "before complete", "completed"], BETWEEN),
    (["requested", "inflight", "markers x", "before log file x"], COMMIT),
    (["rollback requested", "rollback delete x"], ROLLBACK),
    (["completed", "compaction inflight", "compaction marker y"], service("compaction")),
    (["completed", "logcompaction inflight", "markers z", "before log file z"], service("logcompaction")),
    (["logcompaction inflight", "logcompaction completed", "requested", "before complete"], COMMIT),
    (["completed", "clean requested"], service("clean")),
    (["completed", "archive written"], service("archive")),
    (["archive written", "archive removed 1"], BETWEEN),
])
def test_the_phase_of_a_kill_is_read_from_its_step_trace(trace, phase):
    assert phase_of(trace) == phase
