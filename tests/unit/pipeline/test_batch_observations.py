"""What a batch report observes beyond counts: the table layout after a commit and the
inline services that ran (timed once per step), on a real table written without Spark."""

from __future__ import annotations

import pyarrow as pa

from streamer.config.policies import PoliciesConfig
from streamer.pipeline.services import service_runs
from streamer.read import Table
from streamer.services.runner import run_inline_services
from streamer.table.layout import table_layout
from streamer.write import HudiWriter, TableConfig, WriteOptions

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])


def _rows(ids, ts: int) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "ts": pa.array([ts] * len(ids), pa.int64()),
                     "v": [f"v{ts}"] * len(ids)}, schema=SCHEMA)


def test_layout_follows_commits_and_services(tmp_path):
    path = str(tmp_path / "t")
    w = HudiWriter.create(path, TableConfig("t", ("id",), (), "ts"), schema=SCHEMA,
                          options=WriteOptions(engine="local"))
    result = w.upsert(_rows(range(100), 0))
    first = table_layout(result.snapshot)
    assert (first.file_groups, first.log_files, first.log_blocks) == (1, 0, 0)
    for ts in (1, 2, 3):  # updates go to the group's log: one log file (one block) per commit
        result = w.upsert(_rows(range(ts * 10, ts * 10 + 20), ts))
    layout = table_layout(result.snapshot)
    assert (layout.file_groups, layout.log_files, layout.log_blocks) == (1, 3, 3)
    assert (layout.max_log_files_per_slice, layout.mean_log_blocks_per_slice) == (3, 3.0)

    policies = PoliciesConfig.model_validate({"compaction": {"mode": "inline", "trigger": {"delta_commits": 2}}})
    table = Table.from_snapshot(result.snapshot)
    runs = service_runs(run_inline_services(table, policies))
    assert [(r.action, r.outcome) for r in runs] == [("compaction", "scheduled"), ("compaction", "completed")]
    assert runs[0].instant == runs[1].instant
    # one timed step (schedule + execute): its seconds on the first run only
    assert runs[0].seconds is not None and runs[0].seconds >= 0 and runs[1].seconds is None
    assert "compaction" in runs[0].line() and "scheduled in" in runs[0].line()
    table.refresh()
    after = table_layout(table.snapshot)
    assert (after.file_groups, after.log_files, after.pending_compactions) == (1, 0, 0)


def test_a_quiet_round_runs_nothing():
    from streamer.services.runner import ServicesReport

    assert service_runs(ServicesReport()) == ()
