"""A log-only file slice of a version-9 table, as Apache Hudi 1.2 names it, plans it,
cleans around it and compacts it.

The table is Hudi 1.2's own (the ``table_log_only`` fixture: one file group of three
delta commits, no base file). We plan its compaction and write twice more; Hudi's file
system view (``CALL show_fsview_all``) must list the same slices under the same names as
ours, Hudi's cleaner must keep the slice our plan reads (it matches the plan's
``baseInstantTime`` against its slices' names), and Hudi's compactor must run our plan.
Every reader then returns the fixture's expected rows with our writes applied."""

from __future__ import annotations

import json
import re
import shutil
import uuid
from pathlib import Path

import pyarrow as pa

from streamer.config.policies import CompactionPolicy
from streamer.read import Table
from streamer.services.compaction import schedule_compaction_safely
from streamer.write import HudiWriter
from tests.support.fixture_tables import FIXTURES, table_path
from tests.support.write_model import read_hudi_rs

NAME = "quickstart_trips_table__mor__avro__table_log_only"
SCHEMA = pa.schema([("key", pa.string()), ("ts", pa.int64()), ("level", pa.string()),
                    ("severity", pa.int32()), ("partition", pa.string()), ("round", pa.int32())])


def _rounds(rows: pa.Table) -> dict[str, int]:
    return dict(zip(rows.column("key").to_pylist(), rows.column("round").to_pylist(), strict=True))


def _ours(path: str) -> set[tuple[str, str, tuple[str, ...]]]:
    return {(s.file_id, s.base_instant, tuple(sorted(lf.name for lf in s.log_files)))
            for ss in Table.open(path).fsview.all_slices().values() for s in ss}


def _hudis(session, path: str) -> set[tuple[str, str, tuple[str, ...]]]:
    # ``path_regex => ''``: the table's one (empty) partition path; the default pattern
    # fails on a non-partitioned table
    rows = session.sql(f"CALL show_fsview_all(path => '{path}', path_regex => '', include_in_flight => true)", collect=True)
    assert rows is not None
    return {(r["file_id"], r["base_instant"],
             tuple(sorted(Path(p).name for p in re.findall(r"pathStr=([^,)]+)", r["delta_files"]))))
            for r in rows.to_pylist()}


def test_hudi_names_cleans_around_and_compacts_our_plan_of_its_log_only_slice(tmp_path, hudi_fixtures_dir,
                                                                              hudi_sessions):
    session = hudi_sessions["1.2"]
    path = str(tmp_path / "t")
    shutil.copytree(table_path(hudi_fixtures_dir, NAME), path)
    planned = schedule_compaction_safely(Table.open(path), CompactionPolicy(), force=True)
    assert planned is not None
    w = HudiWriter.open(path)
    for r in (3, 4):
        w.upsert(pa.Table.from_pylist([{"key": "k3", "ts": 200 + r, "level": "NEW", "severity": 3,
                                        "partition": "", "round": r}], schema=SCHEMA))
    assert _hudis(session, path) == _ours(path), "Hudi's file system view names the slices as ours does"
    [[read_by_plan, _]] = Table.open(path).fsview.all_slices().values()
    name = f"lo_{uuid.uuid4().hex[:12]}"  # run_clean wants a catalog table
    session.sql(f"CREATE TABLE {name} USING hudi LOCATION '{path}'")
    session.sql("SET hoodie.metadata.enable=false")  # as our writer leaves the table
    try:
        session.sql(f"CALL run_clean(table => '{name}', retain_commits => 1)")
        lost = [lf.name for lf in read_by_plan.log_files if not Path(lf.path).exists()]
        assert not lost, f"Hudi's cleaner deleted logs our pending compaction {planned.timestamp} reads: {lost}"
        session.sql(f"CALL run_compaction(op => 'run', path => '{path}')")
    finally:
        session.sql("RESET hoodie.metadata.enable")
    assert Table.open(path).timeline.get(planned.timestamp).is_completed, "Hudi ran our plan"
    lines = (Path(FIXTURES) / "expected" / f"{NAME}.snapshot.jsonl").read_text().splitlines()
    want = {**{r["key"]: r["round"] for r in map(json.loads, lines)}, "k3": 4}
    assert _rounds(session.read(path)) == _rounds(Table.open(path).read()) == _rounds(read_hudi_rs(path)) == want
