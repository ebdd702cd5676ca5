"""Reading one table through every reader and judging each by an independent answer.

Readers: ours (:class:`streamer.read.Table`), hudi-rs (the ``hudi`` package) and
Apache Hudi 0.15 / 1.0 (Spark, through :mod:`tests.support.hudi`). None of them is
the reference: every answer is compared with an :class:`Expected` answer built without
any reader - a model of the data written (:class:`tests.support.write_model.History`
for snapshot, time travel and incremental queries) and, for the read-optimized query,
the table's latest committed base files read as plain Parquet (:func:`base_file_rows`).
Rows are put in a canonical form: writer-dependent meta columns dropped
(``_hoodie_commit_seqno``, ``_hoodie_file_name``), timestamps as naive UTC, rows sorted,
so only what a query means is compared.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from streamer.errors import StreamerError
from streamer.read import Table
from tests.support.gaps import Gap
from tests.support.hudi import HudiOracleError, HudiSpark
from tests.support.write_model import History, latest_base_files

DROPPED = ("_hoodie_commit_seqno", "_hoodie_file_name")
QUERIES = ("snapshot", "read_optimized", "incremental", "time_travel")


@dataclass(frozen=True)
class Query:
    """One query of a table; ``begin`` exclusive and ``end``/``as_of`` inclusive, as Hudi."""

    kind: str
    begin: str | None = None
    end: str | None = None
    as_of: str | None = None

    def label(self) -> str:
        if self.kind == "incremental":
            return f"incremental ({self.begin}, {self.end}]"
        if self.kind == "time_travel":
            return f"time travel as of {self.as_of}"
        return self.kind


def _norm(v):
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return v.isoformat()
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_norm(x) for x in v]
    if isinstance(v, float) and v != v:
        return "NaN"
    return v


def canon(table: pa.Table, columns: Sequence[str] | None = None) -> list[str]:
    """Rows as sorted canonical JSON lines over ``columns`` (default: all but dropped)."""
    cols = [c for c in (columns or table.column_names) if c not in DROPPED]
    missing = [c for c in cols if c not in table.column_names]
    if missing:
        raise AssertionError(f"columns {missing} missing from {table.column_names}")
    rows = table.select(cols).to_pylist()
    return canon_rows(rows, cols)


def canon_rows(rows: Sequence[dict], columns: Sequence[str]) -> list[str]:
    """Row dicts (a model's) as :func:`canon` puts a table's rows."""
    return sorted(json.dumps(_norm({c: r.get(c) for c in columns}), sort_keys=True, default=str)
                  for r in rows)


def read_ours(path: str, q: Query) -> pa.Table:
    t = Table.open(path)
    if q.kind == "incremental":
        return t.read("incremental", begin=q.begin, end=q.end)
    if q.kind == "time_travel":
        return t.read(as_of=q.as_of)
    return t.read(q.kind)


def read_hudi_rs(path: str, q: Query) -> pa.Table:
    import hudi

    table = hudi.HudiTableBuilder.from_base_uri(path).build()
    opts = hudi.HudiReadOptions()
    if q.kind == "read_optimized":
        opts = opts.with_hudi_option("hoodie.read.use.read_optimized.mode", "true")
    elif q.kind == "incremental":
        opts = (opts.with_query_type(hudi.HudiQueryType.Incremental)
                .with_start_timestamp(q.begin).with_end_timestamp(q.end))
    elif q.kind == "time_travel":
        opts = opts.with_as_of_timestamp(q.as_of)
    batches = table.read(opts)
    return pa.Table.from_batches(batches) if batches else pa.table({})


def hudi_requests(session: HudiSpark, path: str, queries: Sequence[Query], options=None) -> list:
    return [
        session.read_request(path, query=q.kind, begin=q.begin, end=q.end, as_of=q.as_of,
                             options=options)
        for q in queries
    ]


def standard_queries(path: str) -> list[Query]:
    """Snapshot, read-optimized, an incremental range and a time travel point."""
    completed = Table.open(path).timeline.completed_writes()
    writes = [i.timestamp for i in completed]
    assert writes, f"{path} has no completed write"
    # incremental bounds are completion times on a layout-2 timeline (Hudi 1.x). The
    # begin bound is then the requested time of the first commit in range, which no
    # commit completed at: Hudi 1.0.2 takes the begin bound as inclusive, 1.2.0 and
    # hudi-rs as exclusive, and a bound between two commits reads the same in both.
    layout2 = any(i.completion_time for i in completed)
    done = [i.completion_time or i.timestamp for i in completed]
    half = len(writes) // 2
    begin = (writes[half] if layout2 else writes[half - 1]) if len(writes) > 1 else "000"
    queries = [
        Query("snapshot"),
        Query("read_optimized"),
        Query("incremental", begin=begin, end=done[-1]),
        Query("time_travel", as_of=writes[half]),
    ]
    if len(writes) > 2 and writes[-2] != writes[half]:
        queries.append(Query("time_travel", as_of=writes[-2]))
    return queries


# --- the independent expected answers ------------------------------------------------
def base_file_rows(path: str, columns: Sequence[str]) -> tuple[list[dict], list[str]]:
    """What a read-optimized query must return, found without any reader's file view:
    the newest committed base file of every file group read with plain Parquet
    (:func:`tests.support.write_model.latest_base_files`). Returns the rows and the
    ones of ``columns`` the base files hold."""
    rows: list[dict] = []
    present: set[str] = set()
    for file in latest_base_files(path):
        t = pq.read_table(file)
        present |= set(t.column_names)
        rows += t.to_pylist()
    return rows, [c for c in columns if c in present]


@dataclass
class Expected:
    """Independent answers for a table's queries.

    ``history``: a model of every commit (answers snapshot, time travel, incremental);
    without one, ``snapshot`` rows (e.g. a model that cannot name the instants of a
    Hudi writer's commits) answer the snapshot only. ``columns``: what is compared.
    The read-optimized answer comes from the table's base files (:func:`base_file_rows`).
    """

    columns: list[str]
    snapshot: list[dict]
    history: History | None = None

    @classmethod
    def of(cls, history: History) -> Expected:
        return cls(history.columns, history.snapshot(), history)

    @classmethod
    def of_rows(cls, rows: Sequence[dict], columns: Sequence[str]) -> Expected:
        return cls(list(columns), list(rows))

    def rows(self, path: str, q: Query) -> tuple[list[dict], list[str]]:
        """The expected rows of ``q`` and the columns they are compared on."""
        if q.kind == "snapshot":
            return self.snapshot, self.columns
        if q.kind == "read_optimized":
            return base_file_rows(path, self.columns)
        if self.history is None:
            raise AssertionError(f"no independent expected answer for {q.label()}: the model "
                                 "has no history (build the table with a History)")
        if q.kind == "incremental":
            begin, end = _requested_times(path, q.begin, q.end)
            return self.history.incremental(begin, end), self.history.columns_at(end)
        return self.history.as_of(q.as_of), self.history.columns_at(q.as_of)


def _requested_times(path: str, *bounds: str | None) -> list[str | None]:
    """Incremental bounds as the model's instants: a layout-2 bound is a completion time,
    the newest commit completed by it stands for it (one writer: completion order is
    request order); layout-1 bounds are instants already."""
    timeline = Table.open(path).timeline
    if timeline.layout_version < 2:
        return list(bounds)
    done = sorted((i.completion_time or i.timestamp, i.timestamp) for i in timeline.completed())
    out: list[str | None] = []
    for b in bounds:
        before = [ts for ct, ts in done if b is not None and ct <= b]
        out.append(before[-1] if before else b)
    return out


def assert_readers_match(path: str, sessions: Mapping[str, HudiSpark], expected: Expected,
                         queries: Sequence[Query] | None = None, *, hudi_rs: bool = True,
                         hudi_rs_gaps: Mapping[str, Gap] | None = None, hudi_options=None,
                         hudi_ignore: Sequence[str] = ()) -> None:
    """Every query through every reader equals ``expected``: ours, then each Hudi
    session (all queries in one round trip per session), then hudi-rs.

    ``hudi_rs_gaps``: query kinds hudi-rs is not asked here because a registered gap
    (:mod:`tests.support.gaps`) says it answers them wrong; a strict-xfail test asks
    them (:func:`assert_hudi_rs_gap`). ``hudi_ignore``: columns left out of the Apache
    Hudi readers' comparison (a documented Hudi behaviour; ours and hudi-rs compare all).
    A query our reader refuses (e.g. time travel to a cleaned instant) must be refused
    by Hudi too; the snapshot may never be refused.
    """
    queries = list(queries or standard_queries(path))
    gaps = dict(hudi_rs_gaps or {})
    want = {q: expected.rows(path, q) for q in queries}
    failures: list[str] = []
    refused: dict[Query, str] = {}
    for q in queries:
        try:
            got = read_ours(path, q)
        except StreamerError as e:  # e.g. time travel to a cleaned instant: Hudi refuses too
            refused[q] = str(e)
            continue
        rows, cols = want[q]
        _compare(failures, f"our reader {q.label()}", canon_rows(rows, cols), got, cols)
    assert not any(q.kind == "snapshot" for q in refused), f"our reader refused the snapshot: {refused}"
    for version, session in sessions.items():
        results = session.read_many(hudi_requests(session, path, queries, hudi_options))
        for q, got in zip(queries, results, strict=True):
            if q in refused:
                if not isinstance(got, HudiOracleError):
                    failures.append(f"Hudi {version} answers {q.label()} ({got.num_rows} rows) "
                                    f"but our reader refused it: {refused[q]}")
                continue
            if isinstance(got, HudiOracleError):
                failures.append(f"Hudi {version} {q.label()}: {got}")
                continue
            rows, cols = want[q]
            cols = [c for c in cols if c not in hudi_ignore]
            _compare(failures, f"Hudi {version} {q.label()}", canon_rows(rows, cols), got, cols)
    if hudi_rs:
        for q in queries:
            if q.kind in gaps or q in refused:
                continue
            rows, cols = want[q]
            _compare(failures, f"hudi-rs {q.label()}", canon_rows(rows, cols), read_hudi_rs(path, q), cols)
    assert not failures, f"{path}:\n" + "\n".join(failures)


def assert_hudi_rs_gap(path: str, expected: Expected, q: Query, gap: Gap) -> None:
    """Our reader equals ``expected`` (a plain assertion: never the gap), then hudi-rs
    must too, else ``gap``'s own error (what a strict xfail of the gap expects)."""
    rows, cols = expected.rows(path, q)
    want = canon_rows(rows, cols)
    failures: list[str] = []
    _compare(failures, f"our reader {q.label()}", want, read_ours(path, q), cols)
    assert not failures, failures[0]
    _compare(failures, f"hudi-rs {q.label()}", want, read_hudi_rs(path, q), cols)
    gap.check(not failures, failures[0] if failures else "")


def _compare(failures: list[str], what: str, want: list[str], got: pa.Table, cols: Sequence[str]) -> None:
    if got.num_rows == 0 and not want:
        return
    try:
        rows = canon(got, cols)
    except AssertionError as e:
        failures.append(f"{what}: {e}")
        return
    if rows != want:
        failures.append(_diff(what, want, rows))


def _diff(what: str, want: list[str], got: list[str]) -> str:
    a, b = set(want), set(got)
    missing = sorted(a - b)[:3]
    extra = sorted(b - a)[:3]
    return (f"{what}: {len(got)} rows, expected {len(want)}; missing: {missing}; "
            f"unexpected: {extra}")
